#!/usr/bin/env python3
"""A wireguard-go pair set up by hand alternated with `tunbench run` of the same tunnel: scripts/cross_check.py's
throughput check through wireguard-go, with its warm-up second (`--omit 1`) as this script always had.

    python scripts/hand_vs_tunbench.py --rounds 5 --duration 3    # as root, from the checkout
    python scripts/hand_vs_tunbench.py --rounds 1 --json out.json # what the integration test runs

is `python scripts/cross_check.py --only throughput --via wireguard-go --omit 1 --rounds 5 --duration 3`;
every option of cross_check.py is taken, and one given here overrides these (`--omit 0`).
docs/benchmarks/interference.md holds a result.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cross_check

DEFAULTS = ["--only", "throughput", "--via", "wireguard-go", "--omit", "1"]


def main(argv: list[str] | None = None) -> int:
    return cross_check.main([*DEFAULTS, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
