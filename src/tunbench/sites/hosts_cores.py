"""The cores axis on hosts (`--cores` with `--hosts`, docs/scaling.md): each tunnel host keeps one CPU for
its traffic generator, so a side may take up to that host's CPUs less one; the run's largest value is the
least of that over the client and server hosts. What each agent reports of its CPUs (remote/agent.py,
`cpus`) is checked here, the placement on each host chosen, and the line the run prints of it. Pure: no
host is asked from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tunbench.errors import ConfigError

KEPT = 1
"""CPUs a tunnel host keeps for its traffic generator (iperf3 and the like), outside the tunnel's cpuset."""


@dataclass(frozen=True)
class HostCpus:
    """What an agent reports of its host's CPUs: those it may place roles on, why it cannot place any ("" when
    it can: host.cgroup.cpuset_refusal), and where its cpusets go (host.cgroup.cpuset_root, as text)."""

    name: str
    cpus: tuple[int, ...]
    refusal: str = ""
    root: str = ""

    @property
    def most_cores(self) -> int:
        """The most CPUs a side may take here: all but the generator's."""
        return max(0, len(self.cpus) - KEPT)


@dataclass(frozen=True)
class HostPlacement:
    """A side's CPUs on its host at one cores value: the tunnel's processes, the generator's (the CPU kept),
    and the emulator's where the host runs one (its egress): the CPUs between where some are left, else
    the generator's."""

    tunnel: str
    generator: str
    link: str = ""

    def agent_cpus(self) -> dict[str, str]:
        """As the agent's place_open / egress_open take it (`cpus=`)."""
        out = {"tunnel": self.tunnel, "generator": self.generator}
        if self.link:
            out["link"] = self.link
        return out


def _text(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


def fewest(hosts: Sequence[HostCpus]) -> HostCpus:
    """The tunnel host that allows the fewest cores (the first such, in the order given)."""
    return min(hosts, key=lambda h: h.most_cores)


def check_cores(
    values: Sequence[int], hosts: Sequence[HostCpus], at: tuple[str, int | None, str]
) -> tuple[int, HostCpus]:
    """The most cores the hosts allow and the host that sets it; ConfigError naming where the axis was given
    (`at`: source, line, key) when a host cannot place roles on CPUs at all, or a value is above the most,
    naming the host and its CPU count."""
    source, line, key = at
    for h in hosts:
        if h.refusal:
            raise ConfigError(f"host {h.name}: {h.refusal}", source=source, line=line, key=key)
    least = fewest(hosts)
    most = least.most_cores
    too_many = [n for n in values if n > most]
    if too_many:
        hint = f"give cores of 1 to {most}" if most >= 1 else "run without cores there"
        raise ConfigError(
            f"cores {too_many[0]}: host {least.name} has {len(least.cpus)} CPU(s) ({_text(least.cpus)}), one kept "
            f"for the traffic generator, so a side there can take at most {most}: {hint}",
            source=source,
            line=line,
            key=key,
        )
    return most, least


def host_placement(cpus: Sequence[int], cores: int, *, emulator: bool = False) -> HostPlacement:
    """A side on a host with these CPUs at `cores`: the tunnel on the first `cores`, the generator on the
    last, and with an `emulator` the emulator on those between, else on the generator's. ValueError when
    the host has fewer than cores + 1 CPUs (check_cores refuses that before the run)."""
    if not 1 <= cores <= len(cpus) - KEPT:
        raise ValueError(f"{cores} core(s) and one for the generator: the host offers {len(cpus)} CPU(s)")
    tunnel, generator = list(cpus[:cores]), list(cpus[-KEPT:])
    rest = list(cpus[cores:-KEPT])
    return HostPlacement(_text(tunnel), _text(generator), _text(rest or generator) if emulator else "")


def cores_line(most: int, least: HostCpus) -> str:
    """What the run says of its choice, e.g. "cores on hosts: up to 1 (host h1 has 2 CPUs, one kept for
    the generator)"."""
    return f"cores on hosts: up to {most} (host {least.name} has {len(least.cpus)} CPUs, one kept for the generator)"


def placement_lines(by_cores: Mapping[int, Mapping[str, tuple[str, HostPlacement]]]) -> list[str]:
    """One line per cores value: each side's host and CPUs, e.g. "cores 1: client on h1 CPU 0 (generator
    CPU 1), server on h2 CPU 0 (generator CPU 1)"."""
    out = []
    for n, sides in by_cores.items():
        parts = []
        for role, (host, p) in sides.items():
            link = f", emulator CPU {p.link}" if p.link else ""
            parts.append(f"{role} on {host} CPU {p.tunnel} (generator CPU {p.generator}{link})")
        out.append(f"cores {n}: " + ", ".join(parts))
    return out
