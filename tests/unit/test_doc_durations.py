"""Every run time the README, the docs, the examples and the default scenario state is `--dry-run`'s own
estimate, written with its command: "about 5.0 min, as `tunbench run --dry-run` estimates". Each such
statement is checked against that command's dry run (pure: no root, nothing created), and a loose one ("~25
min", "About 17 minutes") fails unless it cites a measured run: a page of docs/benchmarks/ that exists, or
BENCHMARKS.md."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.host import ledger as state

ROOT = Path(__file__).parents[2]
FILES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").rglob("*.toml")),
    ROOT / "src" / "tunbench" / "config" / "default.toml",
]
# "about 5.0 min, as `tunbench run --dry-run` estimates" (a TOML comment may break the line after "as")
STATED = re.compile(r"about (\d+(?:\.\d+)? (?:min|s)),?\s+(?:#\s*)?as\s+(?:#\s*)?`(tunbench run[^`]*?) --dry-run`")
LOOSE = re.compile(r"~ ?\d+(?:\.\d+)? ?min|[Aa]bout \d+(?:\.\d+)? min")
# where measured run times are recorded: BENCHMARKS.md, or one of the subsystem pages it links to
CITED = re.compile(r"BENCHMARKS\.md|benchmarks/([\w-]+\.md)")


SAMPLE = re.compile(r"<!-- sample:[\w-]+ -->\n.*?<!-- /sample -->", re.S)


def _flat(path: Path) -> str:
    """The page's words; an output sample (scripts/readme_samples.py) is what tunbench printed, whose "about
    22.4 min more" is compare's own projection, not a run time the page states."""
    return " ".join(SAMPLE.sub("", path.read_text()).split())


STATEMENTS = sorted(
    {(p.relative_to(ROOT).as_posix(), m.group(1), m.group(2)) for p in FILES for m in STATED.finditer(_flat(p))}
)


def test_the_default_scenarios_time_is_stated_where_a_newcomer_reads_it() -> None:
    where = {f for f, _, cmd in STATEMENTS if cmd == "tunbench run"}
    assert {"README.md", "src/tunbench/config/default.toml"} <= where


@pytest.mark.parametrize(("where", "stated", "command"), STATEMENTS, ids=[f"{w}: {c}" for w, _, c in STATEMENTS])
def test_a_stated_time_is_the_dry_runs(
    where: str, stated: str, command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)  # the examples' paths are the repository's
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    res = CliRunner().invoke(app, [*shlex.split(command)[1:], "--dry-run", "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 0, res.output
    estimate = re.search(r"trials, about (\S+ (?:min|s)) ", " ".join(res.output.split()))
    assert estimate is not None, res.output
    assert stated == estimate.group(1), f"{where} says about {stated} for `{command}`; its dry run: {estimate.group(1)}"


def cites_a_measured_run(sentence: str) -> bool:
    """Whether the sentence names BENCHMARKS.md or a page of docs/benchmarks/ that exists."""
    pages = ROOT / "docs" / "benchmarks"
    return any(not m.group(1) or (pages / m.group(1)).is_file() for m in CITED.finditer(sentence))


def test_a_citation_names_a_page_that_exists() -> None:
    assert cites_a_measured_run("about 4 minutes (docs/benchmarks/debian13.md)")
    assert cites_a_measured_run("about 4 minutes ([benchmarks/debian13.md](benchmarks/debian13.md))")
    assert cites_a_measured_run("about 4 minutes (BENCHMARKS.md)")
    assert not cites_a_measured_run("about 4 minutes (docs/benchmarks/no-such-page.md)")
    assert not cites_a_measured_run("about 4 minutes (BENCHMARKS §13)")
    assert not cites_a_measured_run("about 4 minutes")


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_no_loose_run_times(path: Path) -> None:
    """Outside the checked form, a run time is a measured one: its sentence cites the benchmark docs."""
    text = STATED.sub("", _flat(path))
    for m in LOOSE.finditer(text):
        sentence = text[text.rfind(". ", 0, m.start()) + 1 : text.find(". ", m.end())]
        why = f"{path.name}: {sentence.strip()!r}: give the dry run's estimate and command"
        assert cites_a_measured_run(sentence), why
