"""The run report's page: one section per run (its tables and charts in reading order) in the shared
template, plotly.js embedded once.
"""

from __future__ import annotations

from importlib import resources
from string import Template

from plotly.offline import get_plotlyjs

from tunbench import __version__
from tunbench.report.common import baseline_line
from tunbench.report.html.base import PLOTLY_FOOTER, chart_div, esc, h3, label_colors
from tunbench.report.html.cost import fig_bits_per_cpu, fig_cpu, fig_ratio, fig_throughput
from tunbench.report.html.faults import faults_html
from tunbench.report.html.fleet import is_fleet, many_clients_html
from tunbench.report.html.flows import fig_fairness, fig_flows
from tunbench.report.html.latency import fig_latency, fig_rtt_parts
from tunbench.report.html.scaling import cores_html
from tunbench.report.html.series import fig_queue, fig_timeseries, is_queue, is_throughput, series_section
from tunbench.report.html.tables import (
    headline_tables_html,
    profiles_html,
    provenance_html,
    summary_table,
    warnings_html,
)
from tunbench.report.html.transactions import fig_transactions
from tunbench.report.interference_line import line as interference_line
from tunbench.report.summary import summarize_trials
from tunbench.report.work_table import work_table_html
from tunbench.results import RunRecord


def _anchor(run: RunRecord, index: int) -> str:
    return f"run-{index}-{run.uid}"


def run_section(run: RunRecord, index: int) -> str:
    trials = sorted(run.trials, key=lambda t: t.seq)
    n_trials, n_failed = len(trials), sum(1 for t in trials if t.status != "ok")
    multi = many_clients_html(trials, f"r{index}")
    headlines = headline_tables_html(trials, f"r{index}")
    # The fleet workloads have their own section: their per-client "streams" and storm ready times are not
    # parallel flows of one iperf3 test, so they are left out of the per-case throughput/fairness charts.
    trials = [t for t in trials if not is_fleet(t)]
    summaries = summarize_trials(trials)
    colors = label_colors((s.case.label, s.tunnel) for s in summaries)
    pid = f"r{index}"
    title = f"Run {run.name or run.uid} (#{run.id})"
    meta = f"{n_trials} trials, {n_failed} failed · {run.status} · started {run.started_at}"
    parts = [f'<h2 id="{esc(_anchor(run, index))}">{esc(title)}</h2>', f'<p class="meta">{esc(meta)}</p>']
    if not summaries:
        body = (
            "\n".join(p for p in (headlines, multi, faults_html(run.trials, pid)) if p) or "<p>No trials recorded.</p>"
        )
        return "\n".join([*parts, body, provenance_html(run, run.trials)])
    parts += [warnings_html(summaries), h3(pid, "summary", "Summary"), summary_table(summaries, trials)]
    if host := interference_line(run.trials):
        parts.append(f'<p class="meta" id="{pid}-interference">{esc(host)}</p>')
    if baseline := baseline_line(run.trials):
        parts.append(f'<p class="meta" id="{pid}-baseline">{esc(baseline)}</p>')
    parts += [h3(pid, "throughput", "Throughput"), chart_div(fig_throughput(summaries, colors), f"{pid}-throughput")]
    ratio = fig_ratio(summaries, colors)
    if ratio is not None:
        parts.append(chart_div(ratio, f"{pid}-ratio"))
    cpu, eff = fig_cpu(summaries), fig_bits_per_cpu(summaries)
    if cpu is not None or eff is not None:
        parts.append(h3(pid, "cpu", "CPU cost"))
        parts += [chart_div(f, f"{pid}-{name}") for f, name in ((cpu, "cpu"), (eff, "bits-per-cpu")) if f is not None]
    parts.append(cores_html(trials, pid))
    parts.append(work_table_html(trials, pid))
    parts += series_section(trials, pid, "series", "Throughput over time", is_throughput, fig_timeseries, colors)
    parts += series_section(trials, pid, "queue", "Bottleneck queue occupancy", is_queue, fig_queue, colors)
    fair, flows = fig_fairness(summaries, trials, colors), fig_flows(trials, colors)
    parts.append(h3(pid, "fairness", "Fairness across parallel flows"))
    if fair is None:
        parts.append('<p class="note">Every case ran a single flow: fairness does not apply (use --flows 1,4).</p>')
    else:
        parts.append(chart_div(fair, f"{pid}-fairness"))
        if flows is not None:
            parts.append(chart_div(flows, f"{pid}-flows"))
    latency, rtt = fig_latency(trials, colors), fig_rtt_parts(trials, colors)
    if latency is not None or rtt is not None:
        parts.append(h3(pid, "latency", "Latency"))
        parts += [
            chart_div(f, f"{pid}-{name}") for f, name in ((latency, "latency"), (rtt, "rtt-parts")) if f is not None
        ]
    if (transactions := fig_transactions(trials, colors)) is not None:
        parts += [h3(pid, "transactions", "Transaction time"), chart_div(transactions, f"{pid}-transactions")]
    parts += [headlines, multi, faults_html(trials, pid), profiles_html(trials), provenance_html(run, trials)]
    return "\n".join(p for p in parts if p)


def render(runs: list[RunRecord]) -> str:
    template = Template(resources.files("tunbench.report").joinpath("templates/report.html").read_text("utf-8"))
    if len(runs) == 1:
        title = f"tunbench report: {runs[0].name or runs[0].uid}"
        toc = ""
    else:
        title = f"tunbench report: {len(runs)} runs"
        links = "".join(
            f'<li><a href="#{esc(_anchor(r, i))}">{esc(r.name or r.uid)} (#{r.id}, {esc(r.started_at)})</a></li>'
            for i, r in enumerate(runs)
        )
        toc = f"<nav><b>Runs</b><ul>{links}</ul></nav>"
    lead = (
        "Throughput is the receiving side's rate as the workload's traffic generator measured it. Each case was "
        "repeated; medians are shown with a 95% confidence interval of the median (its exact coverage in "
        "parentheses when few repetitions allow less), ratios are to the direct path (no tunnel) in the same run, "
        "CPU is the tunnel processes' user+system time."
    )
    return template.substitute(
        title=esc(title),
        lead=esc(lead),
        toc=toc,
        body="\n".join(run_section(r, i) for i, r in enumerate(runs)),
        version=esc(__version__),
        plotlyjs=get_plotlyjs(),
        main_class="",
        footer=PLOTLY_FOOTER.replace("$version", esc(__version__)),
    )
