"""One run: trials in planned order, each in a fresh topology, committed to the store as soon as it ends.

Per trial: topology -> link -> role cgroups -> tunnel up -> iperf3 server -> [sampler + iperf3 client]
-> tunnel checked alive -> everything torn down in reverse order -> trial stored.
A failed trial is stored with its error (and the tunnel logs) and the run goes on.

A warm block (PlannedTrial.window, `--warm N`) brings each of its tunnels up once, side by side, and each of
its trials is one measured window on its running tunnel (the same window and accounting as a cold trial's),
stored as it ends; everything is torn down when the block ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from tunbench import workloads
from tunbench.errors import CommandFailed, DependencyMissing, RetryTrial, TrialError, TunnelError
from tunbench.host.cgroup import CpuCap, RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import LocalPlace, Place
from tunbench.host.workdir import workdir as host_workdir
from tunbench.link.emulator import LinkEmulator, link_metrics, queue_series
from tunbench.monitor import crosscheck, work
from tunbench.monitor.cost import cost_metrics
from tunbench.monitor.counters import namespace_counters, short_ifname
from tunbench.monitor.interference import RedoPolicy, watched
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.plan import Case, PlannedTrial
from tunbench.remote.hosts import HostRun, HostsTopology
from tunbench.remote.interference import remote_interference, run_prefixes
from tunbench.remote.place import RemotePlace
from tunbench.results import TrialRecord
from tunbench.store.db import Store, now_iso
from tunbench.topology.build import LinkBuilder, Topology, TopologySpec
from tunbench.tunnels.adapter import IPERF_PORT, ROLES, Tunnel
from tunbench.tunnels.fleet_env import FleetEnv
from tunbench.watchdog import watchdog
from tunbench.workloads.base import BringupContext, Context, FleetContext, Measurement, Workload
from tunbench.workloads.fleet_hosts import HostsFleetEnv

LinkFactory = Callable[[Case, Ledger, Path, int], LinkBuilder | None]


class WindowHook(Protocol):
    """An optional add-on around the measured window (the perf profiler): entered just before the
    workload measures, exited right after; it may add metrics and artifacts to the trial record."""

    def __call__(self, ctx: Context, tunnel: Tunnel, rec: TrialRecord) -> contextlib.AbstractContextManager[object]: ...


class TrialObserver(Protocol):
    """Who watches a run (the CLI's progress bar and per-trial lines): told when each trial starts and ends."""

    def trial_started(self, pt: PlannedTrial) -> None: ...

    def trial_done(self, pt: PlannedTrial, rec: TrialRecord) -> None: ...


class StopRun(TrialError):
    """The stop policy ended the run early (stop_on_error and a trial failed); what ran is stored."""


StopCheck = Callable[[list[PlannedTrial], list[TrialRecord]], str]
"""Asked between two blocks (PlannedTrial.block) with the next block's trials and the records so far: a
reason to end the run there (it ends as done, with the blocks run so far complete), or "" to go on."""


class Deadline:
    """A StopCheck: stop before a block that would not end by `at` (time.monotonic()), at the pace the run's
    trials have kept so far since this object was made; never before `min_blocks` blocks have run."""

    def __init__(self, at: float, *, min_blocks: int = 1) -> None:
        self.at = at
        self.min_blocks = min_blocks
        self.since = time.monotonic()
        self.blocks = 0

    def __call__(self, block: list[PlannedTrial], done: list[TrialRecord]) -> str:
        self.blocks += 1  # asked once after each block but the last
        now = time.monotonic()
        need = (now - self.since) / max(1, len(done)) * len(block)
        if self.blocks < self.min_blocks or now + need <= self.at:
            return ""
        return f"deadline: {max(0.0, self.at - now):.0f} s left, a block takes about {need:.0f} s"


ALIGN_LEAD_S = 0.05  # the role sampler's ticks fall this long before the measured window's edges
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
        observer: TrialObserver | None = None,
        stop_on_error: bool = False,
        hooks: list[WindowHook] | None = None,
        hosts: HostRun | None = None,
        stop: StopCheck | None = None,
        cpuset: dict[str, str] | None = None,
        redo: RedoPolicy | None = None,
    ) -> None:
        """`redo`: which windows are void and measured again (RetryTrial), as a bidir race is: steal, or any
        interference (monitor/interference.py); default none (kept, and flagged by compare)."""
        self.redo = redo or RedoPolicy()
        self.ledger = ledger
        self.store = store
        self.run_id = run_id
        self.topology = topology
        self.duration_s = duration_s
        self.omit_s = omit_s
        self.options = options or {}
        self.link_factory = link_factory
        self.seed = seed
        self.observer = observer
        self.stop_on_error = stop_on_error
        self.hooks = hooks or []
        self.hosts = hosts  # roles on remote hosts (--hosts); None: namespaces of this machine
        self.stop = stop
        self.stopped = ""  # why `stop` ended the run before the plan's last trial ("": it did not)
        self.cpuset = cpuset or {}  # role -> CPU list ([run] cpuset, host.cgroup); {}: not placed

    def run(self, trials: list[PlannedTrial]) -> list[TrialRecord]:
        """The trials in order, each stored as it ends. `stop` is asked at each block boundary, so a run it
        ends keeps only whole blocks (complete pairs). A warm block's trials are windows on tunnels the
        block brings up once (_run_warm)."""
        records: list[TrialRecord] = []
        i = 0
        while i < len(trials):
            pt = trials[i]
            block = list(itertools.takewhile(functools.partial(_same_block, pt.block), trials[i:]))
            if self.stop is not None and i > 0:
                self.stopped = self.stop(block, records)
                if self.stopped:
                    break
            if pt.window:
                self._run_warm(block, records)
            else:
                for bt in block:
                    self._started(bt)
                    self._done(bt, self.run_trial(bt), records)
            i += len(block)
        return records

    def _started(self, pt: PlannedTrial) -> None:
        if self.observer:
            self.observer.trial_started(pt)

    def _done(self, pt: PlannedTrial, rec: TrialRecord, records: list[TrialRecord]) -> None:
        """A trial ended: stored now (a later crash cannot lose it), shown, and the run's stop policies."""
        self.store.add_trial(self.run_id, rec)
        records.append(rec)
        if self.observer:
            self.observer.trial_done(pt, rec)
        lost = [c.name for c in self.hosts.conns.values() if c.lost] if self.hosts is not None else []
        if lost:
            raise StopRun(
                f"the connection to {', '.join(lost)} was lost: the run stops here (its agent removes what it "
                "started when the connection ends; `tunbench clean --hosts` checks)"
            )
        if self.stop_on_error and rec.status != "ok":
            first = (rec.error.splitlines() or ["failed"])[0]
            raise StopRun(f"stopping at the first failed trial (stop_on_error): {first}")

    def _run_warm(self, block: list[PlannedTrial], records: list[TrialRecord]) -> None:
        """A warm block: each of its tunnels is brought up once (named after its first trial, `t7w`), all
        side by side in their own namespaces, then each trial is one measured window on its running tunnel,
        in the planned order; all are torn down when the block ends. A tunnel that fails to come up, or dies
        in a window, fails its remaining windows of the block with that error; a void window is measured
        again on the same tunnel."""
        with contextlib.ExitStack() as stack:
            held: dict[str, tuple[_Trial, _Held | str]] = {}  # by tunnel label: a block's cases differ in it only
            self._started(block[0])
            for pt in block:  # all up before the first window: every window runs beside the same tunnels
                if pt.case.tunnel.label not in held:
                    held[pt.case.tunnel.label] = self._warm_up(pt, stack, slot=str(len(held) or ""))
            for n, pt in enumerate(block):
                if n:
                    self._started(pt)
                first, pair = held[pt.case.tunnel.label]
                rec = self._record(pt, first.options)
                t = dataclasses.replace(first, rec=rec)
                rec.params["warm"] = {"bringup": first.tag, "window": pt.window}
                rec.params["link_seed"] = first.link_seed
                for key, value in first.rec.params.items():  # what the bring-up recorded holds for every window
                    rec.params.setdefault(key, value)
                if isinstance(pair, str):
                    rec.status, rec.error = "failed", pair
                else:
                    error = self._warm_window(t, pair)
                    if first.rec.seq == pt.seq:
                        rec.metrics["setup_s"] = pair.tunnel.setup_s  # once per bring-up, with its first window
                    if error:
                        held[pt.case.tunnel.label] = (first, error)
                self._done(pt, rec, records)

    def _warm_up(self, pt: PlannedTrial, stack: contextlib.ExitStack, slot: str) -> tuple[_Trial, _Held | str]:
        """One tunnel of a warm block brought up on `stack`, or why it could not be (its logs kept)."""
        workload = workloads.get(pt.case.workload)
        options = self.options.get(workload.kind) or workload.options(None)
        tag = f"t{pt.seq}w"
        workdir = stack.enter_context(host_workdir(self.ledger, tag))
        t = _Trial(
            pt.case,
            workload,
            options,
            self._record(pt, options),
            workdir,
            tag,
            self._spec(pt.case),
            self.seed + pt.repetition,
            slot,
        )
        own = contextlib.ExitStack()
        try:
            pair = self._bring_up(t, own)
        except (TrialError, TunnelError, CommandFailed, DependencyMissing) as e:
            own.close()
            logs = "".join(
                f"\n--- {p.name}:\n" + p.read_text(errors="replace")[-2000:] for p in sorted(workdir.glob("*.log"))
            )
            return t, f"the warm bring-up {tag} failed: {e}{logs}"
        except Exception as e:  # a bug of ours must not lose the run: its windows fail with it
            own.close()
            return t, f"internal error in the warm bring-up {tag}: {type(e).__name__}: {e}\n{traceback.format_exc()}"
        except BaseException:
            own.close()
            raise
        stack.enter_context(own)
        return t, pair

    def _warm_window(self, t: _Trial, pair: _Held) -> str:
        """One window of a warm block into t.rec, a void one measured again (at most MAX_ATTEMPTS in all).
        Returns why the tunnel cannot serve the block's later windows ("" when it can)."""
        rec, retried = t.rec, []
        while True:
            try:
                window = self._window(t, pair)
            except RetryTrial as e:
                retried.append(str(e))
                if len(retried) < MAX_ATTEMPTS:
                    rec.metrics.clear()
                    continue
                rec.status, rec.error = "failed", str(e)
                break
            except TunnelError as e:
                rec.status, rec.error = "failed", str(e)
                return f"the tunnel of {t.tag} died in an earlier window: {e}"
            except (TrialError, CommandFailed, DependencyMissing) as e:
                rec.status, rec.error = "failed", str(e)
                try:  # a window can fail because the tunnel died: then the later ones must not run on it
                    pair.tunnel.check_alive()
                except TunnelError as dead:
                    return f"the tunnel of {t.tag} died in an earlier window: {dead}"
                break
            except Exception as e:  # a bug of ours must not lose the run: record it with its traceback
                rec.status, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
                rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
                break
            try:
                self._account(t, pair, window, None)
            except Exception as e:
                rec.status, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
                rec.artifacts["traceback.txt"] = traceback.format_exc().encode()
            break
        if retried:
            rec.params["retried"] = retried
        keep_logs(t)
        return ""

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
            clients=c.clients,
            variant=c.variant,
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
                "ip": c.tunnel.families(),  # underlay / overlay (docs/adapters.md, "IPv6")
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
        self, pt: PlannedTrial, workload: Workload[Any, Any], options: BaseModel, attempt: int = 1
    ) -> tuple[TrialRecord, bool]:
        """(the record, whether the measurement was void and may be tried again). A retry gets names of its
        own (`t7r2`), so nothing an earlier attempt's teardown missed can collide with it."""
        rec = self._record(pt, options)
        tag = f"t{pt.seq}" + (f"r{attempt}" if attempt > 1 else "")
        case = pt.case
        spec = self._spec(case)
        link_seed = self.seed + pt.repetition  # reproducible, yet each repetition sees its own pattern
        rec.params["link_seed"] = link_seed
        with host_workdir(self.ledger, f"t{pt.seq}") as workdir:
            void = self._attempt_in(_Trial(case, workload, options, rec, workdir, tag, spec, link_seed))
        return rec, void

    def _spec(self, case: Case) -> TopologySpec:
        return TopologySpec(
            mtu=case.profile.mtu or self.topology.mtu,
            sysctls={**self.topology.sysctls, **case.profile.sysctl},
            ipv6=self.topology.ipv6,
            congestion_control=case.profile.congestion_control or self.topology.congestion_control,
        )

    def _attempt_in(self, t: _Trial) -> bool:
        rec = t.rec
        void = False
        try:
            if t.workload.fleet:
                self._measure_fleet(t)
            elif t.workload.owns_bringup:
                self._measure_bringups(t)
            else:
                self._measure_pair(t)
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
            keep_logs(t)
        return void

    def _measure_fleet(self, t: _Trial) -> None:
        """N clients: the switched topology, cgroups and the tunnel server come up here; the workload brings
        the clients up at its own pace and measures. The watchdog covers the whole trial."""
        case, workload, options, rec, workdir = t.case, t.workload, t.options, t.rec, t.workdir
        rec.params["workload"]["clients"] = case.clients
        if case.variant:
            rec.params["workload"]["variant"] = case.variant
        limit = workload.trial_timeout_s(case, options, self.duration_s, self.omit_s)
        env: FleetEnv | HostsFleetEnv
        if self.hosts is not None:  # the server on the server host, the clients on the client host
            env = HostsFleetEnv(
                self.hosts,
                self.ledger,
                t.tag,
                workdir,
                case.tunnel,
                t.spec,
                case.clients,
                probe_interval_s=workload.probe_interval_s(options),
            )
        else:
            env = FleetEnv(
                self.ledger,
                t.tag,
                workdir,
                case.tunnel,
                case.profile,
                t.spec,
                t.link_seed,
                case.clients,
                cpu_cap=workload.cpu_cap(case),
                probe_interval_s=workload.probe_interval_s(options),
            )
        with watchdog(limit, f"the {workload.kind} trial"), env:
            rec.params["sysctls"] = env.sysctls_applied
            if isinstance(env, HostsFleetEnv):
                rec.params["net"] = env.net
            ctx = FleetContext(
                env=env,
                ledger=self.ledger,
                workdir=workdir,
                title=case.title,
                label=case.tunnel.label,
                profile=case.profile.name,
                clients=case.clients,
                variant=case.variant,
                direction=case.direction,
                duration_s=self.duration_s,
                omit_s=self.omit_s,
                options=options,
            )
            with self._watched(rec):
                result = workload.measure(ctx)
        self._merge(rec, result)
        rec.metrics.update(env.metrics)
        rec.duration_s = float(rec.metrics.get("window_s") or 0.0)

    def _measure_bringups(self, t: _Trial) -> None:
        """A workload that measures bring-up itself gets the runner's pair bring-up as a function."""
        case, workload, options, rec, workdir = t.case, t.workload, t.options, t.rec, t.workdir

        @contextlib.contextmanager
        def bring_up(name: str) -> Iterator[Tunnel]:
            wd = workdir / name
            wd.mkdir()
            link = self.link_factory(case, self.ledger, wd, t.link_seed) if self.link_factory else None
            with (
                Topology(self.ledger, f"{t.tag}{name}", t.spec, link_builder=link) as topo,
                Tunnel(case.tunnel, topo, self.ledger, wd, {}) as tunnel,
            ):
                rec.params.setdefault("sysctls", topo.sysctls_applied.get(topo.client.name, {}))
                yield tunnel

        ctx = BringupContext(
            bring_up=bring_up,
            ledger=self.ledger,
            workdir=workdir,
            title=case.title,
            duration_s=self.duration_s,
            omit_s=self.omit_s,
            options=options,
        )
        with (
            watchdog(
                workload.trial_timeout_s(case, options, self.duration_s, self.omit_s), f"the {workload.kind} trial"
            ),
            self._watched(rec),
        ):
            result = workload.measure(ctx)
        self._merge(rec, result)
        if result.window is not None:
            rec.duration_s = result.window[1] - result.window[0]

    @staticmethod
    def _merge(rec: TrialRecord, result: Measurement) -> None:
        rec.metrics.update(result.metrics)
        rec.series.update(result.series)
        rec.streams = result.streams
        rec.artifacts.update(result.artifacts)
        rec.params.update(result.params)

    def _measure_pair(self, t: _Trial) -> None:
        """The client/server pair: topology (namespaces here, or the run's hosts), role cgroups and the
        tunnel, then the workload inside the sampled window, its cost, the emulator's counters and the byte
        cross-checks."""
        with contextlib.ExitStack() as stack:
            held = self._bring_up(t, stack)
            t.rec.metrics["setup_s"] = held.tunnel.setup_s
            window = self._window(t, held)
        self._account(t, held, window, held.emulator.stats if held.emulator is not None else None)

    def _bring_up(self, t: _Trial, stack: contextlib.ExitStack) -> _Held:
        """Topology, role cgroups and the tunnel, entered on `stack`."""
        case, rec = t.case, t.rec
        topo: Topology | HostsTopology
        cgroups: dict[str, RoleCgroup] = {}
        if self.hosts is not None:
            topo = stack.enter_context(
                HostsTopology(self.hosts, self.ledger.prefix, t.tag, t.spec, case.profile, t.link_seed)
            )
            places: dict[str, Place] = {role: topo.place(role) for role in ROLES}
        else:
            link = self.link_factory(case, self.ledger, t.workdir, t.link_seed) if self.link_factory else None
            name = f"{self.ledger.prefix}-{t.tag}"  # the emulator's placement outlives it: entered first
            link_cg = stack.enter_context(
                RoleCgroup(f"{name}-link", self.ledger, cpus=self.cpuset.get("link", "") if link else "", account=False)
            )
            topo = stack.enter_context(Topology(self.ledger, t.tag, t.spec, link_builder=link, slot=t.slot))
            cgroups = {
                role: stack.enter_context(RoleCgroup(f"{name}-{role}", self.ledger, cpus=self.cpuset.get(role, "")))
                for role in ROLES
            }
            places = {
                role: LocalPlace(topo.ns_name(role), self.ledger, t.workdir, placement=cgroups[role].placement_files)
                for role in ROLES
            }
            if isinstance(topo.link, LinkEmulator) and topo.link.pid and link_cg.cpus:
                link_cg.join(topo.link.pid)
            if self.cpuset:
                rec.params["cpuset"] = {r: c for r, c in self.cpuset.items() if r != "link" or link}
        rec.params["sysctls"] = topo.sysctls_applied.get(topo.ns_name("client"), {})
        # client_cpu= / server_cpu=: the tunnel's processes only; entered before the tunnel, so the cap's
        # cgroup is removed after the tunnel has stopped its processes (not by killing them first)
        period_us = case.tunnel.cpu_period_us
        caps = {
            role: (stack.enter_context(CpuCap(f"{self.ledger.prefix}-{t.tag}-{role}-cap", self.ledger, period_us)), pct)
            for role, pct in case.tunnel.cpu_caps.items()
        }
        tunnel = stack.enter_context(Tunnel(case.tunnel, topo, self.ledger, t.workdir, cgroups))
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
            ledger=self.ledger,
            workdir=t.workdir,
            title=case.title,
            flows=case.flows,
            direction=case.direction,
            duration_s=self.duration_s,
            omit_s=self.omit_s,
            options=t.options,
            client=places["client"],
            server=places["server"],
            server_port=IPERF_PORT,
            layer=case.tunnel.adapter.spec.layer,
            clock_skew=topo.clock_skew() if isinstance(topo, HostsTopology) else None,
            handshakes=tunnel.handshakes(),
            baseline=case.tunnel.name == "direct",
        )
        emulator = topo.link if isinstance(topo.link, LinkEmulator) else None
        return _Held(topo, cgroups, places, tunnel, ctx, emulator)

    def _window(self, t: _Trial, held: _Held) -> _Window:
        """One measured window on a pair that is up: the workload's servers, then counters, host load, hooks
        and the role sampling around its measurement; the tunnel must still be alive after it."""
        rec, topo, tunnel = t.rec, held.topo, held.tunnel
        assert tunnel.target is not None
        rec.params["ip"]["target"] = "ipv6" if ":" in tunnel.target.address else "ipv4"  # what the traffic used
        rec.params["net"] = topo.effective_settings()  # what the kernel really used (docs: settings)
        with contextlib.ExitStack() as window:
            t.workload.prepare(held.ctx, window)  # its servers, per window (iperf3 -s -1 serves one test)
            if isinstance(topo, Topology):
                namespaces = {"client": topo.client.name, "server": topo.server.name}
                window.enter_context(namespace_counters(namespaces, rec.metrics, prefix=topo.prefix))
            window.enter_context(self._watched(rec))
            for hook in self.hooks:
                window.enter_context(hook(held.ctx, tunnel, rec))
            with (
                Sampler(_local_roles(tunnel, held.cgroups, held.places, held.emulator)) as sampler,
                remote_sampling(tunnel, held.places, sampler, link=_remote_link(topo)) as remote_costs,
                watchdog(t.workload.timeout_s(held.ctx), f"the {t.workload.kind} workload"),
            ):
                if held.emulator is not None:  # the profile's events count from the workload's start
                    held.emulator.start_schedule()
                started = time.monotonic()
                # a sample just before the measured window's start, then each second: with whole-second durations
                # one lands just before its end too, while every process of the roles is still alive
                sampler.align(started + self.omit_s - ALIGN_LEAD_S)
                result = t.workload.measure(held.ctx)
                ended = time.monotonic()
        tunnel.check_alive()
        if why := self.redo.void(rec.metrics, rec.params):
            raise RetryTrial(why)
        return _Window(result, sampler, remote_costs, (started, ended))

    @contextlib.contextmanager
    def _watched(self, rec: TrialRecord) -> Iterator[None]:
        """The host's load and what else ran (other runs, foreign CPU, the harness's own), read at the edges.
        On --hosts also each host's other runs and its agent's CPU; this machine's foreign CPU is then not
        judged (the roles run on the hosts), and the run's agents are not other runs."""
        if self.hosts is None:
            with watched(rec.metrics, rec.params, self.ledger.prefix, self.redo.limits):
                yield None
            return
        conns = list(self.hosts.conns.values())
        limits = dataclasses.replace(self.redo.limits, foreign_cpu_pct=None)
        with (
            remote_interference(conns, rec.metrics, rec.params, self.ledger.prefix),
            watched(rec.metrics, rec.params, run_prefixes(conns, self.ledger.prefix), limits),
        ):
            yield None

    def _account(self, t: _Trial, held: _Held, w: _Window, link_stats: dict[str, Any] | None) -> None:
        """The record from a window: the workload's metrics, CPU over the measured window, the emulator's
        counters and queue occupancy series (`link_stats`: known once the emulator has stopped; None in a
        warm window) and the cross-checks."""
        rec, topo = t.rec, held.topo
        self._merge(rec, w.result)
        measured = None
        if w.result.window is not None:
            measured = (w.result.window[0] - w.sampler.t0, w.result.window[1] - w.sampler.t0)
        _cost_metrics(rec, {**w.sampler.results, **w.remote_costs}, w.sampler.wall_s, measured)
        rec.duration_s = float(rec.metrics["window_s"] or 0.0)
        stats = topo.link_stats if isinstance(topo, HostsTopology) else link_stats
        rec.metrics.update(link_metrics(stats))
        t0, t1 = series_span(w.result, w.call)
        rec.metrics["series_t0_s"] = t0 - w.call[0]  # the series' t = 0, after the workload's (and events') start
        offset = _link_clock_offset_s(topo)
        if stats and offset is not None:  # the queue occupancy on the series' time base, the measured part only
            queues, flags = queue_series(stats, round((t0 + offset) * 1e9), round((t1 + offset) * 1e9))
            rec.series.update(queues)
            rec.metrics.update(flags)
        rec.metrics.update(crosscheck.rtt_checks(rec.metrics))
        if isinstance(topo, Topology):
            underlay = {role: short_ifname(dev, topo.prefix) for role, dev in underlay_devices(topo).items()}
            rec.metrics.update(crosscheck.byte_checks(rec.metrics, underlay, emulated=topo.link is not None))
            rec.metrics.update(work.ratios(rec.metrics, underlay))  # counted work per MB and packet, if counted


def series_span(result: Measurement, call: tuple[float, float]) -> tuple[float, float]:
    """What a workload's time series cover (time.monotonic(); t = 0 at the start): its `series_window`, else
    its measured `window`, else the whole call (`call`: just before and just after measure())."""
    return result.series_window or result.window or call


def _link_clock_offset_s(topo: Topology | HostsTopology) -> float | None:
    """The emulator's monotonic clock minus this machine's: 0 here; on hosts, the offset measured to the
    client's host (where the emulator runs); None when unknown."""
    if not isinstance(topo, HostsTopology):
        return 0.0
    clock = topo.hosts.conn("client").clock
    return clock.mono_s if clock is not None else None


def _same_block(block: int, pt: PlannedTrial) -> bool:
    return pt.block == block


def _local_roles(
    tunnel: Tunnel, cgroups: dict[str, RoleCgroup], places: dict[str, Place], emulator: LinkEmulator | None
) -> dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]]:
    """The roles this machine samples: those in its namespaces, and the emulator."""
    roles: dict[str, tuple[Callable[[], list[int]], RoleCgroup | None]] = {
        role: (functools.partial(tunnel.pids, role), cgroups.get(role))
        for role in ROLES
        if isinstance(places[role], LocalPlace)
    }
    link_pid = emulator.pid if emulator is not None else None
    if link_pid:
        roles["link"] = ((lambda: [link_pid]), None)
    return roles


def _remote_link(topo: Topology | HostsTopology) -> RemotePlace | None:
    """Where a run on hosts has its emulator (the client's place: its egress, or the pair on one host)."""
    if isinstance(topo, HostsTopology) and topo.emulated:
        return topo.place("client")
    return None


@contextlib.contextmanager
def remote_sampling(
    tunnel: Tunnel, places: dict[str, Place], sampler: Sampler, link: RemotePlace | None = None
) -> Iterator[dict[str, RoleCost]]:
    """Each remote role sampled by its host's agent over the same window, and the emulator where `link` is
    the place that runs one (role "link", as a local run samples its own); on exit the yielded dict holds
    their costs on this machine's sampler clock (the clock offset measured at connect maps them)."""
    started: list[tuple[str, RemotePlace, str]] = []
    out: dict[str, RoleCost] = {}
    try:
        for role in ROLES:
            place = places[role]
            if isinstance(place, RemotePlace):
                d = tunnel.daemons.get(role)
                started.append((role, place, place.sample_start(role, [d] if d else [])))
        if link is not None:
            started.append(("link", link, link.sample_start("link", [])))
        yield out
    except BaseException:
        for _, place, key in started:  # a start or the measurement failed: its error is the one to see
            place.sample_abandon(key)
        raise
    stopping = list(started)
    try:
        while stopping:  # each one stopped whatever happens to another
            role, place, key = stopping.pop(0)
            out[role] = place.sample_stop(key, sampler.t0)
    finally:
        for _, place, key in stopping:
            place.sample_abandon(key)


@dataclass(frozen=True)
class _Held:
    """A client/server pair that is up: what a measured window needs."""

    topo: Topology | HostsTopology
    cgroups: dict[str, RoleCgroup]
    places: dict[str, Place]
    tunnel: Tunnel
    ctx: Context
    emulator: LinkEmulator | None


@dataclass(frozen=True)
class _Window:
    result: Measurement
    sampler: Sampler
    remote_costs: dict[str, RoleCost]
    call: tuple[float, float]  # time.monotonic() just before and just after the workload's measure()


@dataclass(frozen=True)
class _Trial:
    """One attempt of a trial as the three bring-up shapes (pair, fleet, bring-up-owning) receive it."""

    case: Case
    workload: Workload[Any, Any]
    options: BaseModel
    rec: TrialRecord
    workdir: Path
    tag: str  # the attempt's name among the run's host objects (t3, t3r2)
    spec: TopologySpec
    link_seed: int
    slot: str = ""  # a warm block's k-th tunnel: "" for the first, "1", "2", ... (Topology's interface names)


LOG_TAIL_BYTES = 65536  # of each log file a trial keeps


def keep_logs(t: _Trial) -> None:
    """Store the last LOG_TAIL_BYTES of the attempt's logs with its record: when it failed, or always for a
    workload whose answer they are part of (`Workload.keeps_logs`)."""
    if t.rec.status != "ok" or t.workload.keeps_logs:
        for log in sorted(t.workdir.glob("*.log")):
            t.rec.artifacts[f"log/{log.name}"] = log.read_bytes()[-LOG_TAIL_BYTES:]


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
    cgroup-vs-sampling cross-check over the window (monitor/cost.py)."""
    w0, w1 = (0.0, wall_s) if window is None else (max(0.0, window[0]), min(wall_s, window[1]))
    rec.metrics["window_s"] = max(0.0, w1 - w0)
    rec.metrics["trial_window_s"] = wall_s
    cost_metrics(rec, costs, wall_s, (w0, w1))
