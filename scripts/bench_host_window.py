"""How closely the hosts' window edges follow the controller's (`--hosts`, remote/watch.py): a run of
wireguard-go trials on the namespaced sshd hosts of the integration tests (tests/sshhosts.py: h1 the client,
h2 the server), then, from every trial's `interference_detail.hosts`, each host's lateness at each edge (when
its agent woke for the edge, less the instant it was given, on the host's clock), how long its reading
took, and each host's clock offset uncertainty (what the mapping of the instant onto its clock may be off by).

Usage (as root, alone on the machine, under the measurement lock):
  .venv/bin/python scripts/bench_host_window.py [REPEAT]"""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshhosts import ssh_hosts  # noqa: E402


def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tb-window-") as d, ssh_hosts(Path(d), ("h1", "h2")) as hosts:
        db = Path(d) / "r.db"
        argv = [sys.executable, "-m", "tunbench", "run", "--db", str(db), "--hosts", str(hosts.inventory)]
        argv += ["-t", "wireguard-go", "--no-direct", "--direction", "up", "--duration", "2", "--omit", "1"]
        subprocess.run([*argv, "--repeat", str(repeat)], check=True, capture_output=True, text=True, timeout=1800)
        con = sqlite3.connect(db)
        late: dict[str, list[float]] = {"start": [], "end": []}
        read: list[float] = []
        for (text,) in con.execute("SELECT params FROM trials WHERE status = 'ok'"):
            for fig in (json.loads(text).get("interference_detail") or {}).get("hosts", {}).values():
                late["start"].append(fig["late_s"][0])
                late["end"].append(fig["late_s"][1])
                read += fig["read_s"]
        (meta,) = con.execute("SELECT provenance FROM runs").fetchone()
        clocks = {h: v["clock"]["uncertainty_s"] for h, v in json.loads(meta)["hosts"].items()}
    print(f"{len(late['start'])} host windows ({repeat} trials x 2 hosts)")
    for edge, xs in late.items():
        print(f"  {edge} edge late: median {1e3 * statistics.median(xs):.2f} ms, max {1e3 * max(xs):.2f} ms")
    print(f"  reading an edge: median {1e3 * statistics.median(read):.1f} ms, max {1e3 * max(read):.1f} ms")
    print("  clock offset uncertainty: " + ", ".join(f"{h} ± {1e3 * u:.3f} ms" for h, u in clocks.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
