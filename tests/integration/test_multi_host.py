"""`tunbench run --hosts`: roles placed on real SSH hosts (network namespaces, each with its own sshd,
reached only through `ssh`; tests/sshhosts.py). Real tunnels and iperf3 on the hosts, the agent over the
SSH channel, and nothing left on any host after success, a cut connection or a SIGKILLed controller."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import leftovers, tunbench
from tests.integration.test_lifecycle import start_run
from tests.sshhosts import SRC_DIR, SUBNET4, SshHosts, ssh_hosts


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    for tool in ("sshd", "ssh", "socat"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"{tool} is not installed (make deps)")
    with ssh_hosts(tmp_path_factory.mktemp("hosts")) as h:
        yield h


def nothing_left(hosts: SshHosts, agent_prefixes: list[str] = ()) -> None:  # type: ignore[assignment]
    for name in hosts.hosts:
        assert hosts.leftovers(name) == [], f"{name} kept things"
    for prefix in agent_prefixes:  # the agents' cgroups and trial directories (the hosts share /sys and /tmp)
        assert leftovers(prefix) == [], f"agent {prefix} left things"


def agent_prefixes(doc: dict) -> list[str]:  # type: ignore[type-arg]
    return [h["agent"]["prefix"] for h in doc["run"]["provenance"]["hosts"].values()]


def run_hosts(tmp: Path, inventory: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    out = tmp / "out.json"
    res = tunbench("run", "--hosts", str(inventory), "--db", str(tmp / "r.db"), "--json", str(out), *args)
    return res, (json.loads(out.read_text()) if out.exists() else {})


def test_tunnels_and_latency_on_two_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    res, doc = run_hosts(
        tmp_path,
        hosts.inventory,
        *("-t", "wireguard-go", "-t", "openvpn-udp", "-w", "iperf3,latency,rr"),
        *("--direction", "up,down", "--duration", "1", "--omit", "1", "--repeat", "1"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    trials = doc["trials"]
    assert {(t["label"], t["workload"]) for t in trials} >= {
        ("direct", "iperf3"),
        ("wireguard-go", "iperf3"),
        ("openvpn-udp", "iperf3"),
        ("wireguard-go", "latency"),
        ("wireguard-go", "rr"),
    }
    for t in trials:
        assert t["status"] == "ok", t["error"]
        # the run's own agents (on this machine here) are not other runs; each window has their CPU
        assert t["metrics"]["interfered"] == 0.0, t["params"].get("interference")
        assert t["metrics"]["harness.remote_cpu_pct"] is not None
        if t["workload"] == "iperf3":
            assert t["throughput_bps"] > 1e6
        if t["label"] != "direct":
            for role in ("client", "server"):  # the remote agents' cgroups and samplers
                cpu = t["cpu"][role]
                assert cpu["user_s"] + cpu["sys_s"] > 0, f"{t['label']} {role} CPU not measured"
                assert t["rss_peak_bytes"][role] > 1_000_000
    lat = [t for t in trials if t["workload"] == "latency" and t["label"] == "wireguard-go"]
    assert lat and lat[0]["metrics"]["latency.p50_ms"] > 0
    for t in (t for t in trials if t["workload"] == "rr"):  # netserver on h2, netperf on h1, through the agents
        m = t["metrics"]
        assert m["rr.transactions_per_s"] > 0 and m["rr.latency_p99_us"] > 0, t["label"]
        if t["label"] != "direct":  # the tunnel's CPU per transaction on each side, from each host's agent
            assert m["rr.cpu_us_per_tx.client"] > 0 and m["rr.cpu_us_per_tx.server"] > 0, t["label"]
    prov = doc["run"]["provenance"]["hosts"]
    assert {prov[n]["role"] for n in prov} == {"client", "server"}
    for h in prov.values():
        clock = h["clock"]
        # the hosts share this machine's clock: the method must find ~0 within its stated bound
        assert abs(clock["wall_s"]) <= clock["uncertainty_s"] + 1e-4
        assert 0 < clock["uncertainty_s"] < 0.05
        assert h["nic"]["device"] == "eth0" and h["nic"]["mtu"] == 1500
        assert h["host"]["kernel"] and h["cpu"]["cores"] >= 1
    nothing_left(hosts, agent_prefixes(doc))


def test_a_tunnel_whose_config_files_name_their_directory_runs_on_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    """strongSwan's config files name `{tmp}` (its vici socket, its credentials): each host gets them
    rendered with its own trial directory, not the controller's."""
    res, doc = run_hosts(
        tmp_path,
        hosts.inventory,
        *(
            "-t",
            "strongswan[datapath=libipsec]",
            "--no-direct",
            "--direction",
            "up",
            "--duration",
            "1",
            "--omit",
            "1",
            "--repeat",
            "1",
        ),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok" and t["throughput_bps"] > 1e6, t["error"]
    nothing_left(hosts, agent_prefixes(doc))


def test_the_same_scenario_runs_locally_and_on_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    sc = tmp_path / "sc.toml"
    sc.write_text(
        '[run]\ntunnels = ["socat"]\nrepeat = 1\n[workload]\nduration_s = 1\nomit_s = 0\ndirections = ["up"]\n'
    )
    local = tunbench("run", str(sc), "--db", str(tmp_path / "l.db"), "--json", str(tmp_path / "l.json"))
    assert local.returncode == 0, local.stdout + local.stderr
    remote, doc = run_hosts(tmp_path, hosts.inventory, str(sc))
    assert remote.returncode == 0, remote.stdout + remote.stderr
    cases = lambda d: sorted((t["label"], t["workload"], t["direction"], t["flows"]) for t in d["trials"])  # noqa: E731
    assert cases(json.loads((tmp_path / "l.json").read_text())) == cases(doc)
    assert "hosts" not in json.loads((tmp_path / "l.json").read_text())["run"]["provenance"]
    nothing_left(hosts, agent_prefixes(doc))
    # the same hosts as a [hosts] table in the scenario itself
    command = f"env PYTHONPATH={SRC_DIR} {sys.executable} -m tunbench"
    table = f'[hosts]\nssh_config = "{hosts.ssh_config}"\n'
    for role, name in (("client", "h1"), ("server", "h2")):
        table += f'[hosts.{role}]\nssh = "{name}"\naddress = "{hosts.address(name)}"\ncommand = "{command}"\n'
    sc2 = tmp_path / "sc-hosts.toml"
    sc2.write_text(sc.read_text() + table)
    res = tunbench("run", str(sc2), "--db", str(tmp_path / "t.db"), "--json", str(tmp_path / "t.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    doc2 = json.loads((tmp_path / "t.json").read_text())
    assert cases(doc2) == cases(doc) and set(doc2["run"]["provenance"]["hosts"]) == {"h1", "h2"}
    nothing_left(hosts, agent_prefixes(doc2))


def test_a_cpu_hog_on_one_host_flags_the_trial_as_interfered_there_by_name(hosts: SshHosts, tmp_path: Path) -> None:
    """A bounded busy loop in h2's namespace (started and ended by its pid) runs through the trial: the
    trial is interfered with on h2, named, and h1 is not; the hosts' figures are each host's own."""
    hog = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{hosts.hosts['h2']}", "--", "timeout", "60", "sh", "-c", "while :; do :; done"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        args = ("-t", "socat", "--no-direct", "--direction", "up", "--duration", "2", "--omit", "0", "--repeat", "1")
        res, doc = run_hosts(tmp_path, hosts.inventory, *args)
    finally:
        hog.terminate()  # timeout(1) passes the signal on to the loop
        hog.wait(timeout=10)
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    m, why = t["metrics"], t["params"]["interference"]
    assert m["interfered"] == 1.0 and "host h2: foreign CPU" in why and "host h1" not in why, why
    assert m["interference.host.h2.foreign_cpu_pct"] >= 50.0  # most of a core, on a 2-core machine shared
    assert m["interference.host.h1.foreign_cpu_pct"] < 10.0
    assert "interfered: host h2: foreign CPU" in " ".join(res.stdout.split()), res.stdout
    late = t["params"]["interference_detail"]["hosts"]["h1"]["late_s"]  # each edge read near its instant
    assert len(late) == 2 and all(-0.001 < x < 0.5 for x in late), late
    nothing_left(hosts, agent_prefixes(doc))


def start(tmp: Path, inventory: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    return start_run(tmp / "r.db", "--hosts", str(inventory), *args)


def wait_for_tunnel(hosts: SshHosts, prefix: str, timeout_s: float = 30, host: str = "h2", dev: str = "ts") -> None:
    """Until the trial's tunnel device is up on a host (the server's, by default: its name carries the run's
    prefix), and a second more."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if hosts.sh(host, f"ip -o link show | grep -q ' {prefix}-{dev}'").returncode == 0:
            time.sleep(1.0)  # into the measured window
            return
        time.sleep(0.1)
    raise AssertionError("the remote trial never started")


def trial_rows(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return [(r[0], r[1]) for r in con.execute("SELECT status, error FROM trials ORDER BY seq")]
    finally:
        con.close()


def test_sigkill_of_the_controller_then_clean_hosts_leaves_nothing(hosts: SshHosts, tmp_path: Path) -> None:
    proc, prefix = start(tmp_path, hosts.inventory, "-t", "wireguard-go", "--no-direct", "--duration", "20")
    try:
        wait_for_tunnel(hosts, prefix)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    # the ssh clients lose their writer: each agent sees EOF and tears down; clean --hosts confirms and sweeps
    res = tunbench("clean", "--hosts", str(hosts.inventory), "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "h1:" in res.stdout and "h2:" in res.stdout
    deadline = time.monotonic() + 15
    while any(hosts.leftovers(n) for n in hosts.hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    nothing_left(hosts)
    assert leftovers(prefix) == []


def host_ledgers(hosts: SshHosts, name: str) -> list[dict]:  # type: ignore[type-arg]
    """The run ledgers on host `name` (its own /run/tunbench), read through ssh."""
    res = hosts.sh(name, 'for f in /run/tunbench/tb*.json; do [ -e "$f" ] && cat "$f" && echo; done; true')
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def test_sigkill_of_an_agent_then_clean_hosts_removes_its_links(hosts: SshHosts, tmp_path: Path) -> None:
    """vxlan makes a kernel device in each host's own namespace, named with the controller's prefix; the
    agent's ledger records those names before they exist, so a SIGKILLed agent's device is removed by
    `clean --hosts`."""
    proc, prefix = start(tmp_path, hosts.inventory, "-t", "vxlan", "--no-direct", "--duration", "8")
    try:
        wait_for_tunnel(hosts, prefix, host="h1", dev="tc")
        ledgers = {name: host_ledgers(hosts, name) for name in hosts.hosts}
        assert all(len(found) == 1 for found in ledgers.values()), ledgers  # each host: its agent's run
        (agent,) = ledgers["h1"]
        assert {"prefix": prefix, "netns": None} in agent["links"], agent  # recorded in the agent's ledger
        kill = hosts.ssh("h1", "kill", "-9", str(agent["owner_pid"]))  # the client host's agent, by its pid
        assert kill.returncode == 0, kill.stderr
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode not in (0, None), out
    rows = trial_rows(tmp_path / "r.db")
    assert len(rows) == 1 and rows[0][0] == "failed" and "h1" in rows[0][1], rows  # the run stops there
    # nothing on h1 tore its device down: the agent that would have is gone
    assert f"h1: link {prefix}-tc" in hosts.leftovers("h1")
    res = tunbench("clean", "--hosts", str(hosts.inventory), "--db", str(tmp_path / "r.db"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "h1: removed" in res.stdout and "1 link(s)" in res.stdout, res.stdout
    deadline = time.monotonic() + 15
    while any(hosts.leftovers(n) for n in hosts.hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    nothing_left(hosts, [found[0]["prefix"] for found in ledgers.values()])
    assert leftovers(prefix) == []


def test_ipv6_underlay_between_two_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    res, doc = run_hosts(
        tmp_path,
        hosts.inventory,
        *("-t", "wireguard-go", "--ip", "6", "--overlay", "6", "--direction", "up"),
        *("--duration", "1", "--omit", "1", "--repeat", "1"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    trials = {t["label"]: t for t in doc["trials"]}
    assert trials["wireguard-go"]["params"]["ip"]["overlay"] == "ipv6"  # tunbench's own inner IPv6 addresses
    assert set(trials) == {"direct", "wireguard-go"}
    for label, t in trials.items():
        assert t["status"] == "ok", t["error"]
        assert t["throughput_bps"] > 1e6, label
        assert t["params"]["ip"]["underlay"] == "ipv6", label
    assert trials["direct"]["params"]["ip"]["target"] == "ipv6"  # iperf3 straight to the server's IPv6 address
    for role in ("client", "server"):
        cpu = trials["wireguard-go"]["cpu"][role]
        assert cpu["user_s"] + cpu["sys_s"] > 0, f"{role} CPU not measured"
    prov = doc["run"]["provenance"]["hosts"]
    for name, h in prov.items():  # the underlay each host used: its IPv6 address, found on its NIC
        assert h["address"] == hosts.address6(name), h
        assert h["nic"]["address"] == hosts.address6(name) and h["nic"]["device"] == "eth0", h["nic"]
    nothing_left(hosts, agent_prefixes(doc))

    # one host with both roles: its two namespaces get tunbench's own IPv6 underlay, as a local run's
    one = one_host_inventory(hosts, tmp_path)
    res, doc = run_hosts(
        tmp_path,
        one,
        *("-t", "wireguard-go", "--ip", "6", "--direction", "up", "--duration", "1", "--omit", "0", "--repeat", "1"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        assert t["params"]["ip"]["underlay"] == "ipv6"
    (direct,) = (t for t in doc["trials"] if t["label"] == "direct")
    assert direct["params"]["ip"]["target"] == "ipv6"
    nothing_left(hosts, agent_prefixes(doc))


def test_a_cut_connection_fails_the_trial_and_stops_the_run_cleanly(hosts: SshHosts, tmp_path: Path) -> None:
    proc, prefix = start(
        tmp_path, hosts.inventory, "-t", "wireguard-go", "--no-direct", "--duration", "8", "--repeat", "3"
    )
    try:
        wait_for_tunnel(hosts, prefix)
        assert hosts.cut("h1") > 0
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode not in (0, None), out
    assert "h1" in out and "lost" in out, out
    rows = trial_rows(tmp_path / "r.db")
    assert rows and rows[0][0] == "failed" and "h1" in rows[0][1], rows
    assert len(rows) == 1, "the run stops at the lost host instead of failing every later trial"
    deadline = time.monotonic() + 15
    while any(hosts.leftovers(n) for n in hosts.hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    nothing_left(hosts)


def write_inventory(hosts: SshHosts, tmp: Path, ssh_config: Path | None = None, **overrides: str) -> Path:
    """The fixture's inventory with some host lines' extra variables (`h2="tunbench_command='...'"`), and
    optionally another ssh_config."""
    lines = []
    for line in hosts.inventory.read_text().splitlines():
        name = line.split(" ", 1)[0]
        if ssh_config is not None and line.startswith("tunbench_ssh_config="):
            line = f"tunbench_ssh_config={ssh_config}"
        lines.append(f"{line} {overrides[name]}" if name in overrides and " " in line else line)
    path = tmp / "hosts.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def other_version_tree(tmp: Path) -> Path:
    """A copy of tunbench's sources that calls itself another version."""
    tree = tmp / "other" / "src"
    shutil.copytree(SRC_DIR / "tunbench", tree / "tunbench", ignore=shutil.ignore_patterns("__pycache__"))
    init = tree / "tunbench" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9-'))
    return tree


def test_a_version_mismatch_says_how_to_install_the_same_version(hosts: SshHosts, tmp_path: Path) -> None:
    cmd = f"env PYTHONPATH={other_version_tree(tmp_path)} {sys.executable} -m tunbench"
    inv = write_inventory(hosts, tmp_path, h2=f"tunbench_command='{cmd}'")
    res, _ = run_hosts(tmp_path, inv, "-t", "direct", "--duration", "1", "--omit", "0", "--repeat", "1")
    assert res.returncode == 2, res.stdout + res.stderr
    text = res.stdout + res.stderr
    assert "h2 runs tunbench 9.9.9-" in text and "Install the same version there" in text, text
    nothing_left(hosts)


def test_doctor_hosts_verdicts(hosts: SshHosts, tmp_path: Path) -> None:
    ok = tunbench("doctor", "--hosts", str(hosts.inventory))
    assert "h1" in ok.stdout and "h2" in ok.stdout
    assert ok.stdout.count("✓ reachable") == 2 and "✓ programs" in ok.stdout, ok.stdout
    assert "✓ root" in ok.stdout and "clock: offset" in ok.stdout
    assert "link emulation: tunbench-link" in ok.stdout
    # counted instructions: the hosts have no PMU (perf answers <not supported>), so callgrind on each, and the
    # pair's one counter; forcing perf is refused when the run connects, before any trial, naming the host
    said = " ".join(ok.stdout.split())
    hosts_part = said[said.index("✓ reachable") :]  # after this machine's own checks: each host's
    assert (
        hosts_part.count("counted instructions (--count-instructions): callgrind, by simulation, as perf cannot") == 2
    )
    assert "counted instructions of a run's pair (h1, h2): callgrind (auto: host h1: perf cannot count" in said
    forced = tunbench(
        "run", "--hosts", str(hosts.inventory), "-t", "wireguard-go", "--no-direct", "--repeat", "1",
        "--count-instructions", "--instr-counter", "perf", "--db", str(tmp_path / "forced.db"),
    )  # fmt: skip
    assert forced.returncode == 3, forced.stdout + forced.stderr
    assert "--instr-counter perf: host h1 cannot count instructions:u: perf cannot count" in " ".join(
        forced.stderr.split()
    ), forced.stderr
    # a client host's addresses for emulated profiles and the clients workload: usable there, or why not
    good = write_inventory(
        hosts,
        tmp_path,
        h1=f"tunbench_egress_address={SUBNET4}.101 tunbench_client_addresses={SUBNET4}.120-{SUBNET4}.139",
    )
    res = tunbench("doctor", "--hosts", str(good))
    assert "✓ tunbench_egress_address" in res.stdout, res.stdout  # (exit 1: this machine lacks gre, ipip...)
    assert f"✓ tunbench_client_addresses: {SUBNET4}.120-{SUBNET4}.139 (20): free" in res.stdout, res.stdout
    off = write_inventory(hosts, tmp_path, h1="tunbench_egress_address=198.18.203.5")  # outside the /23
    res = tunbench("doctor", "--hosts", str(off))
    assert (
        res.returncode == 1 and "✗ tunbench_egress_address" in res.stdout and "not in a network of eth0" in res.stdout
    )

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    nobody = (
        "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+dac_read_search "
        f"--ambient-caps=+dac_read_search env PYTHONPATH={SRC_DIR} {sys.executable} -m tunbench"
    )
    wrong_key = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
    cases = {
        "tunbench_command": (f"tunbench_command='env PATH={empty} {sys.executable} -m tunbench'", "missing"),
        "nobody": (f"tunbench_command='{nobody}'", "needs root"),
        "version": (
            f"tunbench_command='env PYTHONPATH={other_version_tree(tmp_path)} {sys.executable} -m tunbench'",
            "runs tunbench 9.9.9-",
        ),
        "key": ("", "Permission denied"),
    }
    # the wrong key: an ssh_config whose h2 block names a key the host does not accept
    cfg, block = [], ""
    for line in hosts.ssh_config.read_text().splitlines():
        if line.startswith("Host "):
            block = line.split()[1]
        if block == "h2" and line.strip().startswith("IdentityFile"):
            line = f"  IdentityFile {wrong_key}"
        if block == "h2" and line.strip().startswith(("ControlMaster", "ControlPath", "ControlPersist")):
            continue  # a master h2 still has open would authenticate for the wrong key
        cfg.append(line)
    bad_cfg = tmp_path / "ssh_config_wrong_key"
    bad_cfg.write_text("\n".join(cfg) + "\n")
    for what, (var, expect) in cases.items():
        inv = write_inventory(hosts, tmp_path, bad_cfg if what == "key" else None, h2=var)
        res = tunbench("doctor", "--hosts", str(inv))
        host2 = res.stdout[res.stdout.index("h2") :]
        assert res.returncode == 1, f"{what}: {res.stdout}"
        assert expect in host2, f"{what}: {host2}"
        assert "✓ reachable" in res.stdout[: res.stdout.index("h2")], f"{what}: h1 should still pass"
    nothing_left(hosts)


def one_host_inventory(hosts: SshHosts, tmp: Path) -> Path:
    """The fixture's inventory with both roles on h1."""
    lines = hosts.inventory.read_text().splitlines()
    head = [ln for ln in lines if ln.startswith("tunbench_ssh_config=")]
    (h1,) = [ln for ln in lines if ln.startswith("h1 ")]
    inv = tmp / "one.ini"
    inv.write_text("\n".join(["[all:vars]", *head, "[client]", h1, "[server]", "h1", ""]))
    return inv


def test_both_roles_on_one_host_with_an_emulated_link(hosts: SshHosts, tmp_path: Path) -> None:
    inv = one_host_inventory(hosts, tmp_path)
    res, doc = run_hosts(
        tmp_path,
        inv,
        *("-t", "wireguard-go", "-w", "iperf3,latency", "--profile", "d20:delay=20ms"),
        *("--direction", "up", "--duration", "1", "--omit", "1", "--repeat", "1"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(doc["run"]["provenance"]["hosts"]) == {"h1"}
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        assert t["metrics"].get("link.up.forwarded", 0) > 0 or any(k.startswith("link.up.") for k in t["metrics"])
        if t["workload"] == "latency":
            assert 39.0 < t["metrics"]["latency.p50_ms"] < 80.0, "the emulator's 20 ms each way"
        if t["label"] == "wireguard-go":
            assert all(t["cpu"][r]["user_s"] + t["cpu"][r]["sys_s"] > 0 for r in ("client", "server"))
    nothing_left(hosts, agent_prefixes(doc))


def test_an_emulated_link_between_two_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    refused, _ = run_hosts(tmp_path, hosts.inventory, "-t", "wireguard-go", "--profile", "d20:delay=20ms", "--dry-run")
    assert refused.returncode == 2 and "tunbench_egress_address" in refused.stderr, refused.stdout + refused.stderr
    egress = f"{SUBNET4}.101"
    inv = write_inventory(hosts, tmp_path, h1=f"tunbench_egress_address={egress}")
    res, doc = run_hosts(
        tmp_path,
        inv,
        *("-t", "wireguard-go", "-w", "iperf3,latency", "--profile", "lan,d20:delay=20ms,rate=50mbit"),
        *("--direction", "up,down", "--duration", "2", "--omit", "1", "--repeat", "1"),
        # the cores axis on hosts: the fake hosts share this VM's 2 CPUs, one kept for the generator, so 1 is
        # the only value they can run; each side's tunnel on CPU 0, its generator (and h1's emulator) on CPU 1
        *("--cores", "1"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = " ".join(res.stdout.split())
    assert "cores on hosts: up to 1 (host h1 has 2 CPUs, one kept for the generator)" in out, out
    assert "cores 1: client on h1 CPU 0 (generator CPU 1, emulator CPU 1), server on h2 CPU 0 (generator CPU 1)" in out
    assert set(doc["run"]["provenance"]["hosts"]) == {"h1", "h2"}
    reported = doc["run"]["provenance"]["cores_on_hosts"]["hosts"]  # what each agent said of its CPUs
    assert {h: r["cpus"] for h, r in reported.items()} == {"h1": [0, 1], "h2": [0, 1]}, reported
    assert all(r["cpuset_root"] for r in reported.values()), reported
    seen = set()
    for t in doc["trials"]:
        assert t["status"] == "ok", t["error"]
        # as each host's cpusets held them, read back by its agent
        assert t["cores"] == 1 and t["params"]["cpuset"] == {"client": "0", "server": "0"}, t["params"]
        assert t["params"]["cpuset_generator"] == {"client": "1", "server": "1"}, t["params"]
        seen.add((t["label"], t["workload"], t["profile"]))
        m, emulated = t["metrics"], t["profile"] == "d20"
        if not emulated:  # lan in the same run: the hosts' own network, no emulator, no egress
            assert "link.up.delivered_packets" not in m and "egress" not in t["params"].get("net", {})
            if t["workload"] == "latency":
                assert m["latency.p50_ms"] < 10.0
            continue
        # every emulated trial crossed the emulator on h1, both ways, from the egress address
        assert m["link.up.delivered_packets"] > 0 and m["link.down.delivered_packets"] > 0
        assert t["params"]["net"]["egress"]["address"] == egress
        # the emulator's own CPU, sampled on h1 (the "link CPU" column)
        assert m["cpu.link.user_s"] + m["cpu.link.sys_s"] > 0, {k: v for k, v in m.items() if "link" in k}
        if t["workload"] == "latency":
            assert 39.0 < m["latency.p50_ms"] < 80.0, "the emulator's 20 ms each way"
        if t["workload"] == "iperf3":
            assert 30e6 < t["throughput_bps"] <= 51e6, "the emulator's 50 Mbit/s"
        if t["label"] == "wireguard-go":
            assert all(t["cpu"][r]["user_s"] + t["cpu"][r]["sys_s"] > 0 for r in ("client", "server"))
    # a cores value above the hosts' CPUs less one is refused once the run has asked the agents, before a trial
    refused, _ = run_hosts(tmp_path, hosts.inventory, "-t", "socat", "--cores", "2", "--duration", "1")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cores 2: host h1 has 2 CPU(s) (0,1), one kept for the traffic generator" in " ".join(
        refused.stderr.split()
    ), refused.stderr
    assert {(label, w) for label, w, p in seen if p == "d20"} >= {
        ("direct", "iperf3"),
        ("wireguard-go", "iperf3"),
        ("wireguard-go", "latency"),
    }
    # the egress answered ARP for its own address only: h1 still knows h2's address at h2's own MAC
    mac2 = hosts.sh("h2", "cat /sys/class/net/eth0/address").stdout.strip()
    neigh = hosts.sh("h1", f"ip -j neigh show {hosts.address('h2')}").stdout
    assert all(n.get("lladdr") in (None, mac2) for n in json.loads(neigh or "[]")), (neigh, mac2)
    nothing_left(hosts, agent_prefixes(doc))


def test_twenty_clients_between_two_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    """The clients workload across hosts: the wireguard-go server on h2 (its own namespace and address), 20
    clients on h1, each in a namespace with its own address of the hosts' network; the same workload code as
    a local trial, through the agents."""
    sc = tmp_path / "clients.toml"
    rate = 2e6  # 40 Mbit/s in all, inside what 20 wireguard-go clients carry here (as the local 20-client test)
    sc.write_text(
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
clients = [20]
protocols = ["udp"]
udp_rate_bps = {rate:.0f}
"""
    )
    refused, _ = run_hosts(tmp_path, hosts.inventory, str(sc), "--dry-run")
    assert refused.returncode == 2 and "tunbench_client_addresses" in refused.stderr, refused.stdout + refused.stderr
    pool = [f"{SUBNET4}.{k}" for k in range(120, 140)]
    inv = write_inventory(hosts, tmp_path, h1=f"tunbench_client_addresses={pool[0]}-{pool[-1]}")
    res, doc = run_hosts(tmp_path, inv, str(sc))
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok", t["error"]
    m = t["metrics"]
    assert t["clients"] == 20 and m["clients.connected"] == 20
    assert m["clients.udp.aggregate_bps"] == pytest.approx(20 * rate, rel=0.1)
    assert m["clients.udp.per_client_bps_min"] > 0.8 * rate
    assert m["clients.udp.failed_clients"] == 0 and m["clients.udp.loss_pct"] < 5
    assert m["clients.udp.window_s"] == pytest.approx(2.0, abs=0.3)
    # the server's cost, sampled on h2; the clients' on h1
    assert m["clients.udp.server_cpu_s"] > 0 and m["clients.udp.clients_cpu_s"] > 0
    assert m["clients.server_rss_connected_bytes"] >= m["clients.server_rss_base_bytes"] > 1_000_000
    assert t["params"]["net"]["clients"]["addresses"] == f"{pool[0]}-{pool[-1]}"
    assert "clients.udp.host_cpu_pct" not in m  # two hosts: no one host's share
    # the server host's underlay device (h2's eth0) over the phase, read by its agent as a pair's are: at least
    # the clients' payload arrived there, and the host's UDP counters moved
    window = m["clients.udp.window_s"]
    assert m["counters.server.dev.eth0.rx_bytes"] > 0.9 * 20 * rate * window / 8, sorted(
        k for k in m if "counters" in k
    )
    assert m["counters.server.udp_in_datagrams"] > 0
    # the saturated stage per host, each read by its agent: the server side on h2, the clients' on h1
    assert t["params"]["stage_hosts"] == {
        "server": {"h2": t["params"]["stage"]["server"]},
        "client": {"h1": t["params"]["stage"]["client"]},
    }, t["params"]["stage_hosts"]
    for side in ("server", "client"):
        assert m[f"stage.{side}.cpus"] >= 1 and 0 < m[f"stage.{side}.cpus_busy_pct"] <= 100, side
        assert m[f"stage.{side}.saturated"] in (0.0, 1.0) and m[f"stage.{side}.busiest_thread_pct"] > 0, side
        assert t["params"]["host_cpus"][side], side  # each host's CPUs, in the params
    assert t["params"]["threads"]["server"][0][0] == "wireguard-go", t["params"]["threads"]
    nothing_left(hosts, agent_prefixes(doc))


def test_ctrl_c_mid_trial_ends_at_once_and_leaves_nothing(hosts: SshHosts, tmp_path: Path) -> None:
    proc, prefix = start(tmp_path, hosts.inventory, "-t", "wireguard-go", "--no-direct", "--duration", "20")
    try:
        wait_for_tunnel(hosts, prefix)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the agents are busy with the 20 s iperf3 client: closing their input ends it at once
    assert time.monotonic() - t0 < 10, "the interrupt waited for the remote trial to end"
    assert proc.returncode == 130, out
    assert "interrupted" in out
    nothing_left(hosts)
    assert leftovers(prefix) == []
