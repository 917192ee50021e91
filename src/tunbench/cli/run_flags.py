"""The flags of `tunbench run`, each declared once with its help: `run`'s signature names them, and
`tunbench run --help` prints them in that order."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tunbench.session.defaults import INSTRUCTIONS_RATE

ScenarioArg = Annotated[Path | None, typer.Argument(help="Scenario file (TOML). Default: the built-in scenario.")]

TunnelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tunnel",
        "-t",
        help="Tunnel(s): NAME, NAME[key=value,...] or ./adapter.toml. Repeat or separate with commas. A "
        "relative path in bin= (a build, e.g. bin=./wireguard-go) is taken from the directory tunbench was "
        "started in (from a scenario file's own directory for the file's tunnels).",
    ),
]

ProfileOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="WAN profile(s): NAME, ./profile.toml or inline 'NAME:delay=15ms,up.rate=1mbit,...' "
        "(see `tunbench profiles`). Repeat or separate with commas.",
    ),
]

WorkloadOpt = Annotated[
    str | None,
    typer.Option("--workload", "-w", help="Workload kind(s), comma-separated (see `tunbench workloads`)."),
]

FlowsOpt = Annotated[str | None, typer.Option(help="Parallel TCP flows, e.g. 1,2,10.")]

CoresOpt = Annotated[
    str | None,
    typer.Option(
        help="The cores axis, e.g. 1,2: each side's processes placed on that many CPUs, crossed with --flows; "
        "the run then reports how throughput scales with cores and what saturated (docs/scaling.md). "
        "With --hosts each side is placed on its own host, up to that host's CPUs less one kept for the "
        "traffic generator; the run says the most its hosts allow once it has connected. Not with --cpuset."
    ),
]

DirectionOpt = Annotated[
    str | None,
    typer.Option(
        help="up, down and/or bidir, comma-separated. Default: the scenario's (the built-in one: up,down; "
        "a scenario file without [workload] directions: up)."
    ),
]

DurationOpt = Annotated[
    int | None,
    typer.Option(
        help="Seconds measured per trial (whole seconds), after the --omit warm-up. Default: the scenario's "
        "(the built-in one: 3; a scenario file without [workload] duration_s: 10)."
    ),
]

OmitOpt = Annotated[
    int | None,
    typer.Option(
        help="Warm-up seconds at the start of each trial's traffic, excluded from the result. Default: the "
        "scenario's (the built-in one: 1; a scenario file without [workload] omit_s: 1)."
    ),
]

RepeatOpt = Annotated[
    int | None,
    typer.Option(
        help="Repetitions per case (interleaved). Default: the scenario's (the built-in one: 3; a scenario "
        "file without [run] repeat: 3)."
    ),
]

WarmOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=100,
        help="Warm alternation: bring each block's tunnels up once for this many rounds and measure each "
        "round as a window on the running tunnels (A B B A ..., no set-up between windows); 1 = a fresh "
        "bring-up per trial ([run] warm).",
    ),
]

RedoStealOpt = Annotated[
    str | None,
    typer.Option(
        "--redo-steal",
        help="Measure a trial again when the hypervisor took at least this share of the CPUs' time during "
        "its window (steal), e.g. 5%; at most 5 attempts in all ([run] redo_steal_pct). Default: keep it, "
        "flagged.",
    ),
]

RedoInterferedOpt = Annotated[
    bool,
    typer.Option(
        "--redo-interfered",
        help="Measure a trial again when its window was interfered with: another tunbench run was live, "
        "foreign CPU reached --foreign-cpu, or steal reached 5% (or --redo-steal); at most 5 attempts in "
        "all, the reason kept ([run] redo_interfered); with --budget, not when the budget would end first "
        "(kept, flagged). Default: keep it, flagged.",
    ),
]

ForeignCpuOpt = Annotated[
    str | None,
    typer.Option(
        "--foreign-cpu",
        help="A window counts as interfered when processes that are neither this run's nor the kernel's "
        "used at least this much CPU during it, in % of one core, e.g. 10% ([run] foreign_cpu_pct; "
        "default 10%).",
    ),
]

FullOpt = Annotated[bool, typer.Option("--full", help="5 repetitions of 10 s (default: the scenario's).")]

NoDirectOpt = Annotated[bool, typer.Option("--no-direct", help="Do not measure the direct baseline.")]

MtuOpt = Annotated[int | None, typer.Option(help="Link MTU.")]

IpOpt = Annotated[
    str | None,
    typer.Option("--ip", help="4 or 6: the IP family tunnels run over (the scenario's [topology] underlay)."),
]

OverlayOpt = Annotated[
    str | None,
    typer.Option(help="4 or 6: the IP family L3 tunnels carry inside ([topology] overlay)."),
]

SeedOpt = Annotated[int | None, typer.Option(help="Seed for trial order and emulated impairments.")]

NameOpt = Annotated[str | None, typer.Option(help="A name for this run (usable in show/export/compare).")]

CommitOpt = Annotated[
    str | None,
    typer.Option(
        help="The commit of the build under test, recorded in the run's provenance for `tunbench history` "
        "(per tunnel: commit=SHA among the tunnel's parameters).",
    ),
]

BranchOpt = Annotated[str | None, typer.Option(help="The branch of that build, recorded with the commit.")]

JsonOpt = Annotated[Path | None, typer.Option("--json", help="Also write the JSON export here.")]

FlamegraphOpt = Annotated[
    bool,
    typer.Option(
        "--flamegraph",
        help="Record perf flamegraphs (SVG) of the tunnel's client and server processes during each "
        "measurement, stored with the trial and written to --flamegraph-dir. (Not --profile: that "
        "option selects WAN profiles.)",
    ),
]

FlamegraphDirOpt = Annotated[Path, typer.Option("--flamegraph-dir", help="Where --flamegraph writes the SVGs.")]

CountWorkOpt = Annotated[
    bool,
    typer.Option(
        "--count-work",
        help="Count each side's syscalls, context switches, CPU migrations and page faults over each "
        "measured window with perf stat, and their ratios per MB and per packet (docs/counted-work.md; "
        "[run] count_work). Off by default: it costs throughput (a quarter of wireguard-go's on a 2-vCPU VM, "
        "docs/benchmarks/counted-work.md).",
    ),
]

CountInstructionsOpt = Annotated[
    bool,
    typer.Option(
        "--count-instructions",
        help="Count the tunnel's own instructions per role over each trial, per byte its tunnel device handled "
        "('instructions/byte'): a cost figure the box's noise does not reach, which the cost gate then holds in "
        "place of the CPU time (docs/work-gate.md; [run] count_instructions). Counted by valgrind's callgrind, "
        "outside Go's runtime, or, where perf can read the CPU's hardware counter, by perf at full speed "
        "(--instr-counter). Use it with -w udp: a fixed UDP load has no ACKs whose count varies. Under callgrind "
        "the daemons run many times slower, so udp and iperf3 offer a fixed rate both builds sustain "
        f"({INSTRUCTIONS_RATE} unless the scenario's [workload.udp] or [workload.iperf3] rate says otherwise; "
        "perf counts at the same rate). A role that cannot be counted (a kernel tunnel, a remote host, no "
        "valgrind, perf's reason) says why.",
    ),
]

InstrCounterOpt = Annotated[
    str | None,
    typer.Option(
        "--instr-counter",
        help="What counts --count-instructions: 'perf' (the CPU's own count of instructions:u, the tunnel at "
        "full speed; needs a hardware counter, which a VM often lacks; Go's runtime is not separated), "
        "'callgrind' (valgrind's simulation, anywhere) or 'auto' (the default: perf where `perf stat -e "
        "instructions:u` counts on this host, else callgrind; the dry run and `tunbench doctor` say which and "
        "why; with --hosts, one counter for both hosts, chosen from each host's perf when the run connects, "
        "and a forced 'perf' that a host cannot count is refused naming it). Each trial records it, and "
        "compare refuses to judge counts of two counters against each other (docs/work-gate.md; [run] "
        "instr_counter).",
    ),
]

DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Resolve and validate everything, print the plan (cases, trials, estimated time) and exit; "
        "creates nothing, needs no root; missing programs are reported, not required.",
    ),
]

TargetMdeOpt = Annotated[
    str | None,
    typer.Option(
        "--target-mde",
        help="Stop once the paired comparison of the run's two tunnel labels can detect this change, e.g. "
        "3%: the largest MDE of the gated comparisons (--gate cost: the tunnel's CPU per bit delivered, "
        "client and server together) at most this, and the wide tier's (throughput, the wire overhead, each "
        "side's CPU per bit) at most twice this, with at least 10 pairs. Needs --budget and exactly two "
        "tunnels (labels) besides direct; --repeat is then the "
        "upper bound (default: as many pairs as the budget could hold). Stops on precision, never on "
        "significance. Places each side on a CPU of its own (--cpuset split) unless --cpuset or the "
        "scenario says otherwise.",
    ),
]

BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        help="Wall time for the whole run, e.g. 2m: a block (a pair) starts only if, at the pace so far, it "
        "ends within it; the run then stops between blocks, done, with whole pairs.",
    ),
]

UntilOpt = Annotated[
    str | None,
    typer.Option(
        "--until",
        help="As --budget, given as the local time the run must end by: 14:30 (the next 14:30) or 2026-11-24T14:30.",
    ),
]

SiteOpt = Annotated[
    str | None,
    typer.Option(
        "--site",
        metavar="NAME[:WHERE]",
        help="Where the roles run, a site by name: local (this machine's namespaces, the default) or "
        "hosts:INVENTORY (as --hosts INVENTORY); docs/architecture.md#adding-a-site.",
    ),
]
