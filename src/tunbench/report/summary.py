"""Per-case summaries of a run's trials (pure: trials in, frozen summaries out).

The unit of a summary is the independent unit (DESIGN: "a summary's unit is the independent unit"): a cold
trial, or a warm bring-up (`--warm`), whose windows share that bring-up's luck and are therefore one unit,
their geometric mean. ``unit_values`` is the one function that makes the units; the case summary (and so
every format: terminal, HTML, Markdown, JSON, BMF), compare and history all call it. Counting 40 windows of 8
bring-ups as 40 repetitions gave a "95%" interval that covered in 67% of simulated runs (issue 28);
``tests/unit/test_report_warm_units.py`` simulates it.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any

from tunbench import workloads
from tunbench.metrics import core
from tunbench.metrics import link as link_metrics
from tunbench.monitor import cost
from tunbench.monitor.crosscheck import bytes_checked, failed_checks
from tunbench.monitor.hostload import STEAL
from tunbench.monitor.interference import FOREIGN_CPU, INTERFERED
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
from tunbench.workloads import fleet_metrics
from tunbench.workloads.base import Generator

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
    values_bps: tuple[float, ...]  # every ok trial's throughput (windows too: the report's dots); not the units
    warnings: tuple[StabilityWarning, ...] = field(default_factory=tuple)
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n_text(self) -> str:
        """The ok trials, and the bring-ups they were measured on when that is fewer (warm windows): "40 in 8
        bring-ups". The interval and the spread count the bring-ups."""
        units = self.throughput.n
        return f"{self.n}" + (f" in {units} bring-ups" if 0 < units < self.n else "")


def unit_key(t: TrialRecord) -> tuple[str, object]:
    """The independent unit a trial belongs to: its warm bring-up (``params["warm"]["bringup"]``), or itself."""
    warm = t.params.get("warm")
    return ("warm", str(warm.get("bringup"))) if isinstance(warm, dict) else ("trial", t.seq)


def unit_mean(values: list[float]) -> float:
    """One unit's figure from its windows: the geometric mean (the log of the unit is the mean of the logs), or
    the arithmetic mean where a value is <= 0."""
    if len(values) == 1:
        return values[0]
    if all(v > 0.0 for v in values):
        return math.exp(math.fsum(math.log(v) for v in values) / len(values))
    return math.fsum(values) / len(values)


def unit_values(trials: Iterable[TrialRecord], value: Callable[[TrialRecord], float | None]) -> list[float]:
    """A metric's ok, finite values, one per independent unit (``unit_key``, ``unit_mean``), in the order the
    units first appear. Every summary or interval of a case is computed on these. ``trials`` are one run's:
    a unit's key (a seq, a bring-up tag) is unique only within its run, so pooling runs means calling this
    once per run (``report.history`` does)."""
    units: dict[tuple[str, object], list[float]] = {}
    for t in trials:
        v = value(t) if t.status == "ok" else None
        if v is None or not math.isfinite(v):
            continue
        units.setdefault(unit_key(t), []).append(float(v))
    return [unit_mean(vs) for vs in units.values()]


def throughput(t: TrialRecord) -> float | None:
    return t.metrics.get(core.THROUGHPUT.name)


def _med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and not math.isnan(x)]
    return median(vals) if vals else None


def per_trial_role(t: TrialRecord, role: str) -> dict[str, float | None]:
    m = t.metrics
    if not m.get(cost.PROCESSES.key(role=role)):
        return dict.fromkeys(("user_s", "sys_s", "cpu_pct", "bits_per_cpu_s", "rss_peak_bytes", "cgroup_cpu_s"))
    user, sys_ = m.get(cost.CPU_USER.key(role=role)), m.get(cost.CPU_SYS.key(role=role))
    window = m.get(core.WINDOW_S.name) or t.window_s
    cpu = (user or 0.0) + (sys_ or 0.0) if user is not None or sys_ is not None else None
    pct = 100.0 * cpu / window if cpu is not None and window else None
    bps = m.get(core.THROUGHPUT.name)
    per_cpu = bps / (cpu / window) if cpu and window and bps is not None else None
    cg_u, cg_s = m.get(cost.CGROUP_CPU_USER.key(role=role)), m.get(cost.CGROUP_CPU_SYS.key(role=role))
    cg = (cg_u or 0.0) + (cg_s or 0.0) if cg_u is not None else None
    return {
        "user_s": user,
        "sys_s": sys_,
        "cpu_pct": pct,
        "bits_per_cpu_s": per_cpu,
        "rss_peak_bytes": m.get(cost.RSS_PEAK.key(role=role)),
        "cgroup_cpu_s": cg,
    }


def summarize_trials(trials: list[TrialRecord], *, seed: int = 0) -> list[CaseSummary]:
    groups: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        groups[t.case].append(t)
    direct: dict[tuple[str, str, int, str, int, str, int], list[float]] = {}
    for key, ts in groups.items():
        if ts[0].tunnel == BASELINE:
            direct[_baseline_key(key)] = unit_values(ts, throughput)
    out = []
    for key, ts in groups.items():
        ok = [t for t in ts if t.status == "ok"]
        values = unit_values(ts, throughput)
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
                retransmits=_med([t.metrics.get(core.RETRANSMITS.name) for t in ok]),
                setup_s=_med([t.metrics.get(core.SETUP_S.name) for t in ok]),
                values_bps=tuple(_ok_values(ts)),
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
            s.case.cores,
            s.tunnel != BASELINE,
            -(s.throughput.median if s.n else 0.0),
        )
    )
    return out


def _with_common_limits(out: list[CaseSummary], trials: list[TrialRecord]) -> list[CaseSummary]:
    """The `common-limit` warning, once per case group on its direct baseline (stats.checks). Groups whose
    profile or workload sets a rate are left out: there the common limit is the one asked for."""
    rated = {t.case for t in trials if _rated(t)}
    groups: dict[tuple[str, str, int, str, int, str, int], list[CaseSummary]] = defaultdict(list)
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


def _baseline_key(key: CaseKey) -> tuple[str, str, int, str, int, str, int]:
    """The case without its tunnel: the direct case of the same key is its baseline."""
    return (key.profile, key.workload, key.flows, key.direction, key.clients, key.variant, key.cores)


def _ok_values(ts: list[TrialRecord]) -> list[float]:
    return [
        float(t.metrics[core.THROUGHPUT.name] or 0.0)
        for t in ts
        if t.status == "ok" and t.metrics.get(core.THROUGHPUT.name) is not None
    ]


def _link_late(ts: list[TrialRecord]) -> list[float]:
    """The emulator's own p99 lateness (µs) per trial and direction, where an emulator ran."""
    out = []
    for t in ts:
        for d in ("up", "down"):
            v = t.metrics.get(link_metrics.LATE_P99.key(direction=d))
            if v is not None:
                out.append(float(v))
    return out


def _steal(ts: list[TrialRecord]) -> list[float]:
    """The host's steal time (% of all CPUs' time) over each trial's window, where it was recorded."""
    return [float(v) for t in ts if (v := t.metrics.get(STEAL.name)) is not None]


def interference_causes(ts: list[TrialRecord]) -> str:
    """The causes of interfered trials in a few words: the other runs, the most foreign CPU, the most steal."""
    why = [str(t.params.get("interference") or "") for t in ts]
    runs = sorted({r for t in ts for r in (t.params.get("interference_detail") or {}).get("runs", [])})
    causes = [f"another tunbench run ({', '.join(runs)})"] if runs else []
    foreign = [t.metrics.get(FOREIGN_CPU.name) or 0.0 for t, w in zip(ts, why, strict=True) if "foreign" in w]
    if foreign:
        causes.append(f"foreign CPU up to {max(foreign):.0f}% of a core" + _on_hosts(ts, "foreign"))
    steal = [t.metrics.get(STEAL.name) or 0.0 for t, w in zip(ts, why, strict=True) if "steal" in w]
    if steal:
        causes.append(f"steal up to {max(steal):.1f}%" + _on_hosts(ts, "steal"))
    return "; ".join(causes) or "; ".join(sorted(set(why) - {""}))


def _on_hosts(ts: list[TrialRecord], cause: str) -> str:
    """ " on host h2" (" on hosts h2, h3"): the hosts of a `--hosts` run whose own figure the trials' reasons
    name for `cause` ("foreign", "steal"); "" where none does (a local run)."""
    names = sorted(
        {
            m.group(1)
            for t in ts
            for part in str(t.params.get("interference") or "").split("; ")
            if (m := re.match(r"host (\S+): .*\b" + cause, part))
        }
    )
    return f" on host{'s' if len(names) > 1 else ''} {', '.join(names)}" if names else ""


def _generator(t: TrialRecord) -> Generator | None:
    """What the trial's workload declares of its traffic generator's figures (None: none, or a workload
    this version does not know)."""
    w = workloads.REGISTRY.get(t.workload)
    return w.generator if w is not None else None


def trial_warnings(ts: list[TrialRecord], label: str) -> list[StabilityWarning]:
    """Per-trial flags as case warnings: the traffic generator was the bottleneck (its workload's
    Generator.bound: iperf3 at >= 90 % of a core), or an in-run cross-check disagreed (monitor/crosscheck.py)."""
    out = []
    bound: dict[Generator, list[TrialRecord]] = defaultdict(list)
    for t in ts:
        if (g := _generator(t)) is not None and t.metrics.get(g.bound) == 1.0:
            bound[g].append(t)
    for g, hit in bound.items():
        pct = max(t.metrics.get(k) or 0.0 for t in hit for k in g.cpu)
        out.append(
            StabilityWarning(
                "generator-bound",
                f"{label}: {g.program} itself used up to {pct:.0f}% of a core in {len(hit)} of {len(ts)} trial(s): "
                "the traffic generator, not the tunnel, may be the limit",
                g.hint,
            )
        )
    if hit := [t for t in ts if interfered(t)]:
        out.append(
            StabilityWarning(
                "interfered",
                f"{label}: {len(hit)} of {len(ts)} trial(s) interfered with: {interference_causes(hit)}",
                "run nothing else on the host while measuring, or --redo-interfered to measure such trials "
                "again; compare, history and calibrate leave them out",
            )
        )
    if hit := [t for t in ts if t.params.get("clients_lost")]:
        lost = "; ".join(sorted({lost_text(t.params["clients_lost"]) for t in hit}))
        out.append(
            StabilityWarning(
                "clients-lost",
                f"{label}: a client host was lost mid-trial in {len(hit)} of {len(ts)} trial(s): {lost}; those "
                "trials measured the other hosts' clients",
                "check the host and its network (`tunbench doctor --hosts`), then run the case again",
            )
        )
    if hit := [t for t in ts if saturated_text(t.params)]:
        said = "; ".join(sorted({saturated_text(t.params) for t in hit}))
        out.append(
            StabilityWarning(
                "host-saturated",
                f"{label}: a host's stage saturated in {len(hit)} of {len(ts)} trial(s): {said}",
                "a saturated client host limits its own clients, not the tunnel server (give it a smaller "
                "tunbench_client_weight, or add a client host); a saturated server host is the server's limit "
                "(docs/multi-host.md)",
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
    if skewed := [t for t in ts if _start_skewed(t)]:
        worst = max((t.metrics.get(fleet_metrics.whole(fleet_metrics.START_SKEW)) or 0.0) for t in skewed)
        out.append(
            StabilityWarning(
                "start-skew",
                f"{label}: the client hosts started up to {1e3 * worst:.1f} ms apart in {len(skewed)} of {len(ts)} "
                "trial(s), more than the storm's start_tolerance_s",
                "a busy client host or a slow link to it launches late: its clients' ready times carry that "
                "offset (the per-host rows show which host); see docs/multi-host.md",
            )
        )
    unchecked = [t for t in ts if _bytes_unchecked(t)]
    if unchecked:  # no warning would otherwise read as "agreed"
        out.append(
            StabilityWarning(
                "not-cross-checked",
                f"{label}: bytes not cross-checked in {len(unchecked)} of {len(ts)} trial(s)",
                "not checked is not passed: a run over --hosts (docs/multi-host.md) reads no interface counters",
            )
        )
    return out


def _start_skewed(t: TrialRecord) -> bool:
    """A storm over client hosts whose achieved start skew (with the clocks' uncertainty) exceeded its
    tolerance."""
    m = t.metrics
    skew, unc, tol = (
        m.get(fleet_metrics.whole(spec))
        for spec in (fleet_metrics.START_SKEW, fleet_metrics.START_SKEW_UNCERTAINTY, fleet_metrics.START_TOLERANCE)
    )
    return skew is not None and tol is not None and skew + (unc or 0.0) > tol


# ---- interfered trials ------------------------------------------------------------------------------------


def saturated_text(params: dict[str, Any]) -> str:
    """ "server on h1: thread wireguard-go; client on h3: all cores busy" for a fleet trial between hosts whose
    stage saturated on a host (params.stage_hosts: side -> host -> stage, monitor/stage.py fleet_saturation);
    "" when none did, or the trial is not one. A host lost mid-trial has no stage and is not named here."""
    hosts = params.get("stage_hosts")
    if not isinstance(hosts, dict):
        return ""
    return "; ".join(
        f"{side} on {host}: {name}"
        for side in ("server", "client")
        for host, name in (hosts.get(side) or {}).items()
        if name != "none" and not str(name).startswith("not read")
    )


def lost_text(lost: dict[str, Any]) -> str:
    """ "host h4 (12 clients): h4: connection closed" for a trial's `params.clients_lost`."""
    return "; ".join(
        f"host {h} ({v.get('clients', 0)} clients): {(str(v.get('reason') or 'lost').splitlines() or ['lost'])[0]}"
        for h, v in sorted(lost.items())
    )


def interfered(t: TrialRecord) -> bool:
    """Whether the trial's measured window was interfered with (the monitor's ``interfered`` metric: another
    tunbench run live, foreign CPU or steal above its threshold). A trial from before it was recorded is clean."""
    v = t.metrics.get(INTERFERED.name)
    return v is not None and math.isfinite(v) and v >= 0.5


def interference_reason(t: TrialRecord) -> str:
    return str(t.params.get("interference") or "").strip() or "interfered"


@dataclass(frozen=True)
class LeftOut:
    """The trials a verdict left out because they were interfered with, and the partners that went with them
    (a paired design drops the whole pair, as it drops a pair whose partner failed)."""

    trials: tuple[TrialRecord, ...] = ()
    partners: int = 0

    def __bool__(self) -> bool:
        return bool(self.trials)

    @property
    def text(self) -> str:
        """ "left out 2 interfered trials: another tunbench run (tb1a2b3c)" ("" when none)."""
        if not self.trials:
            return ""
        reasons: dict[str, int] = {}
        for t in self.trials:
            reasons[interference_reason(t)] = reasons.get(interference_reason(t), 0) + 1
        why = "; ".join(r if n == 1 or len(reasons) == 1 else f"{r} ({n})" for r, n in reasons.items())
        n = len(self.trials)
        partners = f" and {self.partners} partner trial(s) of their pairs" if self.partners else ""
        return (
            f"left out {n} interfered trial{'s' if n != 1 else ''}{partners}: {why} (--include-interfered keeps them)"
        )


def leave_out_interfered(
    trials: list[TrialRecord], *, paired: bool = False, include: bool = False
) -> tuple[list[TrialRecord], LeftOut]:
    """The trials a verdict uses, and what it left out. Interfered trials are left out (unless ``include``);
    with ``paired`` (two labels of one run compared by repetition) so is every trial of the same case axes and
    repetition, its partners: a pair is whole or not at all."""
    bad = [t for t in trials if t.status == "ok" and interfered(t)]
    if include or not bad:
        return list(trials), LeftOut()
    if not paired:
        gone = {id(t) for t in bad}
        return [t for t in trials if id(t) not in gone], LeftOut(tuple(bad))
    blocks = {(_baseline_key(t.case), t.repetition) for t in bad}
    kept = [t for t in trials if (_baseline_key(t.case), t.repetition) not in blocks]
    partners = sum(
        1 for t in trials if t.status == "ok" and not interfered(t) and (_baseline_key(t.case), t.repetition) in blocks
    )
    return kept, LeftOut(tuple(bad), partners)


def _bytes_unchecked(t: TrialRecord) -> bool:
    """A trial with its generator's bytes recorded (iperf3's) but no byte cross-check (`check.bytes.*`):
    not checked."""
    if (g := _generator(t)) is None:
        return False
    has_bytes = any(t.metrics.get(payload) is not None for payload, _ in g.byte_keys().values())
    return has_bytes and not bytes_checked(t.metrics)
