"""The cores surface in the terminal (`tunbench run`/`show`): one table per tunnel, a row per case and cores
value (report/scaling.py computes them)."""

from __future__ import annotations

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench.report.scaling import Curve, caption_lines, curves, gain_text, gbit, knee_text
from tunbench.results import TrialRecord

NUMERIC = ("cores", "Gbit/s", "per core", "×linear", "n")


def scaling_tables(trials: list[TrialRecord]) -> list[Table]:
    """A table per tunnel whose cases ran at two or more cores values; [] when none did."""
    by_label: dict[str, list[Curve]] = {}
    for c in curves(trials):
        by_label.setdefault(c.label, []).append(c)
    tables = []
    for i, (label, mine) in enumerate(by_label.items()):
        table = Table(
            title=f"cores surface · {label}",
            header_style="bold",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            caption_justify="left",
            caption="\n".join(caption_lines()) if i == len(by_label) - 1 else None,  # once, under the last
        )
        for col in ("case", "cores", "Gbit/s", "per core", "×linear", "n", "knee", "gain", "client", "server"):
            table.add_column(col, justify="right" if col in NUMERIC else "left")
        for c in mine:
            for i, p in enumerate(c.points):
                table.add_row(
                    escape(c.title) if i == 0 else "",
                    str(p.cores),
                    gbit(p.median_bps),
                    gbit(p.per_core_bps),
                    f"{p.efficiency:.2f}" if p.efficiency is not None else "–",
                    str(p.n),
                    knee_text(c) if i == 0 else "",
                    f"{c.gain_span} {gain_text(c)}" if i == 1 else "",
                    escape(p.side_text("client")),
                    escape(p.side_text("server")),
                )
        tables.append(table)
    return tables
