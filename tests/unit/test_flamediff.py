"""`compare --flamegraph-diff` (report/flamediff.py): folded stacks merged per side, and one differential SVG
per matched case and role from a store whose trials carry `flamegraph.<role>.folded`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import run, trial
from tunbench.cli import app
from tunbench.perf.flamegraph import find_tool
from tunbench.report.flamediff import merge_folded
from tunbench.results import RunRecord
from tunbench.store.db import Store


def test_merge_sums_each_stack_and_skips_junk() -> None:
    a = "main;send 10\nmain;recv 5\n"
    b = "main;send 7\nmain;crypt 3\nnot a line\n\n"
    assert merge_folded([a, b]) == "main;crypt 3\nmain;recv 5\nmain;send 17\n"
    assert merge_folded([]) == ""


def _store(path: Path, r: RunRecord, stacks: dict[str, str]) -> None:
    with Store(path) as store:
        rid = store.create_run(
            uid=r.uid, name="r", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="", scenario={}
        )
        for t in r.trials:
            t.artifacts = {"flamegraph.client.folded": stacks[t.label].encode()}
            store.add_trial(rid, t)
        store.finish_run(rid, "done")


def ab_store(db: Path, stacks: dict[str, str]) -> Path:
    """A store holding one run of labels a and b, 3 repetitions each, each trial with the client stacks
    `stacks[label]`."""
    trials = [
        trial(i * 2 + k + 1, label, 4e9, repetition=i + 1, cpu_client_s=1.0)
        for i in range(3)
        for k, label in enumerate(("a", "b"))
    ]
    _store(db, run(trials, uid="tbaaaaaa"), stacks)
    return db


@pytest.mark.skipif(find_tool("inferno-diff-folded") is None, reason="needs inferno (make tools)")
def test_cli_writes_one_differential_flamegraph_per_case_and_side(tmp_path: Path) -> None:
    db = ab_store(tmp_path / "s.db", {"a": "main;send 900\nmain;crypt 100\n", "b": "main;send 300\nmain;crypt 700\n"})
    out = tmp_path / "diff"
    res = CliRunner().invoke(
        app, ["compare", "1", "--label-a", "a", "--label-b", "b", "--db", str(db), "--flamegraph-diff", str(out)]
    )
    assert res.exit_code == 0, res.output
    (svg,) = sorted(out.iterdir())
    assert svg.name == "a_b_lan_up_1_flow-client.svg"
    text = svg.read_text()
    assert "</svg>" in text
    # summed over the 3 trials of each side: crypt's share went from 10% to 70%, send's from 90% to 30%
    assert "crypt (2,100 ns, 70.00%; +60.00%)" in text and "send (900 ns, 30.00%; -60.00%)" in text
    assert "flamegraph diff: a → b · lan · up · 1 flow client" in " ".join(res.output.split())
    assert "no flamegraph" not in res.output  # the server has none on either side: nothing said about it
