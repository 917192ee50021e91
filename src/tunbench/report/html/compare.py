"""`tunbench compare A B --html FILE`: the comparison as one self-contained HTML page (the run report's
template; no script, nothing fetched).

Per matched case, one section: its verdicts (throughput, CPU per bit, latency: the rows of `compare`'s
table, with the change's CI and coverage, the Holm-adjusted p and the MDE), its counted-work changes with
their CIs (`run --count-work`: the rows that explain and never gate) and, beside them, the differential
flamegraph of each side (report/flamediff.py), inline. Above the cases: the verdict line, the analysis,
the notes and warnings `compare` prints.

The flamegraphs are inferno's SVGs made inert for inlining: their script (zoom, search) and its controls are
removed and their ids prefixed so that several can share a page; each frame keeps its <title>, so hovering a
frame shows its name, its time and the change of its share.

Pure: a CompareResult and the Diffs in, text out (the template is an installed file).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from importlib import resources
from string import Template

from rich.text import Text

from tunbench import __version__
from tunbench.report.compare import (
    CaseComparison,
    CompareResult,
    caption,
    compare_lines,
    fmt_change,
    fmt_ci,
    fmt_mde,
    fmt_p,
    n_text,
    threshold_text,
)
from tunbench.report.flamediff import ROLES, Diff
from tunbench.results import CaseKey

SVG_NS = "http://www.w3.org/2000/svg"
_NAMESPACES = {"": SVG_NS, "xlink": "http://www.w3.org/1999/xlink", "fg": "http://github.com/jonhoo/inferno"}
for _prefix, _uri in _NAMESPACES.items():
    ET.register_namespace(_prefix, _uri)
_CONTROLS = {"search", "unzoom", "matched", "details"}  # inferno's script-driven texts: dead without it
_ID_REF = re.compile(r"#([A-Za-z][\w-]*)")
_OUTCOME_CLASS = {"regressed": "bad", "improved": "ok", "unchanged": "", "undecided": "warn"}


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _plain(markup: str) -> str:
    return Text.from_markup(markup).plain


def inline_svg(svg: str, prefix: str) -> str:
    """inferno's SVG as an element to inline in a page: no script, no event handlers, no script-driven
    controls, every id (and each reference to one, in attributes and in its style sheet) prefixed with
    `prefix`, sized by the page (width 100%, its viewBox keeps the proportions)."""
    root = ET.fromstring(svg)
    for parent in list(root.iter()):
        for child in list(parent):
            tag = child.tag.rpartition("}")[2]
            if tag == "script" or (tag == "text" and child.get("id") in _CONTROLS):
                parent.remove(child)
    for el in root.iter():
        for name in [n for n in el.attrib if n.startswith("on")]:
            del el.attrib[name]
        for name, value in el.attrib.items():
            if name == "id":
                el.set(name, f"{prefix}-{value}")
            elif "url(#" in value or (name.endswith("href") and value.startswith("#")):
                el.set(name, _ID_REF.sub(rf"#{prefix}-\1", value))
        if el.tag.rpartition("}")[2] == "style" and el.text:
            el.text = _ID_REF.sub(rf"#{prefix}-\1", el.text)
    root.attrib.pop("width", None)
    root.attrib.pop("height", None)
    root.set("class", "flamegraph")
    return ET.tostring(root, encoding="unicode")


def _outcome(result: CompareResult, rows: list[CaseComparison]) -> str:
    """The case's worst gated outcome (regressed > undecided > improved > unchanged), or "" if none gates."""
    found = {result.outcome(r) for r in rows if r.gated}
    return next((o for o in ("regressed", "undecided", "improved", "unchanged") if o in found), "")


def _table(rows: list[CaseComparison], tid: str) -> str:
    head = "".join(
        f'<th{" class=num" if num else ""}>{_e(h)}</th>'
        for h, num in (
            ("metric", False), ("A", True), ("B", True), ("n A/B", True), ("change", True),
            ("CI, coverage", True), ("p Holm", True), ("verdict", False), ("MDE", True),
        )
    )  # fmt: skip
    body = []
    for r in rows:
        c = r.result
        cls = {"better": "ok", "worse": "bad"}.get(c.verdict, "")
        # counted work never gates (its heading says so); a direct baseline's row does not either
        shown_gated = r.gated or r.metric.kind == "work"
        verdict = _e(r.verdict_text) + (
            ' <span class="note">(wide)</span>'
            if r.wide
            else ""
            if shown_gated
            else ' <span class="note">(not gated)</span>'
        )
        cells = [
            _e(r.metric.fmt(c.baseline.median / r.metric.scale)),
            _e(r.metric.fmt(c.candidate.median / r.metric.scale)),
            _e(n_text(c)),
            f'<b class="{cls}">{_e(fmt_change(c))}</b>',
            _e(fmt_ci(c)),
            _e(fmt_p(c.p_adjusted)),
        ]
        body.append(
            f"<tr><td>{_e(r.metric.title)}</td>"
            + "".join(f'<td class="num">{x}</td>' for x in cells)
            + f'<td class="{cls}">{verdict}</td><td class="num">{_e(fmt_mde(c))}</td></tr>'
        )
    table = f'<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="table-wrap">{table}</div>'


def _flames(diffs: list[Diff], sid: str) -> str:
    if not diffs:
        return (
            '<p class="note">No flamegraph: record A and B with <code>tunbench run --flamegraph</code> to see what '
            "moved.</p>"
        )
    parts = []
    for d in sorted(diffs, key=lambda d: ROLES.index(d.role)):
        fid = f"{sid}-fg-{d.role}"
        if d.svg is None:
            parts.append(
                f'<figure id="{fid}"><figcaption>{_e(d.role)} side</figcaption><p class="bad">{_e(d.note)}</p></figure>'
            )
            continue
        rate_cls = "warn" if d.rate.startswith("warning") else "note"
        parts.append(
            f'<figure id="{fid}"><figcaption>{_e(d.role)} side: where the share of CPU time moved '
            f'<span class="{rate_cls}">({_e(d.rate)})</span></figcaption>{inline_svg(d.svg, fid)}</figure>'
        )
    return "".join(parts)


def _case_section(
    result: CompareResult, key: tuple[CaseKey, CaseKey], rows: list[CaseComparison], diffs: list[Diff], i: int
) -> str:
    sid = f"case-{i}"
    outcome = _outcome(result, rows)
    badge = f' <span class="badge {_OUTCOME_CLASS[outcome]}">{outcome}</span>' if outcome else ""
    verdicts = [r for r in rows if r.metric.kind != "work"]
    work = [r for r in rows if r.metric.kind == "work"]
    left = [f"<h3>Verdicts</h3>{_table(verdicts, f'{sid}-verdicts')}"] if verdicts else []
    if work:
        left.append(
            '<h3>Counted work</h3><p class="meta">What the tunnel processes did per MB and per call over the '
            "measured window (<code>run --count-work</code>; docs/counted-work.md). These rows explain the verdicts; "
            f"they never gate.</p>{_table(work, f'{sid}-work')}"
        )
    elif any(r.metric.kind == "throughput" for r in rows):
        left.append('<p class="note">No counted work: record A and B with <code>tunbench run --count-work</code>.</p>')
    return (
        f'<section class="case" id="{sid}"><h2>{_e(rows[0].case_label)}{badge}</h2><div class="case-grid">'
        f'<div class="case-figures">{"".join(left)}</div><div class="case-flames">{_flames(diffs, sid)}</div>'
        "</div></section>"
    )


def _grouped(rows: Iterable[CaseComparison]) -> dict[tuple[CaseKey, CaseKey], list[CaseComparison]]:
    out: dict[tuple[CaseKey, CaseKey], list[CaseComparison]] = {}
    for r in rows:
        out.setdefault((r.case_a, r.case_b), []).append(r)
    return out


def render_comparison(result: CompareResult, diffs: list[Diff] | None, extra_lines: Iterable[str] = ()) -> str:
    """The page. `diffs`: the differential flamegraphs (None: none were looked for, no trial has stacks);
    `extra_lines`: more plain lines to show with the notes (`--target`'s)."""
    template = Template(resources.files("tunbench.report").joinpath("templates/report.html").read_text("utf-8"))
    *notes, verdict = [_plain(line) for line in compare_lines(result)]
    gate = [n for n in notes if n.startswith("gate: ")]  # what gated and why: beside the verdict, not a warning
    notes = [n for n in notes if n not in gate] + list(extra_lines)
    by_case: dict[tuple[CaseKey, CaseKey], list[Diff]] = {}
    for d in diffs or []:
        by_case.setdefault((d.case_a, d.case_b), []).append(d)
    groups = _grouped(result.rows)
    outcomes = {key: _outcome(result, rows) for key, rows in groups.items()}
    toc = "".join(
        f'<li><a href="#case-{i}">{_e(rows[0].case_label)}</a>'
        + (f' <span class="badge {_OUTCOME_CLASS[o]}">{o}</span>' if (o := outcomes[key]) else "")
        + "</li>"
        for i, (key, rows) in enumerate(groups.items())
    )
    verdict_cls = "bad" if result.exit_code else "warn" if result.tally()["undecided"] else "ok"
    head = [
        f'<p class="verdict {verdict_cls}" id="verdict">{_e(verdict)}</p>',
        *(f'<p class="meta">{_e(line)}</p>' for line in gate),
        f'<p class="meta">{_e(caption(result))}</p>',
    ]
    if notes:
        head.append('<div class="warnings"><ul>' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul></div>")
    sections = [
        _case_section(result, key, rows, by_case.get(key, []), i) for i, (key, rows) in enumerate(groups.items())
    ]
    title = f"tunbench compare: B {result.b_name} vs A {result.a_name}{threshold_text(result)}"
    lead = (
        "Per case: B's change against A for each metric, with its interval and the test's verdict; the counted "
        "work that explains it; and beside them, where each side's CPU time moved (a differential flamegraph: red, "
        "a larger share in B; blue, a smaller one; hover a frame for its figures)."
    )
    return template.substitute(
        title=_e(title),
        lead=_e(lead),
        toc=f"<nav><b>Cases</b><ul>{toc}</ul></nav>" if len(groups) > 1 else "",
        body="\n".join([*head, *sections]),
        version=_e(__version__),
        plotlyjs="",
        main_class="compare",
        footer=f"Made by tunbench {_e(__version__)}. Self-contained: the flamegraphs are inline SVG, the page works "
        "offline.",
    )
