"""Issue 43 item 13: `show` and `history` exited 1 and 2 for the same missing store (and `db export` 6). A
missing store is a bad argument (like an unknown reference): each exits 2, with a message that names the path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli import app


@pytest.mark.parametrize(
    "argv",
    [
        ["show"],
        ["show", "--list"],
        ["show", "latest", "--logs", "1"],
        ["history"],
        ["history", "--changes-only", "--fail-on-regression-since", "c1"],
        ["db", "export", "out.db"],
    ],
)
def test_a_missing_store_exits_2_naming_its_path(argv: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "results" / "none.db"
    res = CliRunner().invoke(app, [*argv, "--db", str(missing)])
    e = res.exception
    assert e is not None and not isinstance(e, SystemExit), res.output
    assert getattr(e, "exit_code", None) == 2, (type(e), str(e))
    assert f"no result store at {missing}" in str(e)
    assert not missing.exists() and not missing.parent.exists()  # looking for it creates nothing
