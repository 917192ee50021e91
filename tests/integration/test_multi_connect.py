"""`connect` between a server host and three client hosts (real SSH hosts, tests/sshhosts.py): every client
host gets its bring-ups, the trial stores per-host and aggregate figures, and nothing is left on any host.
And a CPU cap on a host (remote/cap.py) through a real agent: a busy loop capped to 10% of a core gets that,
then all it wants once the cap is lifted, and the cap's group goes with the agent."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.test_multi_host import agent_prefixes, nothing_left, run_hosts
from tests.sshhosts import SRC_DIR, SUBNET4, SUBNET6, SshHosts, ssh_hosts
from tunbench.host.cgroup import V1_CPU, CpuCap
from tunbench.host.clean import finish_ledger
from tunbench.host.ledger import Ledger
from tunbench.remote.cap import RemoteCpuCap
from tunbench.remote.inventory import load_inventory
from tunbench.remote.place import RemotePlace
from tunbench.remote.topology import HostRun

SERVER, CLIENTS = "h1", ("h2", "h3", "h4")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    for tool in ("sshd", "ssh", "socat"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"{tool} is not installed (make deps)")
    with ssh_hosts(tmp_path_factory.mktemp("hosts"), (SERVER, *CLIENTS)) as h:
        yield h


def three_clients_inventory(hosts: SshHosts, tmp: Path, egress: bool = False) -> Path:
    """The server role on h1, the client role on h2, h3 and h4 (`egress`: each with an egress address, .10x
    for host x, for an emulated profile)."""
    link = os.environ.get("TUNBENCH_LINK")  # a worktree without its own build: the emulator the controller uses
    env = f"PYTHONPATH={shlex.quote(str(SRC_DIR))}" + (f" TUNBENCH_LINK={shlex.quote(link)}" if link else "")
    command = shlex.quote(f"env {env} {shlex.quote(sys.executable)} -m tunbench")

    def line(name: str) -> str:
        i = hosts.address(name).rsplit(".", 1)[1]
        out = f"{name} tunbench_address={SUBNET4}.{i} tunbench_address6={SUBNET6}::{i} tunbench_command={command}"
        return out + (f" tunbench_egress_address={SUBNET4}.10{i}" if egress else "")

    inv = tmp / "four.ini"
    inv.write_text(
        "\n".join(
            ["[all:vars]", f"tunbench_ssh_config={hosts.ssh_config}", "[server]", line(SERVER), "[client]"]
            + [line(c) for c in CLIENTS]
        )
        + "\n"
    )
    return inv


def scenario(tmp: Path, count: int) -> Path:
    """wireguard-go's bring-ups, `count` per client host, one repetition."""
    sc = tmp / "connect.toml"
    sc.write_text(
        '[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = false\n'
        f'[workload]\nkind = ["connect"]\n[workload.connect]\ncount = {count}\n'
    )
    return sc


def test_connect_on_three_client_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    inv = three_clients_inventory(hosts, tmp_path)
    res, doc = run_hosts(tmp_path, inv, str(scenario(tmp_path, 3)))
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    assert m["connect.count"] == 9 and m["connect.failures"] == 0
    assert 0 < m["connect.min_s"] <= m["connect.p50_s"] <= m["connect.max_s"] < 20
    for c in CLIENTS:
        assert m[f"connect.host.{c}.count"] == 3 and m[f"connect.host.{c}.failures"] == 0
        assert m["connect.min_s"] <= m[f"connect.host.{c}.p50_s"] <= m[f"connect.host.{c}.max_s"] <= m["connect.max_s"]
    assert max(m[f"connect.host.{c}.max_s"] for c in CLIENTS) == m["connect.max_s"]
    assert t["params"]["client_hosts"] == list(CLIENTS)
    assert set(doc["run"]["provenance"]["hosts"]) == {SERVER, *CLIENTS}
    assert all(f"{c} p50" in res.stdout for c in CLIENTS), res.stdout  # the table's per-host columns
    nothing_left(hosts, agent_prefixes(doc))


def test_connect_over_an_emulated_link_from_each_client_host(hosts: SshHosts, tmp_path: Path) -> None:
    """Each client host's bring-ups cross an emulator on that host, from its own egress address."""
    inv = three_clients_inventory(hosts, tmp_path, egress=True)
    res, doc = run_hosts(tmp_path, inv, str(scenario(tmp_path, 2)), "--profile", "d20:delay=20ms")
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    assert m["connect.count"] == 6 and m["connect.failures"] == 0
    for c in CLIENTS:  # a handshake and a ping through the tunnel: two round trips of the emulated 40 ms
        assert m[f"connect.host.{c}.count"] == 2 and m[f"connect.host.{c}.p50_s"] >= 0.08
    nothing_left(hosts, agent_prefixes(doc))


def cpu_pct(pid: int, seconds: float) -> float:
    """The share of one core process `pid` used over the next `seconds` (the hosts share this machine's
    pid namespace)."""
    p = psutil.Process(pid)
    t0, c0 = time.monotonic(), p.cpu_times()
    time.sleep(seconds)
    t1, c1 = time.monotonic(), p.cpu_times()
    return 100.0 * ((c1.user + c1.system) - (c0.user + c0.system)) / (t1 - t0)


def cap_groups(agent_prefix: str) -> list[Path]:
    """The CPU caps' groups of an agent (the hosts share this machine's cgroups)."""
    return list(V1_CPU.glob(f"{agent_prefix}-*-cap"))


@pytest.mark.skipif(not CpuCap.available(), reason="no cgroup-v1 cpu controller")
def test_a_cpu_cap_on_a_host_caps_a_busy_loop(hosts: SshHosts, tmp_path: Path) -> None:
    inv = load_inventory(three_clients_inventory(hosts, tmp_path))
    (tmp_path / "logs").mkdir()
    ledger = Ledger.open()
    try:
        with HostRun(inv, ledger, tmp_path / "logs") as run:
            conn = run.conn("server")
            assert conn.info is not None
            agent = conn.info.prefix
            r = conn.call("place_open", tag="t1s", netns=None, roles=["server"], link_prefix=ledger.prefix)
            place = RemotePlace(conn, str(r["place"]), str(r["workdir"]), None)
            argv = [sys.executable, "-c", "while True: pass"]
            busy = place.spawn(argv, what="busy loop", log_name="b.log", role="server")
            pids = place.pids("server", [busy])
            deadline = time.monotonic() + 5
            while not pids and time.monotonic() < deadline:  # right after the spawn the agent may see none yet
                time.sleep(0.1)
                pids = place.pids("server", [busy])
            assert pids, "the busy loop's pid never showed"
            with RemoteCpuCap(place) as cap:
                cap.add(pids)
                cap.limit(10.0)
                capped = cpu_pct(busy.pid, 2.0)
                cap.limit(None)
                free = cpu_pct(busy.pid, 1.0)
                place.stop([busy])
            assert not cap_groups(agent)
            # a second cap, and its place, left open: the agent removes both when the controller goes
            RemoteCpuCap(place).__enter__()
            assert len(cap_groups(agent)) == 1
    finally:
        finish_ledger(ledger)
    deadline = time.monotonic() + 15
    while cap_groups(agent) and time.monotonic() < deadline:  # the agent tears down after its input ends
        time.sleep(0.1)
    print(f"busy loop capped to 10%: {capped:.1f}% of a core; uncapped: {free:.1f}%")
    assert 7.0 <= capped <= 13.0
    assert free >= 50.0
    assert not cap_groups(agent)
    nothing_left(hosts, [agent])
