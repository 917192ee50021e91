"""`tunbench calibrate` end to end: a real A/A of the direct path, 2 pairs of 1 s trials (about 15 s)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.integration.helpers import tunbench
from tunbench.report.compare import load_run


def test_calibrate_prints_noise_and_mde_per_budget_and_stores_the_run(tmp_path: Path) -> None:
    db = tmp_path / "cal.db"
    res = tunbench(
        "calibrate", "-t", "direct", "--pairs", "2", "--duration", "1", "--omit", "0", "--db", str(db), timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert re.search(
        r"calibration: A/A of direct · lan · up · 1 flow as labels a and b, 2 ok pair\(s\); [0-9.]+ s per", out
    )
    header = next(line for line in out.splitlines() if "metric" in line and "trial CV" in line)
    for col in ("gate", "pair sd [CI]", "MDE now", "1 min", "2 min", "5 min", "10 min", "for its target"):
        assert col in header, header
    row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith("throughput"))
    assert "∞" in row  # 2 pairs: the signed-rank test cannot reach 0.05 yet
    assert re.search(r"±[0-9.]+% \(\d+\)", row), row  # but a minute's worth of pairs can
    assert "1/sqrt(pairs)" in " ".join(out.split())
    assert "stored in" in out and "calibrate-direct" in out
    stored = load_run("calibrate-direct", db)
    assert stored.status == "done"
    assert sorted((t.label, t.repetition) for t in stored.trials) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert all(t.status == "ok" for t in stored.trials)
    assert stored.scenario["run"]["order"] == "blocks" and not stored.scenario["run"]["direct"]
    assert "tunbench run -t 'direct[label=a]' -t 'direct[label=b]' --no-direct" in stored.scenario_text


def test_budget_is_a_deadline_the_run_stops_between_pairs(tmp_path: Path) -> None:
    """--budget 15s of 1 s direct trials: the plan allows up to 7 pairs (15 s / 2 s of measuring), a pair here
    takes about 3 s, so the run stops at the budget with whole pairs, and says so."""
    db = tmp_path / "cal.db"
    t0 = time.monotonic()
    res = tunbench(
        "calibrate", "-t", "direct", "--budget", "15s", "--duration", "1", "--omit", "0", "--db", str(db), timeout=120
    )
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    stopped = re.search(r"stopped after (\d+) of at most 7 pairs, at the budget \(15s\): deadline", res.stdout)
    assert stopped, res.stdout
    pairs = int(stopped.group(1))
    assert 2 <= pairs < 7
    stored = load_run("calibrate-direct", db)
    assert stored.status == "done"
    assert sorted((t.label, t.repetition) for t in stored.trials) == sorted(
        (label, rep) for label in "ab" for rep in range(1, pairs + 1)
    )
    firsts = [t.label for t in sorted(stored.trials, key=lambda t: t.seq)][::2]
    assert abs(firsts.count("a") - firsts.count("b")) <= 1  # counterbalanced: ab and ba every two pairs
    assert "upper bound" in stored.scenario_text
    assert wall < 15 + 8  # the budget, and the table and compare after it (a Python start-up or two)
