"""The default gate's error rates, measured (issue 31, step 4): A/A runs of the README's A/B line as written,
A/B runs against a wireguard-go slowed by a known amount, and the long reference run that sizes it.

Every comparison is appended to a JSON-lines file (default docs/benchmarks/data/gate-runs.jsonl), one record
per run, so sittings on other days add to the same count; `summary` reads them all.

    # A/A: the README's line with the same binary on both sides, N times (each run 2 minutes)
    .venv/bin/python scripts/gate_error_rates.py aa --runs 5
    # the reference: one long run of the plain patched build against spin levels (scripts/build_wg_spin.sh)
    .venv/bin/python scripts/gate_error_rates.py --db ref.db reference --minutes 21 --spin 400,500
    # power: the README's line, base = spin off, pr = spin N
    .venv/bin/python scripts/gate_error_rates.py ab --runs 10 --spin 350
    .venv/bin/python scripts/gate_error_rates.py summary
    # what the noise of the runs kept in stores is made of (per-pair SDs, correlations, three readings)
    .venv/bin/python scripts/gate_error_rates.py --db DB1,DB2 noise

Each run takes the measurement lock (/tmp/tunbench-measure.lock) for itself, so other measurements wait and
do not overlap. Runs as root with the project's interpreter (PYTHONPATH=src when run from a checkout).
The README's line (what `aa` and `ab` run, with the sides' binaries filled in):

    tunbench run -t 'wireguard-go[bin=BASE,label=base]' -t 'wireguard-go[bin=PR,label=pr]' --no-direct \\
        --direction up --duration 2 --omit 1 --target-mde 3% --budget 2m --redo-interfered --name NAME
    tunbench compare NAME --label-a base --label-b pr --threshold 3% --target 3%
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import re
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from tunbench.monitor.counters import CARRIED as CARRIED_SPEC
from tunbench.monitor.counters import carried_bytes
from tunbench.report.compare import CompareError, compare_runs
from tunbench.session.defaults import INSTRUCTIONS_RATE
from tunbench.store.db import Store

ROOT = Path(__file__).resolve().parent.parent
CARRIED = CARRIED_SPEC.name
DATA = ROOT / "docs/benchmarks/data/gate-runs.jsonl"
LOCK = "/tmp/tunbench-measure.lock"
SPIN_DIR = Path("/var/tmp/wg-spin")
RECIPE = [
    "--no-direct", "--direction", "up", "--duration", "2", "--omit", "1", "--target-mde", "3%", "--budget", "2m",
    "--redo-interfered",
]  # fmt: skip
THRESHOLD = 0.03
WALL_LIMIT_S = 125.0  # "within 2 minutes", with the run's start and its store
WORK_RECIPE = [
    "--no-direct", "-w", "udp", "--direction", "up", "--duration", "2", "--omit", "0", "--count-instructions",
    "--target-mde", "1%", "--budget", "75s",
]  # fmt: skip
"""The work gate's line (docs/work-gate.md): counted instructions over a fixed UDP load, judged at 1%."""
WORK_DATA = ROOT / "docs/benchmarks/data/work-gate-runs.jsonl"
EXTRA: list[str] = []  # --extra: flags added to the recipe (to try a variant; recorded with each run)


def tunbench() -> list[str]:
    return [sys.executable, "-m", "tunbench"]


def commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip()


def spin_bin(n: int) -> str:
    """A wrapper that runs the patched build with `n` spin steps per packet (0: off), made once."""
    if not (SPIN_DIR / "wireguard-go").exists():
        sys.exit(f"{SPIN_DIR}/wireguard-go is missing: run scripts/build_wg_spin.sh first")
    path = SPIN_DIR / f"wireguard-go-spin{n}"
    if not path.exists():
        path.write_text(
            f'#!/bin/sh\nTB_SPIN_ITERS={n}\nexport TB_SPIN_ITERS\nexec "$(dirname "$0")/wireguard-go" "$@"\n'
        )
        path.chmod(0o755)
    return str(path)


HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
"""A CPU hog: one busy Python loop, bounded in time (a run's budget and then some), ended by its pid."""


@contextlib.contextmanager
def hogs(n: int, seconds: float) -> Iterator[None]:
    """`n` busy loops beside the run, on any CPU (the run's sides are placed on CPUs of their own, so the hogs
    share them), each ended by the pid started here, whatever happens."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=seconds)]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def measure(args: list[str], db: Path, hog: int = 0) -> tuple[float, str]:
    """One `tunbench run` under the lock, `hog` busy loops beside it; (its wall time, not the wait for the
    lock; its output)."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with hogs(hog, 300.0):
            start = time.monotonic()
            proc = subprocess.run([*tunbench(), "run", *args, "--db", str(db)], capture_output=True, text=True)
            wall = time.monotonic() - start
    if proc.returncode not in (0, 4):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        sys.exit(f"tunbench run exited {proc.returncode}")
    return wall, proc.stdout


def backfill_carried(run: Any) -> bool:
    """Give the trials of a store from before `carried_bytes` their count, from the same counters a run records
    it from now (the client's veth, both ways, over the whole workload call); True if any trial got one."""
    filled = False
    for t in run.trials:
        if CARRIED not in t.metrics and (carried := carried_bytes(t.metrics, "vc")) is not None:
            t.metrics[CARRIED] = carried
            filled = True
    return filled


def judged(db: Path, name: str, label_a: str, label_b: str) -> dict[str, Any]:
    """compare's paired verdicts on one run (as `compare NAME --label-a A --label-b B --threshold 3%`), with the
    metric the main tier gated on (`main`)."""
    with Store(db) as store:
        run = store.find_run(name)
    filled = backfill_carried(run)
    try:
        res = compare_runs(run, run, label_a=label_a, label_b=label_b, threshold=THRESHOLD)
    except CompareError as e:  # no verdict at all (e.g. every trial left out): a run to count, not a crash
        notes = sorted({f"{t.label}: {why}" for t in run.trials for why in (t.params.get("instr") or {}).values()})
        return {"metrics": {}, "exit": 2, "gate": "", "main": "", "error": str(e)[:2000], "instr_notes": notes[:20]}
    # what the test detects, whatever the size: the same comparison with no threshold (a significant change)
    seen = {r.metric.name: r.result.verdict for r in compare_runs(run, run, label_a=label_a, label_b=label_b).rows}
    metrics = {}
    for r in res.rows:
        c = r.result
        metrics[r.metric.name] = {
            "tier": "wide" if r.wide else "gate" if r.gated else "",
            "change": c.change,
            "ci": [c.ci_low, c.ci_high],
            "p_adjusted": c.p_adjusted,
            "mde": c.min_detectable_effect,
            "threshold": c.threshold,
            "pairs": c.n_pairs,
            "pair_sd": c.pair_sd,
            "outcome": res.outcome(r),
            "significant": c.significant,
            "detected": seen.get(r.metric.name, ""),
        }
    main = next((k for k, m in metrics.items() if m["tier"] == "gate"), "")
    out = {"metrics": metrics, "exit": res.exit_code, "gate": res.gate_line(), "main": main}
    runtime = [v for t in run.trials for k, v in t.metrics.items() if k.startswith("instr.") and k.endswith(".runtime")]
    if runtime:  # the work gate: whether Go's runtime was counted apart (0 everywhere: not a Go build, or not named)
        out["runtime_split"] = any(v for v in runtime if v)
        # and whether each trial's mode was read (an adapter's [instructions]: OpenVPN's two modes)
        if any("instr_mode" in t.params for t in run.trials):
            out["one_mode"] = True  # (the records of OpenVPN from before it: False, set by hand)
    return out | ({"carried": "backfilled from counters.client.dev.vc"} if filled else {})


def record(rec: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(json.dumps(rec, allow_nan=True) + "\n")


def one(
    kind: str, base: str, pr: str, db: Path, out: Path, extra: dict[str, Any], hog: int = 0, adapter: str = ""
) -> dict[str, Any]:
    """One run of the line and its judgement, appended to `out`. `adapter`: an A/A of that adapter as
    installed (its default build) instead of wireguard-go's `base` and `pr` builds."""
    name = f"gate-{kind}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    if adapter:
        tunnels = ["-t", f"{adapter}[label=base]", "-t", f"{adapter}[label=pr]"]
    else:
        tunnels = ["-t", f"wireguard-go[bin={base},label=base]", "-t", f"wireguard-go[bin={pr},label=pr]"]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    wall, text = measure([*tunnels, *RECIPE, *EXTRA, "--name", name], db, hog)
    stop = re.search(r"stopped (at the target|at the budget|after the planned repetitions)", text)
    rec = {
        "kind": kind, "name": name, "started": started, "commit": commit(), "wall_s": round(wall, 1),
        "stopped": stop.group(1) if stop else "", "extra": " ".join(EXTRA), "recipe": " ".join(RECIPE),
        **extra, **judged(db, name, "base", "pr"),
    }  # fmt: skip
    if RECIPE == WORK_RECIPE:  # the offered rate and the CPU: the work gate's line runs slower on some boxes
        rec |= {"rate": offered_rate(), "cpu": cpu_model()}
    record(rec, out)
    return rec


def offered_rate() -> str:
    """The work gate's offered rate: a scenario's among --extra's words ([workload.udp] rate), else the default."""
    for word in EXTRA:
        if word.endswith(".toml") and Path(word).is_file():
            rate = tomllib.loads(Path(word).read_text()).get("workload", {}).get("udp", {}).get("rate")
            if rate:
                return str(rate)
    return INSTRUCTIONS_RATE


def cpu_model() -> str:
    """This machine's CPU, as /proc/cpuinfo names it ("" where it does not)."""
    for text in Path("/proc/cpuinfo").read_text().splitlines():
        if text.startswith("model name"):
            return text.split(":", 1)[1].strip()
    return ""


def line(rec: dict[str, Any]) -> str:
    if rec.get("error"):
        return f"{rec['name']}: {rec['wall_s']:.0f} s, no verdict: {rec['error'][:200]}"
    parts = []
    for name, m in rec["metrics"].items():
        if m["tier"]:
            parts.append(f"{name.split('.')[-1][:6]} {m['change']:+.1%} mde ±{m['mde']:.1%} {m['outcome']}")
    return f"{rec['name']}: {rec['wall_s']:.0f} s, {rec.get('stopped', '')}; " + "; ".join(parts)


def cmd_runs(kind: str, args: argparse.Namespace) -> None:
    if kind == "aa":
        base = pr = args.bin
        extra: dict[str, Any] = {"bin": args.bin} | ({"hog": args.hog} if args.hog else {})
        extra |= {"adapter": args.adapter} if args.adapter else {}
    else:
        base, pr = spin_bin(0), spin_bin(args.spin)
        extra = {"spin": args.spin}
    with tempfile.TemporaryDirectory(prefix="gate-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "gate.db"
        for i in range(args.runs):
            if args.until and datetime.now().astimezone() + RUN_S > _until(args.until):
                print(f"stopped before run {i + 1}: it would end after {args.until}", flush=True)
                break
            rec = one(kind, base, pr, db, Path(args.out), extra, getattr(args, "hog", 0), getattr(args, "adapter", ""))
            print(f"[{i + 1}/{args.runs}] {line(rec)}", flush=True)


RUN_S = timedelta(seconds=135)  # a 2-minute budget, its start and its store


def _until(text: str) -> datetime:
    """HH:MM today (local time)."""
    hour, minute = (int(x) for x in text.split(":"))
    return datetime.now().astimezone().replace(hour=hour, minute=minute, second=0, microsecond=0)


def cmd_reference(args: argparse.Namespace) -> None:
    spins = [int(x) for x in args.spin.split(",")]
    tunnels = ["-t", f"wireguard-go[bin={spin_bin(0)},label=base]"]
    for n in spins:
        tunnels += ["-t", f"wireguard-go[bin={spin_bin(n)},label=spin{n}]"]
    name = args.existing or f"gate-reference-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    with tempfile.TemporaryDirectory(prefix="gate-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "gate.db"
        started = datetime.now(UTC).isoformat(timespec="seconds")
        run_args = [
            *tunnels, "--no-direct", "--direction", "up", "--duration", "2", "--omit", "1", "--cpuset", "split",
            "--repeat", "1000", "--budget", f"{args.minutes}m", "--name", name,
        ]  # fmt: skip
        wall = 0.0
        if args.existing:  # judge a reference run kept in --db again (e.g. after the gate changed)
            with Store(db) as store:
                run = store.find_run(name)
            started = run.trials[0].started_at
            wall = (datetime.fromisoformat(run.trials[-1].started_at) - datetime.fromisoformat(started)).total_seconds()
        else:
            wall, _ = measure(run_args, db)
        for n in spins:
            rec = {
                "kind": "reference", "name": name, "started": started, "commit": commit(), "wall_s": round(wall, 1),
                "spin": n, **judged(db, name, "base", f"spin{n}"),
            }  # fmt: skip
            record(rec, Path(args.out))
            print(f"spin {n}: " + line(rec), flush=True)


def _rate(k: int, n: int) -> str:
    if not n:
        return "no runs"
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k} of {n} ({k / n:.1%}, 95% CI {ci.low:.1%}-{ci.high:.1%})"


def design(rec: dict[str, Any]) -> str:
    """Which gate judged a record: its main tier's metric, and whether its run was judged again later (its
    stop then followed the gate it was measured under)."""
    main = rec.get("main") or next((k for k, m in rec["metrics"].items() if m["tier"] == "gate"), "")
    hog = f", beside {rec['hog']} busy loops" if rec.get("hog") else ""
    rate = f", at {rec['rate']}" if rec.get("rate", "20mbit") != "20mbit" else ""  # records before it: 20mbit
    adapter = f", {rec['adapter']}" if rec.get("adapter") else ""
    if not rec.get("adapter") and rec.get("runtime_split") is False:  # a Go build whose runtime was not named
        adapter += ", Go's runtime not separated"
    if rec.get("adapter") and rec.get("one_mode") is False:  # OpenVPN before its adapter named the mode it counts
        adapter += ", both modes counted"
    return (f"{main}, judged again" if rec.get("rejudged") else main) + adapter + hog + rate


def cmd_summary(args: argparse.Namespace) -> None:
    recs = [json.loads(x) for x in Path(args.out).read_text().splitlines() if x.strip()]
    if failed := [r for r in recs if r.get("error")]:  # compare gave no verdict at all: counted apart, never "within"
        print(f"== runs compare could not judge: {len(failed)}")
        for r in failed:
            print(f"  {r['name']} ({r['kind']}{', hog ' + str(r['hog']) if r.get('hog') else ''}): {r['error'][:160]}")
        recs = [r for r in recs if not r.get("error")]
    for d in sorted({design(r) for r in recs}):
        print(f"== main tier: {d}")
        summarize([r for r in recs if design(r) == d])


def summarize(recs: list[dict[str, Any]]) -> None:
    aa = [r for r in recs if r["kind"] == "aa"]
    false = sum(
        1 for r in aa if any(m["outcome"] in ("regressed", "improved") for m in r["metrics"].values() if m["tier"])
    )
    if aa:
        print(f"A/A: false verdicts (any gated comparison regressed or improved): {_rate(false, len(aa))}")
    for tier in ("gate", "wide") if aa else ():
        seen = sum(
            1
            for r in aa
            if any(m.get("detected") in ("better", "worse") for m in r["metrics"].values() if m["tier"] == tier)
        )
        print(f"A/A: a significant change of any size in the {tier} tier (no threshold): {_rate(seen, len(aa))}")
    within = sum(
        1 for r in aa if all(m["mde"] <= THRESHOLD for m in r["metrics"].values() if m["tier"] == "gate")
        and r["wall_s"] <= WALL_LIMIT_S
    )  # fmt: skip
    both = sum(
        1 for r in aa if all(m["mde"] <= m["threshold"] for m in r["metrics"].values() if m["tier"])
        and r["wall_s"] <= WALL_LIMIT_S
    )  # fmt: skip
    if aa:
        print(
            f"A/A: MDE <= {THRESHOLD:.0%} on every gated metric of the main tier within {WALL_LIMIT_S:.0f} s: "
            f"{_rate(within, len(aa))}"
        )
        print(f"A/A: and every gated metric within its tier's threshold (the wide: 6%): {_rate(both, len(aa))}")
    for name in sorted({k for r in aa for k in r["metrics"]}):
        ms = [r["metrics"][name] for r in aa if name in r["metrics"]]
        mdes = sorted(m["mde"] for m in ms if math.isfinite(m["mde"]))
        if mdes:
            print(f"  {name}: MDE median ±{mdes[len(mdes) // 2]:.1%}, range ±{mdes[0]:.1%} to ±{mdes[-1]:.1%}")
    walls = sorted(r["wall_s"] for r in aa)
    pairs = sorted(m["pairs"] for r in aa for k, m in r["metrics"].items() if k == "cpu_s_per_bit.client")
    if walls and pairs:
        print(f"  wall: {walls[0]:.0f}-{walls[-1]:.0f} s; pairs: {pairs[0]}-{pairs[-1]}")
    for r in recs:
        if r["kind"] == "reference":
            print(f"reference, spin {r['spin']} ({r['wall_s'] / 60:.0f} min): " + "; ".join(
                f"{k}: {m['change']:+.2%} [{m['ci'][0]:+.2%}, {m['ci'][1]:+.2%}] ({m['pairs']} pairs)"
                for k, m in r["metrics"].items() if m["tier"]
            ))  # fmt: skip
    for spin in sorted({r["spin"] for r in recs if r["kind"] == "ab"}):
        ab = [r for r in recs if r["kind"] == "ab" and r["spin"] == spin]
        names = sorted({k for r in ab for k, m in r["metrics"].items() if m["tier"]})
        for name in names:
            hit = sum(1 for r in ab if r["metrics"].get(name, {}).get("outcome") == "regressed")
            seen = sum(1 for r in ab if r["metrics"].get(name, {}).get("detected") == "worse")
            print(
                f"A/B spin {spin}: {name}: a significant slowdown detected in {_rate(seen, len(ab))}; "
                f"regressed beyond its threshold in {hit}"
            )
        anyhit = sum(1 for r in ab if r["exit"] == 1)
        print(f"A/B spin {spin}: the gate failed (exit 1) in {_rate(anyhit, len(ab))}")


def cmd_rejudge(args: argparse.Namespace) -> None:
    """Judge the runs of the records again with this checkout's compare (their stores: one or more), keeping
    each record's run facts (wall time, how it stopped). --append: add the new judgements as records of their
    own (`rejudged`: the commit that judged them), for the runs of records measured under another main tier
    (--design), and keep the originals; else replace the records in place."""
    recs = [json.loads(x) for x in Path(args.out).read_text().splitlines() if x.strip()]
    dbs = [Path(x) for x in args.stores]
    out = []
    for rec in recs:
        if args.append and (rec.get("rejudged") or design(rec) != args.design):
            continue
        for db in dbs:
            with Store(db) as store:
                names = {r.name for r in store.runs()}
            if rec["name"] in names:
                label_b = f"spin{rec['spin']}" if rec["kind"] == "reference" else "pr"
                stale = ("error", "instr_notes")  # a judgement that had no verdict said why: the new one says its own
                rec = {k: v for k, v in rec.items() if k not in stale} | judged(db, rec["name"], "base", label_b)
                rec = rec | ({"rejudged": commit()} if args.append else {})
                break
        if not args.append or rec.get("rejudged"):
            out.append(rec)
    if args.append:
        for rec in out:
            record(rec, Path(args.out))
    else:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in out))
    print(f"judged {len(out)} record(s) again")


def _cpu(m: dict[str, Any], role: str, key: str) -> float:
    return float(m[f"{key}.{role}.user_s"] + m[f"{key}.{role}.sys_s"])


READINGS: dict[
    str, Callable[[dict[str, Any]], float]
] = {  # one quantity taken different ways: which way is quiet (docs/precision.md, the gate)
    "window CPU / goodput": lambda m: (_cpu(m, "client", "cpu") + _cpu(m, "server", "cpu")) / m["iperf3.bytes.up"],
    "trial CPU / iperf3 sent": lambda m: (
        (_cpu(m, "client", "trial_cpu") + _cpu(m, "server", "trial_cpu")) / m["iperf3.sent_bytes_total.up"]
    ),
    "trial CPU / carried": lambda m: (_cpu(m, "client", "trial_cpu") + _cpu(m, "server", "trial_cpu")) / m[CARRIED],
}


def cmd_noise(args: argparse.Namespace) -> None:
    """Per run of DB: each gated metric's per-pair SD of ln(pr/base), and how the metrics' log ratios correlate
    (what the noise is made of); then, over every trial (none left out), the per-pair SD of the tunnel's CPU
    per bit read three ways (READINGS), and their RMS over the runs."""
    import numpy as np

    from tunbench.report.compare import metrics_for, pair_trials, pair_values

    variances: dict[str, list[float]] = {k: [] for k in READINGS}
    for path in args.db.split(","):
        with Store(Path(path)) as store:
            runs = [r for r in store.runs() if r.name.startswith(args.prefix)]
            for summary in runs:
                run = store.find_run(str(summary.id))
                backfill_carried(run)
                a = [t for t in run.trials if t.label == "base" and t.status == "ok"]
                for label in sorted({t.label for t in run.trials} - {"base"}):
                    b = [t for t in run.trials if t.label == label and t.status == "ok"]
                    pairs, _ = pair_trials(a, b)
                    d = {}
                    for m in metrics_for(run.trials, ("throughput", "cpu")):
                        va, vb = pair_values(pairs, m)
                        d[m.title] = np.log(np.asarray(vb) / np.asarray(va))
                    sds = ", ".join(f"{k} {np.std(v, ddof=1):.1%}" for k, v in d.items())
                    keys = list(d)
                    corr = ", ".join(
                        f"{keys[i]}~{keys[j]} {np.corrcoef(d[keys[i]], d[keys[j]])[0, 1]:+.2f}"
                        for i in range(len(keys))
                        for j in range(i + 1, len(keys))
                    )
                    print(f"{run.name} {label}: {len(pairs)} pairs; per-pair SD: {sds}; correlation: {corr}")
                    read = {}
                    for name, f in READINGS.items():
                        x = np.log([f(pb.metrics) / f(pa.metrics) for pa, pb in pairs])
                        variances[name].append(float(np.var(x, ddof=1)))
                        read[name] = float(np.std(x, ddof=1))
                    print("  read three ways, every trial: " + ", ".join(f"{k} {v:.1%}" for k, v in read.items()))
    print(
        f"RMS over {len(variances['trial CPU / carried'])} comparisons: "
        + ", ".join(f"{k} {math.sqrt(sum(v) / len(v)):.2%}" for k, v in variances.items() if v)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="the JSON-lines file runs are appended to (default: the gate's own)")
    p.add_argument("--db", help="keep the runs in this store (default: a temporary one)")
    p.add_argument("--extra", default="", help="flags added to the README's line, e.g. '--flows 4' (a variant)")
    p.add_argument(
        "--gate",
        choices=("time", "work"),
        default="time",
        help="which line: the timed gate's (3%%, 2 minutes) or the work gate's (--count-instructions over a "
        "fixed UDP load, 1%%, 90 s; records go to docs/benchmarks/data/work-gate-runs.jsonl unless --out)",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    aa = sub.add_parser("aa")
    aa.add_argument("--runs", type=int, default=5)
    aa.add_argument("--bin", default="/usr/bin/wireguard-go")
    aa.add_argument("--until", help="start no run that would end after this local time, HH:MM")
    aa.add_argument("--hog", type=int, default=0, help="busy loops beside each run (the box made noisy)")
    aa.add_argument("--adapter", default="", help="an A/A of this adapter as installed (e.g. boringtun), not --bin")
    ab = sub.add_parser("ab")
    ab.add_argument("--runs", type=int, default=10)
    ab.add_argument("--spin", type=int, required=True)
    ab.add_argument("--until", help="start no run that would end after this local time, HH:MM")
    ref = sub.add_parser("reference")
    ref.add_argument("--minutes", type=int, default=21)
    ref.add_argument("--spin", default="400,500")
    ref.add_argument("--existing", help="judge this run of --db again instead of measuring")
    sub.add_parser("summary")
    rejudge = sub.add_parser("rejudge")
    rejudge.add_argument("stores", nargs="+", help="the stores the records' runs are in")
    rejudge.add_argument("--append", action="store_true", help="add the judgements as new records")
    rejudge.add_argument("--design", default="cpu_s_per_bit", help="with --append: the main tier judged again")
    noise = sub.add_parser("noise")
    noise.add_argument("--prefix", default="gate-")
    args = p.parse_args()
    EXTRA.extend(shlex.split(args.extra))
    global THRESHOLD, WALL_LIMIT_S, RUN_S
    if args.gate == "work":
        RECIPE[:] = WORK_RECIPE
        THRESHOLD, WALL_LIMIT_S, RUN_S = 0.01, 90.0, timedelta(seconds=110)
    args.out = args.out or str(WORK_DATA if args.gate == "work" else DATA)
    if args.cmd == "summary":
        cmd_summary(args)
    elif args.cmd == "noise":
        cmd_noise(args)
    elif args.cmd == "rejudge":
        cmd_rejudge(args)
    elif args.cmd == "reference":
        cmd_reference(args)
    else:
        cmd_runs(args.cmd, args)


if __name__ == "__main__":
    main()
