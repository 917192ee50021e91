"""Stability checks: warnings returned as values, each with a suggested fix (cf. pyperf format_checks).

Checks on one case's repetitions (thresholds are module constants):

=========================  ====================================================================
code                       fires when
=========================  ====================================================================
``no-data``                n == 0
``non-finite``             some value is NaN or infinite (those values are ignored by the rest)
``too-few-repetitions``    1 <= n < 3 (no meaningful spread or CI)
``few-for-significance``   3 <= n < 5 (rank test cannot reach p < 0.05 with n <= 3 per side,
                           and the median CI covers less than 95 %)
``high-cv``                stdev / |mean| >= 5 %
``outlier``                min or max is more than 30 % away from the median (median != 0);
                           the message names the MAD outliers (``outliers``) if any
``mostly-zero``            more than half of the values are exactly 0
=========================  ====================================================================

Checks on per-trial figures: ``link-late`` (the WAN emulator's p99 lateness above 1 ms, link_warnings) and
``steal`` (the host's steal time >= 5 % of all CPUs' time over a trial's window, steal_warnings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np

from tunbench.stats._common import FloatArray, Values
from tunbench.stats.outliers import modified_z_scores, outliers

__all__ = [
    "COMMON_LIMIT_REL",
    "CV_WARN",
    "MIN_REPETITIONS",
    "MIN_REPETITIONS_SIGNIFICANCE",
    "OUTLIER_REL",
    "StabilityWarning",
    "WarningCode",
    "common_limit_warning",
    "link_warnings",
    "modified_z_scores",
    "outliers",
    "stability_warnings",
    "steal_warnings",
]

WarningCode: TypeAlias = Literal[
    "no-data",
    "non-finite",
    "too-few-repetitions",
    "few-for-significance",
    "high-cv",
    "outlier",
    "mostly-zero",
    "cannot-reach-significance",
    "underpowered",
    "link-late",
    "generator-bound",
    "cross-check",
    "not-cross-checked",
    "steal",
    "interfered",
    "common-limit",
    "start-skew",
    "clients-lost",
    "host-saturated",
]

CV_WARN = 0.05
OUTLIER_REL = 0.30
MIN_REPETITIONS = 3
MIN_REPETITIONS_SIGNIFICANCE = 5
MOSTLY_ZERO_FRACTION = 0.5
STEAL_WARN_PCT = 5.0  # a trial whose window lost this much of all CPUs' time to steal is flagged
COMMON_LIMIT_REL = 0.03  # direct and >= 2 tunnels whose medians all lie this close measured one outside limit
LINK_LATE_WARN_US = 1000.0  # the emulator's own p99 lateness above this: its delay and rate were not the profile's


@dataclass(frozen=True)
class StabilityWarning:
    """A reason not to trust a number, and what to do about it. ``message`` includes the label."""

    code: WarningCode
    message: str
    fix: str


def pct(x: float) -> str:
    """Format a fraction as a percentage: 0.0912 -> '9.1%'."""
    return f"{x * 100:.1f}%"


def stability_warnings(values: Values, *, label: str = "") -> list[StabilityWarning]:
    """Return the warnings (possibly none) for one case's repetitions. Never raises on data."""
    prefix = f"{label}: " if label else ""
    raw = np.asarray(values, dtype=np.float64).ravel()
    out: list[StabilityWarning] = []
    finite = raw[np.isfinite(raw)]
    if finite.size < raw.size:
        out.append(
            StabilityWarning(
                "non-finite",
                f"{prefix}{raw.size - finite.size} of {raw.size} repetitions are NaN/inf",
                "re-run the failed repetitions (check the workload's log); they are excluded here",
            )
        )
    n = int(finite.size)
    if n == 0:
        fix = f"run the case with --repeat {MIN_REPETITIONS_SIGNIFICANCE} or more"
        out.append(StabilityWarning("no-data", f"{prefix}no measurements", fix))
        return out
    out.extend(_count_warnings(n, prefix))
    out.extend(_spread_warnings(finite, prefix))
    return out


def link_warnings(late_p99_us: Values, *, label: str = "") -> list[StabilityWarning]:
    """The WAN emulator reports how late it sent packets against its schedule (p99 per direction and trial).
    When that reaches milliseconds, the emulated link was slower and longer than the profile says (the
    host starved it of CPU) and the measurement describes the host as much as the tunnel."""
    prefix = f"{label}: " if label else ""
    x = np.asarray(late_p99_us, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0 or x.max() <= LINK_LATE_WARN_US:
        return []
    return [
        StabilityWarning(
            "link-late",
            f"{prefix}the WAN emulator ran up to {x.max() / 1000:.1f} ms behind its schedule (p99), so the link "
            "was slower than the profile says",
            "the host is CPU-bound: use fewer clients or lower rates, or a host with more cores",
        )
    ]


def steal_warnings(steal_pct: Values, *, label: str = "") -> list[StabilityWarning]:
    """`host.steal_pct` per trial (monitor/hostload.py): on a VM, steal is CPU time the hypervisor gave to
    someone else while the trial measured. Trials at or above STEAL_WARN_PCT are flagged, not voided."""
    prefix = f"{label}: " if label else ""
    x = np.asarray(steal_pct, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    hit = x[x >= STEAL_WARN_PCT]
    if hit.size == 0:
        return []
    return [
        StabilityWarning(
            "steal",
            f"{prefix}steal time up to {hit.max():.1f}% of the CPU time in {hit.size} of {x.size} trial(s)",
            "a VM's neighbours took CPU: re-run, or run on a quieter host (`tunbench doctor --noise`)",
        )
    ]


def common_limit_warning(medians: dict[str, float], *, label: str = "") -> StabilityWarning | None:
    """`medians`: label -> median throughput (bit/s) of one case's direct baseline and tunnels. When the
    baseline and at least two tunnels all lie within COMMON_LIMIT_REL of each other, what was measured is a
    limit none of them owns (a link's rate, a cloud network's per-flow cap, the traffic generator): tunnels
    that differ in cost and design do not tie by chance."""
    vals = [v for v in medians.values() if v > 0 and np.isfinite(v)]
    if len(vals) < 3 or len(vals) < len(medians):
        return None
    lo, hi = min(vals), max(vals)
    if hi / lo - 1.0 > COMMON_LIMIT_REL:
        return None
    prefix = f"{label}: " if label else ""
    return StabilityWarning(
        "common-limit",
        f"{prefix}direct and {len(vals) - 1} tunnels all measured {lo / 1e6:,.0f}–{hi / 1e6:,.0f} Mbit/s (within "
        f"{COMMON_LIMIT_REL:.0%}): suspiciously identical, so a limit outside the tunnels was measured",
        "check the network between the hosts (a per-flow cap or rate limit) and the traffic generator (iperf3 "
        "CPU); compare the tunnels' CPU per bit instead, or use more flows",
    )


def _count_warnings(n: int, prefix: str) -> list[StabilityWarning]:
    if n < MIN_REPETITIONS:
        return [
            StabilityWarning(
                "too-few-repetitions",
                f"{prefix}only {n} repetition(s): spread and confidence interval are meaningless",
                f"use --repeat {MIN_REPETITIONS_SIGNIFICANCE} or more (10 for a CI gate)",
            )
        ]
    if n < MIN_REPETITIONS_SIGNIFICANCE:
        return [
            StabilityWarning(
                "few-for-significance",
                f"{prefix}{n} repetitions: too few for a significance test to be reliable "
                f"(with 3 per side the rank test's smallest p-value is 0.1)",
                f"use --repeat {MIN_REPETITIONS_SIGNIFICANCE} or more (10 for a CI gate)",
            )
        ]
    return []


def _spread_warnings(x: FloatArray, prefix: str) -> list[StabilityWarning]:
    out: list[StabilityWarning] = []
    n = x.size
    zeros = int(np.count_nonzero(x == 0.0))
    if zeros > MOSTLY_ZERO_FRACTION * n:
        out.append(
            StabilityWarning(
                "mostly-zero",
                f"{prefix}{zeros} of {n} repetitions measured exactly 0",
                "check that traffic actually went through the tunnel (tunnel up, routes, test duration)",
            )
        )
    mean = float(np.mean(x))
    if n >= 2 and mean != 0.0:
        cv = float(np.std(x, ddof=1)) / abs(mean)
        if cv >= CV_WARN:
            out.append(
                StabilityWarning(
                    "high-cv",
                    f"{prefix}CV {pct(cv)} over {n} repetitions (>= {pct(CV_WARN)})",
                    f"use --repeat {max(10, 2 * n)} or pin CPUs and quiet the host (see `tunbench doctor`)",
                )
            )
    median = float(np.median(x))
    if n >= 2 and median != 0.0:
        worst = max(abs(float(np.min(x)) - median), abs(float(np.max(x)) - median)) / abs(median)
        if worst > OUTLIER_REL:
            idx = outliers(x)
            which = f"; MAD outliers at repetitions {idx}" if idx else ""
            out.append(
                StabilityWarning(
                    "outlier",
                    f"{prefix}min {x.min():.4g} / max {x.max():.4g} is {pct(worst)} away from the "
                    f"median {median:.4g}{which}",
                    "re-run the case and look for interference (CPU frequency scaling, other traffic); "
                    "add warmup repetitions if the first one is the odd one",
                )
            )
    return out
