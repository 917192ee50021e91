"""The HTML pages, each one self-contained file that works offline (the shared template, report/templates/):

- the run report (`tunbench report`, this package's HtmlExporter): per run, stability warnings, a summary table,
  throughput per case with CI error bars, ratio to direct, CPU cost per role and bits per CPU-second
  (``cost``), per-second throughput of every trial and the emulated bottleneck queues' occupancy over time
  (``series``), fairness across parallel flows (``flows``), latency CDFs and the loaded RTT taken apart into
  propagation, queue and host (``latency``), a "Many clients" section for the workloads that carry a client
  count or per-client ready times (``fleet``), the headline, warning, profile and provenance tables
  (``tables``), assembled by ``page``; plotly.js embedded, no CDN;
- the history of one machine (`tunbench report --history`, ``history``);
- a comparison (`tunbench compare A B --html`, ``compare``): each case's verdicts, counted work and
  differential flamegraphs side by side.

Shared parts are in ``base``. Pure: runs in, text out (plotly builds the figures; nothing is read from the
clock or the disk except the template and plotly.js, both installed files). This module stays light (the
exporter registry imports it): plotly is imported when a page is rendered.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunbench.results import RunRecord


class HtmlExporter:
    """The run report as an `Exporter` (report/exporters): `--format html`, `-o FILE.html`."""

    name = "html"
    suffixes = (".html", ".htm")

    def render(self, runs: Sequence[RunRecord]) -> str:
        from tunbench.report.html import page  # plotly: imported only when a page is rendered

        return page.render(list(runs))
