"""docs/benchmarks/throughput.md's all-tunnels table from two JSON exports of `tunbench run
examples/all-tunnels.toml`, one with `--ip 4` and one with `--ip 6`: per tunnel, direction and flow count
the median throughput (min–max), x direct, CPU per side (% of one core) and Mbit per CPU-second of the
client, over IPv4 and beside it the IPv6 median and its ratio to IPv4.

Usage: python scripts/all_tunnels_table.py V4.json V6.json"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HEADER = (
    "| tunnel | dir | flows | IPv4 Mbit/s (min–max) | ×direct | CPU % client / server | Mbit/CPU-s client "
    "| IPv6 Mbit/s | v6 / v4 |"
)


def rows(path: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    doc = json.loads(Path(path).read_text())
    return {(s["label"], s["direction"], s["flows"]): s for s in doc["summary"] if s["n"]}


def cells(a: dict[str, Any], b: dict[str, Any] | None) -> list[str]:
    t = a["throughput_bps"]
    ratio = (a["ratio_to_direct"] or {}).get("value")
    cpu = a["cpu_pct"] or {}
    per = (a["bits_per_cpu_second"] or {}).get("client")
    b_med = b["throughput_bps"]["median"] if b else None
    return [
        f"{t['median'] / 1e6:,.0f} ({t['min'] / 1e6:,.0f}–{t['max'] / 1e6:,.0f})",
        "–" if ratio is None else f"{ratio:.3f}",
        " / ".join(f"{cpu[r]:.0f}" if cpu.get(r) is not None else "–" for r in ("client", "server")),
        "–" if not per else f"{per / 1e6:,.0f}",
        "–" if b_med is None else f"{b_med / 1e6:,.0f}",
        "–" if b_med is None else f"{b_med / t['median']:.2f}",
    ]


def main() -> None:
    v4, v6 = rows(sys.argv[1]), rows(sys.argv[2])
    print(HEADER)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(v4, key=lambda k: (k[1], k[2], -v4[k]["throughput_bps"]["median"])):
        print("| " + " | ".join([k[0], k[1], str(k[2]), *cells(v4[k], v6.get(k))]) + " |")


if __name__ == "__main__":
    main()
