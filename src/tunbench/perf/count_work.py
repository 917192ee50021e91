"""Counted work as a runner WindowHook (`tunbench run --count-work`, `[run] count_work`): the perf
driving of monitor/work.py around each measured window, on each role's tunnel processes (its cgroup's
members), the result stored as `work.<role>.*` metrics and, when a role was not counted or a process
exited during the window, `params.work.<role>` saying so. The ratios over the underlay's bytes and
packets are derived once the namespace counters are in (runner `_account`, monitor.work.ratios).
Where the sides are placed on CPUs of their own, each side's softirq and irq time over the window too
(monitor/irqtime.py, `work.<role>.softirq_s`); `params.work_irq.<role>` says why a side's was not."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tunbench.monitor import irqtime, work
from tunbench.perf.flamegraph import find_tool
from tunbench.results import TrialRecord
from tunbench.sites.base import Pair
from tunbench.tunnels.tunnel import Tunnel
from tunbench.workloads.base import Context


def capability() -> work.Capability:
    """What this host lets perf count (`tunbench doctor` shows it too)."""
    return work.probe(find_tool("perf"))


class CountWork:
    """A runner WindowHook (see runner.py): perf stat on each role's tunnel processes over the window, by
    this machine's perf for a local role, by the agent of its host for a role on `--hosts`
    (remote/work.py). This machine's capability is probed once, at construction (each agent probes its
    own); a host where perf cannot count gets every trial marked "not counted" with the reason, and the
    run goes on."""

    def __init__(self, cap: work.Capability | None = None) -> None:
        self.cap = cap if cap is not None else capability()

    def __call__(
        self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair
    ) -> contextlib.AbstractContextManager[object]:
        return self._window(ctx, tunnel, rec, pair)

    @contextlib.contextmanager
    def _window(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord, pair: Pair) -> Iterator[object]:
        notes: dict[str, str] = {}
        places = {"client": ctx.client, "server": ctx.server}
        remote = pair.counted_elsewhere(tunnel)
        local = {role: tunnel.pids(role) for role in places if role not in remote}
        if remote:  # where each role's counts come from: the machine it runs on
            rec.params["work_host"] = {role: places[role].machine for role in remote}
        cpus, unattributed = irqtime.attribution(rec.params.get("cpuset") or {})
        try:
            with (
                work.counted(self.cap, local, ctx.workdir, ctx.ledger, rec.metrics, notes),
                work.count_roles(remote, rec.metrics, notes),
            ):
                before = irqtime.snapshot() if cpus else None
                yield None
                after = irqtime.snapshot() if before is not None else None
            if before is not None and after is not None:
                rec.metrics.update(irqtime.irq_metrics(before, after, cpus))
            elif cpus:
                why = "not attributed: /proc/stat lists fewer CPUs than the host has (one is offline)"
                unattributed.update(dict.fromkeys(cpus, why))
        finally:
            if notes:
                rec.params["work"] = notes
            if unattributed:
                rec.params["work_irq"] = unattributed
