"""Remote placement against local namespaces, side by side on this machine: the same `tunbench run` with
and without `--hosts`, alternating (the order swapped every round), the hosts being the namespaced sshd
hosts of the integration tests (tests/sshhosts.py, reached only through ssh). Prints, per mode: wall time
per trial (the run's wall time over its trials, so the per-run SSH connect is included), the tunnel's
set-up time, the median throughput of direct and wireguard-go, and the clock offsets the agents measured.

With `connect`, it times instead how long the controller takes to reach both hosts (ssh, the agent's
start, version check, clock exchanges): one host after the other against both at once (HostRun),
alternating, and one request's round trip.

With `emulated`, it runs one emulated profile (20 ms each way, 50 Mbit/s) locally and between the two hosts
(the emulator on the client host's egress, docs/multi-host.md), alternating, with iperf3 and the latency
workload: how close the two placements' RTT and throughput are.

With `clients`, it runs the clients workload (20 wireguard-go clients, UDP at 4 Mbit/s each) locally and
between the two hosts (the server on h2, the clients in namespaces of h1 with their own addresses),
alternating: bring-up, rate, fairness and the server's cost per client in both placements.

Usage (as root, alone on the machine):
  .venv/bin/python scripts/bench_multihost.py [ROUNDS | connect [ROUNDS] | emulated [ROUNDS] | clients [ROUNDS]]"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshhosts import ssh_hosts  # noqa: E402

ARGS = ["-t", "wireguard-go", "--direction", "up", "--duration", "3", "--omit", "1", "--repeat", "3"]


def one(tmp: Path, tag: str, extra: list[str], args: list[str] = ARGS) -> tuple[float, dict]:  # type: ignore[type-arg]
    out = tmp / f"{tag}.json"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "tunbench", "run", "--db", str(tmp / f"{tag}.db"), "--json", str(out), *args, *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"{tag} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return wall, json.loads(out.read_text())


def with_h1(inventory: Path, out: Path, extra: str) -> Path:
    """A copy of the hosts' inventory with `extra` variables on h1's line (the client host)."""
    lines = inventory.read_text().splitlines()
    out.write_text("\n".join(f"{ln} {extra}" if ln.startswith("h1 ") else ln for ln in lines) + "\n")
    return out


def connect_times(rounds: int) -> None:
    from tunbench.host.scope import run_scope
    from tunbench.host.workdir import workdir
    from tunbench.remote.connection import AgentConnection
    from tunbench.remote.inventory import load_inventory
    from tunbench.remote.topology import HostRun

    seq: list[float] = []
    par: list[float] = []
    cli: list[float] = []
    rtt: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "h").mkdir()
        with ssh_hosts(Path(d) / "h") as hosts, run_scope() as ledger, workdir(ledger, "ssh") as logdir:
            inv = load_inventory(hosts.inventory)
            # the same agent started through the whole CLI (how `tunbench agent` started before its fast path)
            slow = Path(d) / "slow.ini"
            slow.write_text(
                hosts.inventory.read_text().replace("-m tunbench", '-c "from tunbench.cli import main; main()"')
            )
            inv_cli = load_inventory(slow)
            for r in range(rounds):
                modes = ["seq", "par", "cli"]
                for mode in modes[r % 3 :] + modes[: r % 3]:
                    t0 = time.monotonic()
                    if mode == "cli":
                        with HostRun(inv_cli, ledger, logdir):
                            cli.append(time.monotonic() - t0)
                    elif mode == "par":
                        with HostRun(inv, ledger, logdir) as hr:
                            par.append(time.monotonic() - t0)
                            conn = hr.conn("client")
                            t1 = time.monotonic()
                            for _ in range(50):
                                conn.call("clock")
                            rtt.append((time.monotonic() - t1) / 50)
                    else:
                        conns = [AgentConnection(h, ledger, logdir, inv.ssh_config) for h in inv.hosts]
                        for c in conns:
                            c.__enter__()
                        seq.append(time.monotonic() - t0)
                        for c in conns:
                            c.close()
    a, b, c = statistics.median(seq), statistics.median(par), statistics.median(cli)
    print(f"connect both hosts, one after the other: {a:.3f} s; both at once: {b:.3f} s; ratio {b / a:.3f}")
    print(f"both at once, the agent started through the whole CLI: {c:.3f} s; the fast path's ratio {b / c:.3f}")
    print(f"one request's round trip over the SSH channel: {statistics.median(rtt) * 1e3:.2f} ms")


EMULATED = ["-w", "iperf3,latency", "--profile", "d20:delay=20ms,rate=50mbit"]
EGRESS = "198.18.200.101"  # h1's second address on the hosts' underlay (tests/sshhosts.py: 198.18.200.0/24)


def emulated(rounds: int) -> None:
    rows: dict[str, dict[str, list[float]]] = {"local": {}, "hosts": {}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "h").mkdir()
        with ssh_hosts(tmp / "h") as hosts:
            inv = with_h1(hosts.inventory, tmp / "egress.ini", f"tunbench_egress_address={EGRESS}")
            for r in range(rounds):
                for mode in ["local", "hosts"] if r % 2 == 0 else ["hosts", "local"]:
                    extra = ["--hosts", str(inv)] if mode == "hosts" else []
                    _, doc = one(tmp, f"e{mode}{r}", [*EMULATED, *extra])
                    acc = rows[mode]
                    for t in doc["trials"]:
                        m = t["metrics"]
                        if t["workload"] == "iperf3":
                            acc.setdefault(f"{t['label']}_mbit", []).append(t["throughput_bps"] / 1e6)
                        else:
                            acc.setdefault(f"{t['label']}_rtt_p50_ms", []).append(m["latency.p50_ms"])
                        for k in ("link.up.late_us_p50", "link.up.late_us_p99"):
                            if m.get(k) is not None:
                                acc.setdefault(k, []).append(m[k])
    keys = sorted(set(rows["local"]) & set(rows["hosts"]))
    print(f"{'metric':<26} {'local':>10} {'hosts':>10} {'hosts/local':>12}   (medians over {rounds} rounds)")
    for k in keys:
        a, b = statistics.median(rows["local"][k]), statistics.median(rows["hosts"][k])
        print(f"{k:<26} {a:>10.3f} {b:>10.3f} {b / a:>12.3f}")


CLIENTS_TOML = """
[run]
tunnels = ["wireguard-go"]
repeat = 1
direct = false
[workload]
kind = ["clients"]
duration_s = 3
omit_s = 1
[workload.clients]
clients = [20]
protocols = ["udp"]
udp_rate_bps = 4000000
"""
POOL = "198.18.200.120-198.18.200.139"  # 20 unused addresses of the hosts' underlay


def clients(rounds: int) -> None:
    keys = (
        "clients.topology_setup_s",
        "clients.ready_s",
        "clients.udp.start_spread_s",
        "clients.udp.aggregate_bps",
        "clients.udp.jain",
        "clients.udp.loss_pct",
        "clients.udp.server_cpu_s_per_client",
        "clients.server_rss_bytes_per_client",
        "clients.teardown_s",
    )
    rows: dict[str, dict[str, list[float]]] = {"local": {}, "hosts": {}}
    walls: dict[str, list[float]] = {"local": [], "hosts": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "h").mkdir()
        sc = tmp / "clients.toml"
        sc.write_text(CLIENTS_TOML)
        with ssh_hosts(tmp / "h") as hosts:
            inv = with_h1(hosts.inventory, tmp / "clients.ini", f"tunbench_client_addresses={POOL}")
            for r in range(rounds):
                for mode in ["local", "hosts"] if r % 2 == 0 else ["hosts", "local"]:
                    extra = ["--hosts", str(inv)] if mode == "hosts" else []
                    wall, doc = one(tmp, f"c{mode}{r}", extra, [str(sc)])
                    walls[mode].append(wall)
                    (t,) = doc["trials"]
                    for k in keys:
                        if t["metrics"].get(k) is not None:
                            rows[mode].setdefault(k, []).append(float(t["metrics"][k]))
    print(f"{'metric':<38} {'local':>12} {'hosts':>12} {'hosts/local':>12}   (medians over {rounds} rounds)")
    for k in ("run wall time (s)", *keys):
        a_v = walls["local"] if k.startswith("run") else rows["local"].get(k, [])
        b_v = walls["hosts"] if k.startswith("run") else rows["hosts"].get(k, [])
        if a_v and b_v:
            a, b = statistics.median(a_v), statistics.median(b_v)
            print(f"{k:<38} {a:>12.4g} {b:>12.4g} {b / a if a else float('nan'):>12.3f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "clients":
        clients(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "connect":
        connect_times(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "emulated":
        emulated(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows: dict[str, dict[str, list[float]]] = {"local": {}, "hosts": {}}
    clocks: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "h").mkdir()
        with ssh_hosts(tmp / "h") as hosts:
            for r in range(rounds):
                order = ["local", "hosts"] if r % 2 == 0 else ["hosts", "local"]
                for mode in order:
                    extra = ["--hosts", str(hosts.inventory)] if mode == "hosts" else []
                    wall, doc = one(tmp, f"{mode}{r}", extra)
                    trials = doc["trials"]
                    acc = rows[mode]
                    acc.setdefault("wall_per_trial_s", []).append(wall / len(trials))
                    for t in trials:
                        acc.setdefault(f"{t['label']}_mbit", []).append(t["throughput_bps"] / 1e6)
                        if t["label"] != "direct":
                            acc.setdefault("setup_s", []).append(t["setup_s"])
                    for h in (doc["run"]["provenance"].get("hosts") or {}).values():
                        clocks.append((h["clock"]["wall_s"], h["clock"]["uncertainty_s"]))
    keys = ["wall_per_trial_s", "setup_s", "direct_mbit", "wireguard-go_mbit"]
    print(f"{'metric':<20} {'local':>12} {'hosts':>12} {'hosts/local':>12}   (medians over {rounds} rounds)")
    for k in keys:
        a, b = statistics.median(rows["local"][k]), statistics.median(rows["hosts"][k])
        print(f"{k:<20} {a:>12.3f} {b:>12.3f} {b / a:>12.3f}")
    dw = statistics.median(rows["hosts"]["wall_per_trial_s"]) - statistics.median(rows["local"]["wall_per_trial_s"])
    print(f"extra wall time per trial with --hosts: {dw:+.3f} s")
    offs = [abs(o) * 1e6 for o, _ in clocks]
    unc = [u * 1e6 for _, u in clocks]
    print(
        f"clock offsets over {len(clocks)} host connections: |offset| median {statistics.median(offs):.1f} µs "
        f"(max {max(offs):.1f}), stated uncertainty median {statistics.median(unc):.1f} µs (max {max(unc):.1f}); "
        f"every |offset| <= its uncertainty: {all(abs(o) <= u for o, u in clocks)}"
    )


if __name__ == "__main__":
    main()
