"""Issue 43 item 14: a --db value shaped like a URL but not a `postgresql://` one was echoed with its password
(`postgresql+psycopg://bob:s3cret@...`): every message that names a store location prints it redacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.store.backend import redact
from tunbench.store.db import Store, StoreError

SECRET = "s3cret"
URLS = [
    "postgresql+psycopg://bob:s3cret@db.example/tunbench",
    "postgresql+psycopg2://bob:s3cret@db.example:5433/tunbench?sslmode=require",
    "mysql://bob:s3cret@db.example/tunbench",
    "postgresql:/bob:s3cret@db.example/tunbench",  # one slash: still URL-shaped
    "sqlite:///r.db?password=s3cret",
    "postgres+asyncpg://db.example/tunbench?user=bob&password=s3cret",
]


def said(res: Result) -> str:
    return res.output + ("" if res.exception is None else str(res.exception))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://bob:s3cret@db.example/tunbench", "postgresql+psycopg://bob:***@db.example/tunbench"),
        ("mysql://bob:s3cret@h:3306/db?x=1", "mysql://bob:***@h:3306/db?x=1"),
        ("postgresql:/bob:s3cret@h/db", "postgresql:/bob:***@h/db"),
        ("sqlite:///r.db?password=s3cret", "sqlite:///r.db?password=***"),
        ("postgresql+psycopg://bob@h/db", "postgresql+psycopg://bob@h/db"),  # no password: as written
        ("results/tunbench.db", "results/tunbench.db"),
        ("results/user:pw@x.db", "results/user:pw@x.db"),  # a path is a path
    ],
)
def test_every_url_shaped_value_is_redacted(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize("url", URLS)
def test_opening_a_url_that_is_not_postgresql_does_not_echo_its_password(url: str) -> None:
    with pytest.raises(StoreError, match="looks like a URL") as e:
        Store(url)
    assert SECRET not in str(e.value) and "***" in str(e.value)


@pytest.mark.parametrize("url", URLS[:2])
@pytest.mark.parametrize(
    "argv",
    [
        ["show"],
        ["show", "--list"],
        ["history"],
        ["history", "--fail-on-regression-since", "c1"],
        ["compare", "a", "b"],
        ["report", "latest"],
        ["export", "latest"],
        ["db", "migrate"],
        ["db", "export", "-o", "x.db"],
        ["db", "import", "y.db"],
        ["clean"],
    ],
)
def test_no_command_echoes_the_password(
    url: str, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "y.db").write_bytes(b"")
    res = CliRunner().invoke(app, [*argv, "--db", url])
    text = said(res)
    assert res.exit_code != 0 or argv == ["clean"], text
    assert SECRET not in text, text
