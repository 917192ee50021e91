"""One run: trials in planned order, each in a fresh topology, committed to the store as soon as it ends.

Per trial: topology -> link -> role cgroups -> tunnel up -> iperf3 server -> [sampler + iperf3 client]
-> tunnel checked alive -> everything torn down in reverse order -> trial stored.
A failed trial is stored with its error (and the tunnel logs) and the run goes on.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from tunbench import workloads
from tunbench.errors import CommandFailed, DependencyMissing, RetryTrial, TrialError, TunnelError
from tunbench.link.emulator import LinkEmulator, link_metrics
from tunbench.monitor import crosscheck
from tunbench.monitor.cgroup import RoleCgroup
from tunbench.monitor.counters import short_ifname
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.plan import Case, PlannedTrial
from tunbench.results import TrialRecord
from tunbench.state import Ledger
from tunbench.store.db import Store, now_iso
from tunbench.topology.build import LinkBuilder, Topology, TopologySpec
from tunbench.tunnels.adapter import IPERF_PORT, Tunnel
from tunbench.watchdog import watchdog
from tunbench.workloads.base import Context, TrialInput, Workload

LinkFactory = Callable[[Case, Ledger, Path, int], LinkBuilder | None]


class WindowHook(Protocol):
    """Something that runs around the measured window (host counters, a profiler): entered just before the
    workload measures, exited right after; it may add metrics and artifacts to the trial record."""

    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord) -> contextlib.AbstractContextManager[object]: ...


TrialCallback = Callable[[PlannedTrial, TrialRecord], None]
MAX_ATTEMPTS = 5  # a void measurement (RetryTrial) is tried this many times in all


class Runner:
    def __init__(
        self,
        *,
        ledger: Ledger,
        store: Store,
        run_id: int,
        topology: TopologySpec,
        duration_s: float,
        omit_s: float,
        options: dict[str, BaseModel] | None = None,
        link_factory: LinkFactory | None = None,
        seed: int = 1,
        on_start: Callable[[PlannedTrial], None] | None = None,
        on_done: TrialCallback | None = None,
        hooks: list[WindowHook] | None = None,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.run_id = run_id
        self.topology = topology
        self.duration_s = duration_s
        self.omit_s = omit_s
        self.options = options or {}
        self.link_factory = link_factory
        self.seed = seed
        self.on_start = on_start
        self.on_done = on_done
        self.hooks = hooks or []

    def run(self, trials: list[PlannedTrial]) -> list[TrialRecord]:
        records = []
        for pt in trials:
            if self.on_start:
                self.on_start(pt)
            rec = self.run_trial(pt)
            self.store.add_trial(self.run_id, rec)  # committed now: a later crash cannot lose it
            records.append(rec)
            if self.on_done:
                self.on_done(pt, rec)
        return records

    def _record(self, pt: PlannedTrial, options: BaseModel) -> TrialRecord:
        c = pt.case
        return TrialRecord(
            seq=pt.seq,
            tunnel=c.tunnel.name,
            label=c.tunnel.label,
            profile=c.profile.name,
            workload=c.workload,
            flows=c.flows,
            direction=c.direction,
            repetition=pt.repetition,
            started_at=now_iso(),
            params={
                "tunnel": c.tunnel.merged_params(),
                "workload": {
                    "kind": c.workload,
                    "flows": c.flows,
                    "direction": c.direction,
                    "duration_s": self.duration_s,
                    "omit_s": self.omit_s,
                    **options.model_dump(),
                },
                "profile": c.profile.model_dump(),
                "mtu": self.topology.mtu,
            },
        )

    def run_trial(self, pt: PlannedTrial) -> TrialRecord:
        """One trial; a void measurement (RetryTrial) is run again from scratch, at most MAX_ATTEMPTS times,
        and the reasons are kept with the record (`params.retried`)."""
        workload = workloads.get(pt.case.workload)
        options = self.options.get(workload.kind) or workload.options(None)
        retried: list[str] = []
        while True:
            rec, void = self._attempt(pt, workload, options, attempt=len(retried) + 1)
            if not void or len(retried) + 1 >= MAX_ATTEMPTS:
                break
            retried.append(rec.error)
        if retried:
            rec.params["retried"] = retried
        return rec

    def _attempt(
        self, pt: PlannedTrial, workload: Workload, options: BaseModel, attempt: int = 1
    ) -> tuple[TrialRecord, bool]:
        """(the record, whether the measurement was void and may be tried again). A retry gets names of its
        own (`t7r2`), so nothing an earlier attempt's teardown missed can collide with it."""
        void = False
        rec = self._record(pt, options)
        workdir = Path(tempfile.mkdtemp(prefix=f"{self.ledger.prefix}-t{pt.seq}-"))
        self.ledger.add_path(str(workdir))
        try:
            self._measure(
                pt, workload, options, rec, workdir, tag=f"t{pt.seq}" + (f"r{attempt}" if attempt > 1 else "")
            )
        except RetryTrial as e:
            rec.status = "failed"
            rec.error = str(e)
            void = True
        except (TrialError, TunnelError, CommandFailed, DependencyMissing) as e:
            rec.status = "failed"
            rec.error = str(e)
        except Exception as e:  # a bug of ours must not lose the run: record it with its traceback
            rec.status = "failed"
            rec.error = f"internal error: {type(e).__name__}: {e}"
            rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
        finally:
            for log in sorted(workdir.glob("*.log")):
                if rec.status != "ok":
                    rec.artifacts[f"log/{log.name}"] = log.read_bytes()[-65536:]
            shutil.rmtree(workdir, ignore_errors=True)
            self.ledger.drop_path(str(workdir))
        return rec, void

    def _measure(
        self, pt: PlannedTrial, workload: Workload, options: BaseModel, rec: TrialRecord, workdir: Path, tag: str
    ) -> None:
        case = pt.case
        spec = TopologySpec(
            mtu=case.profile.mtu or self.topology.mtu,
            sysctls={**self.topology.sysctls, **case.profile.sysctl},
            ipv6=self.topology.ipv6,
            congestion_control=case.profile.congestion_control or self.topology.congestion_control,
        )
        link_seed = self.seed + pt.repetition  # reproducible, yet each repetition sees its own pattern
        rec.params["link_seed"] = link_seed
        if workload.owns_topology:
            limit = workload.trial_timeout_s(case.flows, case.direction, options, self.duration_s, self.omit_s)
            with watchdog(limit, f"the {workload.kind} trial"):
                workload.run_trial(
                    TrialInput(
                        case=case,
                        repetition=pt.repetition,
                        record=rec,
                        ledger=self.ledger,
                        workdir=workdir,
                        options=options,
                        duration_s=self.duration_s,
                        omit_s=self.omit_s,
                        topology=spec,
                        link_factory=self.link_factory,
                        link_seed=link_seed,
                        hooks=self.hooks,
                    )
                )
            return
        self._measure_pair(pt, workload, options, rec, workdir, tag, spec, link_seed)

    def _measure_pair(
        self,
        pt: PlannedTrial,
        workload: Workload,
        options: BaseModel,
        rec: TrialRecord,
        workdir: Path,
        tag: str,
        spec: TopologySpec,
        link_seed: int,
    ) -> None:
        case = pt.case
        link = self.link_factory(case, self.ledger, workdir, link_seed) if self.link_factory else None
        with contextlib.ExitStack() as stack:
            topo = stack.enter_context(Topology(self.ledger, tag, spec, link_builder=link))
            rec.params["sysctls"] = topo.sysctls_applied.get(topo.client.name, {})
            cgroups = {
                role: stack.enter_context(RoleCgroup(f"{self.ledger.prefix}-{tag}-{role}", self.ledger))
                for role in ("client", "server")
            }
            tunnel = stack.enter_context(Tunnel(case.tunnel, topo, self.ledger, workdir, cgroups))
            assert tunnel.target is not None
            rec.metrics["setup_s"] = tunnel.setup_s
            rec.params["net"] = topo.effective_settings()  # what the kernel really used (docs: settings)
            ctx = Context(
                topo=topo,
                target=tunnel.target,
                ledger=self.ledger,
                workdir=workdir,
                title=case.title,
                flows=case.flows,
                direction=case.direction,
                duration_s=self.duration_s,
                omit_s=self.omit_s,
                options=options,
                server_port=IPERF_PORT,
                layer=case.tunnel.adapter.spec.layer,
            )
            workload.prepare(ctx, stack)
            roles: dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]] = {
                role: (functools.partial(tunnel.pids, role), cgroups[role]) for role in ("client", "server")
            }
            link_pid = getattr(topo.link, "pid", None)
            if link_pid:
                roles["link"] = ((lambda: [link_pid]), None)
            with contextlib.ExitStack() as window:
                for hook in self.hooks:
                    window.enter_context(hook(ctx, tunnel, rec))
                with Sampler(roles) as sampler, watchdog(workload.timeout_s(ctx), f"the {workload.kind} workload"):
                    result = workload.measure(ctx)
            tunnel.check_alive()
        rec.metrics.update(result.metrics)
        rec.series.update(result.series)
        rec.streams = result.streams
        rec.artifacts.update(result.artifacts)
        measured = None
        if result.window is not None:
            measured = (result.window[0] - sampler.t0, result.window[1] - sampler.t0)
        _cost_metrics(rec, sampler.results, sampler.wall_s, measured)
        rec.duration_s = float(rec.metrics["window_s"] or 0.0)
        rec.metrics.update(link_metrics(getattr(topo.link, "stats", None)))
        underlay = {role: short_ifname(dev, topo.prefix) for role, dev in underlay_devices(topo).items()}
        rec.metrics.update(crosscheck.byte_checks(rec.metrics, underlay, emulated=topo.link is not None))


def underlay_devices(topo: Topology) -> dict[str, str]:
    """The device each namespace's underlay traffic arrives on: the emulator's TUN ends, or the veth."""
    if isinstance(topo.link, LinkEmulator):
        return {"client": topo.link.a.dev, "server": topo.link.b.dev}
    return {"client": topo.ifname("vc"), "server": topo.ifname("vs")}


def _cost_metrics(
    rec: TrialRecord, costs: dict[str, RoleCost], wall_s: float, window: tuple[float, float] | None = None
) -> None:
    """CPU figures over the measured window (the headline: throughput counts those seconds only) and over
    the whole workload call (`trial_cpu.*`, connect, warm-up and result exchange included), with the
    cgroup-vs-sampling cross-check over the window."""
    m: dict[str, Any] = rec.metrics
    w0, w1 = (0.0, wall_s) if window is None else (max(0.0, window[0]), min(wall_s, window[1]))
    m["window_s"] = max(0.0, w1 - w0)
    m["trial_window_s"] = wall_s
    for role, cost in costs.items():
        # headline CPU: the cgroup's exact figure when there is one; per-process sampling (psutil reads
        # /proc/<pid>/stat, which lags by up to a few hundred ms of CPU right after a process starts) is
        # kept beside it as the cross-check and for the time series
        sampled, cgroup = cost.between(w0, w1)
        headline = cgroup if cgroup is not None else sampled
        m[f"cpu.{role}.user_s"] = headline.user_s
        m[f"cpu.{role}.sys_s"] = headline.sys_s
        m[f"sampled_cpu.{role}.user_s"] = sampled.user_s
        m[f"sampled_cpu.{role}.sys_s"] = sampled.sys_s
        whole = cost.cgroup_cpu if cost.cgroup_cpu is not None else cost.cpu
        m[f"trial_cpu.{role}.user_s"] = whole.user_s
        m[f"trial_cpu.{role}.sys_s"] = whole.sys_s
        m[f"rss_peak_bytes.{role}"] = cost.rss_peak_bytes
        m[f"processes.{role}"] = cost.processes
        if cgroup is not None:
            m[f"cgroup_cpu.{role}.user_s"] = cgroup.user_s
            m[f"cgroup_cpu.{role}.sys_s"] = cgroup.sys_s
            if cost.processes:
                diff, ok = crosscheck.cpu_check(cgroup.total_s, sampled.total_s)
                m[f"check.cpu.{role}.diff_s"] = diff
                m[f"check.cpu.{role}.ok"] = 1.0 if ok else 0.0
        rec.series[f"cpu_pct.{role}"] = _cpu_pct(cost)
        rec.series[f"rss_bytes.{role}"] = [(s.t_s, float(s.rss_bytes)) for s in cost.series]


def _cpu_pct(cost: RoleCost) -> list[tuple[float, float]]:
    out = []
    prev = None
    for s in cost.series:
        if prev is not None and s.t_s > prev.t_s:
            used = (s.cpu_user_s + s.cpu_sys_s) - (prev.cpu_user_s + prev.cpu_sys_s)
            out.append((s.t_s, 100.0 * used / (s.t_s - prev.t_s)))
        prev = s
    return out
