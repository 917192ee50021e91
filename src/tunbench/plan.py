"""The matrix of cases and the order trials run in (pure).

Trials are interleaved: every repetition (a round) visits every case once, in a freshly shuffled order
(seeded), so drift, heat and background noise spread over all tunnels instead of biasing the ones measured
last. By default a round is made of blocks: the cases that differ only in their tunnel (same profile,
workload, flows, direction, clients, variant) run next to each other, and the blocks' order is shuffled
too. The tunnels of one block are then measured seconds apart, under the same host conditions: compare
pairs them by round (a paired design), so slow drift cancels instead of widening the comparison.

The order inside a block is counterbalanced, not drawn afresh each round: over every k rounds (k tunnels
in the block) each tunnel runs once in each position (the k rotations of a shuffled order, in a shuffled
sequence; for two tunnels AB and BA, in random order, every two rounds). An effect of the position in a
block (the second trial of a block runs on warmer caches, or after the first one's teardown) then falls on
every tunnel equally after each such cycle, and by at most one block's worth in between, instead of on
whichever tunnel the coin put second more often.

Warm alternation (`warm` > 1 windows): a block then covers `warm` consecutive rounds of one block key, and
its tunnels are brought up once, side by side, for the whole block (trial/warm.py): each trial of it is a measured
window on running tunnels (PlannedTrial.window), A B B A ..., counterbalanced as above, with no set-up or
tear-down between windows. Workloads that bring their tunnels up themselves or run many clients stay cold.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from tunbench.config.schema import Scenario
from tunbench.link.fault_cost import bringup_fault_s
from tunbench.link.profile import Profile
from tunbench.results import CaseKey
from tunbench.sites.base import SiteChoice
from tunbench.tunnels.registry import TunnelRef


@dataclass(frozen=True)
class Case(CaseKey):
    """A case as the plan holds it: its CaseKey (what a stored trial names it by, and what it is compared
    and hashed by), with the tunnel reference and the link profile its label and profile name come from.
    Build it with `of`, which takes those names from them."""

    tunnel: TunnelRef = field(kw_only=True, compare=False)
    link: Profile = field(kw_only=True, compare=False)

    def __post_init__(self) -> None:
        if (self.label, self.profile) != (self.tunnel.label, self.link.name):
            raise ValueError(f"case {self.label}/{self.profile} built from {self.tunnel.label}/{self.link.name}")

    @classmethod
    def of(
        cls,
        tunnel: TunnelRef,
        link: Profile,
        workload: str,
        flows: int = 1,
        direction: str = "-",
        clients: int = 1,
        variant: str = "",
        cores: int = 0,
    ) -> Case:
        """The case of `workload` through `tunnel` over `link`, on its axes (the multi-client workloads':
        how many clients and the storm's variant, 1 and "" for every other workload; the CPUs each side is
        placed on, 0 off the cores axis)."""
        return cls(
            tunnel.label, link.name, workload, flows, direction, clients, variant, cores, tunnel=tunnel, link=link
        )

    @property
    def key(self) -> CaseKey:
        """The plain key, equal to a stored trial's `case` (a Case compares equal only to a Case)."""
        return CaseKey(
            self.label, self.profile, self.workload, self.flows, self.direction, self.clients, self.variant, self.cores
        )

    @property
    def fault_s(self) -> float:
        """The seconds the profile's counted faults add to each bring-up of this tunnel (link/fault_cost.py)."""
        spec = self.tunnel.adapter.spec
        return bringup_fault_s(self.link.faults, spec.messages, spec.ready_timeout_s)

    @property
    def title(self) -> str:
        from tunbench import workloads

        return workloads.case_title(self)


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    case: Case
    repetition: int
    block: int = 0
    """Consecutive trials with the same number form a block (the paired tunnels of one case in one round;
    with order "shuffled", a whole round): a run may stop early only between blocks (Runner's stop check)."""
    window: int = 0
    """0: a cold trial (its own bring-up); k >= 1: the k-th trial of a warm block, measured on tunnels the
    block brought up once (one bring-up per tunnel per block)."""

    @property
    def warm(self) -> bool:
        """A window of a warm block (measured on a tunnel the block keeps up), not a cold trial."""
        return self.window > 0

    @property
    def reuses_bringup(self) -> bool:
        """A later window of a warm block: no bring-up or tear-down of its own."""
        return self.window > 1


def expand(
    tunnels: list[TunnelRef],
    profiles: list[Profile],
    flows: list[int],
    directions: list[str],
    kinds: Sequence[str],
    options: Mapping[str, BaseModel] | None = None,
    cores: Sequence[int] = (),
) -> list[Case]:
    """Profiles x workloads x tunnels x the workload's own axes (a latency probe has no flows/direction).
    A workload that cannot cross a tunnel's layer (UDP through a TCP port forward) skips that tunnel.

    A workload with a `clients` axis sweeps the client counts its options give (Case.clients) instead of
    flows, a `variant` axis their variants (Case.variant), both by Workload.sweeps; it skips tunnels whose
    adapter has no [multi] table (e.g. direct). `cores` (the cores axis, docs/scaling.md) crosses the cases of
    the workloads measured on the client/server pair; () leaves every case off that axis (cores 0)."""
    from tunbench import workloads

    out: list[Case] = []
    for p in profiles:
        for kind in kinds:
            w = workloads.get(kind)
            fs = flows if "flows" in w.axes else [1]
            ds = directions if "direction" in w.axes else ["-"]
            cs, vs = w.sweeps((options or {}).get(kind) or w.options(None))
            ns = list(cores) if cores and w.pair() else [0]
            for t in tunnels:
                if t.adapter.spec.layer not in w.layers:
                    continue
                if "clients" in w.axes and t.adapter.spec.multi is None:
                    continue
                if ip_refusal(t, w.fleet):
                    continue
                out.extend(
                    Case.of(t, p, kind, f, d, c, v, n) for n in ns for f in fs for d in ds for c in cs for v in vs
                )
    return out


def skipped(tunnels: list[TunnelRef], kinds: Sequence[str]) -> list[tuple[str, str, str]]:
    """The (tunnel label, workload, why) pairs `expand` leaves out, to tell the user instead of dropping
    them silently."""
    from tunbench import workloads

    out: list[tuple[str, str, str]] = []
    for kind in kinds:
        w = workloads.get(kind)
        for t in tunnels:
            if why := w.layer_problem(t.adapter.spec.layer):
                out.append((t.label, kind, why))
            elif "clients" in w.axes and t.adapter.spec.multi is None:
                if t.name != "direct":  # (the direct baseline has no many-client form: not worth a note)
                    out.append((t.label, kind, "the adapter has no [multi] table (one server, many clients)"))
            elif refusal := ip_refusal(t, w.fleet):
                out.append((t.label, kind, refusal))
    return out


def ip_refusal(t: TunnelRef, fleet: bool) -> str | None:
    """Why the tunnel cannot run this workload with the run's IP families (underlay / overlay), or None."""
    if fleet and "ipv6" in (t.underlay, t.overlay):
        return "the many-client workloads run over IPv4 only (underlay and overlay)"
    return t.ip_refusal()


def block_key(case: Case) -> tuple[object, ...]:
    """What a case shares with the cases it is paired with: everything but its tunnel."""
    return (case.profile, case.workload, case.flows, case.direction, case.clients, case.variant, case.cores)


def interleave(cases: list[Case], repeat: int, seed: int, *, blocks: bool = True, warm: int = 1) -> list[PlannedTrial]:
    """`repeat` rounds of every case. blocks=True: each round is the blocks of block_key in a shuffled
    order, each block's tunnels in a counterbalanced order (the module docstring); blocks=False: each round
    one shuffle of all cases (and one block). warm > 1 (with blocks): each block key's rounds are taken
    `warm` at a time into one warm block (the module docstring), for the workloads that allow it."""
    rng = random.Random(seed)
    out: list[PlannedTrial] = []
    groups: dict[tuple[object, ...], list[Case]] = {}
    for c in cases:
        groups.setdefault(block_key(c), []).append(c)
    pending: dict[tuple[object, ...], list[list[Case]]] = {k: [] for k in groups}
    block = 0
    step = warm if blocks and warm > 1 else 1
    for first in range(1, repeat + 1, step):
        reps = range(first, min(repeat, first + step - 1) + 1)
        if not blocks:
            order = list(cases)
            rng.shuffle(order)
            block += 1
            out.extend(PlannedTrial(len(out) + 1, c, first, block) for c in order)
            continue
        keys = list(groups)
        rng.shuffle(keys)
        for k in keys:
            windows = step > 1 and warm_capable(groups[k][0])
            for i, rep in enumerate(reps, start=1):
                if not pending[k]:
                    pending[k] = counterbalanced(groups[k], rng)
                if i == 1 or not windows:
                    block += 1
                out.extend(
                    PlannedTrial(len(out) + 1, c, rep, block, window=i if windows else 0) for c in pending[k].pop()
                )
    return out


def warm_capable(case: Case) -> bool:
    """Whether a case can be measured in warm windows: a client/server pair workload (not one that brings
    its tunnels up itself, nor a many-client one)."""
    from tunbench import workloads

    return workloads.get(case.workload).pair()


def counterbalanced(block: list[Case], rng: random.Random) -> list[list[Case]]:
    """The next len(block) orders of one block: the rotations of a shuffled order, shuffled, so each case
    runs once in each position over them (AB and BA, in random order, for two cases)."""
    first = list(block)
    rng.shuffle(first)
    orders = [first[i:] + first[:i] for i in range(len(first))]
    rng.shuffle(orders)
    return orders


@dataclass(frozen=True)
class RunPlan:
    """Everything a run will do, resolved and validated, before anything exists (`--dry-run` prints it);
    session.preflight.prepare builds it once, and nothing changes it after."""

    scenario: Scenario
    source: str
    refs: list[TunnelRef]
    profiles: list[Profile]
    options: dict[str, BaseModel]
    cases: list[Case]
    trials: list[PlannedTrial]
    expected: list[float]  # seconds, per trial
    skipped: list[tuple[str, str, str]]  # (tunnel label, workload, why)
    notes: list[str]  # what a dry run could not check (missing programs)
    flamegraphs: bool = False
    commit: str = ""  # the build's commit (`tunbench run --commit`), for `tunbench history`
    branch: str = ""  # its branch (`--branch`)
    site: SiteChoice = field(kw_only=True)  # where the roles run: this machine (each side's CPUs) or --hosts
    # with count_instructions, the counter that counts them ("perf" or "callgrind", perf/hwinstr.py) and why
    instr_counter: str = field(default="", kw_only=True)
    instr_why: str = field(default="", kw_only=True)

    @property
    def total_s(self) -> float:
        return sum(self.expected)

    @property
    def warm(self) -> int:
        """Windows per bring-up of the warm blocks (`[run] warm`, `--warm`); 1: every trial is cold."""
        return self.scenario.run.warm
