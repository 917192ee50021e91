"""A third site, kept beside its test: what adding a site takes (docs/architecture.md, "Adding a site").

`toy` places both roles on one scripted machine: its places answer every command from a table and start
nothing. It is this file's module (its choice, site, pair, topology and places) plus one registration line
(`SITES["toy"] = ...` in sites/registry.py; here monkeypatched in), and nothing else changes: the session
plans on it, describes it, refuses through it what it cannot do, and opens it for a run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tunbench import session
from tunbench.config.load import load_scenario
from tunbench.errors import ConfigError, TrialError
from tunbench.host.cgroup import RoleCgroup
from tunbench.host.ledger import Ledger
from tunbench.host.place import Completed, Place, Proc, completed
from tunbench.link.profile import Profile
from tunbench.monitor.callgrind import InstrWindow
from tunbench.monitor.interference import Thresholds
from tunbench.monitor.sampler import RoleCost, Sampler
from tunbench.monitor.work import RoleCount
from tunbench.plan import RunPlan
from tunbench.sites import base, registry
from tunbench.sites.needs import SiteNeeds
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.build import TopologySpec
from tunbench.tunnels.registry import TunnelRef
from tunbench.tunnels.tunnel import Tunnel

SRC = Path(__file__).resolve().parents[2] / "src" / "tunbench"

# ---- the toy site: what a new site's module holds ---------------------------------------------------------


@dataclass
class ToyPlace:
    """A role's place on the toy machine: commands answer from `script` (argv[0] -> stdout), and are kept."""

    label: str
    workdir: Path
    machine: str
    script: Mapping[str, str] = field(default_factory=dict)
    ran: list[list[str]] = field(default_factory=list)

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
        self.ran.append(list(argv))
        return completed(argv, 0, self.script.get(argv[0], ""), "")

    def spawn(
        self, argv: Sequence[str], *, what: str, log_name: str, env: Mapping[str, str] | None = None, role: str = ""
    ) -> Proc:
        raise TrialError(f"the toy machine starts no daemon ({what})")

    def port_open(self, port: int, proto: str = "tcp") -> bool:
        return False

    def listening(self, proto: str = "tcp") -> set[int]:
        return set()

    def exists(self, path: str) -> bool:
        return False

    def put_files(self, files: Mapping[str, tuple[bytes, int]]) -> None:
        pass

    def read(self, rel: str) -> bytes | None:
        return None

    def pids(self, role: str, procs: Sequence[Proc]) -> list[int]:
        return []

    def rss(self, role: str, procs: Sequence[Proc]) -> list[int]:
        return []

    def wait_exits(self, procs: Sequence[Proc], timeout_s: float) -> list[float | None]:
        return [None for _ in procs]

    def stop(self, procs: Sequence[Proc]) -> None:
        pass


@dataclass
class ToyTopology:
    """The toy pair's topology (sites.base.PairTopology): the tunbench address plan, its places."""

    prefix: str
    spec: TopologySpec
    places: dict[str, ToyPlace]
    addr: AddressPlan = field(default_factory=AddressPlan)
    sysctls_applied: dict[str, dict[str, str]] = field(default_factory=dict)

    def ifname(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def place(self, role: str) -> Place | None:
        return self.places[role]

    def ns_name(self, role: str) -> str:
        return ""  # the machine's own namespace

    def effective_settings(self) -> dict[str, Any]:
        return {"mtu": self.spec.mtu}


@dataclass(frozen=True)
class ToyPair:
    """A pair on the toy machine (sites.base.Pair): nothing sampled, counted or capped here."""

    topo: ToyTopology

    @property
    def places(self) -> dict[str, Place]:
        return dict(self.topo.places)

    @property
    def cgroups(self) -> dict[str, RoleCgroup]:
        return {}

    def clock_skew(self) -> tuple[float, float] | None:
        return None

    def cpu_cap(self, stack: contextlib.ExitStack, role: str, period_us: int) -> base.Cap:
        raise TrialError("the toy machine caps no CPU")

    def counted_elsewhere(self, tunnel: Tunnel) -> dict[str, Callable[[], RoleCount]]:
        return {}

    def instructions_elsewhere(
        self, tunnel: Tunnel, counter: str = "callgrind"
    ) -> dict[str, Callable[[str], InstrWindow]]:
        return {}

    def start_schedule(self) -> None:
        pass

    def counters(self, metrics: dict[str, float | None]) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def sampled_roles(self, tunnel: Tunnel) -> base.SampledRoles:
        return {}

    def remote_sampling(
        self, tunnel: Tunnel, sampler: Sampler
    ) -> contextlib.AbstractContextManager[dict[str, RoleCost]]:
        return contextlib.nullcontext({})

    def link_stats(self, final: bool) -> dict[str, Any] | None:
        return None

    def link_clock_offset_s(self) -> float | None:
        return None

    def underlay(self) -> tuple[dict[str, str], bool] | None:
        return None


class ToySite:
    """Both roles on the toy machine `machine` (sites.base.Site); no fleet, no bare pair."""

    def __init__(self, ledger: Ledger, machine: str) -> None:
        self.ledger = ledger
        self.machine = machine

    def pair(self, stack: contextlib.ExitStack, spot: base.Spot, profile: Profile, params: dict[str, Any]) -> ToyPair:
        places = {role: ToyPlace(f"toy {self.machine}", spot.workdir, self.machine) for role in ("client", "server")}
        params["toy"] = self.machine
        return ToyPair(ToyTopology(f"{self.ledger.prefix}-{spot.tag}", spot.spec, places))

    def client_machines(self) -> tuple[str, ...]:
        return (self.machine,)

    def bare_pair(
        self, spot: base.Spot, tunnel: TunnelRef, profile: Profile, params: dict[str, Any], machine: str | None = None
    ) -> contextlib.AbstractContextManager[Tunnel]:
        raise TrialError("the toy machine brings no tunnel up")  # refused when the choice settled

    def fleet(
        self,
        spot: base.Spot,
        tunnel: TunnelRef,
        profile: Profile,
        clients: int,
        *,
        cpu_cap: bool,
        probe_interval_s: float,
    ) -> base.FleetSetup:
        raise TrialError("the toy machine holds no fleet")  # refused when the choice settled

    def watched(
        self, metrics: dict[str, float | None], params: dict[str, Any], limits: Thresholds
    ) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def instr_counter(self) -> tuple[str, str] | None:
        return None

    def lost(self) -> list[str]:
        return []


@dataclass(frozen=True)
class ToyChoice:
    """The toy site as a plan holds it (sites.base.SiteChoice): its machine's name."""

    machine: str = "toy"
    programs_here = False

    def settle(self, needs: SiteNeeds) -> ToyChoice:
        if needs.not_pair:
            raise ConfigError(
                f"workload {needs.not_pair!r} needs many clients or its own bring-ups: not on the toy site",
                source=needs.source,
                key="workload.kind",
            )
        if needs.emulated:
            raise ConfigError(
                f"profile(s) {', '.join(needs.emulated)} emulate a link: the toy site has none",
                source=needs.source,
                key="run.profiles",
            )
        if needs.cpuset.mode != "off":
            raise ConfigError("the toy site places no CPU", source=needs.source, key="run.cpuset")
        return self

    def lines(self) -> list[str]:
        return [f"site: toy machine {self.machine}"]

    def fleet_line(self, clients: int) -> str:
        return ""

    def client_count(self) -> int:
        return 1

    def open(
        self, stack: contextlib.ExitStack, ledger: Ledger, needs: SiteNeeds, provenance: dict[str, Any]
    ) -> ToySite:
        provenance["toy"] = {"machine": self.machine}
        return ToySite(ledger, self.machine)


# ---- its test ---------------------------------------------------------------------------------------------


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registration line, as sites/registry.py would hold it."""
    monkeypatch.setitem(registry.SITES, "toy", lambda where: ToyChoice(where or "toy"))


def prepared(tmp_path: Path, extra: str = "", **run: str) -> RunPlan:
    settings = "".join(f"{k} = {v}\n" for k, v in run.items())
    sc = tmp_path / "s.toml"
    sc.write_text(f'[run]\ntunnels = ["socat"]\n{settings}[workload]\nkind = ["iperf3"]\ndirections = ["up"]\n{extra}')
    scenario, text, source = load_scenario(sc)
    return session.prepare(scenario, source, dry_run=True, text=text, site=registry.choose("toy:box1"))


def members(protocol: type) -> set[str]:
    """What a class must have to implement `protocol`: the methods, properties and annotated attributes of
    it and of the protocols it extends."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__module__ in ("typing", "builtins"):
            continue
        names |= set(vars(cls).get("__annotations__", {}))
        names |= {n for n, v in vars(cls).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return names


def provided(cls: type) -> set[str]:
    """What `cls` has: its attributes, its dataclass fields, and what its constructor keeps (by name)."""
    names = set(dir(cls)) | (set(inspect.signature(cls).parameters))
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    return names


@pytest.mark.parametrize(
    ("protocol", "toy_class"),
    [
        (base.SiteChoice, ToyChoice),
        (base.Site, ToySite),
        (base.Pair, ToyPair),
        (base.PairTopology, ToyTopology),
        (Place, ToyPlace),
    ],
)
def test_the_toy_implements_every_member_of_the_seam(protocol: type, toy_class: type) -> None:
    assert members(protocol), protocol
    assert members(protocol) - provided(toy_class) == set()


def test_with_one_registration_line_the_session_plans_and_describes_the_toy(toy: None, tmp_path: Path) -> None:
    plan = prepared(tmp_path)
    assert plan.site == ToyChoice("box1")
    assert "site: toy machine box1" in session.describe(plan)
    with pytest.raises(ConfigError, match="no site 'tiy': the sites are local, hosts, toy"):
        registry.choose("tiy")


def test_the_toy_refuses_what_it_cannot_do_from_the_plans_needs(toy: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        prepared(tmp_path, profiles='["wan-50ms"]')
    assert e.value.key == "run.profiles" and "the toy site has none" in str(e.value)
    with pytest.raises(ConfigError) as e:
        prepared(tmp_path, cpuset='"split"')
    assert e.value.key == "run.cpuset"


def test_opened_for_a_run_the_toy_gives_the_trial_shapes_its_pair(toy: None, tmp_path: Path) -> None:
    plan = prepared(tmp_path)
    provenance: dict[str, Any] = {}
    ledger = Ledger.__new__(Ledger)
    ledger.prefix = "tbtoy000"
    with contextlib.ExitStack() as stack:
        site = plan.site.open(stack, ledger, session.site_needs(plan), provenance)
        assert provenance == {"toy": {"machine": "box1"}} and site.client_machines() == ("box1",)
        params: dict[str, Any] = {}
        spot = base.Spot("t1", tmp_path, TopologySpec(), link_seed=1)
        pair = site.pair(stack, spot, plan.profiles[0], params)
        assert params == {"toy": "box1"} and pair.topo.place("client") is pair.places["client"]
        assert pair.places["server"].run(["true"]).returncode == 0
        with pytest.raises(TrialError, match="caps no CPU"):
            pair.cpu_cap(stack, "client", 100_000)


def test_nothing_outside_sites_names_a_site() -> None:
    """What lets a site be its module and one registry line: outside sites/, the code imports only the
    seam (sites.base, sites.needs) and the registry, never a site's own module."""
    seam = {"base", "needs", "registry"}
    named = []
    for path in SRC.rglob("*.py"):
        if path.parent.name == "sites":
            continue
        for module in re.findall(r"tunbench\.sites\.(\w+)", path.read_text(encoding="utf-8")):
            if module not in seam:
                named.append(f"{path.relative_to(SRC)}: sites.{module}")
    assert named == []


def conforming(ledger: Ledger, topo: ToyTopology) -> tuple[base.SiteChoice, base.Site, base.Pair, Place]:
    """The toy typed as the seam's protocols: `mypy --strict` on this file checks their signatures too (the
    test above checks that no member is missing)."""
    return ToyChoice(), ToySite(ledger, "toy"), ToyPair(topo), ToyPlace("toy", Path(), "toy")
