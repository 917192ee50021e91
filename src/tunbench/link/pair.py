"""Two namespaces of this machine joined by a WAN profile's link: what `tunbench link shell` opens a shell
over and what the self-test measures through (link/bench.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tunbench.host.ledger import Ledger
from tunbench.link.emulator import profile_link_builder
from tunbench.link.profile import Profile
from tunbench.topology.build import Topology, TopologySpec


@contextlib.contextmanager
def emulated_pair(
    profile: Profile,
    ledger: Ledger,
    workdir: Path,
    *,
    seed: int,
    mtu: int = 1500,
    sysctls: dict[str, str] | None = None,
) -> Iterator[Topology]:
    """Client and server namespaces joined by the profile's link (veth for `lan`)."""
    build = profile_link_builder(profile, ledger, workdir, seed)
    spec = TopologySpec(
        mtu=profile.mtu or mtu,
        sysctls={**(sysctls or {}), **profile.sysctl},
        congestion_control=profile.congestion_control,
    )
    with Topology(ledger, "sh", spec, link_builder=build) as topo:
        yield topo
