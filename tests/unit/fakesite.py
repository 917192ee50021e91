"""A site that runs nothing: every step a trial shape takes on it (the pair, the tunnel, a window's watch, the
workload's measurement, a fleet, a bare pair, a lost host) does what a `Script` says, call by call, and a
journal records what was entered and exited, so a test can run the trial shapes and the runner end to end
without root, namespaces or processes.

The tunnel is the real `Tunnel`, run against scripted places: its adapter (`fake_tunnel`) starts a daemon on
each side and runs one `tunnel` command on the client, so a tunnel that fails to come up is that command
failing, and a tunnel that dies is its daemons exiting (the `DIES` outcome of a measurement).

A script holds, per step, a list of outcomes taken in turn (an empty or exhausted list: the step succeeds):
None succeeds; an exception (any BaseException: KeyboardInterrupt too) is raised there; a dict gives the
step's figures (a measurement's metrics, a watch's `interfered`); a list names the hosts `lost()` reports.
Written against sites/base.py's protocols, which mypy --strict holds it to; the fleet is duck-typed (it has
only what the shapes and the fake fleet workload use of base.FleetSetup).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tunbench import workloads
from tunbench.host import ledger as state
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Completed, Place, Proc, completed
from tunbench.link.profile import Profile
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.interference import RedoPolicy, Thresholds
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.work import RoleCount
from tunbench.plan import Case, PlannedTrial
from tunbench.results import TrialRecord
from tunbench.runner import Runner
from tunbench.sites.base import Cap, SampledRoles, Spot
from tunbench.store.db import Store
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.build import TopologySpec
from tunbench.trial import warm
from tunbench.trial.attempt import Setup
from tunbench.tunnels.adapter import AdapterSpec, LoadedAdapter, RoleSpec, TargetSpec
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import Tunnel
from tunbench.units import Window
from tunbench.workloads.base import BringupContext, Context, FleetContext, FleetWorkload, Measurement, Workload

DIES = "dies"
"""A measurement outcome: the window is measured, and the tunnel's daemons have exited by its end."""

FIGURES = {"throughput_bps": 1e9}
"""What a measurement scripted to succeed (None) reports."""


class Script:
    """Each step's outcomes, taken in turn, and the journal of what the site and its tunnels did."""

    def __init__(self, **steps: Sequence[object]) -> None:
        self.steps = {step: list(outcomes) for step, outcomes in steps.items()}
        self.journal: list[str] = []  # "+name" entered, "-name" exited, "step" a call
        self.procs: list[FakeProc] = []  # every daemon started, in order

    def take(self, step: str, name: str = "") -> object:
        """The step's next outcome (None once its list is used up), journalled; an exception is raised."""
        queue = self.steps.get(step) or []
        outcome = queue.pop(0) if queue else None
        self.journal.append(f"{step} {name}".strip())
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    @contextlib.contextmanager
    def held(self, name: str) -> Iterator[None]:
        """`name` entered for the block, its exit journalled however the block ends."""
        self.journal.append(f"+{name}")
        try:
            yield
        finally:
            self.journal.append(f"-{name}")

    def open(self) -> list[str]:
        """What was entered and never exited (teardown missed), and daemons never stopped."""
        left: list[str] = []
        for entry in self.journal:
            if entry.startswith("+"):
                left.append(entry[1:])
            elif entry.startswith("-"):
                left.remove(entry[1:])
        return left + [p.what for p in self.procs if not p.stopped]

    def entered(self, prefix: str) -> list[str]:
        """The names entered that start with `prefix`, in order."""
        return [e[1:] for e in self.journal if e.startswith(f"+{prefix}")]

    def kill(self, workdir: Path) -> None:
        """The daemons started in `workdir` (one tunnel's) exit (code 1)."""
        for p in self.procs:
            if p.log.is_relative_to(workdir):
                p.dead = True


# ---- places and daemons ------------------------------------------------------------------------------


class FakeProc:
    """A daemon that is only a name and a log file."""

    _pids = itertools.count(40000)

    def __init__(self, what: str, log: Path) -> None:
        self.what = what
        self.log = log
        self.dead = False
        self.stopped = False
        self._pid = next(FakeProc._pids)

    @property
    def pid(self) -> int:
        return self._pid

    def alive(self) -> bool:
        return not self.dead and not self.stopped

    def returncode(self) -> int | None:
        return 1 if self.dead else None

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text().splitlines()[-lines:])

    def stop(self) -> None:
        self.stopped = True


class FakePlace:
    """A role's place whose commands are steps of the script (a command's first word names its step)."""

    def __init__(self, script: Script, role: str, workdir: Path) -> None:
        self.script = script
        self.label = f"fake {role}"
        self.workdir = workdir
        self.machine = ""

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout_s: float = 30.0,
        check: bool = True,
        what: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        self.script.take(argv[0], " ".join(argv[1:]))
        return completed(argv, 0, "", "")

    def spawn(
        self, argv: Sequence[str], *, what: str, log_name: str, env: Mapping[str, str] | None = None, role: str = ""
    ) -> Proc:
        log = self.workdir / log_name
        log.write_text(f"{what} started as {' '.join(argv)}\n")
        proc = FakeProc(what, log)
        self.script.procs.append(proc)
        return proc

    def port_open(self, port: int, proto: str = "tcp") -> bool:
        return True

    def listening(self, proto: str = "tcp") -> set[int]:
        return set()

    def exists(self, path: str) -> bool:
        return True

    def put_files(self, files: Mapping[str, tuple[bytes, int]]) -> None:
        pass

    def read(self, rel: str) -> bytes | None:
        return None

    def pids(self, role: str, procs: Sequence[Proc]) -> list[int]:
        return [p.pid for p in procs]

    def rss(self, role: str, procs: Sequence[Proc]) -> list[int]:
        return [0 for _ in procs]

    def wait_exits(self, procs: Sequence[Proc], timeout_s: float) -> list[float | None]:
        return [0.0 for _ in procs]

    def stop(self, procs: Sequence[Proc]) -> None:
        for p in procs:
            p.stop()


def fake_tunnel(label: str = "fake") -> TunnelRef:
    """A tunnel whose server and client are daemons at their places, and whose client runs one `tunnel`
    command (the step a test fails to keep it from coming up)."""
    spec = AdapterSpec(
        name="fake",
        layer="l3",
        requires=[],
        server=RoleSpec(daemon="fake-server {server_addr}"),
        client=RoleSpec(before=["tunnel {inner_server}"], daemon="fake-client {server_addr}"),
        target=TargetSpec(address="{inner_server}"),
    )
    return TunnelRef(LoadedAdapter(spec=spec, source="<fake>", text=""), label=label)


# ---- the pair ----------------------------------------------------------------------------------------


class FakeTopology:
    """A pair's topology as a tunnel and a trial read it: names, addresses, and the fake places."""

    def __init__(self, spot: Spot, places: dict[str, FakePlace]) -> None:
        self.prefix = f"fake-{spot.tag}"
        self.addr = AddressPlan()
        self.spec: TopologySpec = spot.spec
        self.sysctls_applied: dict[str, dict[str, str]] = {}
        self._places = places

    def effective_settings(self) -> dict[str, Any]:
        return {"mtu": self.spec.mtu}

    def ifname(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def place(self, role: str) -> FakePlace | None:
        return self._places.get(role)

    def ns_name(self, role: str) -> str:
        return f"{self.prefix}-{role}"


class FakePair:
    """A client/server pair that measures nothing of its own: no sampled roles, counters or emulator."""

    def __init__(self, script: Script, spot: Spot) -> None:
        self.script = script
        self.fakes = {role: FakePlace(script, role, spot.workdir) for role in ("client", "server")}
        self.places: dict[str, Place] = dict(self.fakes)
        self.topo = FakeTopology(spot, self.fakes)
        self.cgroups: dict[str, RoleCgroup] = {}

    def clock_skew(self) -> tuple[float, float] | None:
        return None

    def start_schedule(self) -> None:
        self.script.journal.append("schedule")

    def counters(self, metrics: dict[str, float | None]) -> contextlib.AbstractContextManager[None]:
        return self.script.held("counters")

    def sampled_roles(self, tunnel: Tunnel) -> SampledRoles:
        return {}

    @contextlib.contextmanager
    def remote_sampling(self, tunnel: Tunnel, sampler: Sampler) -> Iterator[dict[str, RoleCost]]:
        with self.script.held("sampling"):
            yield {}

    def link_stats(self, final: bool) -> dict[str, Any] | None:
        return None

    def link_clock_offset_s(self) -> float | None:
        return None

    def underlay(self) -> tuple[dict[str, str], bool] | None:
        return None

    def cpu_cap(self, stack: contextlib.ExitStack[bool | None], role: str, period_us: int) -> Cap:
        raise AssertionError("the fake site caps no CPU: no test asks it to")

    def counted_elsewhere(self, tunnel: Tunnel) -> dict[str, Callable[[], RoleCount]]:
        return {}

    def instructions_elsewhere(
        self, tunnel: Tunnel, counter: str = "callgrind"
    ) -> dict[str, Callable[[str], InstrWindow]]:
        return {}


# ---- the fleet and the site --------------------------------------------------------------------------


class FakeFleet:
    """N clients' set-up that is a name in the journal: `fleet` scripts its entry."""

    def __init__(self, script: Script, spot: Spot, clients: int) -> None:
        self.script = script
        self.name = f"fleet {spot.tag}"
        self.clients = clients
        self.metrics: dict[str, float | None] = {}
        self._held = script.held(self.name)

    def __enter__(self) -> FakeFleet:
        self._held.__enter__()
        try:
            self.script.take("fleet", self.name)
        except BaseException as e:
            self._held.__exit__(type(e), e, e.__traceback__)
            raise
        self.metrics["fleet.clients_up"] = float(self.clients)
        return self

    def __exit__(self, *exc: object) -> None:
        self._held.__exit__(None, None, None)

    def recorded(self) -> dict[str, Any]:
        return {"fleet": {"clients": self.clients}}

    def lost_clients(self) -> dict[str, str]:
        return {}

    def clients_per_host(self) -> dict[str, int]:
        return {}


class FakeSite:
    """The Site protocol over a Script: `machines` are the client machines a bring-up workload is offered."""

    def __init__(self, ledger: Ledger, script: Script, machines: tuple[str, ...] = ()) -> None:
        self.ledger = ledger
        self.script = script
        self.machines = machines

    def pair(self, stack: contextlib.ExitStack, spot: Spot, profile: Profile, params: dict[str, Any]) -> FakePair:
        stack.enter_context(self.script.held(f"pair {spot.tag}"))
        self.script.take("pair", spot.tag)
        params["site"] = "fake"
        return FakePair(self.script, spot)

    def client_machines(self) -> tuple[str, ...]:
        return self.machines

    @contextlib.contextmanager
    def bare_pair(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, params: dict[str, Any], machine: str | None = None
    ) -> Iterator[Tunnel]:
        with self.script.held(f"bare {spot.tag}"):
            self.script.take("bare_pair", f"{spot.tag} on {machine or 'here'}")
            pair = FakePair(self.script, spot)
            with Tunnel(tunnel, pair.topo, self.ledger, spot.workdir, {}) as up:
                yield up

    def fleet(
        self, spot: Spot, tunnel: TunnelRef, profile: Profile, clients: int, *, cpu_cap: bool, probe_interval_s: float
    ) -> Any:  # duck-typed: the part of base.FleetSetup the shapes use
        return FakeFleet(self.script, spot, clients)

    @contextlib.contextmanager
    def watched(self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds) -> Iterator[None]:
        with self.script.held("watched"):
            yield
            figures = self.script.take("watched")
            assert figures is None or isinstance(figures, dict)
            interfered = (figures or {}).get("interfered", 0.0)
            metrics["interfered"] = interfered
            params["interference"] = "a scripted neighbour" if interfered else ""

    def instr_counter(self) -> tuple[str, str] | None:
        return None

    def lost(self) -> list[str]:
        hosts = self.script.take("lost")
        assert hosts is None or isinstance(hosts, list)
        return [str(h) for h in hosts or []]


# ---- workloads, one per shape ------------------------------------------------------------------------


def measured(script: Script, name: str, workdir: Path) -> Measurement:
    """A measurement as the script has it: its figures, or the daemons of the tunnel in `workdir` dying
    during it."""
    outcome = script.take("measure", name)
    if outcome == DIES:
        script.kill(workdir)
        outcome = None
    assert outcome is None or isinstance(outcome, dict)
    return Measurement(metrics=dict(outcome or FIGURES))


class PairWork(Workload[Context, Any]):
    """The client/server pair's workload: its server is held for the window, its measurement scripted."""

    kind = "fake-pair"
    description = "scripted pair workload"
    requires = ()

    def __init__(self, script: Script) -> None:
        self.script = script

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        stack.enter_context(self.script.held("servers"))

    def measure(self, ctx: Context) -> Measurement:
        return measured(self.script, ctx.target.address, ctx.workdir)


class FleetWork(FleetWorkload[Any]):
    """N clients' workload: its measurement scripted."""

    kind = "fake-fleet"
    description = "scripted fleet workload"
    requires = ()

    def __init__(self, script: Script) -> None:
        self.script = script

    def measure(self, ctx: FleetContext) -> Measurement:
        return measured(self.script, f"{ctx.clients} clients", ctx.workdir)


class BringupWork(Workload[BringupContext, Any]):
    """A workload that brings a tunnel up on each client machine (or once here) and measures each."""

    kind = "fake-connect"
    description = "scripted bring-up workload"
    requires = ()
    owns_bringup = True

    def __init__(self, script: Script) -> None:
        self.script = script

    def measure(self, ctx: BringupContext) -> Measurement:
        metrics: dict[str, float | None] = {}
        for n, machine in enumerate(ctx.machines or (None,)):
            with ctx.bring_up(f"b{n}", machine) as tunnel:
                metrics.update(measured(self.script, tunnel.ref.label, tunnel.workdir).metrics)
                metrics[f"setup_s.{n}"] = tunnel.setup_s
        return Measurement(metrics=metrics)


WORKLOADS: tuple[type[Workload[Any, Any]], ...] = (PairWork, FleetWork, BringupWork)


# ---- a run on the fake site --------------------------------------------------------------------------


class Bench:
    """A runner on a fake site, its store and its script; the workloads above registered by kind."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **redo: Any) -> None:
        monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
        self.script = Script()
        for cls in WORKLOADS:
            monkeypatch.setitem(workloads.REGISTRY, cls.kind, cls(self.script))  # type: ignore[call-arg]
        self.ledger = state.Ledger.open("tbfake01")
        self.site = FakeSite(self.ledger, self.script)
        self.store = Store(tmp_path / "r.db")
        self.run_id = self.store.create_run(
            uid="tbfake01", name="t", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
            scenario={},
        )  # fmt: skip
        policy = RedoPolicy.of(None, True, 10.0) if redo.get("interfered") else RedoPolicy()
        self.setup = Setup(self.ledger, self.site, Window(1, 0), redo=policy)
        self.runner = Runner(self.setup, self.store, self.run_id)
        self.done: list[TrialRecord] = []

    def script_steps(self, **steps: Sequence[object]) -> None:
        """What each step does from now on (replacing its earlier script)."""
        self.script.steps.update({step: list(outcomes) for step, outcomes in steps.items()})

    @staticmethod
    def case(kind: str = PairWork.kind, label: str = "a") -> Case:
        """A case of `kind` through the fake tunnel `label` (a fleet's: 3 clients)."""
        clients = 3 if kind == FleetWork.kind else 1
        return Case.of(fake_tunnel(label), Profile(name="lan", emulated=False), kind, 1, "up", clients)

    def trial(self, kind: str = PairWork.kind, seq: int = 1) -> PlannedTrial:
        """A cold trial of `kind` (PlannedTrial.window 0)."""
        return PlannedTrial(seq, self.case(kind), 1)

    def cold(self, kind: str = PairWork.kind) -> TrialRecord:
        """One cold trial through the runner (its retries included)."""
        return self.runner.run_trial(self.trial(kind))

    def warm(self, labels: Sequence[str], windows: int) -> list[TrialRecord]:
        """A warm block of `windows` rounds over the tunnels `labels`, in planned order; its records as the
        block reports them."""
        cases = {label: self.case(label=label) for label in labels}
        block = [
            PlannedTrial(n, cases[label], r, block=1, window=n)
            for n, (r, label) in enumerate(((r, lb) for r in range(1, windows + 1) for lb in labels), start=1)
        ]
        warm.run_block(self.setup, block, lambda pt: None, lambda pt, rec: self.done.append(rec))
        return self.done

    def stored(self) -> list[TrialRecord]:
        return self.store.trials(self.run_id, with_series=False)

    def close(self) -> None:
        self.store.close()
