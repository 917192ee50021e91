"""The workload interface: what the runner needs from a traffic generator.

A workload starts its servers in `prepare` (outside the measured window), then `measure` runs inside the
window while the tunnel's processes are sampled, and returns plain numbers. Parsing tool output stays in
pure functions of each module (tested on committed outputs).
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from tunbench.host.ledger import Ledger
from tunbench.host.place import Place
from tunbench.link.profile import Profile
from tunbench.metrics import MetricSpec
from tunbench.metrics.core import THROUGHPUT
from tunbench.results import TrialRecord
from tunbench.sites.base import FleetSetup
from tunbench.tunnels.handshakes import HandshakeReader
from tunbench.tunnels.tunnel import Placed, Target, Tunnel
from tunbench.units import Window, fmt, mbit

TRIAL_SETUP_S = 1.5  # namespaces, tunnel bring-up and teardown of a typical trial on this kind of host


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseAxes(Protocol):
    """A case's coordinates that a workload reads (results.CaseKey, and so plan.Case, has them): parallel flows
    and direction, or, for the multi-client workloads, the client count and the storm variant."""

    @property
    def flows(self) -> int: ...

    @property
    def direction(self) -> str: ...

    @property
    def clients(self) -> int: ...

    @property
    def variant(self) -> str: ...


@dataclass(frozen=True)
class Axes:
    """Plain CaseAxes (a case's neutral values by default: one flow, no direction, one client, no variant)."""

    flows: int = 1
    direction: str = "-"
    clients: int = 1
    variant: str = ""


@dataclass(frozen=True)
class Column:
    """One column of a workload's own table: its header, the metric key it shows (several joined by "|"
    are shown as "a / b") and the unit its value is written in (tunbench.units.fmt)."""

    header: str
    key: str
    unit: str


@dataclass(frozen=True)
class Generator:
    """What a workload's traffic generator records about itself, by stored metric name, for the layers
    that check it without knowing the workload: the report's generator-bound warning (`bound`, `cpu`,
    `hint`) and the trial's byte cross-checks (`payload_bytes`, `sent_bytes`, monitor/crosscheck.py)."""

    program: str  # its program, as a warning names it
    bound: str  # 1.0: the generator itself was the bottleneck
    cpu: tuple[str, ...]  # its own CPU on each side, % of one core
    hint: str  # what to do when it was the bottleneck
    payload_bytes: str  # "{direction}": the bytes its receiver counted in the measured seconds
    sent_bytes: str  # "{direction}": the sender's bytes over the whole test (warm-up included)

    def byte_keys(self) -> dict[str, tuple[str, str]]:
        """direction -> (payload bytes, sent bytes) metric names, for the byte cross-checks."""
        return {
            d: (self.payload_bytes.format(direction=d), self.sent_bytes.format(direction=d)) for d in ("up", "down")
        }


@dataclass(frozen=True)
class Scaling:
    """One scaling chart of a fleet workload (its metric against the client count, report/html/fleet.py):
    the metric, its display scale (value / scale), the chart id's suffix, the title, the y-axis title and
    the hover number format.

    The workload's own, not the metric's declaration: a declaration's chart hint (tunbench.metrics.Chart) is a
    unit and a factor, while this chart needs a title, an axis title and a hover format per key (one family,
    clients.{on}{proto}.aggregate_bps, is charted twice as "UDP" and "TCP"), and which keys are charted, in
    which order, is the workload's choice. Its values are divided by ``scale``: the hint's factor (1e-6 for
    Mbit/s) would multiply, and x * 1e-6 differs from x / 1e6 in the last bit for about a third of values."""

    metric: str
    scale: float
    slug: str
    title: str
    ytitle: str
    fmt: str


@dataclass(frozen=True)
class ReadySeries:
    """A fleet workload's per-client ready times, by stored series name: the CDF (x: seconds, y: fraction
    ready) and, for stores that lack it, the raw ready time of each client (x: client, y: seconds)."""

    cdf: str
    by_client: str


@dataclass
class Context:
    """Everything a workload may use during one trial."""

    topo: Placed
    target: Target
    ledger: Ledger
    workdir: Path
    title: str
    flows: int
    direction: str
    window: Window  # the measured seconds and the warm-up before them
    options: BaseModel
    client: Place  # where the workload's client runs (the tunnel client's namespace or host)
    server: Place  # where its server runs
    server_port: int = 5201  # where the workload's server listens in the server namespace ({iperf_port})
    layer: str = "l3"  # the tunnel's layer: UDP workloads need an L3 tunnel (or direct)
    # the server's underlay address ({server_addr}): what reaches the server's place without the tunnel, for
    # a generator's own control connection (netperf's, when its data goes through an L4 proxy)
    underlay_server: str = ""
    # (server clock - client clock, its uncertainty) in seconds when the two are different hosts, else None
    clock_skew: tuple[float, float] | None = None
    # the tunnel's handshake counter where its adapter declares one (docs/adapters.md, "Handshakes"); None:
    # it declares none
    handshakes: HandshakeReader | None = None
    # the case is the no-tunnel baseline (`direct`): a bulk workload may spread its generator over processes
    baseline: bool = False
    # takes a sample of the roles' CPU now and gives its time (time.monotonic()): the edges of a Part. The
    # trial shape sets it to its sampler's mark for each measured window; outside one, the clock alone
    mark: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Part:
    """A stretch of a workload's call whose tunnel CPU is accounted on its own, per unit of work done in it:
    the pps ladder's step at the rate found for one datagram size, per packet delivered. Its edges come from
    `Context.mark`, so each role's sampler holds a sample at both and the figure is read, not interpolated.
    `keys`: role -> the metric key its CPU seconds per unit go under (a role without one is not recorded)."""

    start: float  # time.monotonic()
    end: float
    units: float  # the work done in it (packets delivered)
    keys: Mapping[str, str]


@dataclass
class Measurement:
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    streams: list[tuple[int, str, float, int | None]] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    # the measured part of the call, as (start, end) in time.monotonic(): e.g. iperf3's seconds after its
    # --omit warm-up, without connecting and the result exchange. The runner takes the CPU figures over
    # this window (the whole call's are kept beside them); None: the whole call was measured.
    window: tuple[float, float] | None = None
    # what the workload's time series cover, as (start, end) in time.monotonic(), their t = 0 at its start,
    # where that is not `window` (rrul: its load's measured seconds, while its CPU is the whole call's).
    # The runner puts the emulator's queue occupancy on this time base; None: `window`, else the whole call.
    series_span: tuple[float, float] | None = None
    # what the trial's params should record about how it was measured (e.g. the traffic generator)
    params: dict[str, Any] = field(default_factory=dict)
    # stretches of the call whose tunnel CPU the trial shape accounts per unit of work (Part)
    parts: list[Part] = field(default_factory=list)


@dataclass
class FleetContext:
    """Everything a workload of N clients may use during one trial: the runner has built the switched
    topology, the cgroups and the tunnel server (`env`); the workload brings the clients up (`env.fleet`)
    at its own pace and measures."""

    env: FleetSetup  # this machine's namespaces, or the run's two hosts (sites/)
    ledger: Ledger
    workdir: Path
    title: str
    label: str
    profile: str
    clients: int
    variant: str
    direction: str
    window: Window  # the measured seconds and the warm-up before them
    options: BaseModel

    @property
    def axes(self) -> Axes:
        return Axes(direction=self.direction, clients=self.clients, variant=self.variant)


@dataclass
class BringupContext:
    """For a workload whose measurement is the bring-up itself (connect): `bring_up(name, machine)` is the
    site's own pair bring-up (fresh namespaces or places, link and tunnel, in a sub-directory `name` of the
    trial's directory) with its client on `machine`, as a context manager yielding the tunnel once it is up.
    `machines`: the client machines the site offers, by name (a run's client hosts); () for this machine
    alone, which bring_up names None."""

    bring_up: Callable[[str, str | None], AbstractContextManager[Tunnel]]
    ledger: Ledger
    workdir: Path
    title: str
    window: Window  # the measured seconds and the warm-up before them
    options: BaseModel
    machines: tuple[str, ...] = ()


C = TypeVar("C", Context, FleetContext, BringupContext, default=Context)
Opt = TypeVar("Opt", bound=BaseModel, default=NoOptions)


def axes_title(kind: str, axes: tuple[str, ...], case: CaseAxes) -> str:
    """A case named by its workload's kind and its axes (Workload.title's default): 'latency',
    'rrul · up · 4 flows', 'storm · 50 clients · all-at-once'."""
    parts = [kind]
    if "clients" in axes:
        parts += [f"{case.clients} clients", case.variant or case.direction]
    elif case.direction != "-":
        parts += [case.direction, f"{case.flows} flow" + ("s" if case.flows > 1 else "")]
    return " · ".join(parts)


def cell(metrics: dict[str, float | None], column: Column) -> str:
    """A column's value(s) in one trial's metrics, written in its unit ("a / b" for several keys)."""
    return " / ".join(fmt(metrics.get(k), column.unit) for k in column.key.split("|"))


class Workload(ABC, Generic[C, Opt]):
    """A traffic generator as a plug-in: one file and one line in the registry (workloads/__init__.py).
    The planner, the runner, the reports and `doctor` read what it declares here; none of them knows a
    workload by name."""

    kind: ClassVar[str]
    description: ClassVar[str]
    # the programs it runs: checked before a run, listed by `tunbench doctor`
    requires: ClassVar[tuple[str, ...]] = ("iperf3",)
    # programs only some of its options need, each with the option (rr's sockperf: generator = "sockperf"):
    # `tunbench doctor` lists them apart; `programs` says what a run with given options needs
    optional: ClassVar[tuple[tuple[str, str], ...]] = ()
    # which matrix axes apply: a latency probe has no flows or direction; "clients" and "variant" sweep
    # the values sweeps() takes from the options
    axes: ClassVar[tuple[str, ...]] = ("flows", "direction")
    Options: ClassVar[type[BaseModel]] = NoOptions
    # the layers it can run through (UDP cannot cross a TCP port forward)
    layers: ClassVar[tuple[str, ...]] = ("l3", "l4")
    # it measures one direction at a time: a `bidir` case would fail every trial or measure one way only
    one_way: ClassVar[bool] = False

    # N clients through one tunnel server: the runner builds a FleetContext (switched topology, cgroups,
    # the server up, a readiness probe) instead of the client/server pair, and the workload brings the
    # clients up itself (their timing is what a storm measures)
    fleet: ClassVar[bool] = False
    # the bring-up is what it measures: the runner hands it a BringupContext to bring tunnels up itself
    owns_bringup: ClassVar[bool] = False
    # the tunnel's logs (last 64 KiB of each) are stored with every trial, not only with failed ones: what
    # the tunnel did is part of the answer (whether it came back after a disruption, and how)
    keeps_logs: ClassVar[bool] = False

    def layer_problem(self, layer: str) -> str:
        """Why this workload cannot cross a tunnel of `layer` ("" when it can): the plan's note for the
        tunnels it skips."""
        if layer in self.layers:
            return ""
        return f"{self.kind} needs an L3 tunnel (an L4 proxy forwards TCP connections only: no UDP)"

    def programs(self, options: BaseModel | None) -> tuple[str, ...]:
        """The programs a run with these options (None: the defaults) needs: `requires` unless an option picks
        another generator."""
        return self.requires

    def derive(self, metrics: dict[str, float | None]) -> dict[str, float | None]:
        """Figures it derives from a trial's metrics once the trial's CPU figures are in (its own and the
        window's, monitor/cost.py's per side): rr's CPU per transaction. None by default."""
        return {}

    def profile_problem(self, profile: Profile) -> str:
        """Why this workload has nothing to measure over `profile` ("" when it can run over it)."""
        return ""

    @classmethod
    def on_hosts(cls) -> bool:
        """Whether a run on --hosts can place it (the pair workloads; a fleet says so itself)."""
        return cls.pair()

    @classmethod
    def pair(cls) -> bool:
        """Measured on the one client/server pair (trial/pair.py) (neither a fleet nor its own bring-ups): what warm
        windows, CPU placement, CPU caps and --hosts apply to."""
        return not (cls.fleet or cls.owns_bringup)

    # its traffic generator's own figures (None: it records none), read by the report and the cross-checks
    generator: ClassVar[Generator | None] = None

    # its own table (terminal and HTML): the headline metrics of its cases and a caption. Empty: a bulk
    # throughput workload, whose cases go in the throughput summary (Mbit/s, ×direct, CPU, Mbit/CPU-s)
    columns: ClassVar[tuple[Column, ...]] = ()
    # its own declared metrics that compare judges beyond throughput, CPU per bit and latency in ms, each under
    # a metric kind of compare's (`throughput`, `latency`, `cpu`): compare finds their keys in the trials and
    # takes their family (gate, wide) from the declaration (rr: transactions/s, p99, CPU per transaction; pps:
    # packets/s and CPU per packet per size)
    compared: ClassVar[tuple[tuple[MetricSpec, str], ...]] = ()
    caption: ClassVar[str] = ""

    @property
    def own_table(self) -> bool:
        """Whether its cases get a table of their own instead of rows of the throughput summary."""
        return bool(self.columns)

    def table_columns(self, trials: Sequence[TrialRecord]) -> list[Column]:
        """The columns of its table for these (good) trials; fixed unless a workload's metrics depend on
        its options (udp-search: one column per datagram size)."""
        return list(self.columns)

    def headline(self, rec: TrialRecord) -> str:
        """One good trial's result in a few words (the progress line after each trial)."""
        if self.columns:
            return ", ".join(f"{c.header} {cell(rec.metrics, c)}" for c in self.columns[:3])
        return f"{mbit(rec.metrics.get(THROUGHPUT.name) or 0.0)} Mbit/s"

    def title(self, case: CaseAxes) -> str:
        """What names a case of this workload after its tunnel and profile: 'latency', 'up · 4 flows',
        'storm · 50 clients · all-at-once'."""
        return axes_title(self.kind, self.axes, case)

    def sweeps(self, options: BaseModel) -> tuple[list[int], list[str]]:
        """The client counts and variants its cases sweep (its "clients" and "variant" axes)."""
        return [1], [""]

    def start_tolerance_s(self, options: BaseModel) -> float | None:
        """Between hosts: how far apart the client hosts may start (a coordinated start); None: the
        workload starts its clients without one."""
        return None

    def prepare(self, ctx: Context, stack: contextlib.ExitStack) -> None:
        """Start servers; register their teardown on `stack`."""

    @abstractmethod
    def measure(self, ctx: C) -> Measurement:
        """Run inside the measured window."""

    def timeout_s(self, ctx: Context) -> float:
        """The watchdog: a `measure` call still running after this many seconds fails its trial."""
        axes = Axes(flows=ctx.flows, direction=ctx.direction)
        return self.estimate(axes, ctx.options, ctx.window) + 30.0

    def trial_timeout_s(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        """The watchdog of a fleet workload's whole trial (bring-up of N clients included)."""
        return 2.0 * self.estimate(case, options, window) + 60.0

    def bringups(self, options: BaseModel) -> int:
        """How many times one trial brings its tunnel up (the pair's and a fleet's server: once; a workload
        that brings its pairs up itself says): what a profile's counted faults delay (link/fault_cost.py)."""
        return 1

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        """A rough wall-clock estimate of one trial of `case` (set-up included), for the run's time estimate
        and ETA."""
        return window.total_s + TRIAL_SETUP_S

    def options(self, raw: dict[str, Any] | None) -> BaseModel:
        """The `[workload.<kind>]` table validated against Options (its defaults when there is none)."""
        return self.Options.model_validate(raw or {})

    def opts(self, options: BaseModel) -> Opt:
        """`options` as this workload's own Options type: the runner and the planner only ever pass what
        options() validated, so anything else is a programming error."""
        if not isinstance(options, self.Options):
            raise TypeError(f"{self.kind}: options of type {type(options).__name__}, not {self.Options.__name__}")
        return options  # type: ignore[return-value]


class FleetWorkload(Workload[FleetContext, Opt]):
    """N clients through one tunnel server (the fleet shape, trial/fleet.py): the site sets up the clients'
    topology, cgroups, the tunnel server and a readiness probe as this workload asks, and the workload
    brings the clients up at its own pace."""

    fleet: ClassVar[bool] = True
    # a run between hosts can place it (its server on the server host, its clients on the client host:
    # sites/hosts_fleet.py)
    fleet_on_hosts: ClassVar[bool] = False

    # its charts against the client count (the report's "Many clients" section)
    scaling: ClassVar[tuple[Scaling, ...]] = ()
    # its per-client ready times (the report's time-to-ready CDF); None: it records none
    ready: ClassVar[ReadySeries | None] = None

    @classmethod
    def on_hosts(cls) -> bool:
        return cls.fleet_on_hosts

    def cpu_cap(self, case: CaseAxes) -> bool:
        """Whether the site gives the tunnel server a CPU quota group (host.cgroup.CpuCap) to drive."""
        return False

    def probe_interval_s(self, options: BaseModel) -> float:
        """How often the N-client readiness probe sends its echoes."""
        return 0.1
