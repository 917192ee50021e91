"""The local site's CPU placement: `[run] cpuset` resolved against this machine's CPUs into the CPUs of
each side, refused (naming the key) where it cannot apply, and the line a plan shows of it."""

from __future__ import annotations

from collections.abc import Mapping

from tunbench.errors import ConfigError
from tunbench.host.cgroup import cores_placement, cpuset_refusal, online_cpus, split_placement
from tunbench.sites.needs import SiteNeeds


def resolve_cpuset(needs: SiteNeeds) -> tuple[dict[str, str], str]:
    """`[run] cpuset` as the CPUs of each side on this host, and a note (a shared CPU); refused, naming the
    key, where it cannot apply: workloads that start many clients or their own bring-ups, a host without a
    cpuset controller tunbench may use, CPUs this host does not offer."""
    setting = needs.cpuset
    if setting.mode == "off":
        return {}, ""
    if kind := needs.not_pair:
        raise ConfigError(
            f"CPU placement covers the client/server pair; workload {kind!r} brings up many clients or its "
            "own tunnels: run it with cpuset = 'off'",
            source=needs.source,
            key="run.cpuset",
        )
    if why := cpuset_refusal():
        raise ConfigError(f'{why}; set cpuset = "off"', source=needs.source, key="run.cpuset")
    cpus = online_cpus()
    note = ""
    if setting.mode == "split":
        try:
            placed, note = split_placement(cpus)
        except ValueError as e:
            raise ConfigError(str(e), source=needs.source, key="run.cpuset") from None
    else:
        placed = setting.cpu_lists()
        for role, wanted in setting.roles:
            text = placed[role]
            missing = sorted(set(wanted) - set(cpus))
            if missing:
                raise ConfigError(
                    f"{role} = {text!r}: CPU(s) {', '.join(map(str, missing))} not available here "
                    f"(this host offers {', '.join(map(str, cpus))})",
                    source=needs.source,
                    key="run.cpuset",
                )
    if not needs.emulated:
        placed.pop("link", None)  # no emulator in this run, nothing shares
        note = ""
    return placed, note


def resolve_cores(needs: SiteNeeds) -> dict[int, tuple[dict[str, str], str]]:
    """The cores axis on this host: for each cores value, the CPUs of each side and a note of what shares
    (host.cgroup.cores_placement); {} without the axis. Refused, naming where the axis was given: with a
    `[run] cpuset` (both would place the sides), with a workload off the client/server pair, on a host
    without a cpuset controller tunbench may use, and beyond this host's CPUs."""
    if not needs.cores:
        return {}
    source, line, key = needs.cores_at

    def refuse(message: str) -> ConfigError:
        return ConfigError(message, source=source, line=line, key=key)

    if needs.cpuset.mode != "off":
        raise refuse("the cores axis places each side itself: leave [run] cpuset off (no --cpuset)")
    if kind := needs.not_pair:
        raise refuse(
            f"the cores axis places the client/server pair; workload {kind!r} brings up many clients or its own "
            "tunnels: run it without cores"
        )
    if why := cpuset_refusal():
        raise refuse(why)
    cpus = online_cpus()
    out: dict[int, tuple[dict[str, str], str]] = {}
    for n in needs.cores:
        try:
            out[n] = cores_placement(cpus, n, emulator=bool(needs.emulated))
        except ValueError as e:
            raise refuse(f"{e}: give cores of 1 to {len(cpus)}") from None
    return out


def placement_text(cpuset: Mapping[str, str], note: str = "") -> str:
    """ "client side on CPU 0, server side on CPU 1, emulator on CPU 1 (note)", or "" when off."""
    names = {"client": "client side", "server": "server side", "link": "emulator"}
    parts = [f"{names.get(role, role)} on CPU {cpus}" for role, cpus in cpuset.items()]
    return ", ".join(parts) + (f" ({note})" if note and parts else "")
