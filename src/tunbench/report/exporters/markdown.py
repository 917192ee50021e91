"""The Markdown exporter: tables ready to paste into a PR or a docs page (report/markdown.py renders them)."""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class MarkdownExporter:
    name = "md"
    suffixes = (".md",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report import markdown

        return markdown.render(list(runs))
