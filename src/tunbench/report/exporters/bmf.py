"""The bencher.dev exporter (Bencher Metric Format JSON; report/bmf.py renders it). BMF is JSON too, so no
file suffix selects it: `.json` means the run's own JSON export; ask for BMF with `--format bmf`."""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class BmfExporter:
    name = "bmf"
    suffixes: tuple[str, ...] = ()

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report import bmf

        return bmf.render(list(runs))
