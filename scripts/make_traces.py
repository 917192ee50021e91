"""Generate the synthetic traces shipped with tunbench's built-in profiles (deterministic: seeded).

    PYTHONPATH=src python scripts/make_traces.py [OUT_DIR]     # default: src/tunbench/wan_profiles/traces

- lte-handover-{down,up}.mm: a 15 s drive on an LTE cell, in mahimahi's packet-delivery format (one line
  per 1500-byte delivery opportunity, its time in ms). The capacity wanders (a random walk of its logarithm
  every 100 ms, clipped), then a handover at 7.0 s leaves 400 ms without any delivery, and the new cell
  starts at a different level. Down 4-40 Mbit/s (mean about 15), up about a third of it.
- geo-rain-fade.csv: a GEO satellite link (300 ms one way) through a rain fade, as a timeline of changes
  (at, direction, rate, loss): the downlink falls from 50 to 10 Mbit/s and its loss rises to 2 % between
  8 and 14 s, then recovers by 20 s; the uplink loses less.

Nobody's measured data: the numbers are made up to look like the kinds of link they are named after.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

from tunbench.link.mahimahi import OPPORTUNITY_BITS, opportunities, text


def lte_rates(seed: int, scale: float, seconds: float = 15.0) -> list[float]:
    """Per-ms capacity of the drive: a log random walk per 100 ms; no capacity during the handover."""
    rng = random.Random(seed)
    level = math.log(12e6 * scale)
    lo, hi = math.log(4e6 * scale), math.log(40e6 * scale)
    rates: list[float] = []
    for block in range(int(seconds * 10)):
        t = block / 10
        if abs(t - 7.0) < 1e-9:  # the new cell: another level
            level = math.log(20e6 * scale)
        level = min(hi, max(lo, level + rng.gauss(0.0, 0.12)))
        bps = 0.0 if 7.0 <= t < 7.4 else math.exp(level)
        rates += [bps] * 100
    return rates


GEO = """# A GEO satellite link through a rain fade (tunbench's scripts/make_traces.py; made-up numbers).
# at: time after the start of the traffic; an empty cell leaves that key as it was.
at,direction,rate,loss
8s,down,40mbit,0.1%
10s,down,20mbit,0.5%
12s,down,10mbit,2%
14s,down,20mbit,0.5%
16s,down,40mbit,0.1%
20s,down,50mbit,0%
10s,up,8mbit,0.2%
16s,up,10mbit,0%
"""


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, seed, scale in (("lte-handover-down", 1, 1.0), ("lte-handover-up", 2, 1 / 3)):
        ops = opportunities(lte_rates(seed, scale))
        (out / f"{name}.mm").write_text(text(ops))
        print(f"{name}.mm: {len(ops)} opportunities, mean {len(ops) * OPPORTUNITY_BITS / 15 / 1e6:.1f} Mbit/s")
    (out / "geo-rain-fade.csv").write_text(GEO)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "src/tunbench/wan_profiles/traces")
