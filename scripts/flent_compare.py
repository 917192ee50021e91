"""Flent's RRUL and tunbench's rrul side by side, by the same code: each argument is a Flent data file
(.flent.gz, Flent's own or one `tunbench export --format flent` wrote) or a tunbench run (id, uid, name or
JSON export), whose rrul trials are put in Flent's format in memory. Every one is then read by
report/exporters/flent.py with Flent's summary rules, and a row printed: the loaded ping's median and p99
and each direction's goodput, with the median over the rows of each source at the end.

Usage: PYTHONPATH=src .venv/bin/python scripts/flent_compare.py SOURCE... [--db STORE]
           [--load | --cutoff START,END] [--ping 'Ping (ms) ICMP']

--load cuts each file to its load (a tunbench file's recorded seconds, Flent's DELAY at each end of its
own); --cutoff is Flent's -c/--data-cutoff (END <= 0 counts from the end); without either, the idle
seconds count, as in Flent's summary. --ping picks the series (default "Ping (ms) avg", the one Flent's
totals plot draws; tunbench's files have it and "Ping (ms) UDP BE")."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from tunbench.report.compare import load_run
from tunbench.report.exporters import flent


def sources(arg: str, db: str) -> list[flent.FlentFile]:
    path = Path(arg)
    if path.is_file() and (path.name.endswith(".gz") or path.name.endswith(".flent")):
        return [flent.read(path.read_bytes(), str(path))]
    run = load_run(arg, db)
    return [flent.read(flent.render_trial(r, t)) for r, t in flent.rrul_trials([run])]


def _median(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


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
        for f in sources(arg, a.db):
            if a.load:
                window: flent.Cutoff | None = flent.load_cutoff(f)
            elif a.cutoff:
                start, end = (float(x) for x in a.cutoff.split(","))
                window = (start, end)
            else:
                window = None
            fig = flent.figures(f, window)
            ping = fig.ping.get(a.ping) or flent.Latency(None, None, 0)
            rows.append((ping.median_ms, ping.p99_ms, fig.upload_mbit, fig.download_mbit))
            name = arg if len(arg) <= 28 else "..." + arg[-25:]
            print(
                f"{name:<28} {_fmt(ping.median_ms):>11} {_fmt(ping.p99_ms):>7} {ping.n:>5} "
                f"{_fmt(fig.upload_mbit):>9} {_fmt(fig.download_mbit):>7}  {fig.title}"
            )
        if len(rows) > 1:
            med = [_median([v for v in col if v is not None]) for col in zip(*rows, strict=True)]
            print(
                f"{'  median of ' + str(len(rows)):<28} {_fmt(med[0]):>11} {_fmt(med[1]):>7} {'':>5} "
                f"{_fmt(med[2]):>9} {_fmt(med[3]):>7}"
            )


if __name__ == "__main__":
    main()
