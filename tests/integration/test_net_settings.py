"""Every trial can say which network settings it ran with (issue 9, item 7): read in real namespaces, with
the host's inherited congestion control by default and a pinned one when asked; hostile sysctls never reach
a shell (item 13)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import STARTED
from tunbench.errors import ConfigError
from tunbench.host.ledger import Ledger
from tunbench.host.netns import run_in_netns
from tunbench.link.binary import link_binary_or_none
from tunbench.link.emulator import profile_link_builder
from tunbench.link.profile import parse_inline
from tunbench.topology.build import Topology, TopologySpec
from tunbench.topology.settings import SYSCTLS


def host(path: str) -> str:
    return " ".join(Path("/proc/sys/net", path).read_text().split())


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    led = Ledger.open()
    STARTED.add(led.prefix)
    yield led
    led.close()


def check_namespace_block(block: dict[str, object], ifname: str, mtu: int) -> None:
    assert set(block) == {*SYSCTLS, "interfaces"}
    for name in SYSCTLS:
        assert isinstance(block[name], str) and block[name], name
    interfaces = block["interfaces"]
    assert isinstance(interfaces, dict)
    assert set(interfaces) == {"lo", ifname}
    assert interfaces[ifname]["mtu"] == mtu
    assert interfaces["lo"]["mtu"] == 65536
    for dev in interfaces.values():
        assert set(dev) == {"mtu", "gso", "gro", "tso"}
        assert all(isinstance(dev[k], bool) for k in ("gso", "gro", "tso")), dev


def test_default_records_the_inherited_host_values(ledger: Ledger) -> None:
    with Topology(ledger, "ns", TopologySpec(mtu=1400)) as topo:
        t0 = time.monotonic()
        net = topo.effective_settings()
        took = time.monotonic() - t0
    assert net["kernel"] == os.uname().release
    assert set(net) == {"kernel", "client", "server"}, "no 'link' without an emulated link"
    check_namespace_block(net["client"], topo.ifname("vc"), 1400)
    check_namespace_block(net["server"], topo.ifname("vs"), 1400)
    for role in ("client", "server"):
        assert net[role]["congestion_control"] == host("ipv4/tcp_congestion_control")
        assert net[role]["default_qdisc"] == host("core/default_qdisc")
    assert took < 0.5, f"reading the settings took {took * 1000:.0f} ms"


def pinnable() -> str:
    """An algorithm a namespace may use that differs from the host's default when there is one."""
    allowed = host("ipv4/tcp_allowed_congestion_control").split()
    others = [a for a in allowed if a != host("ipv4/tcp_congestion_control")]
    return others[0] if others else "reno"


def test_pinned_congestion_control_applies_to_both_namespaces_only(ledger: Ledger) -> None:
    before = host("ipv4/tcp_congestion_control")
    cc = pinnable()
    with Topology(ledger, "cc", TopologySpec(congestion_control=cc)) as topo:
        net = topo.effective_settings()
        assert topo.sysctls_applied[topo.client.name] == {"net.ipv4.tcp_congestion_control": cc}
    assert net["client"]["congestion_control"] == cc
    assert net["server"]["congestion_control"] == cc
    assert host("ipv4/tcp_congestion_control") == before, "the root namespace must keep its own"


def test_a_congestion_control_namespaces_may_not_use_is_refused(ledger: Ledger) -> None:
    available = set(host("ipv4/tcp_available_congestion_control").split())
    refused = sorted(available - set(host("ipv4/tcp_allowed_congestion_control").split())) or ["no_such_cc"]
    with pytest.raises(ConfigError, match="tcp_a(vailable|llowed)_congestion_control") as e:
        TopologySpec(congestion_control=refused[0])
    assert e.value.key == "congestion_control"


@pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")
def test_emulated_link_records_its_devices(ledger: Ledger) -> None:
    profile = parse_inline("d:delay=1ms", "test")
    with tempfile.TemporaryDirectory(prefix=f"{ledger.prefix}-test-") as wd:
        build = profile_link_builder(profile, ledger, Path(wd), seed=1)
        with Topology(ledger, "em", TopologySpec(mtu=1420), link_builder=build) as topo:
            net = topo.effective_settings()
    lc, ls = topo.ifname("lc"), topo.ifname("ls")
    check_namespace_block(net["client"], lc, 1420)
    check_namespace_block(net["server"], ls, 1420)
    link = net["link"]
    assert link["emulator"] == "tunbench-link"
    assert set(link["devices"]) == {lc, ls}
    assert link["devices"][lc] == {"netns": "client", **net["client"]["interfaces"][lc]}
    assert link["devices"][ls] == {"netns": "server", **net["server"]["interfaces"][ls]}


HOSTILE = [
    "1'; touch {marker}; echo '",
    "1; touch {marker}",
    "$(touch {marker})",
    "`touch {marker}`",
]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_sysctl_values_never_run(ledger: Ledger, tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    spec = TopologySpec(sysctls={"net.ipv4.tcp_rmem": template.format(marker=marker)})
    with pytest.raises(ConfigError) as e, Topology(ledger, "hx", spec):
        pass
    assert e.value.key == "sysctl.net.ipv4.tcp_rmem"
    assert not marker.exists(), "a sysctl value was executed"


def test_sysctls_are_written_inside_the_namespace(ledger: Ledger) -> None:
    before = host("ipv4/tcp_rmem")
    spec = TopologySpec(sysctls={"net.ipv4.tcp_rmem": "4096 65536 1048576", "net.ipv4.tcp_wmem": "4096 16384 1048576"})
    with Topology(ledger, "sw", spec) as topo:
        net = topo.effective_settings()
    assert net["client"]["tcp_rmem"] == net["server"]["tcp_rmem"] == "4096 65536 1048576"
    assert net["client"]["tcp_wmem"] == "4096 16384 1048576"
    assert host("ipv4/tcp_rmem") == before


def test_a_sysctl_the_kernel_keeps_global_is_refused(ledger: Ledger) -> None:
    """net.core.default_qdisc exists only in the root namespace: setting it would change the host."""
    before = host("core/default_qdisc")
    with (
        pytest.raises(ConfigError, match="not a per-namespace") as e,
        Topology(ledger, "sg", TopologySpec(sysctls={"net.core.default_qdisc": "fq"})),
    ):
        pass
    assert e.value.key == "sysctl.net.core.default_qdisc"
    assert host("core/default_qdisc") == before


def test_a_sysctl_the_kernel_keeps_read_only_in_a_namespace_is_refused_naming_the_key(ledger: Ledger) -> None:
    """net.core.rmem_default is per namespace but read-only inside one on recent kernels: a clear error naming
    the key, not an internal PermissionError on every trial."""
    probe = "/proc/sys/net/core/rmem_default"
    with Topology(ledger, "sr", TopologySpec()) as topo:
        mode = run_in_netns(topo.client.name, lambda: os.stat(probe).st_mode & 0o222)
    if mode:
        pytest.skip("net.core.rmem_default is writable inside a namespace on this kernel")
    before = host("core/rmem_default")
    with (
        pytest.raises(ConfigError, match="read-only inside a network namespace") as e,
        Topology(ledger, "sr", TopologySpec(sysctls={"net.core.rmem_default": "4194304"})),
    ):
        pass
    assert e.value.key == "sysctl.net.core.rmem_default"
    assert host("core/rmem_default") == before
