"""strongSwan, kernel ESP (ipsec-xfrm) and fastd carry real iperf3 traffic, with their cost measured, and
leave nothing behind: no xfrm state or policy in the host's namespace, no charon or fastd process, no
charon pid file in the host's /run.

Kernel ESP (CONFIG_INET_ESP) is a kernel feature a machine may lack (this project's CI kernel has XFRM but
no ESP): the kernel-ESP tests run where it exists and are in tests/conftest.py ALLOWED_SKIPS; where it
does not, the test that the adapters say so clearly runs instead. strongSwan's userspace ESP (libipsec)
runs everywhere, so strongSwan itself is always tested."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.helpers import run_json, tunbench
from tunbench.errors import CommandFailed
from tunbench.tunnels.registry import parse_ref
from tunbench.tunnels.template import render

DAEMONS = {"charon", "fastd", "swanctl"}
SHORT = ("--duration", "1", "--omit", "1", "--repeat", "1", "--direction", "up")


def kernel_has_esp() -> bool:
    """Can this kernel hold an ESP SA? Tried in a throwaway anonymous network namespace (gone on exit)."""
    key = "0x" + "00" * 36
    res = subprocess.run(
        ["unshare", "--net", "ip", "xfrm", "state", "add", "src", "198.18.0.1", "dst", "198.18.0.2", "proto", "esp",
         "spi", "0x100", "mode", "tunnel", "aead", "rfc4106(gcm(aes))", key, "128"],
        capture_output=True, text=True,
    )  # fmt: skip
    return res.returncode == 0


def _xfrm_root() -> str:
    state = subprocess.run(["ip", "xfrm", "state"], capture_output=True, text=True, check=True).stdout
    policy = subprocess.run(["ip", "xfrm", "policy"], capture_output=True, text=True, check=True).stdout
    return state + "\n--\n" + policy


def _daemons() -> set[tuple[int, str]]:
    out = set()
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        argv = p.info["cmdline"] or []
        names = {p.info["name"], Path(argv[0]).name if argv else ""}
        if names & DAEMONS:
            out.add((p.info["pid"], " ".join(argv)[:120]))
    return out


@pytest.fixture
def no_ipsec_leftovers() -> Iterator[None]:
    """Around the test: the host's xfrm state and policies unchanged, no new charon/fastd/swanctl process,
    no charon pid file in the host's /run (each charon has a private /run)."""
    xfrm, procs = _xfrm_root(), _daemons()
    pidfile = Path("/run/charon.pid")
    had_pidfile = pidfile.exists()
    yield
    assert _xfrm_root() == xfrm, "the host's xfrm state or policies changed"
    left = _daemons() - procs
    assert not left, f"processes left behind: {left}"
    assert had_pidfile or not pidfile.exists(), "a charon wrote its pid file into the host's /run"


def _check_costed(doc: Any, label: str, roles: tuple[str, ...] = ("client", "server")) -> dict[str, Any]:
    trials = {t["label"]: t for t in doc["trials"]}
    t: dict[str, Any] = trials[label]
    assert t["status"] == "ok", t["error"]
    assert t["throughput_bps"] > 1e6
    assert t["setup_s"] > 0
    for role in roles:
        cpu = t["cpu"][role]
        assert cpu["user_s"] + cpu["sys_s"] > 0, f"{label}: {role} CPU not measured"
        assert t["cgroup_cpu"][role] == cpu, "headline CPU is the cgroup's exact figure"
        sampled = t["sampled_cpu"][role]
        assert sampled["user_s"] + sampled["sys_s"] > 0, f"{label}: {role} not sampled"
        assert t["rss_peak_bytes"][role] > 1_000_000
    return t


def test_strongswan_and_fastd_carry_traffic_and_are_costed(tmp_path: Path, no_ipsec_leftovers: None) -> None:
    tunnels = [
        "strongswan[datapath=libipsec]",
        "strongswan[datapath=libipsec,esp=chacha20poly1305,label=strongswan-chacha]",
        "fastd",
        "fastd[method=null,label=fastd-null]",
    ]
    res, doc = run_json(tmp_path, *[a for t in tunnels for a in ("-t", t)], *SHORT, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert {t["label"] for t in doc["trials"]} == {"direct", "strongswan[datapath=libipsec]", "strongswan-chacha",
                                                    "fastd", "fastd-null"}  # fmt: skip
    for label in ("strongswan[datapath=libipsec]", "strongswan-chacha"):
        t = _check_costed(doc, label)
        # libipsec: ESP is done inside charon, so carrying traffic costs each side's charon real CPU
        for role in ("client", "server"):
            assert t["cpu"][role]["user_s"] + t["cpu"][role]["sys_s"] > 0.05, (label, role, t["cpu"][role])
        assert t["params"]["tunnel"]["datapath"] == "libipsec"
    assert _check_costed(doc, "strongswan-chacha")["params"]["tunnel"]["esp"] == "chacha20poly1305"
    for label in ("fastd", "fastd-null"):
        _check_costed(doc, label)
    assert _check_costed(doc, "fastd-null")["params"]["tunnel"]["method"] == "null"
    for s in doc["summary"]:
        if s["label"] != "direct":
            assert 0 < s["ratio_to_direct"]["value"] < 2
            assert s["bits_per_cpu_second"]["client"] > 0
    versions = {k: v["version"] for k, v in doc["run"]["provenance"]["tunnels"].items()}
    assert versions["strongswan-chacha"].startswith("5."), versions
    assert versions["fastd"].startswith("v"), versions


def test_strongswan_roadwarriors_storm(tmp_path: Path, no_ipsec_leftovers: None) -> None:
    """[multi]: 10 roadwarriors (one charon each) connect to one charon, then all drop and come back."""
    path = tmp_path / "s.toml"
    path.write_text(
        """
[run]
tunnels = ["strongswan[datapath=libipsec]"]
repeat = 1
direct = false
[workload]
kind = ["storm"]
[workload.storm]
clients = [10]
variants = ["connect", "reconnect"]
timeout_s = 30
"""
    )
    res, doc = run_json(tmp_path, str(path), timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(doc["trials"]) == 2
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        m = t["metrics"]
        assert m["clients.success_ratio"] == 1.0, (t["variant"], m.get("clients.failed_count"))
        assert 0 < m["clients.ready_p50_s"] <= m["clients.ready_max_s"] < 30
        assert m["clients.server_cpu_s"] > 0
        if t["variant"] == "reconnect":
            assert m["clients.connect.success_ratio"] == 1.0


def test_strongswan_carries_ipv6_inside(tmp_path: Path, no_ipsec_leftovers: None) -> None:
    """--overlay 6: the inner addresses and the traffic selectors are IPv6 (/128), over the IPv4 underlay;
    libipsec's ESP runs in each side's charon, so each side's CPU is real."""
    label = "strongswan[datapath=libipsec]"
    res, doc = run_json(tmp_path, "-t", label, "--overlay", "6", "--no-direct", *SHORT, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    t = _check_costed(doc, label)
    assert t["params"]["ip"] == {"underlay": "ipv4", "overlay": "ipv6", "target": "ipv6"}
    for role in ("client", "server"):
        assert t["cpu"][role]["user_s"] + t["cpu"][role]["sys_s"] > 0.05, (role, t["cpu"][role])
    (s,) = doc["summary"]
    assert s["bits_per_cpu_second"]["client"] > 0 and s["bits_per_cpu_second"]["server"] > 0


@pytest.mark.skipif(not kernel_has_esp(), reason="kernel has no ESP (CONFIG_INET_ESP) or no rfc4106(gcm(aes))")
def test_kernel_esp_carries_traffic(tmp_path: Path, no_ipsec_leftovers: None) -> None:
    """Where the kernel does ESP: static SAs (no process at all) and strongSwan with kernel ESP."""
    res, doc = run_json(tmp_path, "-t", "ipsec-xfrm", "-t", "strongswan", *SHORT, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    # strongSwan's charon does IKE; the ESP work is the kernel's (in iperf3's and softirq context)
    _check_costed(doc, "strongswan")
    t = {t["label"]: t for t in doc["trials"]}["ipsec-xfrm"]
    assert t["status"] == "ok", t["error"]
    assert t["throughput_bps"] > 1e6
    # no tunnel process: the role cgroups are empty, so the tunnel's own CPU is honestly zero (the crypto
    # is charged to whoever sends and receives, not to a role)
    for role in ("client", "server"):
        assert t["cpu"][role]["user_s"] + t["cpu"][role]["sys_s"] == 0
    assert doc["run"]["provenance"]["tunnels"]["ipsec-xfrm"]["version"]


@pytest.mark.skipif(kernel_has_esp(), reason="the kernel has ESP: test_kernel_esp_carries_traffic runs instead")
def test_missing_kernel_esp_is_reported_clearly(tmp_path: Path, no_ipsec_leftovers: None) -> None:
    """Without kernel ESP, ipsec-xfrm and strongswan (datapath=kernel) are refused before anything starts
    (exit 3, as any tunnel whose kernel module is missing), naming the module and, for both, strongSwan's
    userspace datapath as the way out; `tunbench tunnels` does not call them ready."""
    res, doc = run_json(tmp_path, "-t", "ipsec-xfrm", "-t", "strongswan", "--no-direct", *SHORT, timeout=120)
    assert res.returncode == 3, res.stdout + res.stderr
    assert doc is None
    assert "ipsec-xfrm needs kernel module esp4 (no kernel ESP: strongswan with datapath=libipsec" in res.stderr
    assert "strongswan needs kernel module esp4 (or run it with datapath=libipsec" in res.stderr
    listing = tunbench("tunnels", check=True).stdout
    for name in ("ipsec-xfrm", "strongswan"):
        (row,) = [line for line in listing.splitlines() if line.startswith(f"│ {name} ")]
        assert "kernel module missing" in row and "ready" not in row


def test_a_failed_sa_setup_keeps_the_keys_out_of_its_error(tmp_path: Path) -> None:
    """ipsec-xfrm's SA file, with a key the kernel refuses (too short for the cipher, or no ESP at all), run
    as the adapter runs it (`ip -batch`, in a throwaway namespace): what a failed trial would store names
    neither key."""
    spec = parse_ref("ipsec-xfrm").adapter.spec
    (batch,) = [f for f in spec.files if f.path == "sa.batch"]
    keys = {"key_up": "5ec12e7a" * 2, "key_down": "c0ffee11" * 2}  # 8 bytes: wrong for any aead here
    variables = {**spec.params, **keys, "client_addr": "198.18.0.1", "server_addr": "198.18.0.2"}
    path = tmp_path / "sa.batch"
    path.write_text(render(batch.content, variables))
    argv = ["unshare", "--net", "ip", "-batch", str(path)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert res.returncode != 0, res.stdout + res.stderr
    stored = str(CommandFailed(argv, res.returncode, res.stdout + res.stderr, what="ipsec-xfrm server.before"))
    assert not any(k in stored for k in keys.values()), stored
