"""Flent's RRUL and tunbench's rrul side by side, by the same code: each argument is a Flent data file
(.flent.gz, Flent's own or one `tunbench export --format flent` wrote) or a tunbench run (id, uid, name or
JSON export), whose rrul trials are put in Flent's format in memory. Every one is then read by
report/flent_compare.py with Flent's summary rules, and a row printed: the ping's median and p99 and each
direction's goodput, with the median over the rows of each source at the end. `tunbench import-flent`
does the same for files beside one run, with the ratio; this script takes any number of each.

Usage: PYTHONPATH=src .venv/bin/python scripts/flent_compare.py SOURCE... [--db STORE]
           [--load | --cutoff START,END] [--ping 'Ping (ms) ICMP']

--load cuts each file to its load (a tunbench file's recorded seconds, Flent's DELAY at each end of its
own: import-flent's `--windows tunbench`); --cutoff is Flent's -c/--data-cutoff (END <= 0 counts from the
end); without either, the idle seconds count, as in Flent's summary. --ping picks the series (default
"Ping (ms) avg", the one Flent's totals plot draws; tunbench's files have it and "Ping (ms) UDP BE")."""

from __future__ import annotations

import argparse
from pathlib import Path

from tunbench.report import flent_compare as fc
from tunbench.report.compare import load_run
from tunbench.report.exporters import flent


def sources(arg: str, db: str) -> list[tuple[str, flent.FlentFile]]:
    path = Path(arg)
    if path.is_file() and (path.name.endswith(".gz") or path.name.endswith(".flent")):
        return [(arg, flent.read(path.read_bytes(), str(path)))]
    run = load_run(arg, db)
    return [(f"{r.uid} #{t.seq}", flent.read(flent.render_trial(r, t))) for r, t in flent.rrul_trials([run])]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _print(r: fc.Row, n: str) -> None:
    name = r.source if len(r.source) <= 28 else "..." + r.source[-25:]
    print(
        f"{name:<28} {_fmt(r.ping_p50_ms):>11} {_fmt(r.ping_p99_ms):>7} {n:>5} "
        f"{_fmt(r.up_mbit):>9} {_fmt(r.down_mbit):>7}  {r.title}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", nargs="+")
    ap.add_argument("--db", default="tunbench.db")
    ap.add_argument("--ping", default=flent.PING_AVG)
    cut = ap.add_mutually_exclusive_group()
    cut.add_argument("--load", action="store_true")
    cut.add_argument("--cutoff", help="START,END in seconds, as Flent's --data-cutoff")
    a = ap.parse_args()
    print(f"{'source':<28} {'ping p50 ms':>11} {'p99':>7} {'n':>5} {'up Mbit/s':>9} {'down':>7}  title")
    for arg in a.source:
        rows = []
        for name, f in sources(arg, a.db):
            window: fc.Windows | flent.Cutoff = "tunbench" if a.load else "flent"
            if a.cutoff:
                start, end = (float(x) for x in a.cutoff.split(","))
                window = (start, end)
            rows.append(fc.row(f, name, window, a.ping))
            _print(rows[-1], str(rows[-1].n))
        if len(rows) > 1:
            _print(fc.median_row(rows, f"  median of {len(rows)}"), "")


if __name__ == "__main__":
    main()
