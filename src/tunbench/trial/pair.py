"""The client/server pair: the site brings the pair up (topology, role cgroups, places), the tunnel comes
up on it (with its CPU caps), then each measured window runs the workload while the roles are sampled,
and the record gets the workload's metrics, the CPU over the measured window, the emulator's counters and
queue occupancy, and the cross-checks.

Per trial: pair up -> tunnel up -> workload servers -> [counters, host load, hooks, sampling + measure]
-> tunnel checked alive -> everything torn down in reverse order -> accounted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tunbench.errors import RetryTrial
from tunbench.link.emulator import link_metrics, queue_series
from tunbench.link.fault_record import fault_metrics, fired, fired_params
from tunbench.link.faults import ProfileFault
from tunbench.metrics import core
from tunbench.monitor import counters, crosscheck, stage, work
from tunbench.monitor.cost import cost_metrics, cpu_per_unit
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair, SampledRoles
from tunbench.trial.attempt import Attempt, Setup, merge
from tunbench.tunnels.tunnel import IPERF_PORT, Tunnel
from tunbench.units import parse_rate
from tunbench.watchdog import watchdog
from tunbench.workloads.base import Context, Measurement

ALIGN_LEAD_S = 0.05  # the role sampler's ticks fall this long before the measured window's edges


@dataclass(frozen=True)
class Held:
    """A client/server pair that is up, its tunnel too: what a measured window needs."""

    pair: Pair
    tunnel: Tunnel
    ctx: Context


@dataclass(frozen=True)
class Measured:
    """One measured window: the workload's result and the costs sampled over it."""

    result: Measurement
    sampler: Sampler
    remote_costs: dict[str, RoleCost]
    call: tuple[float, float]  # time.monotonic() just before and just after the workload's measure()


def measure(setup: Setup, t: Attempt) -> None:
    """A cold pair trial: brought up, one window, torn down, then accounted (the emulator's counters are
    complete once it has stopped)."""
    with contextlib.ExitStack() as stack:
        held = bring_up(setup, t, stack)
        t.rec.metrics[core.SETUP_S.name] = held.tunnel.setup_s
        window = measure_window(setup, t, held)
    account(t, held, window, final=True)


def bring_up(setup: Setup, t: Attempt, stack: contextlib.ExitStack) -> Held:
    """The site's pair, the tunnel's CPU caps and the tunnel, entered on `stack`."""
    case, rec = t.case, t.rec
    pair = setup.site.pair(stack, t.spot, case.link, rec.params)
    topo = pair.topo
    rec.params["sysctls"] = topo.sysctls_applied.get(topo.ns_name("client"), {})
    # client_cpu= / server_cpu=: the tunnel's processes only, capped by the site (this machine's cgroups
    # locally); entered before the tunnel, so the cap is removed after the tunnel has stopped its processes
    period_us = case.tunnel.cpu_period_us
    caps = {role: (pair.cpu_cap(stack, role, period_us), pct) for role, pct in case.tunnel.cpu_caps.items()}
    tunnel = stack.enter_context(Tunnel(case.tunnel, topo, setup.ledger, t.workdir, pair.cgroups, wrap=setup.wrap))
    assert tunnel.target is not None
    for role, (cap, pct) in caps.items():
        cap.add(tunnel.pids(role))
        cap.limit(pct)
        rec.params.setdefault("cpu_cap", {})[role] = pct
    if caps:
        rec.params["cpu_cap_period_ms"] = period_us / 1000
    ctx = Context(
        topo=topo,
        target=tunnel.target,
        ledger=setup.ledger,
        workdir=t.workdir,
        title=case.title,
        flows=case.flows,
        direction=case.direction,
        window=setup.window,
        options=t.options,
        client=pair.places["client"],
        server=pair.places["server"],
        server_port=IPERF_PORT,
        layer=case.tunnel.adapter.spec.layer,
        underlay_server=tunnel.vars["server_addr"],
        clock_skew=pair.clock_skew(),
        handshakes=tunnel.handshakes(),
        baseline=case.tunnel.name == "direct",
    )
    return Held(pair, tunnel, ctx)


def placed_pids(pair: Pair, roles: SampledRoles) -> dict[str, Callable[[], list[int]]]:
    """The processes of each placement on this machine, as the sampler reads them for the saturated stage:
    each placed side's (its tunnel and its generator) and the emulator's."""
    out = {role: cg.placed_pids for role, cg in pair.cgroups.items() if cg.cpus}
    if "link" in roles:
        out["link"] = roles["link"][0]
    return out


def measure_window(setup: Setup, t: Attempt, held: Held) -> Measured:
    """One measured window on a pair that is up: the workload's servers, then counters, host load, hooks
    and the role sampling around its measurement; the tunnel must still be alive after it."""
    rec, pair, tunnel = t.rec, held.pair, held.tunnel
    assert tunnel.target is not None
    rec.params["ip"]["target"] = "ipv6" if ":" in tunnel.target.address else "ipv4"  # what the traffic used
    rec.params["net"] = pair.topo.effective_settings()  # what the kernel really used (docs: settings)
    with contextlib.ExitStack() as window:
        t.workload.prepare(held.ctx, window)  # its servers, per window (iperf3 -s -1 serves one test)
        window.enter_context(pair.counters(rec.metrics))
        window.enter_context(setup.site.watched(rec.metrics, rec.params, setup.redo.limits))
        for hook in setup.hooks:
            window.enter_context(hook(held.ctx, tunnel, rec, pair))
        roles = pair.sampled_roles(tunnel)
        with (
            Sampler(roles, threads=True, placed=placed_pids(pair, roles)) as sampler,
            pair.remote_sampling(tunnel, sampler) as remote_costs,
            watchdog(t.workload.timeout_s(held.ctx), f"the {t.workload.kind} workload"),
        ):
            pair.start_schedule()  # the profile's events count from the workload's start
            started = time.monotonic()
            # a sample just before the measured window's start, then each second: with whole-second durations
            # one lands just before its end too, while every process of the roles is still alive
            sampler.align(started + setup.window.omit_s - ALIGN_LEAD_S)
            held.ctx.mark = sampler.mark  # a workload's parts are sampled at their edges
            result = t.workload.measure(held.ctx)
            ended = time.monotonic()
    tunnel.check_alive()
    now = time.monotonic()
    if (why := setup.redo.void(rec.metrics, rec.params)) and setup.redo.fits(now - t.began, now):
        raise RetryTrial(why)  # (a window the budget leaves no time to measure again is kept, flagged)
    return Measured(result, sampler, remote_costs, (started, ended))


def account(t: Attempt, held: Held, w: Measured, *, final: bool) -> None:
    """The record from a window: the workload's metrics, CPU over the measured window, the emulator's
    counters and queue occupancy series (complete once the pair is down: `final`; a warm window's are
    not) and the cross-checks."""
    rec, pair = t.rec, held.pair
    merge(rec, w.result)
    measured = None
    if w.result.window is not None:
        measured = (w.result.window[0] - w.sampler.t0, w.result.window[1] - w.sampler.t0)
    costs = {**w.sampler.results, **w.remote_costs}
    cost_metrics_over(rec, costs, w.sampler.wall_s, measured)
    span = measured or (0.0, w.sampler.wall_s)
    threads = {role: cost.threads for role, cost in w.sampler.results.items() if cost.threads}
    cpuset = rec.params.get("cpuset") or {}
    if apart := {role: cost for role, cost in w.remote_costs.items() if cost.cpus}:  # each read on its host
        figures, said = stage.saturation_on_hosts(apart, span, cpuset)
    else:
        figures, said = stage.saturation(threads, w.sampler.cpus, span, cpuset, placed=w.sampler.placed)
    rec.metrics.update(figures)  # what saturated each side over the window (docs/scaling.md)
    rec.params.update(said)
    for part in w.result.parts:  # the CPU of a stretch of the call per unit of work in it (the pps ladder)
        for role, key in part.keys.items():
            if (cost := costs.get(role)) is not None:
                span = (part.start - w.sampler.t0, part.end - w.sampler.t0)
                rec.metrics[key] = cpu_per_unit(cost, *span, part.units)
    rec.window_s = float(rec.metrics[core.WINDOW_S.name] or 0.0)
    rec.metrics.update(t.workload.derive(rec.metrics))  # what it derives from the CPU figures (per transaction)
    stats = pair.link_stats(final)
    rec.metrics.update(link_metrics(stats))
    t0, t1 = series_span(w.result, w.call)
    rec.metrics[core.SERIES_T0_S.name] = t0 - w.call[0]  # the series' t = 0, after the workload's (and events') start
    offset = pair.link_clock_offset_s()
    if stats and offset is not None:  # the queue occupancy on the series' time base, the measured part only
        queues, flags = queue_series(stats, round((t0 + offset) * 1e9), round((t1 + offset) * 1e9))
        rec.series.update(queues)
        rec.metrics.update(flags)
    if stats:  # the faults that fired, and the recovery from them
        account_faults(rec, stats, round((t0 + offset) * 1e9) if offset is not None else None)
    rec.metrics.update(crosscheck.rtt_checks(rec.metrics))
    delivered = None
    if (generator := t.workload.generator) is not None:
        sent = [sent_key for _, sent_key in generator.byte_keys().values()]
        if (delivered := counters.delivered_bytes(rec.metrics, sent)) is not None:
            rec.metrics[counters.DELIVERED.name] = delivered
    count_instructions(rec, delivered)
    if (underlay := pair.underlay()) is not None:
        devices, emulated = underlay
        if (carried := counters.carried_bytes(rec.metrics, devices["client"])) is not None:
            rec.metrics[counters.CARRIED.name] = carried
        if (generator := t.workload.generator) is not None:
            keys = generator.byte_keys()
            rec.metrics.update(crosscheck.byte_checks(rec.metrics, devices, emulated=emulated, generator=keys))
        rec.metrics.update(work.ratios(rec.metrics, devices))  # counted work per MB and packet, if counted


def account_faults(rec: TrialRecord, stats: dict[str, Any], origin_ns: int | None) -> None:
    """The profile's faults that fired (kept in `params["faults_fired"]`, each at its time after `origin_ns`,
    the series' start on the emulator's clock) and the `faults.*` figures, where the emulator classified the
    tunnel's messages (the profile as the trial stored it: `params["profile"]`)."""
    profile = rec.params.get("profile") or {}
    if not (profile.get("faults") or profile.get("classify")):
        return
    faults = [ProfileFault.model_validate(f) for f in profile.get("faults") or []]
    rec.metrics.update(fault_metrics(stats, faults))
    if hits := fired(stats, faults):
        rec.params["faults_fired"] = fired_params(stats, hits, origin_ns)


def count_instructions(rec: TrialRecord, delivered: float | None) -> None:
    """The counted instructions' ratios (monitor/counters.py), each side's per byte its tunnel device handled
    (the devices perf/instructions.py recorded) or per payload byte `delivered`; or, when the trial did not
    carry its fixed rate, no count, with the reason."""
    if short := rate_short(rec):  # a count at another load than the fixed one is not the figure A and B are judged on
        for role in ("client", "server"):
            if rec.metrics.pop(counters.INSTR_COUNT.key(role=role), None) is not None:
                rec.metrics.pop(counters.INSTR_RUNTIME.key(role=role), None)
                rec.params.setdefault("instr", {})[role] = f"not counted: {short}"
        return
    handled = counters.handled_bytes(rec.metrics, rec.params.get("instr_devices") or {})
    sides = rec.params.get("instr_sides", counters.ROLES)
    rec.metrics.update(counters.instruction_ratios(rec.metrics, delivered, handled, sides))


RATE_KEPT = 0.9
"""The share of a fixed offered rate a trial must carry for its counted instructions to count."""


def rate_short(rec: TrialRecord) -> str:
    """Why a trial's counted instructions are not at its workload's fixed offered rate ("" when they are, or
    when it has none): it carried less than RATE_KEPT of it or more than 1/RATE_KEPT of it (iperf3 catching
    up after a stall), a stall or a build too slow for the rate. Both were seen with wireguard-go under
    callgrind: 2 of 20 Mbit/s with 130 instructions per byte, and 29 of 20 Mbit/s with 57, where the rest
    read 13-15 (docs/work-gate.md). Counted instructions per byte include the idle work of the window, so
    they are compared at one load only."""
    rate = (rec.params.get("workload") or {}).get("rate")
    got = rec.metrics.get(core.THROUGHPUT.name)
    if not rate or got is None or not any(counters.INSTR_COUNT.matches(k) for k in rec.metrics):
        return ""
    offered = parse_rate(str(rate))
    if RATE_KEPT * offered <= got <= offered / RATE_KEPT:
        return ""
    side = f"below {RATE_KEPT:.0%}" if got < offered else f"above {1 / RATE_KEPT:.0%}"
    return f"carried {got / 1e6:.1f} Mbit/s of the {offered / 1e6:g} Mbit/s offered ({side} of it)"


def series_span(result: Measurement, call: tuple[float, float]) -> tuple[float, float]:
    """What a workload's time series cover (time.monotonic(); t = 0 at the start): its `series_span`, else
    its measured `window`, else the whole call (`call`: just before and just after measure())."""
    return result.series_span or result.window or call


def cost_metrics_over(
    rec: TrialRecord, costs: dict[str, RoleCost], wall_s: float, window: tuple[float, float] | None = None
) -> None:
    """CPU figures over the measured window (the headline: throughput counts those seconds only) and over
    the whole workload call (`trial_cpu.*`, connect, warm-up and result exchange included), with the
    cgroup-vs-sampling cross-check over the window (monitor/cost.py)."""
    w0, w1 = (0.0, wall_s) if window is None else (max(0.0, window[0]), min(wall_s, window[1]))
    rec.metrics[core.WINDOW_S.name] = max(0.0, w1 - w0)
    rec.metrics[core.TRIAL_WINDOW_S.name] = wall_s
    cost_metrics(rec, costs, wall_s, (w0, w1))
