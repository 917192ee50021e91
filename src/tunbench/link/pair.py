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


def pair_spec(profile: Profile, base: TopologySpec | None = None) -> TopologySpec:
    """The namespaces' settings: `base` (a scenario's, session/network.py; none: the kernel's defaults)
    with the profile's own on top, by the rule a trial uses (`TopologySpec.with_profile`)."""
    return (base or TopologySpec()).with_profile(profile.mtu, profile.sysctl, profile.congestion_control)


@contextlib.contextmanager
def emulated_pair(
    profile: Profile,
    ledger: Ledger,
    workdir: Path,
    *,
    seed: int,
    base: TopologySpec | None = None,
) -> Iterator[Topology]:
    """Client and server namespaces joined by the profile's link (veth for `lan`), with `pair_spec`'s
    settings."""
    build = profile_link_builder(profile, ledger, workdir, seed)
    with Topology(ledger, "sh", pair_spec(profile, base), link_builder=build) as topo:
        yield topo
