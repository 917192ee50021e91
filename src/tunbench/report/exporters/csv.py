"""The CSV exporter: one row per trial of every run given (report/csv_export.py renders it)."""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class CsvExporter:
    name = "csv"
    suffixes = (".csv",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report import csv_export

        return csv_export.render(list(runs))
