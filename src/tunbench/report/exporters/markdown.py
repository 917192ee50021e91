"""Markdown export: tables in the style of the JMUX proxy document, ready to paste into a PR or docs page.

Per run and per (profile, workload, direction): an overview table (tunnels x flow counts, with the direct
baseline first and each tunnel's ratio to it), then a detail table per case (CI, n, CPU cost), then the
stability warnings and the provenance needed to reproduce the numbers. Pure: runs in, text out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from tunbench.report.common import (
    count_of,
    count_text,
    direction_text,
    fmt_bps,
    fmt_num,
    fmt_ratio,
    is_num,
    median_or_none,
    mode_of,
    trial_jain,
)
from tunbench.report.summary import BASELINE, CaseSummary, summarize_trials
from tunbench.results import RunRecord, TrialRecord


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(_esc(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    divider = ["---:" if i in right else "---" for i in range(len(header))]
    return [_row(header), "| " + " | ".join(divider) + " |", *(_row(r) for r in rows)]


def _ratio(s: CaseSummary) -> str:
    r = s.ratio_to_direct
    if r is None or not math.isfinite(r.value):
        return ""
    finite = math.isfinite(r.ci_low) and math.isfinite(r.ci_high)
    ci = f" [{fmt_ratio(r.ci_low)}–{fmt_ratio(r.ci_high)}]" if finite else ""
    if ci and math.isfinite(r.ci_coverage):  # the interval's real coverage (90% at 3 vs 3), not a nominal 95%
        ci += f" ({r.ci_coverage:.1%})".replace(".0%", "%")
    return f"{fmt_ratio(r.value)}×{ci}"


def _median_cell(s: CaseSummary) -> str:
    if not s.n:
        return "failed"
    cell = fmt_bps(s.throughput.median)
    if s.tunnel != BASELINE and s.ratio_to_direct is not None and math.isfinite(s.ratio_to_direct.value):
        cell += f" ({fmt_ratio(s.ratio_to_direct.value)}× direct)"
    return cell


def _ci(s: CaseSummary) -> str:
    t = s.throughput
    if not (math.isfinite(t.ci_low) and math.isfinite(t.ci_high)):
        return "–"
    return f"{fmt_bps(t.ci_low)} – {fmt_bps(t.ci_high)} ({t.ci_coverage:.0%})"


def _pct(x: float | None) -> str:
    return f"{x:.0f}%" if is_num(x) else "–"


def _mbit(x: float | None) -> str:
    return f"{x / 1e6:,.0f}" if is_num(x) and x is not None else "–"


def _overview(summaries: list[CaseSummary]) -> list[str]:
    flows = sorted({count_of(s.case) for s in summaries})
    labels = list(dict.fromkeys(s.case.label for s in summaries))
    cell = {(s.case.label, count_of(s.case)): s for s in summaries}
    texts = {count_of(s.case): count_text(s.case) for s in summaries}
    header = ["tunnel", *(texts[f] for f in flows)]
    rows = []
    for label in labels:
        base = cell.get((label, flows[0])) or next(s for s in summaries if s.case.label == label)
        name = f"{label} (baseline)" if base.tunnel == BASELINE else label
        rows.append([name, *(_median_cell(cell[(label, f)]) if (label, f) in cell else "" for f in flows)])
    return _table(header, rows, set(range(1, len(header))))


def _details(summaries: list[CaseSummary], fairness: dict[tuple[str, int], float | None]) -> list[str]:
    header = [
        "tunnel",
        "flows",
        "median",
        "CI of median (its coverage)",
        "n",
        "vs direct [CI] (coverage)",
        "CPU client",
        "CPU server",
        "Mbit per CPU-s client",
        "Mbit per CPU-s server",
        "Jain fairness",
    ]
    rows = []
    for s in sorted(summaries, key=lambda s: (count_of(s.case), s.tunnel != BASELINE, -(s.throughput.median or 0))):
        c, v = s.roles["client"], s.roles["server"]
        n = s.n_text + (f" ({s.n_failed} failed)" if s.n_failed else "")
        jain = fairness.get((s.case.label, count_of(s.case)))
        rows.append(
            [
                s.case.label,
                str(count_of(s.case)),
                fmt_bps(s.throughput.median) if s.n else "failed",
                _ci(s),
                n,
                _ratio(s) or "–",
                _pct(c.cpu_pct),
                _pct(v.cpu_pct),
                _mbit(c.bits_per_cpu_s),
                _mbit(v.bits_per_cpu_s),
                fmt_num(jain, ".3f") if s.case.flows > 1 else "–",
            ]
        )
    return _table(header, rows, {1, 2, 4, 5, 6, 7, 8, 9, 10})


def _fairness(trials: list[TrialRecord]) -> dict[tuple[str, int], float | None]:
    per: dict[tuple[str, int], list[float | None]] = defaultdict(list)
    for t in trials:
        if t.status == "ok":
            per[(t.label, count_of(t.case))].append(trial_jain(t))
    return {k: median_or_none(v) for k, v in per.items()}


def _profile_text(trials: list[TrialRecord], profile: str) -> str:
    for t in trials:
        p = t.params.get("profile")
        if t.profile == profile and isinstance(p, dict):
            desc = str(p.get("description") or "")
            parts = [f"{d}: {', '.join(f'{k}={v}' for k, v in (p.get(d) or {}).items())}" for d in ("up", "down")]
            shaped = "; ".join(x for x in parts if not x.endswith(": "))
            return " — ".join(x for x in (desc, shaped) if x)
    return ""


def _provenance(run: RunRecord) -> list[str]:
    p = run.provenance
    host, cpu, tools = p.get("host") or {}, p.get("cpu") or {}, p.get("tools") or {}
    out = [
        f"- tunbench {run.tunbench_version}, run `{run.uid}` (#{run.id}{', ' + run.name if run.name else ''}), "
        f"started {run.started_at}, {run.status}",
    ]
    if host or cpu:
        out.append(
            f"- host: Linux {host.get('kernel', '?')} {host.get('arch', '')}, {cpu.get('model', '?')} "
            f"({cpu.get('cores', '?')} cores)"
        )
    if tools:
        out.append("- tools: " + ", ".join(f"{k} {v}" for k, v in sorted(tools.items())))
    tunnels = p.get("tunnels") or {}
    for label, info in sorted(tunnels.items()):
        params = ", ".join(f"{k}={v}" for k, v in (info.get("params") or {}).items())
        version = f" {info['version']}" if info.get("version") else ""
        out.append(f"- `{label}`: adapter {info.get('adapter', label)}{version}" + (f" ({params})" if params else ""))
    return out


def render_run(run: RunRecord) -> str:
    summaries = summarize_trials(run.trials)
    title = run.name or run.uid
    lines = [f"## tunbench run {title} (#{run.id})", ""]
    if not summaries:
        return "\n".join([*lines, "No trials recorded.", ""])
    groups: dict[tuple[str, str, str], list[CaseSummary]] = defaultdict(list)
    for s in summaries:
        groups[(s.case.profile, s.case.workload, mode_of(s.case))].append(s)
    fairness = _fairness(run.trials)
    for (profile, workload, direction), group in groups.items():
        lines.append(f"### {profile} — {direction_text(direction)} ({workload})")
        lines.append("")
        desc = _profile_text(run.trials, profile)
        if desc:
            lines += [f"Profile `{profile}`: {desc}.", ""]
        lines += ["Median throughput over the repetitions:", "", *_overview(group), ""]
        lines += ["<details><summary>Details: confidence intervals, CPU cost, fairness</summary>", ""]
        lines += [*_details(group, fairness), "", "</details>", ""]
    notes = [(s, w) for s in summaries for w in s.warnings] + [(s, None) for s in summaries if s.errors]
    if notes:
        lines += ["#### Warnings", ""]
        for s, w in notes:
            if w is None:
                lines += [f"- **{s.case.label}** ({mode_of(s.case)}, {count_text(s.case)}): {e}" for e in s.errors]
            else:
                lines.append(f"- {w.message} ({mode_of(s.case)}, {count_text(s.case)}) — {w.fix}")
        lines.append("")
    lines += ["#### Provenance", "", *_provenance(run), ""]
    return "\n".join(lines)


def render(runs: list[RunRecord]) -> str:
    intro = (
        "Throughput is the receiving side's rate as the traffic generator measured it; medians over the "
        "repetitions, ratios to the direct path (no tunnel) in the same run. CPU is the tunnel processes' "
        "user+system time as a percentage of one core; Mbit per CPU-second is throughput divided by that CPU "
        "rate (higher is cheaper)."
    )
    return "\n".join(["# tunbench results", "", intro, "", *(render_run(r) for r in runs)]).rstrip() + "\n"


class MarkdownExporter:
    """`--format md`, `-o FILE.md`: tables ready to paste into a PR or a docs page."""

    name = "md"
    suffixes = (".md",)

    def render(self, runs: Sequence[RunRecord]) -> str:
        return render(list(runs))
