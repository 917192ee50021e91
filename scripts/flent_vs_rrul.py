#!/usr/bin/env python3
"""Flent's RRUL against tunbench's rrul on one emulated link, alternated: a standing comparison.

    python scripts/flent_vs_rrul.py --rounds 5 --length 30 --out cmp/       # as root, from a checkout
    python scripts/flent_vs_rrul.py --rounds 5 --variant 'start="together"' --variant 'start="flent"'
    python scripts/flent_vs_rrul.py --rounds 5 --netperf-dir build/netperf-head/bin

Each round runs, in alternating order (Flent first in even rounds), Flent's `rrul` through `tunbench link
shell` (4 netperf TCP_STREAM + 4 TCP_MAERTS, irtt and ping, `-l LENGTH`, idle DELAY 5 s each side) and
`tunbench run` of rrul with Flent's flows, timing and summary (4 + 4 flows, `summary = "flent"`, `omit_s =
0`), both over the same profile. Each measurement takes the shared lock on its own (`flock LOCK`), or with
--lock-per pair each round's pair of them, so others can measure in between; do not wrap this script in
flock.

Both sides are read by the same code (report/exporters/flent.py, Flent's summary rules, the unmarked UDP
probe `Ping (ms) UDP BE` of each), and it prints per round each side's median and p99 RTT and goodput up
and down, then rrul / Flent of the medians over the rounds with a 95% bootstrap CI, in Flent's windows
(every second, the idle ones included: `flent -f summary`) and in the load's seconds only. The start-up
columns say where the two differ first: the p99 of the load's first 3 s, and the upload over its first 10 s.

--netperf-dir puts a directory holding `netperf` and `netserver` first on the PATH of both namespaces (a
netperf built from source, or a wrapper that adds options); --flent-arg passes options to flent (e.g.
`--flent-arg=--send-size=1448`); --rrul KEY=VALUE sets [workload.rrul] options of tunbench's side;
each --variant 'KEY=VALUE;...' is one more rrul measured every round against the same Flent runs, and each
--flent-variant NAME=DIR one more Flent with DIR's netperf (the order rotates, so each side comes first in
turn). Every rrul is reported against every Flent, and every Flent variant against the first Flent.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

from hand_pair import ratio_ci  # noqa: E402

from tunbench.report.compare.load import load_run  # noqa: E402
from tunbench.report.exporters import flent  # noqa: E402
from tunbench.stats import percentile  # noqa: E402

PROFILE = "flent20:delay=10ms,rate=20mbit,queue=256KB"
LOCK = "/tmp/tunbench-measure.lock"
START_P99_S = 3.0  # the load's first seconds, where Flent's p99 came from
START_UP_S = 10.0  # the load's first seconds, where Flent's upload was low


@dataclass(frozen=True)
class Side:
    """One measurement's figures, read with Flent's rules."""

    p50_ms: float
    p99_ms: float
    up_mbit: float
    down_mbit: float
    load_p50_ms: float
    load_p99_ms: float
    load_up_mbit: float
    load_down_mbit: float
    start_p99_ms: float  # the load's first START_P99_S seconds
    start_up_mbit: float  # upload over the load's first START_UP_S seconds
    rest_up_mbit: float  # upload after them


def side(f: flent.FlentFile) -> Side:
    whole = flent.figures(f)
    cut = flent.load_cutoff(f)
    load = flent.figures(f, cut)
    start = cut[0]
    first = flent.values(f, flent.PING, (start, start + START_P99_S))
    up_first = flent.values(f, flent.UP_SUM, (start, start + START_UP_S))
    up_rest = flent.values(f, flent.UP_SUM, (start + START_UP_S, cut[1]))

    def num(x: float | None) -> float:
        return float("nan") if x is None else float(x)

    return Side(
        num(whole.ping[flent.PING].median_ms),
        num(whole.ping[flent.PING].p99_ms),
        num(whole.upload_mbit),
        num(whole.download_mbit),
        num(load.ping[flent.PING].median_ms),
        num(load.ping[flent.PING].p99_ms),
        num(load.upload_mbit),
        num(load.download_mbit),
        num(percentile(first, 99)),
        sum(up_first) / len(up_first) if up_first else float("nan"),
        sum(up_rest) / len(up_rest) if up_rest else float("nan"),
    )


HELD: list[int] = []  # the lock's descriptor while this script holds it for a pair
MEASURE_TIMEOUT_S = 600  # one measurement; a hung one fails the script, which then lets the lock go


def locked(argv: list[str], lock: str, env: dict[str, str] | None = None) -> None:
    """One measurement under the shared lock (flock waits for it, unless this script holds it for the
    pair), output to the terminal."""
    prefix = [] if HELD else ["flock", lock]
    subprocess.run([*prefix, *argv], check=True, env=env, timeout=MEASURE_TIMEOUT_S)


@contextlib.contextmanager
def pair_lock(lock: str, on: bool) -> Iterator[None]:
    """The shared lock held across one pair of alternated measurements (--lock-per pair), released on any exit."""
    if not on:
        yield
        return
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        HELD.append(fd)
        yield
    finally:
        HELD.clear()
        os.close(fd)  # closing the descriptor releases the lock


def run_flent(a: argparse.Namespace, out: Path, title: str, netperf_dir: str | None) -> flent.FlentFile:
    path_prefix = f"PATH={shlex.quote(str(Path(netperf_dir).resolve()))}:$PATH " if netperf_dir else ""
    server = f"sh -c '{path_prefix}irtt server & {path_prefix}exec netserver -D'"
    extra = " ".join(shlex.quote(x) for x in a.flent_arg)
    client = (
        f"{path_prefix}{shlex.quote(str(Path(a.flent).resolve()))} rrul -H $TUNBENCH_PEER -l {a.length} "
        f"-t {title} -D {shlex.quote(str(out))} {extra}"
    )
    before = set(out.glob("*.flent.gz"))
    locked(
        [*a.tunbench, "link", "shell", "--profile", a.profile, "--server-cmd", server, "--", "sh", "-c", client], a.lock
    )
    new = sorted(set(out.glob("*.flent.gz")) - before)
    if not new:
        raise SystemExit(f"flent wrote no data file into {out}")
    return flent.read(new[-1].read_bytes(), str(new[-1]))


def run_rrul(a: argparse.Namespace, out: Path, name: str, variant: list[str]) -> flent.FlentFile:
    toml = out / f"{name}.toml"
    opts = "\n".join(f"{k} = {v}" for k, v in (kv.split("=", 1) for kv in [*a.rrul, *variant]))
    toml.write_text(
        f'[run]\ntunnels = ["wireguard-go"]\nprofiles = [{json.dumps(a.profile)}]\ndirect = true\n\n'
        f'[workload]\nkind = ["rrul"]\nflows = [4]\nduration_s = {a.length}\nomit_s = 0\n\n'
        f'[workload.rrul]\nsummary = "flent"\n{opts}\n'
    )
    db = out / "tunbench.db"
    locked([*a.tunbench, "run", str(toml), "-t", "direct", "--repeat", "1", "--name", name, "--db", str(db)], a.lock)
    run = load_run(name, db)
    trials = flent.rrul_trials([run])
    if len(trials) != 1:
        raise SystemExit(f"{name}: expected one rrul trial, found {len(trials)}")
    r, t = trials[0]
    data = flent.render_trial(r, t)
    (out / flent.file_name(r, t)).write_bytes(data)
    return flent.read(data)


def fmt_side(s: Side) -> str:
    return (
        f"{s.p50_ms:7.2f} {s.p99_ms:7.2f} {s.up_mbit:6.2f} {s.down_mbit:6.2f} | {s.load_p50_ms:7.2f} "
        f"{s.load_p99_ms:7.2f} {s.load_up_mbit:6.2f} {s.load_down_mbit:6.2f} | {s.start_p99_ms:7.2f} "
        f"{s.start_up_mbit:6.2f} {s.rest_up_mbit:6.2f}"
    )


HEADER = (
    f"{'':14} {'p50':>7} {'p99':>7} {'up':>6} {'down':>6} | {'ld p50':>7} {'ld p99':>7} {'ld up':>6} "
    f"{'ld dn':>6} | {'st p99':>7} {'st up':>6} {'rst up':>6}"
)


def report(flents: list[Side], rruls: list[Side]) -> None:
    print("medians over the rounds, their ratio and its 95% bootstrap CI")
    print(f"{'figure':<34} {'base':>8} {'this':>8} {'ratio':>7}  CI")
    names = {
        "p50_ms": "RTT p50, whole test (ms)",
        "p99_ms": "RTT p99, whole test (ms)",
        "up_mbit": "upload, whole test (Mbit/s)",
        "down_mbit": "download, whole test (Mbit/s)",
        "load_p50_ms": "RTT p50, load only (ms)",
        "load_p99_ms": "RTT p99, load only (ms)",
        "load_up_mbit": "upload, load only (Mbit/s)",
        "load_down_mbit": "download, load only (Mbit/s)",
        "start_p99_ms": f"RTT p99, load's first {START_P99_S:g} s (ms)",
        "start_up_mbit": f"upload, load's first {START_UP_S:g} s",
        "rest_up_mbit": "upload, after them",
    }
    for key, label in names.items():
        fa = [getattr(s, key) for s in flents]
        rb = [getattr(s, key) for s in rruls]
        r, lo, hi = ratio_ci(fa, rb)
        med_f, med_r = statistics.median(fa), statistics.median(rb)
        print(f"{label:<34} {med_f:8.2f} {med_r:8.2f} {r:7.3f}  [{lo:.3f}, {hi:.3f}]")


def report_log(text: str) -> None:
    """The report from the `round N SIDE figures...` lines a run printed (one that was stopped early, too):
    every other side against the first Flent side."""
    by: dict[str, list[Side]] = {}
    for line in text.splitlines():
        parts = line.replace("|", " ").split()
        if len(parts) == 3 + len(fields(Side)) and parts[0] == "round" and parts[1].isdigit():
            by.setdefault(parts[2], []).append(Side(*(float(x) for x in parts[3:])))
    if "flent" not in by:
        raise SystemExit("no Flent rounds in that output")
    for name, got in by.items():
        if name != "flent":
            print(f"\n{name} / flent ({len(got)} and {len(by['flent'])} rounds)")
            report(by["flent"], got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--length", type=int, default=30, help="seconds of load (Flent's -l), both sides")
    ap.add_argument("--profile", default=PROFILE)
    ap.add_argument("--flent", default=str(ROOT / "build/flent-venv/bin/flent"))
    ap.add_argument("--flent-arg", action="append", default=[], help="an option passed on to flent")
    ap.add_argument("--netperf-dir", help="a directory with netperf and netserver, first on Flent's PATH")
    ap.add_argument(
        "--flent-variant",
        action="append",
        default=[],
        help="NAME=DIR: one more Flent measured every round, with DIR's netperf and netserver first on its PATH",
    )
    ap.add_argument("--rrul", action="append", default=[], help="KEY=VALUE (TOML) for [workload.rrul]")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="an rrul variant, KEY=VALUE[;KEY=VALUE...] (TOML), each measured every round (default: one, --rrul)",
    )
    ap.add_argument("--only", choices=("flent", "rrul"), help="measure only the Flent sides, or only the rrul ones")
    ap.add_argument("--out", help="keep the data files here (default: a temporary directory)")
    ap.add_argument("--lock", default=LOCK)
    ap.add_argument(
        "--lock-per",
        choices=("measurement", "pair"),
        default="measurement",
        help="take the lock for each measurement, or for each round's pair (one Flent and one rrul: fewer waits "
        "on a shared machine, the two sides back to back)",
    )
    ap.add_argument("--json", help="write every round's figures here")
    ap.add_argument("--from-log", help="measure nothing: the report from the round lines of an earlier run's output")
    a = ap.parse_args()
    if a.from_log:
        report_log(Path(a.from_log).read_text())
        return
    a.tunbench = [sys.executable, "-m", "tunbench"]
    os.environ["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="flent-vs-rrul-"))
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    stamp = time.strftime("%H%M%S")
    variants = {f"rrul{j + 1}" if len(a.variant) > 1 else "rrul": v.split(";") for j, v in enumerate(a.variant)}
    variants = variants or {"rrul": []}
    for name, v in variants.items():
        print(f"{name}: [workload.rrul] {'; '.join([*a.rrul, *v]) or '(defaults)'}")
    flents = {"flent": a.netperf_dir, **dict(fv.split("=", 1) for fv in a.flent_variant)}
    for name, d in flents.items():
        print(f"{name}: netperf {d or 'from PATH'}")
    sides: dict[str, list[Side]] = {**{n: [] for n in flents}, **{n: [] for n in variants}}
    rows: list[tuple[int, str, Side]] = []
    order = [n for n in [*flents, *variants] if not a.only or (n in flents) == (a.only == "flent")]
    if a.lock_per == "pair" and len(order) != 2:
        raise SystemExit(f"--lock-per pair needs two sides a round, not {len(order)} ({', '.join(order)})")
    for i in range(a.rounds):
        turn = order[i % len(order) :] + order[: i % len(order)]  # each side first in turn
        with pair_lock(a.lock, a.lock_per == "pair"):
            for which in turn:
                if which in flents:
                    s = side(run_flent(a, out, f"{which}-{stamp}-r{i + 1}", flents[which]))
                else:
                    s = side(run_rrul(a, out, f"{which}-{stamp}-r{i + 1}", variants[which]))
                sides[which].append(s)
                rows.append((i + 1, which, s))
                print(f"round {i + 1} {which:<5} " + fmt_side(s), flush=True)
    print(f"\ndata in {out}\n{HEADER}")
    for i, which, s in rows:
        print(f"round {i:>2} {which:<5}" + fmt_side(s))
    if a.json:
        Path(a.json).write_text(json.dumps([{"round": i, "side": w, **asdict(s)} for i, w, s in rows], indent=1))
    for base in flents:
        for name in [*(n for n in flents if n != base and base == "flent"), *variants]:
            if sides[base] and sides[name]:
                what = f"netperf {flents[name]}" if name in flents else "; ".join([*a.rrul, *variants[name]])
                print(f"\n{name} ({what or 'defaults'}) / {base} (netperf {flents[base] or 'from PATH'})")
                report(sides[base], sides[name])


if __name__ == "__main__":
    main()
