"""The counted-work table of a run (`run --count-work`, monitor/work.py): per case and side, the medians
of the ratios compare shows (report.compare.WORK_RATIOS), and where a side was not counted, why."""

from __future__ import annotations

import html
import statistics
from collections import defaultdict

from tunbench.monitor.counters import INSTR, INSTR_COUNT, INSTR_SIDE
from tunbench.monitor.work import RATIO
from tunbench.report.compare import WORK_RATIOS
from tunbench.report.compare.metrics import STALL, below_rate, rate_hint
from tunbench.report.summary import ROLES
from tunbench.results import CaseKey, TrialRecord
from tunbench.workloads import case_title

Row = tuple[CaseKey, str, dict[str, float | None], str]  # case, role, suffix -> median, note


def work_rows(trials: list[TrialRecord]) -> list[Row]:
    """One row per (case, counted or noted side), in the trials' case order (pure)."""
    by_case: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if t.status == "ok":
            by_case[t.case].append(t)
    rows: list[Row] = []
    for case, ts in by_case.items():
        for role in ROLES:
            medians: dict[str, float | None] = {}
            for suffix in WORK_RATIOS:
                vals = [v for t in ts if (v := t.metrics.get(RATIO[suffix].key(role=role))) is not None]
                medians[suffix] = statistics.median(vals) if vals else None
            notes = sorted({str(t.params.get("work", {}).get(role, "")) for t in ts} - {""})
            if any(v is not None for v in medians.values()) or notes:
                rows.append((case, role, medians, "; ".join(notes)))
    return rows


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def work_table_html(trials: list[TrialRecord], pid: str) -> str:
    """The table, with its heading; "" when no trial was counted."""
    rows = work_rows(trials)
    if not any(any(v is not None for v in m.values()) for _, _, m, _ in rows):
        return ""
    shown = [s for s in WORK_RATIOS if any(m[s] is not None for _, _, m, _ in rows)]
    head = "".join(f'<th class="num">{html.escape(WORK_RATIOS[s][0])}</th>' for s in shown)
    body = "".join(
        f"<tr><td>{html.escape(case_title(case))}</td><td>{role}</td>"
        + "".join(f'<td class="num">{_num(m[s])}</td>' for s in shown)
        + f'<td class="note">{html.escape(note)}</td></tr>'
        for case, role, m, note in rows
    )
    return (
        f'<h3 id="{pid}-sec-work">Counted work</h3>'
        '<p class="meta">Medians over the repetitions; per MB and per packet of the side\'s underlay link, both '
        "directions (docs/counted-work.md). Lower per-MB counts and higher packets per call are cheaper.</p>"
        f'<div class="table-wrap"><table id="{pid}-work"><thead><tr><th>case</th><th>side</th>{head}<th>note</th>'
        f"</tr></thead><tbody>{body}</tbody></table></div>"
    )


def instruction_lines(trials: list[TrialRecord]) -> list[str]:
    """What `run --count-instructions` counted, one line per case: each side's median instructions per payload
    byte (and both sides together), or why a side was not counted ("" lines: none asked for). Pure."""
    by_case: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if t.status == "ok":
            by_case[t.case].append(t)
    lines = []
    for case, ts in by_case.items():
        if not any(
            INSTR_COUNT.matches(k) or INSTR_SIDE.matches(k) or k == INSTR.name for t in ts for k in t.metrics
        ) and not any("instr" in t.params for t in ts):
            continue
        parts = []
        for role in ROLES:
            vals = [v for t in ts if (v := t.metrics.get(INSTR_SIDE.key(role=role))) is not None]
            notes = _reasons(ts, role)
            counted = f"{statistics.median(vals):.4g}" if vals else ""
            if notes:
                counted = (counted + " (" if counted else "") + "; ".join(notes) + (")" if counted else "")
            parts.append(f"{role} {counted or 'not counted'}")
        both = [v for t in ts if (v := t.metrics.get(INSTR.name)) is not None]
        total = f", both {statistics.median(both):.4g}" if both else ""
        lines.append(f"instructions/byte {case_title(case)}: {', '.join(parts)}{total}")
    if lines and (hint := rate_hint([t for ts in by_case.values() for t in ts])):
        lines.append(hint)
    return lines


def _reasons(ts: list[TrialRecord], role: str) -> list[str]:
    """A side's distinct reasons for not counting, sorted; those of the trials short of their fixed rate (each
    with its own carried rate) as one: how many, and the range they carried (`below_rate`)."""
    short = {
        id(t): s
        for t in ts
        if str((t.params.get("instr") or {}).get(role, "")).startswith(STALL) and (s := below_rate(t))
    }
    rest = {
        str(t.params.get(key, {}).get(role, ""))
        for t in ts
        for key in ("instr", "instr_whole")
        if not (key == "instr" and id(t) in short)
    } - {""}
    if not short:
        return sorted(rest)
    carried = [c / 1e6 for c, _ in short.values()]
    span = f"{min(carried):.1f}" if min(carried) == max(carried) else f"{min(carried):.1f}-{max(carried):.1f}"
    offered = max(o for _, o in short.values()) / 1e6
    return [
        f"not counted in {len(short)} of {len(ts)} trial(s): carried {span} Mbit/s of the {offered:g} Mbit/s offered",
        *sorted(rest),
    ]
