"""Storms on one machine against the same storms spread over three client hosts, side by side on this
machine: the namespaced sshd hosts of the integration tests (tests/sshhosts.py, h1 the server, h2..h4 the
client hosts, reached only through ssh). Alternating, the order swapped every round. Prints per placement
and storm size: the launch spread (first to last client started), ready p50 and max, handshakes per second,
the start skew achieved among the client hosts, and the controller's own CPU (its Python process and its
ssh clients, sampled with psutil; the tunnel processes it starts are not counted) with its marginal cost
per client between the two storm sizes.

With `--compare SRC` (another checkout's src/, e.g. a worktree of an earlier commit), a third placement
runs the same storms over the hosts with that tunbench, controller and agents alike: before/after, side by
side in one sitting.

With `openvpn`, it runs examples/openvpn-storm.toml unchanged with `--hosts` on a four-host inventory
(`--repeat 1`, as docs/benchmarks/clients.md ran it locally) and prints its table.

Usage (as root, alone on the machine):
  .venv/bin/python scripts/bench_fleet_hosts.py [storm [ROUNDS] [--compare SRC] | openvpn]"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshhosts import SshHosts, ssh_hosts  # noqa: E402

SIZES = (60, 300)
OWN = {"python", "python3", "ssh"}  # the controller's own processes (not the tunnels it starts)


def inventory(hosts: SshHosts, out: Path, pools: dict[str, str]) -> Path:
    """h1 the server, h2..h4 the client hosts with the client addresses `pools`."""
    v = {}
    cfg = ""
    for line in hosts.inventory.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name in hosts.hosts and rest:
            v[name] = rest
        if line.startswith("tunbench_ssh_config="):
            cfg = line
    lines = ["[all:vars]", cfg, "", "[server]", f"h1 {v['h1']}", "", "[client]"]
    lines += [f"{h} {v[h]} tunbench_client_addresses={pool}" for h, pool in pools.items()]
    out.write_text("\n".join(lines) + "\n")
    return out


class ControllerCpu:
    """The CPU seconds of a process and its descendants named in OWN, sampled until it exits."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:
                    if p.pid == self.pid or p.name() in OWN:
                        t = p.cpu_times()
                        self.seen[p.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.1)

    def total_s(self) -> float:
        self._thread.join(timeout=5)
        return sum(self.seen.values())


def run(tmp: Path, tag: str, args: list[str], src: Path | None = None) -> tuple[dict, float, str]:  # type: ignore[type-arg]
    out = tmp / f"{tag}.json"
    env = {**os.environ, "COLUMNS": "160", **({"PYTHONPATH": str(src)} if src else {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunbench", "run", "--db", str(tmp / f"{tag}.db"), "--json", str(out), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    cpu = ControllerCpu(proc.pid)
    text, _ = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{tag} failed ({proc.returncode}):\n{text}")
    return json.loads(out.read_text()), cpu.total_s(), text


def storm_scenario(tmp: Path, n: int) -> Path:
    path = tmp / f"storm{n}.toml"
    path.write_text(
        f'[run]\ntunnels = ["wireguard-go"]\nrepeat = 1\ndirect = false\n[workload]\nkind = "storm"\n'
        f'[workload.storm]\nclients = [{n}]\nvariants = ["connect"]\ntimeout_s = 60\n'
    )
    return path


def storms(rounds: int, compare: Path | None = None) -> None:
    pools = {
        "h2": "198.18.200.100-198.18.200.219",
        "h3": "198.18.201.1-198.18.201.120",
        "h4": "198.18.201.130-198.18.201.250",
    }
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as d, ssh_hosts(Path(d), ("h1", "h2", "h3", "h4")) as hosts:
        tmp = Path(d)
        inv = inventory(hosts, tmp / "fleet.ini", pools)
        invs = {"hosts": inv}
        if compare is not None:  # the same hosts, whose agents run the other tree
            old = tmp / "fleet-old.ini"
            old.write_text(inv.read_text().replace(f"PYTHONPATH={ROOT / 'src'}", f"PYTHONPATH={compare}"))
            invs["hosts-old"] = old
        places = ["local", *invs]
        for r in range(rounds):
            order = places if r % 2 == 0 else places[::-1]
            for n in SIZES:
                sc = storm_scenario(tmp, n)
                for where in order:
                    extra = ["--hosts", str(invs[where])] if where in invs else []
                    src = compare if where == "hosts-old" else None
                    doc, cpu_s, _ = run(tmp, f"{where}{n}r{r}", [str(sc), *extra], src)
                    (t,) = doc["trials"]
                    if t["status"] != "ok":
                        raise SystemExit(f"{where} {n}: {t['error']}")
                    m = t["metrics"]
                    rows.setdefault((where, n), []).append(
                        {
                            "launch": m["clients.launch_spread_s"],
                            "p50": m["clients.ready_p50_s"],
                            "max": m["clients.ready_max_s"],
                            "hs": m["clients.handshakes_per_s"],
                            "skew": m.get("clients.start_skew_s") or 0.0,
                            "unc": m.get("clients.start_skew_uncertainty_s") or 0.0,
                            "cpu": cpu_s,
                        }
                    )
                    print(f"round {r + 1} {where} {n}: {rows[(where, n)][-1]}", flush=True)
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in rows.items()}
    print(f"\nwireguard-go storms (connect, all at once), median of {rounds} round(s):\n")
    head = ["placement", "clients", "launch spread s", "ready p50 s", "ready max s", "hs/s", "start skew ms"]
    print("| " + " | ".join([*head, "controller CPU-s"]) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (where, n), m in sorted(med.items()):
        skew = f"{1e3 * m['skew']:.2f} ± {1e3 * m['unc']:.2f}" if where != "local" else "–"
        print(
            f"| {where} | {n} | {m['launch']:.3f} | {m['p50']:.2f} | {m['max']:.2f} | {m['hs']:.0f} | {skew} "
            f"| {m['cpu']:.2f} |"
        )
    lo, hi = SIZES
    for where in sorted({w for w, _ in med}):
        per = (med[(where, hi)]["cpu"] - med[(where, lo)]["cpu"]) / (hi - lo)
        print(f"controller CPU per client ({where}, {lo} -> {hi} clients): {1e3 * per:.2f} ms")


def openvpn() -> None:
    # 500 clients over three hosts: 167 addresses each on the hosts' /23
    pools = {
        "h2": "198.18.200.10-198.18.200.176",
        "h3": "198.18.200.177-198.18.201.87",
        "h4": "198.18.201.88-198.18.201.254",
    }
    with tempfile.TemporaryDirectory() as d, ssh_hosts(Path(d), ("h1", "h2", "h3", "h4")) as hosts:
        tmp = Path(d)
        inv = inventory(hosts, tmp / "fleet.ini", pools)
        t0 = time.monotonic()
        _, cpu_s, text = run(
            tmp, "openvpn", [str(ROOT / "examples/openvpn-storm.toml"), "--hosts", str(inv), "--repeat", "1"]
        )
        print(text)
        print(f"wall {time.monotonic() - t0:.0f} s, controller CPU {cpu_s:.1f} s")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "storm"
    if mode == "openvpn":
        openvpn()
    else:
        args = sys.argv[2:]
        cmp_src = Path(args[args.index("--compare") + 1]).resolve() if "--compare" in args else None
        nums = [a for a in args if a.isdigit()]
        storms(int(nums[0]) if nums else 3, cmp_src)
