"""Fleets over several client hosts (issue: many client machines): a server host and three client hosts,
each a network namespace with its own sshd (tests/sshhosts.py). Real wireguard-go and OpenVPN clients
spread over the three hosts, each host's clients launched in one request at one agreed instant; per-host
and total figures; and the faults: a host unreachable at the start, a host lost in the middle, clocks
known too loosely for a storm, and a SIGKILLed controller cleaned up with `clean --hosts`."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.helpers import leftovers, tunbench
from tests.integration.test_lifecycle import start_run
from tests.sshhosts import SshHosts, ssh_hosts

CLIENT_HOSTS = ("h2", "h3", "h4")
# each client host's addresses of the hosts' network (198.18.200.0/23: the fixture's hosts are .200.1-.200.4)
POOLS = {"h2": ("198.18.200.100", "198.18.200.219"), "h3": ("198.18.201.1", "198.18.201.120"),
         "h4": ("198.18.201.130", "198.18.201.250")}  # fmt: skip


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    for tool in ("sshd", "ssh", "socat"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"{tool} is not installed (make deps)")
    with ssh_hosts(tmp_path_factory.mktemp("fleet"), ("h1", "h2", "h3", "h4")) as h:
        yield h


def host_vars(hosts: SshHosts) -> dict[str, str]:
    """Each host's line of the fixture's inventory, after its name (address, command)."""
    out = {}
    for line in hosts.inventory.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name in hosts.hosts and rest:
            out[name] = rest
    return out


def fleet_inventory(hosts: SshHosts, tmp: Path, *, weights: dict[str, float] | None = None, extra: str = "") -> Path:
    """h1 the server, h2..h4 the client hosts, each with its own client addresses (and weight)."""
    v = host_vars(hosts)
    cfg = next(line for line in hosts.inventory.read_text().splitlines() if line.startswith("tunbench_ssh_config="))
    lines = ["[all:vars]", cfg, "", "[server]", f"h1 {v['h1']}", "", "[client]"]
    for name in CLIENT_HOSTS:
        lo, hi = POOLS[name]
        w = f" tunbench_client_weight={weights[name]}" if weights and name in weights else ""
        lines.append(f"{name} {v[name]} tunbench_client_addresses={lo}-{hi}{w}")
    lines.append(extra)
    path = tmp / "fleet.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_hosts(tmp: Path, inventory: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    out = tmp / "out.json"
    res = tunbench("run", "--hosts", str(inventory), "--db", str(tmp / "r.db"), "--json", str(out), *args)
    return res, (json.loads(out.read_text()) if out.exists() else {})


def agent_prefixes(doc: dict) -> list[str]:  # type: ignore[type-arg]
    return [h["agent"]["prefix"] for h in doc["run"]["provenance"]["hosts"].values()]


def nothing_left(hosts: SshHosts, prefixes: list[str] = (), wait_s: float = 0.0) -> None:  # type: ignore[assignment]
    deadline = time.monotonic() + wait_s
    while any(hosts.leftovers(n) for n in hosts.hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    for name in hosts.hosts:
        assert hosts.leftovers(name) == [], f"{name} kept things"
    for prefix in prefixes:  # the agents' cgroups and trial directories (the hosts share /sys and /tmp)
        assert leftovers(prefix) == [], f"agent {prefix} left things"


def scenario(tmp: Path, text: str) -> str:
    path = tmp / "s.toml"
    path.write_text(text)
    return str(path)


def test_twenty_clients_on_each_of_three_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    # 15 Mbit/s in all: inside what 60 wireguard-go clients carry on a slow 2-vCPU VM (at 1 Mbit/s each, one
    # AMD VM's first host carried 1.2-8.0 of its 20 Mbit/s, where an Intel VM carried them all)
    rate = 0.25e6
    sc = scenario(
        tmp_path,
        f"""
[run]
tunnels = ["wireguard-go"]
repeat = 1
direct = false
[workload]
kind = ["clients"]
duration_s = 2
omit_s = 1
[workload.clients]
clients = [60]
protocols = ["udp"]
udp_rate_bps = {rate:.0f}
""",
    )
    res, doc = run_hosts(tmp_path, fleet_inventory(hosts, tmp_path), sc)
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    assert t["clients"] == 60 and m["clients.connected"] == 60
    assert t["params"]["net"]["clients"]["hosts"] == {"h2": 20, "h3": 20, "h4": 20}
    per_host = [m[f"clients.host.{h}.udp.aggregate_bps"] for h in CLIENT_HOSTS]
    assert sum(per_host) == pytest.approx(m["clients.udp.aggregate_bps"], rel=1e-9)  # the parts add up
    for h, bps in zip(CLIENT_HOSTS, per_host, strict=True):
        assert bps == pytest.approx(20 * rate, rel=0.15), h
        assert m[f"clients.host.{h}.udp.clients_cpu_s"] > 0, h  # each host's clients sampled there
        assert m[f"clients.host.{h}.ready_s"] <= m["clients.ready_s"]
    assert m["clients.udp.server_cpu_s"] > 0
    assert set(doc["run"]["provenance"]["hosts"]) == {"h1", *CLIENT_HOSTS}
    assert all(f"└ {h}" in res.stdout for h in CLIENT_HOSTS), res.stdout  # the table's per-host rows
    nothing_left(hosts, agent_prefixes(doc))


def storm(tmp: Path, tunnel: str, clients: int, variants: list[str], extra: str = "") -> str:
    return scenario(
        tmp,
        f"""
[run]
tunnels = ["{tunnel}"]
repeat = 1
direct = false
[workload]
kind = "storm"
[workload.storm]
clients = [{clients}]
variants = {json.dumps(variants)}
timeout_s = 60
{extra}
""",
    )


def check_storm(m: dict, n: int, shares: dict[str, int], p: str = "clients.") -> None:  # type: ignore[type-arg]
    assert m[f"{p}ready_count"] == n, m
    for h, k in shares.items():
        hp = f"clients.host.{h}.{p.removeprefix('clients.')}"
        assert m[f"{hp}ready_count"] == k, h
        assert m[f"{hp}ready_max_s"] <= m[f"{p}ready_max_s"], h
    # the start each host achieved against the agreed instant, and the skew among them, are stored
    late = [m[f"clients.host.{h}.{p.removeprefix('clients.')}start_late_s"] for h in shares]
    assert m[f"{p}start_skew_s"] == pytest.approx(max(late) - min(late))
    assert m[f"{p}start_skew_uncertainty_s"] > 0
    assert m[f"{p}server_cpu_s"] > 0 and m[f"{p}server_rss_peak_bytes"] > 0  # the server's, per phase


def test_a_300_client_wireguard_go_storm_over_three_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    res, doc = run_hosts(tmp_path, fleet_inventory(hosts, tmp_path), storm(tmp_path, "wireguard-go", 300, ["connect"]))
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    check_storm(t["metrics"], 300, {"h2": 100, "h3": 100, "h4": 100})
    assert all(f"└ {h}" in res.stdout for h in CLIENT_HOSTS), res.stdout  # per-host rows under the total
    nothing_left(hosts, agent_prefixes(doc))


def test_openvpn_storms_connect_reconnect_and_overload_over_three_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    weights = {"h2": 2.0, "h3": 1.0, "h4": 1.0}  # h2 takes half
    res, doc = run_hosts(
        tmp_path,
        fleet_inventory(hosts, tmp_path, weights=weights),
        storm(
            tmp_path, "openvpn-udp", 90, ["connect", "reconnect", "overload"], "overload_s = 3\noverload_cpu_pct = 2"
        ),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {t["variant"]: t for t in doc["trials"]}
    for variant, t in trials.items():
        assert t["status"] == "ok", (variant, t["error"])
        check_storm(t["metrics"], 90, {"h2": 45, "h3": 23, "h4": 22})
    check_storm(trials["reconnect"]["metrics"], 90, {"h2": 45, "h3": 23, "h4": 22}, p="clients.connect.")
    over = trials["overload"]["metrics"]
    assert over["clients.recovery_s"] is not None  # every client ended up with a working tunnel
    # held to 2% of a core on its host for 3 s (0.06 CPU-s), the server connects fewer clients then than
    # without a cap: 90 connects cost it 0.11-0.13 CPU-s here, so at 5% (0.15 CPU-s, less the storm's lead)
    # all 90 could finish inside the cap (seen once in CI: 90 ready at 2.7 s, the cap lifted at 2.77 s)
    assert over["clients.ready_during_overload"] < 90
    nothing_left(hosts, agent_prefixes(doc))


# ---- faults ------------------------------------------------------------------------------------------------


def test_an_unreachable_client_host_stops_the_run_before_it_starts(hosts: SshHosts, tmp_path: Path) -> None:
    v = host_vars(hosts)["h4"].replace(f"tunbench_address={hosts.address('h4')}", "tunbench_address=198.18.201.253")
    # h5: no such host in the ssh_config, and an address this machine has no route to
    inv = fleet_inventory(hosts, tmp_path, extra=f"h5 ansible_host=198.18.201.253 {v.split(' ', 1)[1]}")
    text = inv.read_text().replace("\nh5 ", "\n[client]\nh5 ")
    inv.write_text(text.replace("tunbench_ssh_config=", "tunbench_ssh_config=", 1))
    res, _ = run_hosts(tmp_path, inv, storm(tmp_path, "wireguard-go", 12, ["connect"]))
    assert res.returncode != 0, res.stdout
    assert "h5" in res.stdout + res.stderr, res.stdout + res.stderr
    assert trial_rows(tmp_path / "r.db") == []  # nothing started
    nothing_left(hosts, wait_s=15)
    # a one-client workload runs on the first client host only: the unreachable one is not needed
    res, doc = run_hosts(tmp_path, inv, "-t", "wireguard-go", "--no-direct", "--duration", "1", "--omit", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(doc["run"]["provenance"]["hosts"]) == {"h1", "h2"}
    nothing_left(hosts, agent_prefixes(doc), wait_s=15)


def trial_rows(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return [(r[0], r[1] or "") for r in con.execute("SELECT status, error FROM trials ORDER BY seq")]
    except sqlite3.OperationalError:  # no tables yet
        return []
    finally:
        con.close()


def client_processes(hosts: SshHosts, host: str, name: str) -> int:
    """How many processes called `name` run under host `host`'s sshd (its agent's children)."""
    with contextlib.suppress(psutil.Error):
        return sum(1 for p in psutil.Process(hosts.sshd_pid(host)).children(recursive=True) if p.name() == name)
    return 0


def test_a_client_host_lost_mid_traffic_loses_its_share_and_the_run_stops(hosts: SshHosts, tmp_path: Path) -> None:
    sc = scenario(
        tmp_path,
        """
[run]
tunnels = ["wireguard-go"]
repeat = 2
direct = false
[workload]
kind = ["clients"]
duration_s = 10
omit_s = 1
[workload.clients]
clients = [9]
protocols = ["udp"]
udp_rate_bps = 1000000
""",
    )
    proc, prefix = start_run(tmp_path / "r.db", "--hosts", str(fleet_inventory(hosts, tmp_path)), sc)
    try:
        deadline = time.monotonic() + 120
        while not trial_rows(tmp_path / "r.db") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert trial_rows(tmp_path / "r.db"), "the first trial never ended"
        while client_processes(hosts, "h4", "iperf3") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the second trial's traffic runs on h4
        time.sleep(1.0)
        assert hosts.cut("h4") > 0
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode not in (0, None), out
    rows = trial_rows(tmp_path / "r.db")
    assert [r[0] for r in rows] == ["ok", "ok"], rows  # the second kept the other hosts' clients
    con = sqlite3.connect(tmp_path / "r.db")
    try:
        params = json.loads(con.execute("SELECT params FROM trials ORDER BY seq DESC").fetchone()[0])
        m = dict(con.execute("SELECT name, value FROM metrics m JOIN trials t ON t.id = m.trial_id WHERE seq = 2"))
    finally:
        con.close()
    assert set(params["clients_lost"]) == {"h4"} and params["clients_lost"]["h4"]["clients"] == 3, params
    assert m["clients.lost"] == 3
    assert m["clients.udp.aggregate_bps"] == pytest.approx(6e6, rel=0.15)  # h2's and h3's six clients
    assert "clients.host.h4.udp.aggregate_bps" not in m
    assert "connection to h4" in out, out
    nothing_left(hosts, wait_s=20)
    assert leftovers(prefix) == []


def test_a_client_host_lost_mid_storm_loses_its_share_and_the_trial_keeps_the_others(
    hosts: SshHosts, tmp_path: Path
) -> None:
    inv = fleet_inventory(hosts, tmp_path)
    proc, prefix = start_run(tmp_path / "r.db", "--hosts", str(inv), storm(tmp_path, "wireguard-go", 45, ["connect"]))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # h4's agent has started one of its clients: the storm is on
            with contextlib.suppress(psutil.Error):
                if any(p.name() == "wireguard-go" for p in psutil.Process(hosts.sshd_pid("h4")).children(True)):
                    break
            time.sleep(0.01)
        else:
            raise AssertionError("the storm's clients never started on h4")
        assert hosts.cut("h4") > 0  # its sshd's connections killed by pid: the agent's input ends
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode not in (0, None), out  # the run stops after the trial that lost a host
    con = sqlite3.connect(tmp_path / "r.db")
    try:
        (status, params), *more = con.execute("SELECT status, params FROM trials").fetchall()
        m = dict(con.execute("SELECT name, value FROM metrics").fetchall())
    finally:
        con.close()
    assert status == "ok" and not more
    lost = json.loads(params)["clients_lost"]
    assert set(lost) == {"h4"} and lost["h4"]["clients"] == 15 and "closed" in lost["h4"]["reason"], lost
    assert m["clients.lost"] == 15
    assert m["clients.ready_count"] == 30 and m["clients.success_ratio"] == 1.0  # the other hosts' clients
    assert m["clients.host.h2.ready_count"] == 15 and m["clients.host.h3.ready_count"] == 15
    assert "clients.host.h4.ready_count" not in m
    # the stage per client host: h2's and h3's read by their agents, h4's said to be missing, never a zero
    said = json.loads(params)
    assert said["stage_hosts"]["client"]["h4"].startswith("not read: h4 was lost"), said["stage_hosts"]
    assert {h: f"stage.client.host.{h}.cpus_busy_pct" in m for h in CLIENT_HOSTS} == {
        "h2": True,
        "h3": True,
        "h4": False,
    }
    assert "no stage: h4 lost" in said["stage"]["client"] and "stage.server.cpus_busy_pct" in m
    assert "lost: host h4 (15 clients)" in " ".join(out.split()), out
    assert "h4" in out.splitlines()[-1] or "connection to h4" in out, out
    nothing_left(hosts, wait_s=20)
    assert leftovers(prefix) == []


def test_clocks_known_too_loosely_refuse_a_storm_with_the_measured_figures(hosts: SshHosts, tmp_path: Path) -> None:
    sc = storm(tmp_path, "wireguard-go", 12, ["connect"], "start_tolerance_s = 0.000001")
    res, _ = run_hosts(tmp_path, fleet_inventory(hosts, tmp_path), sc)
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, res.stdout + res.stderr
    assert "start_tolerance_s" in err and "known to ±" in err, err
    assert all(f"{h} ± " in err for h in CLIENT_HOSTS), err  # each host's measured uncertainty
    assert trial_rows(tmp_path / "r.db") == []
    nothing_left(hosts, wait_s=15)


def test_sigkill_of_the_controller_mid_storm_then_clean_hosts_leaves_nothing(hosts: SshHosts, tmp_path: Path) -> None:
    inv = fleet_inventory(hosts, tmp_path)
    proc, prefix = start_run(tmp_path / "r.db", "--hosts", str(inv), storm(tmp_path, "wireguard-go", 150, ["connect"]))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the clients' namespaces exist on the last client host
            if hosts.sh("h4", "ip netns list | grep -q c32").returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the storm's clients never appeared on h4")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    res = tunbench("clean", "--hosts", str(inv), "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert all(f"{h}:" in res.stdout for h in ("h1", *CLIENT_HOSTS)), res.stdout
    nothing_left(hosts, wait_s=30)
    assert leftovers(prefix) == []
