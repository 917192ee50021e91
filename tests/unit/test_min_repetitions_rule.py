"""One minimum-repetition rule (issue 34 item 5), from the gated family, in one place (stats.min_repetitions):
compare's notes, `run --dry-run` and the run's header, compare's help and the docs all follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench.cli.app import app
from tunbench.report.compare import min_repetitions_text, repetition_note
from tunbench.stats import min_attainable_p, min_repetitions

ROOT = Path(__file__).resolve().parents[2]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text)).lower()


def test_the_rule() -> None:
    assert min_repetitions(paired=True) == 3  # the paired t has no floor: where compare pairs at all
    assert min_repetitions(6, paired=True) == 3  # 6 pairs, Holm over 6: a verdict is possible (issue 28 item 6)
    for family in (1, 3, 6, 7, 24):
        n = min_repetitions(family, paired=False)
        assert min_attainable_p(n, n) < 0.05 / family <= min_attainable_p(n - 1, n - 1)


def test_the_note_before_a_run() -> None:
    few = repetition_note(labels=1, cases_per_label=1, units=3)
    assert "cannot give any verdict" in few and "5 per side" in few and "--repeat 5" in few
    assert repetition_note(labels=1, cases_per_label=1, units=5) == ""
    paired = repetition_note(labels=2, cases_per_label=2, units=2, warm=5)
    assert "3 pairs" in paired and "bring-up" in paired and "--repeat 15" in paired
    assert repetition_note(labels=2, cases_per_label=2, units=6) == ""


def test_dry_run_says_it() -> None:
    out = CliRunner().invoke(app, ["run", "--dry-run", "-t", "socat", "--direction", "up", "--repeat", "3"]).output
    assert "cannot give any verdict" in out and "--repeat 5" in out
    ok = CliRunner().invoke(app, ["run", "--dry-run", "-t", "socat", "--direction", "up", "--repeat", "5"]).output
    assert "cannot give any verdict" not in ok


def test_help_and_docs_state_the_rule() -> None:
    rule = _flat(min_repetitions_text())
    help_text = _flat(CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": "200"}).output)
    assert rule in help_text
    for doc in ("README.md", "docs/precision.md", "docs/ci.md"):
        text = _flat((ROOT / doc).read_text())
        assert rule in text, doc
        for stale in ("at least 6 pairs", "at least 7 pairs", "keep `repeat` at 8"):
            assert stale not in text, (doc, stale)


def test_the_runs_header_says_it(tmp_path: Path) -> None:
    from rich.console import Console

    from tunbench import session
    from tunbench.cli.progress import RunProgress
    from tunbench.config.load import load_scenario, with_overrides

    sc, _, source = load_scenario(None)
    few = with_overrides(sc, {"run": {"tunnels": ["socat[label=a]", "socat[label=b]"], "repeat": 2, "direct": False}})
    plan = session.prepare(few, source, dry_run=True)
    console = Console(record=True, width=300)
    progress = RunProgress(console, str(tmp_path / "r.db"))
    with progress:
        progress.run_started(1, "tb000001", plan)
    out = console.export_text()
    assert "2 repetition(s) per case cannot give any verdict" in out and "3 pairs" in out


@pytest.mark.parametrize("family", [24, 27, 36, 85, 86, 321, 400])
def test_the_rules_sentence_covers_the_family_of_every_plan(family: int) -> None:
    # the sentence stopped at 23 comparisons, so a plan of 27 or 36 printed a figure the rule never stated
    need = min_repetitions(family, paired=False)
    rule = min_repetitions_text()
    spans = [(int(lo), int(hi), int(n)) for n, lo, hi in re.findall(r"(\d+) for (\d+)-(\d+)", rule)]
    above = re.search(r"(\d+) or more above (\d+)", rule)
    assert above is not None, rule
    covered = [n for lo, hi, n in spans if lo <= family <= hi]
    if family > int(above.group(2)):
        assert need >= int(above.group(1)), rule
    else:
        assert covered == [need], (family, need, rule)
