"""Counted instructions on `--hosts` against the same run locally: wireguard-go over the work gate's fixed UDP
load (`-w udp --direction up --duration 2 --omit 0 --count-instructions --repeat 3`), alternately on this
machine's namespaces and on the namespaced sshd hosts of the integration tests (tests/sshhosts.py: the client
on h1, the server on h2, each counted by its host's agent), ROUNDS of each, the order swapped every round.
Per placement it prints each side's instructions per byte (outside Go's runtime, per byte its tunnel device
handled: the work gate's figures) and the two added, with each trial's figures, their median and range, and
the ratio of the medians (hosts / local).

Usage (as root, alone on the machine, under the measurement lock):
  .venv/bin/python scripts/bench_hosts_instructions.py [ROUNDS]"""

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

ARGS = ["-t", "wireguard-go", "-w", "udp", "--direction", "up", "--duration", "2", "--omit", "0"]
ARGS += ["--count-instructions", "--repeat", "3", "--no-direct"]
FIGURES = {"client": "instr.client.per_byte", "server": "instr.server.per_byte", "both": "instr.per_byte"}


def one(tmp: Path, tag: str, extra: list[str]) -> list[dict[str, Any]]:
    out = tmp / f"{tag}.json"
    argv = [sys.executable, "-m", "tunbench", "run", "--db", str(tmp / f"{tag}.db"), "--json", str(out)]
    res = subprocess.run([*argv, *ARGS, *extra], capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"{tag} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return [t["metrics"] | {"_params": t["params"]} for t in json.loads(out.read_text())["trials"]]


def main(rounds: int) -> None:
    got: dict[str, list[dict[str, Any]]] = {"local": [], "hosts": []}
    with tempfile.TemporaryDirectory(prefix="tb-instr-") as d, ssh_hosts(Path(d), ("h1", "h2")) as hosts:
        tmp = Path(d)
        for r in range(rounds):
            order = ["local", "hosts"] if r % 2 == 0 else ["hosts", "local"]
            for mode in order:
                extra = ["--hosts", str(hosts.inventory)] if mode == "hosts" else []
                trials = one(tmp, f"{mode}{r}", extra)
                got[mode] += trials
                for t in trials:
                    said = {k: t["_params"][k] for k in ("instr", "instr_whole") if k in t["_params"]}
                    print(f"{mode}{r}: " + ", ".join(f"{n} {t.get(k)}" for n, k in FIGURES.items()), said or "")
    for name, key in FIGURES.items():
        line, meds = [], {}
        for mode, rows in got.items():
            xs = [row[key] for row in rows if row.get(key) is not None]
            if not xs:
                line.append(f"{mode}: none")
                continue
            meds[mode] = med = statistics.median(xs)
            spread = 100 * (max(xs) - min(xs)) / med
            line.append(f"{mode} {med:.5g} ({min(xs):.5g}-{max(xs):.5g}, n {len(xs)}, range {spread:.2f}%)")
        ratio = f"; hosts/local {meds['hosts'] / meds['local']:.5f}" if len(meds) == 2 else ""
        print(f"instructions/byte {name}: " + "; ".join(line) + ratio)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
