"""The JSON exporter: one run in tunbench's own format (docs/json-format.md; report/json_export.py renders
it). `tunbench export` and `tunbench run --json` use this exporter too."""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class JsonExporter:
    name = "json"
    suffixes = (".json",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report import json_export

        if len(runs) != 1:
            from tunbench.report.compare import CompareError

            raise CompareError("--format json exports one run at a time (the format holds one run)")
        return json_export.render(runs[0])
