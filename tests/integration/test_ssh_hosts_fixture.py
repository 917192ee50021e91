"""tests/sshhosts.py: the SSH "hosts" the multi-host tests run on are real sshds in namespaces of their own,
reachable only through ssh, and the fixture leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil

from tests.integration.helpers import root_namespace_snapshot
from tests.sshhosts import ssh_hosts
from tunbench.host.cgroup import cgroup_root
from tunbench.remote.inventory import load_inventory

PRIVSEP = Path("/run/sshd")  # sshd's privilege-separation directory


def _dir_state(path: Path) -> tuple[int, int, int, list[str]] | None:
    """What a directory is (inode, mode, mtime, its entries), None when it does not exist: the machine's own
    /run/sshd (where its sshd runs) must come out of a test as it went in."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mode, st.st_mtime_ns, sorted(p.name for p in path.iterdir())


def _tbh_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("tbh-")]


def test_ssh_hosts_are_namespaces_reached_only_by_ssh(tmp_path: Path) -> None:
    before_ns = _tbh_namespaces()
    root_net = os.readlink("/proc/self/ns/net")
    before = root_namespace_snapshot()
    privsep = _dir_state(PRIVSEP)
    cgroups = cgroup_root()  # the machine's accounting hierarchy (cgroup v1 cpuacct or cgroup2), if any
    see_cgroups = f"; test -d {cgroups[1]}" if cgroups else ""
    with ssh_hosts(tmp_path) as hosts:
        assert set(hosts.hosts) == {"h1", "h2"}
        pids = {n: hosts.sshd_pid(n) for n in hosts.hosts}
        seen_net = {}
        for name in ("h1", "h2"):
            res = hosts.sh(name, f"ip -o addr show dev eth0; readlink /proc/self/ns/net{see_cgroups}")
            assert res.returncode == 0, res.stderr
            assert f"inet {hosts.address(name)}/23" in res.stdout  # the hosts share a /23 (client pools fit)
            assert f"inet6 {hosts.address6(name)}/64" in res.stdout
            seen_net[name] = res.stdout.strip().splitlines()[-1]
            assert seen_net[name] != root_net
            assert seen_net[name] == os.readlink(f"/proc/{pids[name]}/ns/net")
        assert seen_net["h1"] != seen_net["h2"]
        # the underlay joins the hosts (IPv4 and IPv6); the root namespace has no route into it
        res = hosts.ssh("h1", "ping", "-c", "1", "-W", "2", hosts.address("h2"))
        assert res.returncode == 0, res.stdout + res.stderr
        res = hosts.ssh("h2", "ping", "-6", "-c", "1", "-W", "2", hosts.address6("h1"))
        assert res.returncode == 0, res.stdout + res.stderr
        during = root_namespace_snapshot()
        assert during == before and "198.18.200." not in during["route4"] + during["addr"]
        # sshd's /run is its own: /run/sshd exists in a session; the machine's is as it was (absent, or its
        # own sshd's)
        res = hosts.sh("h1", "stat -c '%d %i' /run/sshd")
        assert res.returncode == 0, res.stderr
        if privsep is not None:
            st = PRIVSEP.stat()
            assert res.stdout.split() != [str(st.st_dev), str(st.st_ino)], "the session uses the machine's /run/sshd"
        assert _dir_state(PRIVSEP) == privsep
        # the inventory names the hosts and the ssh_config
        inv = load_inventory(hosts.inventory)
        assert inv.ssh_config == str(hosts.ssh_config)
        assert inv.for_role("client").name == "h1" and inv.for_role("server").name == "h2"
        assert inv.for_role("server").address == hosts.address("h2")
        res = subprocess.run(
            [*inv.for_role("client").ssh_argv(inv.ssh_config), "true"], capture_output=True, timeout=10
        )
        assert res.returncode == 0, res.stderr
        # the tunbench command of the inventory runs there
        res = hosts.sh("h2", inv.for_role("server").command + " --help", timeout=20)
        assert res.returncode == 0 and "Usage" in res.stdout, res.stdout + res.stderr
        assert hosts.leftovers("h1") == [] and hosts.leftovers("h2") == []
    assert _tbh_namespaces() == before_ns
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids.values())
    assert not list(tmp_path.iterdir())
    assert root_namespace_snapshot() == before
    assert _dir_state(PRIVSEP) == privsep


def test_cut_ends_a_running_session(tmp_path: Path) -> None:
    before_ns = _tbh_namespaces()
    with ssh_hosts(tmp_path, ("h1",)) as hosts:
        assert hosts.sh("h1", "true").returncode == 0  # the control master is up
        proc = subprocess.Popen(
            hosts.ssh_argv("h1", "sleep 30"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 5
        while not any("sleep" in _cmdline(p) for p in _descendants(hosts.sshd_pid("h1"))):
            assert time.monotonic() < deadline, "the remote sleep never started"
            time.sleep(0.02)
        t0 = time.monotonic()
        assert hosts.cut("h1") >= 1
        try:
            rc = proc.wait(timeout=5)
        finally:
            proc.kill()
            proc.wait()
        assert rc != 0 and time.monotonic() - t0 < 5
        # the listener is still there: a new connection works
        assert hosts.sh("h1", "true", timeout=10).returncode == 0
    assert _tbh_namespaces() == before_ns


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""
