"""The figures a `--hosts` run now derives from the hosts' underlay counters, against a local run of the same
trial: socat relaying iperf3 up, counted (`--count-work`), 2 s, alternately on this machine's namespaces and
on the namespaced sshd hosts of the integration tests (tests/sshhosts.py: the client on h1, the server on
h2), ROUNDS of each, the order swapped every round. Per placement it prints each figure's median and range,
and the spread of each placement's own repetitions (its A/A noise): the tunnel's CPU per bit delivered (the
cost gate's figure), the wire's bytes per payload byte (carried / delivered), and the client's syscalls,
reads and writes per MB of its underlay bytes. Last, the CPU figure's hosts/local ratio within each round:
what the integration test that compares one trial of each sees.

Usage (as root, alone on the machine, under the measurement lock):
  .venv/bin/python scripts/bench_hosts_parity.py [ROUNDS]"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshhosts import ssh_hosts  # noqa: E402

ARGS = ["-t", "socat", "--no-direct", "--duration", "2", "--omit", "0", "--repeat", "1", "--direction", "up"]
ARGS += ["--count-work"]


def figures(m: dict[str, Any]) -> dict[str, float]:
    cpu = sum(m.get(f"trial_cpu.{r}.{k}_s") or 0.0 for r in ("client", "server") for k in ("user", "sys"))
    delivered = m["delivered_bytes"]
    client = sum(m.get(f"trial_cpu.client.{k}_s") or 0.0 for k in ("user", "sys"))
    return {
        "CPU ns/bit delivered": 1e9 * cpu / (8 * delivered),
        "client share of that CPU": client / cpu,
        "carried / delivered": m["carried_bytes"] / delivered,
        "client syscalls/MB": m["work.client.syscalls_per_mb"],
        "client reads/MB": m["work.client.read_per_mb"],
        "client writes/MB": m["work.client.write_per_mb"],
    }


def one(tmp: Path, tag: str, extra: list[str]) -> dict[str, float]:
    out = tmp / f"{tag}.json"
    argv = [sys.executable, "-m", "tunbench", "run", "--db", str(tmp / f"{tag}.db"), "--json", str(out)]
    res = subprocess.run([*argv, *ARGS, *extra], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"{tag} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    (t,) = json.loads(out.read_text())["trials"]
    return figures(t["metrics"])


def main(rounds: int) -> None:
    got: dict[str, list[dict[str, float]]] = {"local": [], "hosts": []}
    with tempfile.TemporaryDirectory(prefix="tb-parity-") as d, ssh_hosts(Path(d), ("h1", "h2")) as hosts:
        tmp = Path(d)
        for r in range(rounds):
            order = ["local", "hosts"] if r % 2 == 0 else ["hosts", "local"]
            for mode in order:
                extra = ["--hosts", str(hosts.inventory)] if mode == "hosts" else []
                got[mode].append(one(tmp, f"{mode}{r}", extra))
    for name in got["local"][0]:
        line = []
        for mode, rows in got.items():
            xs = [row[name] for row in rows]
            med = statistics.median(xs)
            line.append(f"{mode} {med:.4g} ({min(xs):.4g}-{max(xs):.4g}, range {100 * (max(xs) - min(xs)) / med:.1f}%)")
        ratio = statistics.median(r[name] for r in got["hosts"]) / statistics.median(r[name] for r in got["local"])
        print(f"{name}: " + "; ".join(line) + f"; hosts/local {ratio:.3f}")
    # what one test sees: one trial of each placement, run one after the other
    cpu = "CPU ns/bit delivered"
    pairs = sorted(h[cpu] / lo[cpu] for h, lo in zip(got["hosts"], got["local"], strict=True))
    print("CPU ns/bit, hosts/local within each round: " + " ".join(f"{x:.3f}" for x in pairs))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
