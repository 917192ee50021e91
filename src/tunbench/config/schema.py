"""The scenario: what to measure. Equivalent to `tunbench run` flags (flags override the file)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    field_validator,
    model_validator,
)

from tunbench.config.cpuset import CpuSetting
from tunbench.topology.addresses import Family
from tunbench.topology.settings import check_congestion_control
from tunbench.units import Window

Direction = Literal["up", "down", "bidir"]
_SYSCTL_VALUE = re.compile(r"^[A-Za-z0-9_. -]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunSection(_Strict):
    tunnels: list[str] = Field(default_factory=lambda: ["wireguard-go"], min_length=1)
    profiles: list[str] = Field(default_factory=lambda: ["lan"], min_length=1)
    repeat: int = Field(default=3, ge=1, le=1000)
    direct: bool = True
    seed: int = Field(default=1, ge=0, le=2**63 - 1)  # tunbench-link takes seed + repetition as a u64
    name: str = ""
    stop_on_error: bool = False
    # "blocks": each round runs a case's tunnels next to each other (counterbalanced per block), so compare can
    # pair them; "shuffled": each round one shuffle of every case (the order before blocks existed)
    order: Literal["blocks", "shuffled"] = "blocks"
    # warm alternation: this many consecutive rounds of a block share one bring-up of its tunnels, each round
    # a measured window on the running tunnels (plan.py); 1: every trial brings its tunnel up (cold)
    warm: int = Field(default=1, ge=1, le=100)
    # CPU placement of each side's processes (host.cgroup.RoleCgroup, docs/precision.md): "off"; "split" (client
    # side, server side, emulator on CPUs of their own where there are enough); or a map of CPU lists
    cpuset: Annotated[CpuSetting, PlainValidator(CpuSetting.parse), PlainSerializer(CpuSetting.stored)] = CpuSetting()
    # a trial whose measured window lost at least this share of all CPUs' time to steal (the hypervisor ran
    # someone else: `host.steal_pct`) is void and measured again, at most 5 times in all; None: kept, flagged
    redo_steal_pct: float | None = Field(default=None, gt=0, le=100)
    # a window counts as interfered (monitor/interference.py) when another tunbench run was live, the CPU used
    # by processes that are neither this run's nor the kernel's reached foreign_cpu_pct (% of one core), or
    # steal reached 5% (or redo_steal_pct); redo_interfered: measure such a trial again (at most 5 attempts)
    foreign_cpu_pct: float = Field(default=10.0, gt=0, le=100_000)
    redo_interfered: bool = False
    # counted work per role over each measured window (perf stat: syscalls, context switches, migrations, page
    # faults; monitor/work.py, docs/counted-work.md); off by default, its cost is measured in
    # docs/benchmarks/counted-work.md
    count_work: bool = False
    # the tunnel's own instructions per role over each workload call, counted by callgrind (valgrind) or perf: a cost
    # figure the box's noise does not reach (perf/instructions.py, docs/work-gate.md); the daemons then run
    # under valgrind, far slower, so `run --count-instructions` has iperf3 offer a fixed rate both builds
    # sustain
    count_instructions: bool = False
    # which counts them (perf/hwinstr.py): "perf" (the CPU's own count of `instructions:u`, natively, where perf
    # can read a hardware counter), "callgrind" (by simulation, anywhere), or "auto": perf where it can, else
    # callgrind; each trial records which counted it (params.instr_counter)
    instr_counter: Literal["auto", "perf", "callgrind"] = "auto"


class WorkloadSection(BaseModel):
    """Common settings; per-kind options go in a sub-table named after the kind (`[workload.udp]`),
    validated by that workload (config/load.py)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: list[str] = Field(default_factory=lambda: ["iperf3"], min_length=1)
    flows: list[int] = Field(default_factory=lambda: [1], min_length=1)
    # the cores axis (docs/scaling.md): each side's processes placed on this many CPUs, crossed with flows;
    # [] places nothing per case ([run] cpuset applies)
    cores: list[int] = Field(default_factory=list)
    directions: list[Direction] = Field(default_factory=lambda: list[Direction](["up"]), min_length=1)
    # whole seconds: iperf3 (3.12) truncates fractional -t/-O, and -t 0 means "forever"
    duration_s: int = Field(default=10, ge=1, le=3600)
    omit_s: int = Field(default=1, ge=0, le=600)

    @property
    def window(self) -> Window:
        """The measured window every trial of the run gets."""
        return Window(self.duration_s, self.omit_s)

    @field_validator("kind", mode="before")
    @classmethod
    def _kinds(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("flows")
    @classmethod
    def _flows(cls, v: list[int]) -> list[int]:
        for f in v:
            if not 1 <= f <= 128:
                raise ValueError(f"flows must be between 1 and 128 (got {f})")
        return v

    @field_validator("cores")
    @classmethod
    def _cores(cls, v: list[int]) -> list[int]:
        for n in v:
            if not 1 <= n <= 1024:
                raise ValueError(f"cores must be between 1 and 1024 (got {n})")
        if len(set(v)) != len(v):
            raise ValueError(f"cores lists a value twice ({', '.join(map(str, v))})")
        return sorted(v)


class TopologySection(_Strict):
    mtu: int = Field(default=1500, ge=576, le=65535)
    ipv6: bool = True  # the underlay link also gets its IPv6 addresses (2001:2::1, 2001:2::2)
    congestion_control: str | None = None  # pinned in tunbench's namespaces; None: the host's default
    # the family tunnels run over (`--ip 6`), and the one L3 tunnels carry inside (docs/adapters.md)
    underlay: Family = "ipv4"
    overlay: Family = "ipv4"

    @field_validator("congestion_control")
    @classmethod
    def _cc(cls, v: str | None) -> str | None:
        return None if v is None else check_congestion_control(v)

    @model_validator(mode="after")
    def _v6_link(self) -> TopologySection:
        if self.underlay == "ipv6" and not self.ipv6:
            raise ValueError("underlay = 'ipv6' needs the link's IPv6 addresses: remove ipv6 = false")
        return self


def _sysctl_key(key: str) -> str:
    if not re.fullmatch(r"net(\.[a-z0-9_]+)+", key):
        raise ValueError("only per-namespace net.* sysctls can be set")
    return key


def _sysctl_value(value: str) -> str:
    if not _SYSCTL_VALUE.match(value):
        raise ValueError(f"value {value!r} may only have letters, digits, spaces, dots, dashes")
    return value


SysctlKey = Annotated[str, AfterValidator(_sysctl_key)]
SysctlValue = Annotated[str, AfterValidator(_sysctl_value)]


class Scenario(_Strict):
    run: RunSection = RunSection()
    workload: WorkloadSection = WorkloadSection()
    topology: TopologySection = TopologySection()
    sysctl: dict[SysctlKey, SysctlValue] = {}
    # roles on remote hosts (docs/multi-host.md); checked by tunbench.remote.inventory.inventory_from_table
    hosts: dict[str, Any] | None = None
