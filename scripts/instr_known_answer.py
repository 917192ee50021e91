#!/usr/bin/env python3
"""Counted instructions against a known answer: the wg-spin build (scripts/build_wg_spin.sh) adds N xorshift
steps after each packet it encrypts and after each it decrypts. From the loop's machine code (objdump of the
build, read by this script) each packet costs a known number of instructions more: 12 per step (the loop body
of 10, its compare and its branch) plus the loop's entry and exit. A run of `--count-instructions` with two
labels of the same build, one with the spin off, gives the measured difference per packet, per side: each
trial's instructions over the packets its tunnel device carried (encrypted + decrypted), B minus A, paired by
repetition. The script prints both, and their ratio.

    scripts/instr_known_answer.py --db spin.db --run 1 --label-a base --label-b spin --spin 15 \\
        --binary /var/tmp/wg-spin/wireguard-go

It also prints the per-pair noise of each counted figure (the SD of the within-pair log ratio), the same
statistic compare's MDE is built on, for `--noise` runs (an A/A: both labels spin off)."""

from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tunbench.perf.instructions import DEVICE
from tunbench.report.compare import pair_trials
from tunbench.results import TrialRecord
from tunbench.store.db import Store


def spin_cost(binary: str) -> dict[str, tuple[int, int]]:
    """Per inlined spin site ("encrypt", "decrypt"): (instructions per step, extra instructions per packet
    beyond the steps), read from the build's machine code: the path with the spin on (the check, the set-up,
    the loop's first compare and branch, the exit test) minus the path with it off (the check alone)."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True, check=True)
    lines = dis.stdout.splitlines()
    out: dict[str, tuple[int, int]] = {}
    for i, line in enumerate(lines):
        if "<golang.zx2c4.com/wireguard/device.spinIters>" not in line or "(%rip),%" not in line:  # its loads
            continue
        func = "decrypt" if "RoutineDecryption" in "".join(lines[i : i + 40]) else "encrypt"
        block = []
        for ln in lines[i : i + 40]:
            m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", ln)
            if m:
                block.append((int(m.group(1), 16), m.group(2), m.group(3)))
            if "device.spinSink" in ln:
                break
        addrs = [a for a, _, _ in block]
        je = next(k for k, (_, op, _) in enumerate(block) if op == "je")  # spin off: jumps past the loop
        jb = next(k for k, (_, op, _) in enumerate(block) if op == "jb")  # the loop's back edge
        target = int(re.search(r"([0-9a-f]+) <", block[jb][2]).group(1), 16)  # type: ignore[union-attr]
        body = jb - addrs.index(target) + 1  # the steps' instructions, compare and branch included
        jmp = next(k for k, (_, op, _) in enumerate(block) if op == "jmp")
        setup = jmp - je  # after the check, up to and including the jump to the loop's compare
        jne = next(k for k, (_, op, _) in enumerate(block) if op == "jne" and k > jb)
        exit_test = jne - jb  # what follows the loop, up to the exit test's branch (taken: the state is never 0)
        off = je + 1  # the check alone
        on = je + 1 + setup + 2 + exit_test  # the check, the set-up, the first compare and branch, the exit
        out[func] = (body, on - off)
    return out


def per_packet(t: TrialRecord, role: str, *, runtime: bool = False) -> tuple[float, float, float] | None:
    """(instructions, packets encrypted, packets decrypted) of a role's trial, over the same workload call: the
    instructions outside Go's runtime, as the gate counts them (`runtime`: all of them)."""
    n = t.metrics.get(f"instr.{role}.count")
    in_runtime = t.metrics.get(f"instr.{role}.runtime")
    if n is not None and in_runtime is not None and not runtime:
        n -= in_runtime
    dev = (t.params.get("instr_devices") or {}).get(role) or DEVICE[role]
    tx, rx = (t.metrics.get(f"counters.{role}.dev.{dev}.{d}_packets") for d in ("tx", "rx"))
    if n is None or tx is None or rx is None:
        return None
    return n, tx, rx


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--label-a", required=True)
    ap.add_argument("--label-b", required=True)
    ap.add_argument("--spin", type=int, default=0, help="B's steps per packet (0: an A/A, noise only)")
    ap.add_argument("--binary", default="/var/tmp/wg-spin/wireguard-go")
    args = ap.parse_args()
    with Store(args.db) as store:
        run = store.find_run(args.run)
    ok = [t for t in run.trials if t.status == "ok"]
    a = [t for t in ok if t.label == args.label_a]
    b = [t for t in ok if t.label == args.label_b]
    pairs, lost = pair_trials(a, b)
    print(f"run {run.uid}: {len(pairs)} pairs ({lost} lost)")
    # the per-pair noise of each counted and timed figure: SD of ln(B/A) over the pairs
    for name in (
        "instr.per_byte",
        "instr.client.per_byte",
        "instr.server.per_byte",
        "instr.client.all_per_byte",
        "instr.server.all_per_byte",
        "throughput_bps",
    ):
        d = [math.log(vb / va) for ta, tb in pairs if (va := ta.metrics.get(name)) and (vb := tb.metrics.get(name))]
        if len(d) >= 2:
            print(
                f"  {name:24} per-pair SD {statistics.stdev(d):.2%}, mean change {math.expm1(statistics.mean(d)):+.2%}"
            )
    if not args.spin:
        return 0
    cost = spin_cost(args.binary)
    print(f"spin {args.spin}: per step and extra per packet, from the machine code: {cost}")
    for role, runtime in (("client", False), ("server", False), ("client", True), ("server", True)):
        # the client encrypts what it sends (tx) and decrypts what it receives (rx); so does the server
        step_tx, extra_tx = cost["encrypt"]
        step_rx, extra_rx = cost["decrypt"]
        measured, predicted = [], []
        for ta, tb in pairs:
            pa, pb = per_packet(ta, role, runtime=runtime), per_packet(tb, role, runtime=runtime)
            if pa is None or pb is None:
                continue
            na, txa, rxa = pa
            nb, txb, rxb = pb
            want = (step_tx * args.spin + extra_tx) * txb + (step_rx * args.spin + extra_rx) * rxb
            measured.append(nb / (txb + rxb) - na / (txa + rxa))
            predicted.append(want / (txb + rxb))
        if measured:
            m, p = statistics.median(measured), statistics.median(predicted)
            se = statistics.stdev(measured) / math.sqrt(len(measured)) if len(measured) > 1 else math.nan
            what = f"{role}, Go's runtime included" if runtime else role
            print(
                f"  {what}: measured {m:+.1f} instructions per packet (median of {len(measured)} pairs, "
                f"SE of the mean {se:.1f}), predicted {p:+.1f}: ratio {m / p:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
