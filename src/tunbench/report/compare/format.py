"""compare's output: the table, the notes and warnings, and the verdict line; the change, its interval,
p and MDE written for people (rich markup; data escaped; pure).
"""

from __future__ import annotations

import math

from rich.markup import escape
from rich.table import Table

from tunbench.report.compare.repetitions import repetitions_for
from tunbench.report.compare.result import OUTCOMES, CaseComparison, CompareResult
from tunbench.report.terminal import grouped_lines
from tunbench.stats import Comparison
from tunbench.workloads import case_title

_VERDICT_STYLE = {"better": "green", "worse": "red", "no significant change": "dim"}


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%" if math.isfinite(x) else "–"


def _decimals(*xs: float) -> int:
    """Decimals for signed amounts shown together: about 2 significant digits on the largest."""
    big = max((abs(x) for x in xs if math.isfinite(x)), default=0.0)
    if big == 0.0:
        return 1
    return max(0, min(4, 1 - math.floor(math.log10(big))))


def fmt_change(c: Comparison) -> str:
    """The change alone: "-7.9%" (relative) or "+7.0 ms" (absolute, in the metric's unit)."""
    if not math.isfinite(c.change):
        return "–"
    if not c.absolute:
        return _pct(c.change)
    d = _decimals(c.change, c.ci_low, c.ci_high)
    return f"{c.change:+.{d}f} {c.unit}".rstrip()


def fmt_ci(c: Comparison) -> str:
    """The interval "[+5.1, +8.8] 96.8%": the interval of the change (same unit as the change) and its real coverage."""
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return ""
    if c.absolute:
        d = _decimals(c.change, c.ci_low, c.ci_high)
        ci = f"[{c.ci_low:+.{d}f}, {c.ci_high:+.{d}f}]"
    else:
        ci = f"[{c.ci_low * 100:+.1f}, {c.ci_high * 100:+.1f}]"
    return f"{ci} {fmt_coverage(c.ci_coverage)}"


def fmt_coverage(coverage: float) -> str:
    """The real coverage of an interval: 90%, 96.8%, 95% (never a nominal figure)."""
    if not math.isfinite(coverage):
        return ""
    text = f"{coverage * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def _change(c: Comparison) -> str:
    ci = fmt_ci(c)
    return fmt_change(c) + (f"\n{ci}" if ci else "")


def fmt_p(p: float) -> str:
    if not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_mde(c: Comparison) -> str:
    x = c.min_detectable_effect
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞"
    if c.absolute:
        return f"±{x:.3g} {c.unit}".rstrip()
    return f"±{x * 100:.1f}%"


def threshold_text(result: CompareResult) -> str:
    parts = [f"threshold {result.threshold:.1%}"] if result.threshold else []
    parts += [f"{v:g} {unit} for absolute {unit} changes" for unit, v in result.threshold_abs.items() if v]
    return ", " + ", ".join(parts) if parts else ""


_UNPAIRED_TEXT = (
    "change = the Hodges-Lehmann estimate of median(B) / median(A) - 1 (of logs), or of median(B) - median(A) in "
    "the metric's unit for signed metrics (and whenever a value is <= 0); [CI] its distribution-free interval, "
    "then its exact coverage (nominal from 50 per side); p: Mann-Whitney U"
)


_PAIRED_TEXT = (
    "paired t on the within-pair log ratios: change = exp(mean of ln(B/A) per pair) - 1, or the mean of B - A in "
    "the metric's unit for signed metrics (and whenever a value is <= 0); [CI] its t interval, then its nominal "
    "coverage; p: paired t-test"
)


def caption(result: CompareResult) -> str:
    if result.analysis == "paired":
        method = f"paired: {result.analysis_reason}; {_PAIRED_TEXT}"
    elif result.analysis == "mixed":
        method = f"paired where possible: {result.analysis_reason}; paired rows (n shown as pairs): {_PAIRED_TEXT}; "
        method += f"unpaired rows: {_UNPAIRED_TEXT}"
    else:
        method = f"unpaired: {result.analysis_reason}; {_UNPAIRED_TEXT}"
    family, wide_family = result.family_sizes()
    tiers = f"the {family} gated comparison(s) of the main tier"
    if wide_family:
        tiers += f", or the {wide_family} of the wide tier for (wide) rows (their own family and threshold)"
    return (
        f"{method}. A, B: medians (CPU/bit in CPU-seconds per Gbit); p Holm: adjusted over {tiers}; verdicts use "
        "it, and a significant change smaller than the threshold is named but does not gate ('within'); MDE: "
        "change detectable with 80% power at Holm's level"
    )


def n_text(c: Comparison) -> str:
    return f"{c.n_pairs} pairs" if c.analysis == "paired" else f"{c.baseline.n}/{c.candidate.n}"


def compare_table(result: CompareResult) -> Table:
    table = Table(
        title=escape(f"B {result.b_name} vs A {result.a_name}{threshold_text(result)}"),
        caption=escape(caption(result)),
        header_style="bold",
    )
    for col, justify in [
        ("case", "left"),
        ("metric", "left"),
        ("A", "right"),
        ("B", "right"),
        ("n A/B", "right"),
        ("change [CI] coverage", "right"),
        ("p", "right"),
        ("p Holm", "right"),
        ("verdict", "left"),
        ("MDE", "right"),
    ]:
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for i, r in enumerate(result.rows):
        c = r.result
        style = _VERDICT_STYLE[c.verdict]
        verdict = f"[{style}]{r.verdict_text}[/]" + (
            " [dim](wide)[/]" if r.wide else "" if r.gated else " [dim](not gated)[/]"
        )
        first = i == 0 or result.rows[i - 1].case_a != r.case_a
        if first and i:
            table.add_section()
        table.add_row(
            escape(r.case_label) if first else "",
            r.metric.title,
            r.metric.fmt(c.baseline.median / r.metric.scale),
            r.metric.fmt(c.candidate.median / r.metric.scale),
            n_text(c),
            _change(c),
            fmt_p(c.p_value),
            fmt_p(c.p_adjusted),
            verdict,
            fmt_mde(c),
        )
    return table


def compare_lines(result: CompareResult) -> list[str]:
    """Notes, settings, unmatched cases, the warnings grouped by cause (one line each, with a count), the
    regressions by name, and last the verdict line (rich markup; data is escaped), in that order."""
    lines = [f"[yellow]note: {escape(n)}[/]" for n in result.notes]
    lines += [f"[yellow]warning: {escape(s)}[/]" for s in result.settings]
    for k in result.unmatched_a:
        lines.append(f"[dim]only in A: {escape(case_title(k))}[/]")
    for k in result.unmatched_b:
        lines.append(f"[dim]only in B: {escape(case_title(k))}[/]")
    lines += [
        f"[yellow]warning:[/] {line}"
        for line in grouped_lines(result.warnings(), unit="comparison(s)", most=4, of=len(result.rows))
    ]
    regs = result.regressions
    if regs:
        worst = ", ".join(f"{r.case_label} {r.metric.title} {fmt_change(r.result)}" for r in regs)
        lines.append(f"[bold red]{len(regs)} regression(s) beyond the threshold: {escape(worst)}[/]")
    if any(r.gated for r in result.rows):
        lines.append(f"[dim]{escape(result.gate_line())}[/]")
    lines.append(verdict_line(result))
    return lines


_METHOD = {
    "paired": "paired t on log ratios",
    "unpaired": "unpaired Mann-Whitney U",
    "mixed": "paired t on log ratios where there are pairs, else unpaired Mann-Whitney U",
}


def verdict_line(result: CompareResult) -> str:
    """The last line of `tunbench compare`, for a human and a CI log: how many gated comparisons regressed,
    improved, stayed unchanged or could not decide (``Outcome``), the analysis, its level, and the smallest
    change these data could detect (the range of the gated comparisons' MDEs), then the exit status::

        verdict: 2 regressed, 1 improved, 33 unchanged, 0 undecided (paired t on log ratios, Holm over
        36 at alpha 0.05; smallest detectable change ±4.1% to ±9.0%) -> exit 1, regression
    """
    tally = result.tally()
    gated = [r for r in result.rows if r.gated]
    code = result.exit_code
    end = f"→ exit {code}, " + ("regression" if code else "no regression")
    if not gated:
        return f"[bold]verdict:[/] nothing gated (only the direct baseline was compared) {end}"
    counts = ", ".join(f"{tally[o]} {o}" for o in OUTCOMES)
    main = [r for r in gated if not r.wide] or gated
    limits = threshold_text(result).removeprefix(", ")
    how = f"{_METHOD[result.analysis]}, {_level(main[0].result)}" + (f", {limits}" if limits else "")
    if wide := [r for r in gated if r.wide]:
        titles = ", ".join(dict.fromkeys(r.metric.title for r in wide))
        at = f", threshold {wide[0].result.threshold:.1%}" if wide[0].result.threshold else ""
        how += f"; {titles}: {_level(wide[0].result)}{at}"
    style = "bold red" if code else "bold yellow" if tally["undecided"] else "bold green"
    seen = _detectable(result, main)
    if wide and (wide_seen := _detectable(result, wide)).startswith("smallest"):
        seen += f" ({', '.join(dict.fromkeys(r.metric.title for r in wide))}: {wide_seen.split(' change ', 1)[1]})"
    return f"[{style}]verdict: {counts}[/] ({escape(how)}; {escape(seen)}) {end}"


def _level(c: Comparison) -> str:
    return f"Holm over {c.family_size} at alpha {c.alpha:.2g}" if c.family_size > 1 else f"alpha {c.alpha:.2g}"


def _detectable(result: CompareResult, gated: list[CaseComparison]) -> str:
    """The range of the gated comparisons' MDEs (relative ones; absolute ones when there are only those, in
    their unit), or, when none is finite, how many repetitions would let the test decide anything."""
    relative = [r.result.min_detectable_effect for r in gated if not r.result.absolute]
    finite = sorted(x for x in relative if math.isfinite(x))
    if finite:
        lo, hi = finite[0], finite[-1]
        span = f"±{lo:.1%}" if f"{lo:.1%}" == f"{hi:.1%}" else f"±{lo:.1%} to ±{hi:.1%}"
        return f"smallest detectable change {span}"
    absolute = [r.result for r in gated if r.result.absolute and math.isfinite(r.result.min_detectable_effect)]
    units = {c.unit for c in absolute}
    if absolute and len(units) == 1:
        xs = sorted(c.min_detectable_effect for c in absolute)
        unit = units.pop()
        span = f"±{xs[0]:.3g} {unit}" if len(xs) == 1 else f"±{xs[0]:.3g} to ±{xs[-1]:.3g} {unit}"
        return f"smallest detectable change {span.replace(' ' + unit + ' to', ' to')}".rstrip()
    first = gated[0].result
    if any(math.isinf(r.result.min_detectable_effect) for r in gated):
        paired = any(r.result.analysis == "paired" for r in gated)
        need = repetitions_for(first.alpha / first.family_size, paired=paired)
        return f"no change is detectable at these repetitions: use --repeat {need} or more"
    return "no detectable change could be computed (spread undefined)"
