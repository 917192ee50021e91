"""The run report's tables: the summary, the workloads' headline tables, the stability warnings, the WAN
profiles and the run's provenance.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from tunbench.report.common import (
    fmt_bps,
    fmt_num,
    fmt_ratio,
    host_lines,
    is_num,
    median_or_none,
    trial_jain,
)
from tunbench.report.headlines import AXES, headline_tables
from tunbench.report.html.base import NUM_CELL, esc, group_title, h3
from tunbench.report.summary import BASELINE, CaseSummary
from tunbench.results import CaseKey, RunRecord, TrialRecord


def headline_tables_html(trials: list[TrialRecord], pid: str) -> str:
    """The tables of the workloads with a table of their own (Workload.columns), as the terminal shows them."""
    tables = headline_tables(trials)
    if not tables:
        return ""
    show_profile = len({r.case.profile for t in tables for r in t.rows}) > 1
    parts = [h3(pid, "workloads", "Workloads")]
    for ht in tables:
        heads = ["tunnel", *(["profile"] if show_profile else []), *(AXES[a][1] for a in ht.axes)]
        first_num = len(heads)
        heads += [c.header for c in ht.columns] + ["n"]
        rows = []
        for r in ht.rows:
            n = f"{r.ok}" + (f' <span class="bad">({r.failed} failed)</span>' if r.failed else "")
            cells = [esc(r.case.label), *([esc(r.case.profile)] if show_profile else [])]
            cells += [esc(getattr(r.case, a)) for a in ht.axes]
            cells += (
                [esc(c) for c in r.cells]
                if r.ok
                else ['<span class="bad">failed</span>'] + [""] * (len(ht.columns) - 1)
            )
            cells.append(n)
            rows.append(
                "<tr>" + "".join(f"<td{NUM_CELL if i >= first_num else ''}>{c}</td>" for i, c in enumerate(cells))
            )
            for host, host_cells in r.hosts:  # a fleet over several client hosts: each host's own figures
                sub = [f"&nbsp;&nbsp;└ {esc(host)}", *[""] * (first_num - 1), *(esc(c) for c in host_cells), ""]
                rows.append(
                    '<tr class="note">'
                    + "".join(f"<td{NUM_CELL if i >= first_num else ''}>{c}</td>" for i, c in enumerate(sub))
                )
        head = "".join(f"<th{NUM_CELL if i >= first_num else ''}>{esc(h)}</th>" for i, h in enumerate(heads))
        parts.append(f'<h4 id="{pid}-workload-{esc(ht.kind)}">{esc(ht.kind)} (median of repetitions)</h4>')
        if ht.caption:
            parts.append(f'<p class="note">{esc(ht.caption)}</p>')
        parts.append(
            f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>'
            + "</tr>".join(rows)
            + "</tr></tbody></table></div>"
        )
    return "\n".join(parts)


def _ci_text(s: CaseSummary) -> str:
    t = s.throughput
    if not (math.isfinite(t.ci_low) and math.isfinite(t.ci_high)):
        return "–"
    return f"{fmt_bps(t.ci_low)} – {fmt_bps(t.ci_high)} ({t.ci_coverage:.0%} coverage)"


def _ratio_text(s: CaseSummary) -> str:
    r = s.ratio_to_direct
    if r is None or not math.isfinite(r.value):
        return "–"
    finite = math.isfinite(r.ci_low) and math.isfinite(r.ci_high)
    ci = f" [{fmt_ratio(r.ci_low)}–{fmt_ratio(r.ci_high)}]" if finite else ""
    if ci and math.isfinite(r.ci_coverage):  # the interval's real coverage (90% at 3 vs 3), not a nominal 95%
        ci += f" ({r.ci_coverage:.1%} coverage)".replace(".0%", "%")
    return f"{fmt_ratio(r.value)}×{ci}"


def summary_table(summaries: list[CaseSummary], trials: list[TrialRecord]) -> str:
    fair: dict[CaseKey, list[float | None]] = defaultdict(list)
    for t in trials:
        if t.status == "ok":
            fair[t.case].append(trial_jain(t))
    heads = [
        ("tunnel", ""),
        ("median", "num"),
        ("CI of median (coverage in the cell)", "num"),
        ("n", "num"),
        ("CV", "num"),
        ("vs direct [CI]", "num"),
        ("CPU client", "num"),
        ("CPU server", "num"),
        ("Mbit/CPU-s client", "num"),
        ("Mbit/CPU-s server", "num"),
        ("peak RSS client/server", "num"),
        ("retrans&shy;mits", "num"),
        ("Jain", "num"),
    ]
    rows: list[tuple[bool, list[str]]] = []
    for s in summaries:
        c, v = s.roles["client"], s.roles["server"]
        n = s.n_text + (f' <span class="bad">({s.n_failed} failed)</span>' if s.n_failed else "")
        rss = " / ".join(
            f"{x / 2**20:.0f} MiB" if is_num(x) and x else "–" for x in (c.rss_peak_bytes, v.rss_peak_bytes)
        )
        jain = median_or_none(fair.get(s.case, [])) if s.case.flows > 1 else None
        cells = [
            esc(s.case.label),
            f"<b>{esc(fmt_bps(s.throughput.median))}</b>" if s.n else '<span class="bad">failed</span>',
            esc(_ci_text(s)),
            n,
            esc(f"{s.throughput.cv:.1%}") if is_num(s.throughput.cv) else "–",
            esc(_ratio_text(s)),
            esc(f"{c.cpu_pct:.0f}%") if is_num(c.cpu_pct) else "–",
            esc(f"{v.cpu_pct:.0f}%") if is_num(v.cpu_pct) else "–",
            esc(f"{c.bits_per_cpu_s / 1e6:,.0f}") if c.bits_per_cpu_s else "–",
            esc(f"{v.bits_per_cpu_s / 1e6:,.0f}") if v.bits_per_cpu_s else "–",
            esc(rss),
            esc(fmt_num(s.retransmits, ".0f")),
            esc(fmt_num(jain, ".3f")),
        ]
        rows.append((s.tunnel == BASELINE, cells))
    # Columns with nothing in any row (e.g. server CPU of an L4 proxy that runs no server process) are dropped.
    keep = [i for i in range(len(heads)) if i < 2 or any(cells[i] not in ("–", "– / –") for _, cells in rows)]
    out = ['<div class="table-wrap"><table>', "<thead><tr>"]
    out.append("".join(f'<th class="{heads[i][1]}">{heads[i][0]}</th>' for i in keep) + "</tr></thead><tbody>")
    last = ""
    for (is_base, cells), s in zip(rows, summaries, strict=True):
        group = group_title(s.case)
        if group != last:
            out.append(f'<tr class="group"><td colspan="{len(keep)}">{esc(group)}</td></tr>')
            last = group
        cls = ' class="baseline"' if is_base else ""
        out.append(f"<tr{cls}>" + "".join(f'<td class="{heads[i][1]}">{cells[i]}</td>' for i in keep) + "</tr>")
    out += ["</tbody>", "</table></div>"]
    return "\n".join(out)


_CODE_TITLES = {
    "no-data": "no measurements",
    "non-finite": "failed repetitions",
    "too-few-repetitions": "too few repetitions",
    "few-for-significance": "too few repetitions for a significance test",
    "high-cv": "high spread (coefficient of variation)",
    "outlier": "outliers",
    "mostly-zero": "zero throughput",
    "link-late": "the emulated link fell behind its schedule",
    "generator-bound": "the traffic generator was the bottleneck",
    "cross-check": "in-run cross-checks disagreed",
    "not-cross-checked": "byte cross-checks not run (not checked, not passed)",
    "steal": "a VM's neighbours took CPU (steal time)",
    "interfered": "interfered with: another tunbench run, foreign CPU or steal during the window",
}


def warnings_html(summaries: list[CaseSummary]) -> str:
    """Failures first, then stability warnings grouped by kind (one fix per kind), collapsed when long."""
    failures = [
        f'<li class="bad">{esc(s.case.label)} ({esc(group_title(s.case))}) failed: {esc(err)}</li>'
        for s in summaries
        for err in s.errors
    ]
    by_code: dict[str, list[tuple[CaseSummary, str]]] = defaultdict(list)
    fixes: dict[str, str] = {}
    for s in summaries:
        for w in s.warnings:
            by_code[w.code].append((s, w.message))
            fixes.setdefault(w.code, w.fix)
    if not failures and not by_code:
        return '<p class="ok">No stability warnings: every case has enough repetitions and a low spread.</p>'
    groups = []
    for code, items in by_code.items():
        lis = "".join(f'<li>{esc(msg)} <span class="fix">({esc(group_title(s.case))})</span></li>' for s, msg in items)
        title = _CODE_TITLES.get(code, code)
        groups.append(
            f'<li><b>{esc(title)}</b> in {len(items)} case(s) — <span class="fix">fix: {esc(fixes[code])}</span>'
            f"<ul>{lis}</ul></li>"
        )
    counts = ", ".join(f"{len(v)} × {_CODE_TITLES.get(k, k)}" for k, v in by_code.items())
    head = f"{len(failures)} failed trial(s); " if failures else ""
    summary = f"<summary><b>Stability warnings</b>: {esc(head + counts)}</summary>"
    failed = f"<ul>{''.join(failures)}</ul>" if failures else ""
    opened = " open" if sum(len(v) for v in by_code.values()) <= 6 else ""
    return f'<div class="warnings">{failed}<details{opened}>{summary}<ul>{"".join(groups)}</ul></details></div>'


def profiles_html(trials: list[TrialRecord]) -> str:
    seen: dict[str, dict[str, Any]] = {}
    for t in trials:
        p = t.params.get("profile")
        if isinstance(p, dict) and t.profile not in seen:
            seen[t.profile] = p
    if not seen:
        return ""
    rows = []
    for name, p in seen.items():
        link = "emulated (tunbench-link)" if p.get("emulated") else "veth (no impairment)"
        dirs = [", ".join(f"{k}={v}" for k, v in (p.get(d) or {}).items()) or "–" for d in ("up", "down")]
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(link)}</td><td>{esc(dirs[0])}</td><td>{esc(dirs[1])}</td>"
            f"<td>{esc(p.get('mtu') or '')}</td><td>{esc(p.get('description') or '')}</td></tr>"
        )
    head = "<tr><th>profile</th><th>link</th><th>up (client → server)</th><th>down (server → client)</th>"
    head += "<th>MTU</th><th>description</th></tr>"
    return f"<h3>WAN profiles</h3><table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def provenance_html(run: RunRecord, trials: list[TrialRecord]) -> str:
    p = run.provenance
    host, cpu, mem = p.get("host") or {}, p.get("cpu") or {}, p.get("memory") or {}
    items: list[tuple[str, str]] = [
        ("run", f"#{run.id} {run.uid}" + (f" ({run.name})" if run.name else "")),
        ("status", f"{run.status}; started {run.started_at}; finished {run.finished_at or '–'}"),
        ("tunbench", run.tunbench_version),
        ("host", f"{host.get('hostname', '?')}: Linux {host.get('kernel', '?')} {host.get('arch', '')}"),
        ("CPU", f"{cpu.get('model', '?')}, {cpu.get('cores', '?')} cores, {cpu.get('freq_mhz', '?')} MHz"),
    ]
    if mem.get("total_bytes"):
        items.append(("memory", f"{mem['total_bytes'] / 2**30:.1f} GiB"))
    load = p.get("load") or {}
    if load:
        items.append(("load at start", ", ".join(f"{k} {v:.2f}" for k, v in load.items() if is_num(v))))
    tools = p.get("tools") or {}
    if tools:
        items.append(("tools", ", ".join(f"{k} {v}" for k, v in sorted(tools.items()))))
    for label, info in sorted((p.get("tunnels") or {}).items()):
        params = ", ".join(f"{k}={v}" for k, v in (info.get("params") or {}).items())
        items.append((f"tunnel {label}", f"{info.get('adapter', label)} {info.get('version') or ''} {params}".strip()))
    for line in host_lines(p):
        name, _, rest = line.partition(": ")
        items.append((f"host {name}", rest))
    if "seed" in p:
        items.append(("seed", str(p["seed"])))
    sysctls = next((t.params.get("sysctls") for t in trials if isinstance(t.params.get("sysctls"), dict)), None)
    if sysctls:
        items.append(("namespace sysctls", ", ".join(f"{k}={v}" for k, v in sorted(sysctls.items()))))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
    scenario = f"<h3>Scenario</h3><pre>{esc(run.scenario_text)}</pre>" if run.scenario_text else ""
    resolved = json.dumps(run.scenario, indent=2, sort_keys=True, default=str)
    return (
        f'<h3>Provenance</h3><dl class="prov">{dl}</dl>{scenario}'
        f"<details><summary>Resolved scenario (after command-line overrides)</summary><pre>{esc(resolved)}</pre>"
        "</details>"
    )
