"""The HTML exporter: one self-contained page with interactive plots (report/html.py renders it)."""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class HtmlExporter:
    name = "html"
    suffixes = (".html", ".htm")

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report import html  # plotly: imported only when a page is rendered

        return html.render(list(runs))
