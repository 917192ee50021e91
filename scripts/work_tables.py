"""The tables of docs/benchmarks/counted-work.md from stored runs.

    # A/A noise of each counted ratio against throughput, one run of two labels of one tunnel (a, b):
    scripts/work_tables.py noise aa.db [RUN]
    # the cost of counting: runs without counting against runs with it (alternated), pooled, unpaired:
    scripts/work_tables.py overhead off.db on.db

Uses tunbench's own compare (report/compare.py), so the figures are those `tunbench compare` prints.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import replace

from tunbench.monitor.work import ratios
from tunbench.report.compare import CaseComparison, compare_runs, load_run
from tunbench.results import RunRecord

COLS = [("down", "client"), ("down", "server"), ("up", "client"), ("up", "server")]


def _median(r: CaseComparison, median: float) -> str:
    if r.metric.scale == 1.0:
        return r.metric.fmt(median)
    return f"{median:,.0f} {r.metric.unit}" if median >= 100 else f"{median:.3g} {r.metric.unit}"


def noise(db: str, ref: str) -> None:
    run = load_run(ref, db)
    for t in run.trials:  # the ratios as the current code derives them from the stored counts (lan: veth vc, vs)
        t.metrics.update(ratios(t.metrics, {"client": "vc", "server": "vs"}))
    res = compare_runs(run, run, label_a="a", label_b="b")
    cells: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    for r in res.rows:
        c, title, role = r.result, r.metric.title, ""
        for side in ("client", "server"):
            if title.endswith(" " + side):
                title, role = title[: -len(side) - 1], side
        direction = r.case_a.direction
        text = (
            f"{_median(r, c.baseline.median)}, {max(c.baseline.cv, c.candidate.cv):.1%}, "
            f"[{c.ci_low:+.1%}, {c.ci_high:+.1%}], {c.min_detectable_effect:.1%}"
        )
        for side in (role,) if role else ("client", "server"):
            cells[title][(direction, side)] = text
    print("| metric | " + " | ".join(f"{d} {s}: median, CV, A/A CI, MDE" for d, s in COLS) + " |")
    print("|---|" + "---:|" * len(COLS))
    for title, row in cells.items():
        print(f"| {title} | " + " | ".join(row.get(k, "–") for k in COLS) + " |")


def _pooled(db: str) -> RunRecord:
    from tunbench.store.db import Store

    with Store(db) as store:
        refs = [str(r.id) for r in store.runs()]
    runs = [load_run(ref, db) for ref in refs]
    # numbered anew: a trial's seq is its independent unit (report.summary.unit_key), unique within one run only
    return replace(runs[0], trials=[replace(t, seq=i) for i, t in enumerate((t for r in runs for t in r.trials), 1)])


def overhead(off_db: str, on_db: str) -> None:
    res = compare_runs(_pooled(off_db), _pooled(on_db), kinds=("throughput", "cpu"))
    print("| case | metric | without counting | with counting | n | change [95% CI] |")
    print("|---|---|---:|---:|---:|---:|")
    for r in res.rows:
        c = r.result
        print(
            f"| {r.case_label} | {r.metric.title} | {_median(r, c.baseline.median)} | "
            f"{_median(r, c.candidate.median)} | {c.baseline.n}/{c.candidate.n} | "
            f"{c.change:+.1%} [{c.ci_low:+.1%}, {c.ci_high:+.1%}] |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("noise")
    n.add_argument("db")
    n.add_argument("run", nargs="?", default="1")
    o = sub.add_parser("overhead")
    o.add_argument("off_db")
    o.add_argument("on_db")
    a = p.parse_args()
    if a.cmd == "noise":
        noise(a.db, a.run)
    else:
        overhead(a.off_db, a.on_db)


if __name__ == "__main__":
    main()
