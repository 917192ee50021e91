"""Per-case summaries of a run's trials (pure: trials in, frozen summaries out)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from statistics import median

from tunbench.monitor.crosscheck import failed_checks
from tunbench.results import CaseKey, TrialRecord
from tunbench.stats import (
    Ratio,
    StabilityWarning,
    Summary,
    common_limit_warning,
    link_warnings,
    ratio_of_medians,
    stability_warnings,
    steal_warnings,
    summarize,
)

ROLES = ("client", "server")
# the WAN emulator's own process, when the profile is emulated (its cost is the harness's, not the tunnel's)
ALL_ROLES = (*ROLES, "link")
BASELINE = "direct"


@dataclass(frozen=True)
class RoleFigures:
    user_s: float | None
    sys_s: float | None
    cpu_pct: float | None  # of one core, over the measurement window
    bits_per_cpu_s: float | None
    rss_peak_bytes: float | None
    cgroup_cpu_s: float | None


@dataclass(frozen=True)
class CaseSummary:
    case: CaseKey
    tunnel: str
    n: int
    n_failed: int
    throughput: Summary
    ratio_to_direct: Ratio | None
    roles: dict[str, RoleFigures]
    retransmits: float | None
    setup_s: float | None
    values_bps: tuple[float, ...]
    warnings: tuple[StabilityWarning, ...] = field(default_factory=tuple)
    errors: tuple[str, ...] = field(default_factory=tuple)


def _med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and not math.isnan(x)]
    return median(vals) if vals else None


def per_trial_role(t: TrialRecord, role: str) -> dict[str, float | None]:
    m = t.metrics
    if not m.get(f"processes.{role}"):
        return dict.fromkeys(("user_s", "sys_s", "cpu_pct", "bits_per_cpu_s", "rss_peak_bytes", "cgroup_cpu_s"))
    user, sys_ = m.get(f"cpu.{role}.user_s"), m.get(f"cpu.{role}.sys_s")
    window = m.get("window_s") or t.duration_s
    cpu = (user or 0.0) + (sys_ or 0.0) if user is not None or sys_ is not None else None
    pct = 100.0 * cpu / window if cpu is not None and window else None
    bps = m.get("throughput_bps")
    per_cpu = bps / (cpu / window) if cpu and window and bps is not None else None
    cg_u, cg_s = m.get(f"cgroup_cpu.{role}.user_s"), m.get(f"cgroup_cpu.{role}.sys_s")
    cg = (cg_u or 0.0) + (cg_s or 0.0) if cg_u is not None else None
    return {
        "user_s": user,
        "sys_s": sys_,
        "cpu_pct": pct,
        "bits_per_cpu_s": per_cpu,
        "rss_peak_bytes": m.get(f"rss_peak_bytes.{role}"),
        "cgroup_cpu_s": cg,
    }


def summarize_trials(trials: list[TrialRecord], *, seed: int = 0) -> list[CaseSummary]:
    groups: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        groups[t.case].append(t)
    direct: dict[tuple[str, str, int, str, int, str], list[float]] = {}
    for key, ts in groups.items():
        if ts[0].tunnel == BASELINE:
            direct[_baseline_key(key)] = _ok_values(ts)
    out = []
    for key, ts in groups.items():
        ok = [t for t in ts if t.status == "ok"]
        values = _ok_values(ts)
        base = direct.get(_baseline_key(key))
        ratio = None
        if base and values and ts[0].tunnel != BASELINE:
            ratio = ratio_of_medians(values, base, seed=seed, resamples=2000)
        roles = {}
        for role in ALL_ROLES:
            rows = [per_trial_role(t, role) for t in ok]
            if role == "link" and not any(r["user_s"] is not None for r in rows):
                continue
            rss = [r["rss_peak_bytes"] for r in rows if r["rss_peak_bytes"] is not None]
            roles[role] = RoleFigures(
                user_s=_med([r["user_s"] for r in rows]),
                sys_s=_med([r["sys_s"] for r in rows]),
                cpu_pct=_med([r["cpu_pct"] for r in rows]),
                bits_per_cpu_s=_med([r["bits_per_cpu_s"] for r in rows]),
                rss_peak_bytes=max(rss) if rss else None,
                cgroup_cpu_s=_med([r["cgroup_cpu_s"] for r in rows]),
            )
        out.append(
            CaseSummary(
                case=key,
                tunnel=ts[0].tunnel,
                n=len(ok),
                n_failed=len(ts) - len(ok),
                throughput=summarize(values, seed=seed, resamples=2000),
                ratio_to_direct=ratio,
                roles=roles,
                retransmits=_med([t.metrics.get("retransmits") for t in ok]),
                setup_s=_med([t.metrics.get("setup_s") for t in ok]),
                values_bps=tuple(values),
                warnings=(
                    tuple(stability_warnings([v / 1e6 for v in values], label=f"{key.label} Mbit/s")) if values else ()
                )
                + tuple(link_warnings(_link_late(ok), label=key.label))
                + tuple(steal_warnings(_steal(ok), label=key.label))
                + tuple(trial_warnings(ok, label=f"{key.label} {key.variant or key.direction}")),
                errors=tuple(dict.fromkeys(t.error.splitlines()[0] for t in ts if t.status != "ok" and t.error)),
            )
        )
    out = _with_common_limits(out, trials)
    out.sort(
        key=lambda s: (
            s.case.profile,
            s.case.workload,
            s.case.direction,
            s.case.variant,
            s.case.flows,
            s.case.clients,
            s.tunnel != BASELINE,
            -(s.throughput.median if s.n else 0.0),
        )
    )
    return out


def _with_common_limits(out: list[CaseSummary], trials: list[TrialRecord]) -> list[CaseSummary]:
    """The `common-limit` warning, once per case group on its direct baseline (stats.checks). Groups whose
    profile or workload sets a rate are left out: there the common limit is the one asked for."""
    rated = {t.case for t in trials if _rated(t)}
    groups: dict[tuple[str, str, int, str, int, str], list[CaseSummary]] = defaultdict(list)
    for s in out:
        if s.n and s.case not in rated:
            groups[_baseline_key(s.case)].append(s)
    extra: dict[CaseKey, StabilityWarning] = {}
    for members in groups.values():
        base = [s for s in members if s.tunnel == BASELINE]
        if not base:
            continue
        k = base[0].case
        label = f"{k.profile} {k.workload} {k.variant or k.direction} {k.flows} flow(s)"
        w = common_limit_warning({s.case.label: s.throughput.median for s in members}, label=label)
        if w is not None:
            extra[k] = w
    return [replace(s, warnings=(*s.warnings, extra[s.case])) if s.case in extra else s for s in out]


def _rated(t: TrialRecord) -> bool:
    prof = t.params.get("profile") or {}
    return bool(
        (t.params.get("workload") or {}).get("rate") or any("rate" in (prof.get(d) or {}) for d in ("up", "down"))
    )


def _baseline_key(key: CaseKey) -> tuple[str, str, int, str, int, str]:
    """The case without its tunnel: the direct case of the same key is its baseline."""
    return (key.profile, key.workload, key.flows, key.direction, key.clients, key.variant)


def _ok_values(ts: list[TrialRecord]) -> list[float]:
    return [
        float(t.metrics["throughput_bps"] or 0.0)
        for t in ts
        if t.status == "ok" and t.metrics.get("throughput_bps") is not None
    ]


def _link_late(ts: list[TrialRecord]) -> list[float]:
    """The emulator's own p99 lateness (µs) per trial and direction, where an emulator ran."""
    out = []
    for t in ts:
        for d in ("up", "down"):
            v = t.metrics.get(f"link.{d}.late_us_p99")
            if v is not None:
                out.append(float(v))
    return out


def _steal(ts: list[TrialRecord]) -> list[float]:
    """The host's steal time (% of all CPUs' time) over each trial's window, where it was recorded."""
    return [float(v) for t in ts if (v := t.metrics.get("host.steal_pct")) is not None]


def trial_warnings(ts: list[TrialRecord], label: str) -> list[StabilityWarning]:
    """Per-trial flags as case warnings: the traffic generator was the bottleneck (iperf3 at >= 90 % of a
    core), or an in-run cross-check disagreed (monitor/crosscheck.py)."""
    out = []
    bound = [t for t in ts if t.metrics.get("iperf3.generator_bound") == 1.0]
    if bound:
        pct = max(
            max(t.metrics.get("iperf3.cpu.client_pct") or 0.0, t.metrics.get("iperf3.cpu.server_pct") or 0.0)
            for t in bound
        )
        out.append(
            StabilityWarning(
                "generator-bound",
                f"{label}: iperf3 itself used up to {pct:.0f}% of a core in {len(bound)} of {len(ts)} trial(s): "
                "the traffic generator, not the tunnel, may be the limit",
                "iperf3 before 3.16 runs every stream in one thread; with iperf3 >= 3.16 (one thread per stream) "
                "first in PATH, use --flows 2 or more",
            )
        )
    failed = sorted({name for t in ts for name in failed_checks(t.metrics)})
    if failed:
        out.append(
            StabilityWarning(
                "cross-check",
                f"{label}: independent measurements disagreed ({', '.join(failed)})",
                "see docs/cross-checks.md for the tolerances; the figures of these trials are less certain",
            )
        )
    unchecked = [t for t in ts if _bytes_unchecked(t.metrics)]
    if unchecked:  # no warning would otherwise read as "agreed"
        out.append(
            StabilityWarning(
                "not-cross-checked",
                f"{label}: bytes not cross-checked in {len(unchecked)} of {len(ts)} trial(s)",
                "not checked is not passed: a run over --hosts (docs/multi-host.md) reads no interface counters",
            )
        )
    return out


def _bytes_unchecked(metrics: dict[str, float | None]) -> bool:
    """An iperf3 trial (its bytes recorded) without any byte cross-check (`check.bytes.*`): not checked."""
    has_bytes = any(metrics.get(f"iperf3.bytes.{d}") is not None for d in ("up", "down"))
    return has_bytes and not any(k.startswith("check.bytes.") for k in metrics)
