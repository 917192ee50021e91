"""The exit-status table of the README and of docs/ci.md is complete and the same: every status tunbench
exits with (tunbench.errors' EXIT_* and each error class's exit_code) has a row, and no row names a status it
never uses."""

from __future__ import annotations

import re
from pathlib import Path

import tunbench.errors as errors

ROOT = Path(__file__).resolve().parents[2]


def _rows(doc: str) -> dict[int, str]:
    text = (ROOT / doc).read_text()
    start = text.index("| code | meaning |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        m = re.match(r"\|\s*(\d+)\s*\|(.*)\|\s*$", line)
        assert m is not None, line
        rows[int(m.group(1))] = m.group(2).strip()
    return rows


def _codes() -> set[int]:
    codes = {0} | {v for k, v in vars(errors).items() if k.startswith("EXIT_") and isinstance(v, int)}
    return codes | {c.exit_code for c in vars(errors).values() if isinstance(c, type) and hasattr(c, "exit_code")}


def test_the_tables_list_every_status_and_only_those() -> None:
    readme, ci = _rows("README.md"), _rows("docs/ci.md")
    assert set(readme) == _codes(), sorted(readme)
    assert set(ci) == set(readme)
    assert [v.replace("docs/ci.md#", "#") for v in readme.values()] == list(ci.values())


def test_1_is_only_a_verdict() -> None:
    row = _rows("README.md")[1]
    assert row.startswith('a verdict of "regressed", and nothing else'), row
    assert errors.TunbenchError.exit_code not in (0, errors.EXIT_REGRESSED)


def test_run_help_names_each_of_its_statuses_as_the_readme_does() -> None:
    """`tunbench run --help` lists the statuses a run can end with; each is one of the README's rows, and the
    error status is 6 (1 is a verdict's alone)."""
    from tunbench.cli.run import run

    doc = " ".join((run.__doc__ or "").split())
    named = {int(n) for n in re.findall(r"(\d+) = ", doc[doc.index("Exit status") :])}
    assert named <= set(_rows("README.md")), named
    assert {0, 2, 3, 4, 5, 6, 70, 130} <= named and 1 not in named
