"""User pages cite no internal issue numbers ("issue 31", "#28"): a reader cannot follow them. The lab
notebook (docs/benchmarks/, docs/notes/) may; the README, CONTRIBUTING, docs/*.md and the commands' --help
may not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
INTERNAL = re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w/])(?<!run )#\d{1,3}\b(?! \()|§ ?\d+")  # "run #4": a run id
SAMPLE = re.compile(r"<!-- sample:[\w-]+ -->\n.*?<!-- /sample -->", re.S)  # what tunbench printed: run ids


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_internal_issue_numbers(page: Path) -> None:
    text = SAMPLE.sub("", page.read_text())
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # output shown in code blocks: run ids like (#1)
    found = INTERNAL.findall(text)
    assert not found, f"{page.name}: {found}"


def test_no_internal_issue_numbers_in_help() -> None:
    commands = [c.name or c.callback.__name__ for c in app.registered_commands if c.callback is not None]
    for name in ["", *commands]:
        out = CliRunner().invoke(app, [*([name] if name else []), "--help"], env={"COLUMNS": "200"}).output
        assert not re.search(r"\b[Ii]ssues? #?\d+", out), (name, out)


def test_the_pattern() -> None:
    assert INTERNAL.search("measured in issue 31, step 4") and INTERNAL.search("see #28")
    assert not INTERNAL.search("esnet/iperf#2029") and not INTERNAL.search("run #1 (tb1a2b3c)")
    assert not INTERNAL.search("run #4 of the same store")
