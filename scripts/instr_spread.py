#!/usr/bin/env python3
"""Where a work-gate run's pair noise is, function by function, from the dumps it kept (docs/work-gate.md,
"What moves a count").

    TUNBENCH_KEEP_DUMPS=DIR tunbench run ... --count-instructions --name RUN --db DB   # the work gate's line
    scripts/instr_spread.py DB RUN DIR [--top 12] [--label-a base --label-b pr] [--leave-out REGEX] [--delta]

For each trial and side, each kept dump is split by function (callgrind_annotate; a stripped Go build's
functions named from its pclntab, as the gate names them) and by call count (the dump's `calls=` lines, summed
per callee). Each function's self instructions are divided by the side's bytes (the gate's own divisor, read
back from the stored figure), so they add up to the gated `instructions/byte` of the side.

The gated pair difference d = (B - A) / mean, for one side, is the sum of each function's difference d_f. So
var(d) = sum over f of cov(d_f, d): each function's share of the pair variance, which is what the output ranks
(with the function's mean count and calls per byte, and the correlation of its calls with its instructions).
Go's runtime (the functions the gate leaves out) is listed apart, as one line.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tunbench.host.proc import run_cmd
from tunbench.monitor import callgrind
from tunbench.monitor.counters import INSTR_COUNT, INSTR_RUNTIME, INSTR_SIDE
from tunbench.perf.instructions import DEVICE
from tunbench.report.compare import load_run, pair_trials
from tunbench.results import TrialRecord

_FN = re.compile(r"^c?fn=(?:\((\d+)\))? ?(.*)$")  # `fn=(n) name`, `fn=(n)`, or `fn=name` (uncompressed)
_OB = re.compile(r"^c?ob=(?:\((\d+)\))? ?(.*)$")
_CALLS = re.compile(r"^calls=(\d+)")
RUNTIME = "(Go's runtime, left out)"


def _named(m: re.Match[str], table: dict[str, str]) -> str:
    """The name on a compressed (`(n) name` defines, `(n)` refers) or uncompressed (`name`) line."""
    ident, text = m.group(1), m.group(2)
    if ident is None:
        return text
    if text:
        table[ident] = text
    return table.get(ident, "")


def calls_by_function(dump: Path, name: Callable[[str, str], str]) -> dict[str, float]:
    """The number of calls each function received in one dump (`calls=` lines, summed per callee), named by
    `name(object, callgrind's name)`. A `cob=` names the next call's callee object only; a callee named
    without one is in the caller's object."""
    fn_names: dict[str, str] = {}
    ob_names: dict[str, str] = {}
    calls: dict[str, float] = defaultdict(float)
    cob = ob = ""
    cfn = ""
    with dump.open() as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith(("ob=", "cob=")) and (m := _OB.match(line)):
                obj = _named(m, ob_names)
                if line.startswith("ob="):
                    ob = cob = obj
                else:
                    cob = obj
            elif line.startswith(("fn=", "cfn=")) and (m := _FN.match(line)):
                fn = _named(m, fn_names)
                if line.startswith("cfn="):
                    cfn = name(cob or ob, fn)
                else:
                    cob = ob
            elif line.startswith("calls=") and (m := _CALLS.match(line)):
                calls[cfn] += int(m.group(1))
                cob = ob
    return calls


def split(dump: Path) -> tuple[dict[str, float], dict[str, float]]:
    """One dump's self instructions and calls by function, the runtime's folded into RUNTIME: read once, then
    from `<dump>.split.json` beside it, while the rule of what is the runtime is the one it was read with."""
    cache = dump.with_name(dump.name + ".split.json")
    rule = callgrind.GO_RUNTIME.pattern
    if cache.exists():
        kept = json.loads(cache.read_text())
        if isinstance(kept, dict) and kept.get("rule") == rule:
            return kept["counts"], kept["calls"]
    counts, calls = _split(dump)
    cache.write_text(json.dumps({"rule": rule, "counts": counts, "calls": calls}))
    return counts, calls


def _split(dump: Path) -> tuple[dict[str, float], dict[str, float]]:
    tools = callgrind.find()
    if tools.annotate is None:
        sys.exit("callgrind_annotate is missing (apt-get install valgrind)")
    text = run_cmd([tools.annotate, "--threshold=100", str(dump)], timeout_s=60).stdout
    _, by_address = callgrind.address_names(callgrind.dumped_program(dump))

    def name(obj: str, fn: str) -> str:
        fn = callgrind.function_name(fn.split("'")[0], obj, by_address)
        return RUNTIME if callgrind.GO_RUNTIME.match(fn) else fn

    counts: dict[str, float] = defaultdict(float)
    for n, fn, obj in callgrind.functions(text):
        counts[name(obj, fn)] += n
    return counts, calls_by_function(dump, name)


def side(t: TrialRecord, role: str, dumps: Path) -> tuple[dict[str, float], dict[str, float], float] | None:
    """A trial's side: instructions and calls per byte by function, and the bytes per packet its tunnel device
    handled (nan where its counters are missing); None: not counted or no dump kept."""
    per_byte = t.metrics.get(INSTR_SIDE.key(role=role))
    count, runtime = t.metrics.get(INSTR_COUNT.key(role=role)), t.metrics.get(INSTR_RUNTIME.key(role=role))
    if per_byte is None or count is None or runtime is None:
        return None
    found = sorted(dumps.glob(f"{t.seq:03d}-{t.label}-r{t.repetition}.{role}.*.callgrind"))
    if not found:
        return None
    nbytes = (count - runtime) / per_byte
    instr: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    for d in found:
        c, k = split(d)
        for f, v in c.items():
            instr[f] += v / nbytes
        for f, v in k.items():
            calls[f] += v / nbytes
    dev = (t.params.get("instr_devices") or {}).get(role) or DEVICE[role]
    counts = [t.metrics.get(f"counters.{role}.dev.{dev}.{d}_packets") for d in ("tx", "rx")]
    packets = math.nan if None in counts else sum(c for c in counts if c is not None)
    return instr, calls, nbytes / packets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("run")
    ap.add_argument("dumps", type=Path)
    ap.add_argument("--label-a", default="base")
    ap.add_argument("--label-b", default="pr")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument(
        "--leave-out",
        type=re.compile,
        help="a regex of functions also left out: prints the per-pair SD of each side's figure and of the sum "
        "(the gated figure) with them out, beside the gate's own",
    )
    ap.add_argument(
        "--delta",
        action="store_true",
        help="an A/B: each function's mean change per packet (B - A), largest first, instead of the noise",
    )
    args = ap.parse_args()
    run = load_run(args.run, args.db)
    ok = [t for t in run.trials if t.status == "ok"]
    pairs, _ = pair_trials([t for t in ok if t.label == args.label_a], [t for t in ok if t.label == args.label_b])
    both: dict[str, list[tuple[float, ...]]] = {}
    for role in ("client", "server"):
        rows = [(side(a, role, args.dumps), side(b, role, args.dumps)) for a, b in pairs]
        sides = [(a, b) for a, b in rows if a is not None and b is not None]
        if len(sides) < 3:
            print(f"{role}: {len(sides)} pairs with dumps, too few")
            continue
        fns = {f for a, b in sides for f in (*a[0], *b[0])}
        mean_total = statistics.fmean(sum(v for f, v in s[0].items() if f != RUNTIME) for pair in sides for s in pair)
        d = {f: [(b[0].get(f, 0.0) - a[0].get(f, 0.0)) / mean_total for a, b in sides] for f in fns}
        dc = {f: [b[1].get(f, 0.0) - a[1].get(f, 0.0) for a, b in sides] for f in fns}
        gated = [sum(d[f][i] for f in fns if f != RUNTIME) for i in range(len(sides))]
        total_var = statistics.variance(gated)
        runtime_sd = f"{statistics.stdev(d[RUNTIME]):.3%}" if RUNTIME in d else "none (no Go runtime)"
        print(
            f"\n{role}: {len(sides)} pairs; gated instructions/byte {mean_total:.4f}; per-pair SD "
            f"{statistics.stdev(gated):.3%} (of (B - A) / mean); the runtime's {runtime_sd} (left out)"
        )
        if args.leave_out:
            out = {f for f in fns if f != RUNTIME and args.leave_out.search(f)}
            kept = [
                tuple(
                    sum(v for f, v in x[0].items() if f != RUNTIME and f not in drop)
                    for x in (a, b)
                    for drop in (set(), out)
                )
                for a, b in sides
            ]
            both[role] = kept  # (A gated, A without, B gated, B without) per pair
            share_out = sum(statistics.covariance(d[f], gated) for f in out) / total_var
            part = statistics.fmean(k[0] - k[1] for k in kept) / mean_total
            print(
                f"  leaving out {len(out)} more functions ({part:.2%} of the count, {share_out:.0%} of the pair "
                f"variance): per-pair SD of ln(B/A) {_sd(kept, 1):.3%}, against {_sd(kept, 0):.3%}"
            )
        if args.delta:
            per_packet = {f: [b[0].get(f, 0.0) * b[2] - a[0].get(f, 0.0) * a[2] for a, b in sides] for f in fns}
            total = [sum(per_packet[f][i] for f in fns if f != RUNTIME) for i in range(len(sides))]
            print(
                f"  B - A, instructions per packet, gated: mean {statistics.fmean(total):+.1f} "
                f"(SE {statistics.stdev(total) / math.sqrt(len(total)):.1f}), median {statistics.median(total):+.1f}; "
                "by function (means):"
            )
            for f in sorted(fns, key=lambda f: -abs(statistics.fmean(per_packet[f])))[: args.top]:
                v = per_packet[f]
                print(f"  {statistics.fmean(v):>+10.1f} (SE {statistics.stdev(v) / math.sqrt(len(v)):5.1f})  {f[:90]}")
            continue
        if args.leave_out:  # rank what is left
            fns = {f for f in fns if f == RUNTIME or not args.leave_out.search(f)}
            gated = [sum(d[f][i] for f in fns if f != RUNTIME) for i in range(len(sides))]
            total_var = statistics.variance(gated)
        share = {f: statistics.covariance(d[f], gated) / total_var for f in fns if f != RUNTIME}
        print(f"{'share of var':>12} {'instr/byte':>10} {'pair SD':>8} {'calls/kB':>9} {'r(calls)':>8}  function")
        for f in sorted(share, key=lambda f: -abs(share[f]))[: args.top]:
            mean_f = statistics.fmean(s[0].get(f, 0.0) for pair in sides for s in pair)
            mean_c = statistics.fmean(s[1].get(f, 0.0) for pair in sides for s in pair)
            rc = (
                statistics.correlation(d[f], dc[f])
                if min(statistics.stdev(d[f]), statistics.stdev(dc[f])) > 0
                else math.nan
            )
            print(
                f"{share[f]:>12.1%} {mean_f:>10.4f} {statistics.stdev(d[f]):>8.3%} {mean_c * 1000:>9.3f} "
                f"{rc:>8.2f}  {f[:90]}"
            )
    if len(both) == 2 and len(both["client"]) == len(both["server"]):
        summed = [tuple(c[i] + s[i] for i in range(4)) for c, s in zip(both["client"], both["server"], strict=True)]
        pattern = args.leave_out.pattern if args.leave_out else ""
        print(
            f"\nboth sides added (the gated figure), {len(summed)} pairs: per-pair SD of ln(B/A) "
            f"{_sd(summed, 0):.3%} as gated, {_sd(summed, 1):.3%} leaving out {pattern}"
        )


def _sd(kept: list[tuple[float, ...]], i: int) -> float:
    """The per-pair SD of ln(B/A), `i`: 0 the gated figure, 1 with the functions left out."""
    return statistics.stdev(math.log(k[2 + i] / k[i]) for k in kept)


if __name__ == "__main__":
    main()
