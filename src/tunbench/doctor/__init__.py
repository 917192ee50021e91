"""`tunbench doctor`: what this machine can do, and what to install for the rest. Checks return values."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePath

from tunbench import workloads
from tunbench.doctor.packages import (
    UNPACKAGED,
    Family,
    fix_text,
    host_family,
    install_plan,
)
from tunbench.host import HOST_TOOLS
from tunbench.host.cgroup import cgroup_root
from tunbench.tunnels.registry import (
    KERNEL_MODULE,
    builtin_names,
    missing_requirements,
    missing_text,
    module_name,
    parse_ref,
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    missing: tuple[str, ...] = ()  # the programs this check lacks (what `install_lines` installs)


def programs_fix(programs: list[str], family: Family | None) -> str:
    """What to do about missing programs: one install command on this host's family (packages.py), then
    where each program no package of it gives comes from."""
    if not programs:
        return ""
    if family is None:
        return "; ".join(dict.fromkeys(fix_text(p, None) for p in programs))
    plan = install_plan(programs, family)
    return "; ".join([plan.command] * bool(plan.command) + [f"{n}: {how}" for n, how in plan.unpackaged.items()])


def tunnel_fix(missing: list[str], family: Family | None = None) -> str:
    """What to do about a tunnel's missing requirements (registry.missing_requirements)."""
    mods = [module_name(m) for m in missing if m.startswith(KERNEL_MODULE)]
    progs = [m for m in missing if not m.startswith(KERNEL_MODULE)]
    fixes = [programs_fix(progs, family)] if progs else []
    if mods:
        fixes.append(
            f"this kernel has no {', '.join(mods)}: install its module (modprobe {mods[0]}) "
            "or run on a kernel built with it"
        )
    return "; ".join(fixes)


def checks(family: Family | None = None) -> list[Check]:
    """Every check of `tunbench doctor`; the fixes name packages of `family` (default: this host's, from
    its os-release)."""
    family = family or host_family()
    out = [
        Check(
            "root",
            os.geteuid() == 0,
            "running as root" if os.geteuid() == 0 else "not root",
            "network namespaces need root: run tunbench with sudo",
        ),
        Check("/dev/net/tun", Path("/dev/net/tun").exists(), "TUN device node", "modprobe tun"),
        Check("network namespaces", Path("/proc/self/ns/net").exists(), "netns support", "a kernel with CONFIG_NET_NS"),
    ]
    cg = cgroup_root()
    out.append(
        Check(
            "cgroup CPU accounting",
            cg is not None,
            f"{cg[0]} at {cg[1]}" if cg else "no cpuacct (v1) or cgroup2 mount found",
            "per-role CPU totals are then sampled only (psutil); mount cgroup2 or cpuacct",
        )
    )
    for tool in HOST_TOOLS:
        path = shutil.which(tool)
        lacks = () if path else (tool,)
        out.append(Check(tool, path is not None, path or "not found", programs_fix(list(lacks), family), lacks))
    for w in workloads.REGISTRY.values():
        needs = [tool for tool in w.requires if shutil.which(tool) is None]
        detail = (
            "missing " + ", ".join(needs)
            if needs
            else ("uses " + ", ".join(w.requires) if w.requires else "no extra program")
        )
        out.append(Check(f"workload {w.kind}", not needs, detail, programs_fix(needs, family), tuple(needs)))
        for tool, option in w.optional:  # with one of its options only (rr's generator = "sockperf")
            lacks = () if shutil.which(tool) else (tool,)
            detail = f"uses {tool}" if not lacks else f"missing {tool}"
            out.append(
                Check(f"workload {w.kind} ({option})", not lacks, detail, programs_fix(list(lacks), family), lacks)
            )
    from tunbench.link.binary import link_binary_or_none

    link = link_binary_or_none()
    out.append(
        Check(
            "tunbench-link (WAN emulator)",
            link is not None,
            str(link) if link else "not found",
            UNPACKAGED["tunbench-link"] + "; only needed for emulated profiles",
        )
    )
    out.append(count_work_check(family))
    out.append(instructions_check(family))
    for name in builtin_names():
        ref = parse_ref(name)
        miss = missing_requirements(ref)
        progs = tuple(m for m in miss if not m.startswith(KERNEL_MODULE))
        out.append(
            Check(f"tunnel {name}", not miss, "ok" if not miss else missing_text(miss), tunnel_fix(miss, family), progs)
        )
    return out


def count_work_check(family: Family | None) -> Check:
    """Whether `run --count-work` can count here: perf present and allowed to count syscalls (and whether
    the host has hardware counters: instructions and cycles per byte then)."""
    from tunbench.monitor.work import probe
    from tunbench.perf.flamegraph import find_tool

    perf = find_tool("perf")
    cap = probe(perf)
    if not cap.available:
        fix = programs_fix(["perf"], family) if perf is None else cap.fix
        return Check("counted work (perf stat)", False, cap.why, fix + "; only needed for --count-work")
    syscalls = sum(1 for e in cap.events if e.startswith("syscalls:"))
    hw = "instructions and cycles" if cap.hardware else "no hardware counters (instructions, cycles: not available)"
    return Check("counted work (perf stat)", True, f"software events, {syscalls} syscall tracepoints; {hw}")


def instructions_check(family: Family | None) -> Check:
    """Which counter `run --count-instructions` uses here under `--instr-counter auto`, and why: perf where
    it counts `instructions:u` (a hardware counter), else callgrind, which needs valgrind."""
    from tunbench.monitor.callgrind import find
    from tunbench.perf.hwinstr import choose, probe

    name = "counted instructions (--count-instructions)"
    choice = choose("auto", probe())
    if choice.counter == "perf":
        return Check(name, True, f"perf: {choice.why.removeprefix('auto: ')}; the tunnel runs natively")
    tools = find()
    missing = [p for p, path in (("valgrind", tools.valgrind), ("callgrind_control", tools.control)) if not path]
    why = choice.why.removeprefix("auto: ")
    if missing:
        fix = programs_fix(["valgrind"], family) + "; only needed for --count-instructions"
        return Check(name, False, f"callgrind ({why}), but {', '.join(missing)} missing", fix, ("valgrind",))
    return Check(name, True, f"callgrind, by simulation, as {why}")


def install_lines(found: list[Check], family: Family | None) -> list[str]:
    """After the checks: the one command that installs every missing program this family packages, and
    where each of the rest comes from. Empty when nothing is missing."""
    programs = list(dict.fromkeys(p for c in found if not c.ok for p in c.missing))
    if not programs:
        return []
    if family is None:
        return [
            "this distribution is not one of tunbench's package families (apt, dnf, pacman, zypper: "
            "docs/install.md); install these programs: " + ", ".join(PurePath(p).name for p in programs)
        ]
    plan = install_plan(programs, family)
    lines = [f"install them all ({family}): {plan.command}"] if plan.command else []
    lines += [f"{name}: {how}" for name, how in plan.unpackaged.items()]
    return lines


# ---- `tunbench doctor --noise`: how quiet this host is (cf. `pyperf system show`) ----------------------
# Each function below is pure over what the machine says (file contents, numbers); noise_checks() reads.

NOT_EXPOSED = "not exposed (usual on a VM: the hypervisor decides)"
LOAD_WARN_PER_CPU = 0.25  # a 1-minute load above a quarter of the CPUs: something else is running


def load_check(load: tuple[float, float, float], cpus: int) -> Check:
    ok = load[0] <= LOAD_WARN_PER_CPU * max(1, cpus)
    return Check(
        "load average",
        ok,
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min) on {cpus} CPU(s)",
        "something else is running: wait for it or stop it (top -o %CPU); a benchmark shares the CPUs with it",
    )


def governor_check(governors: dict[str, str]) -> Check:
    """`governors`: CPU name -> the content of its cpufreq/scaling_governor."""
    if not governors:
        return Check("CPU frequency governor", True, NOT_EXPOSED)
    kinds = sorted({g.strip() for g in governors.values()})
    detail = ", ".join(f"{k} on {sum(g.strip() == k for g in governors.values())} CPU(s)" for k in kinds)
    return Check(
        "CPU frequency governor",
        kinds == ["performance"],
        detail,
        "cpupower frequency-set -g performance (the clock then does not follow the load; undo afterwards)",
    )


def turbo_check(no_turbo: str | None, boost: str | None) -> Check:
    """intel_pstate/no_turbo ("1": turbo off) or cpufreq/boost ("0": boost off); None where absent."""
    fix = (
        "turn turbo off for stable clocks: echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo "
        "(or echo 0 > /sys/devices/system/cpu/cpufreq/boost)"
    )
    if no_turbo is not None:
        off = no_turbo.strip() == "1"
        return Check("turbo / boost", off, "intel_pstate turbo " + ("off" if off else "on"), fix)
    if boost is not None:
        off = boost.strip() == "0"
        return Check("turbo / boost", off, "cpufreq boost " + ("off" if off else "on"), fix)
    return Check("turbo / boost", True, NOT_EXPOSED)


def smt_check(active: str | None) -> Check:
    """/sys/devices/system/cpu/smt/active: "1" when sibling hardware threads share cores."""
    if active is None:
        return Check("SMT (hyper-threading)", True, NOT_EXPOSED)
    on = active.strip() == "1"
    return Check(
        "SMT (hyper-threading)",
        not on,
        "active: sibling threads share a core's execution units" if on else "inactive",
        "siblings slow each other down: pin the run to one thread per core, or "
        "echo off > /sys/devices/system/cpu/smt/control (undo afterwards)",
    )


def steal_check(shares: dict[str, float], seconds: float) -> Check:
    """`shares`: monitor.hostload.cpu_shares() over a short sample."""
    from tunbench.stats.checks import STEAL_WARN_PCT

    if not shares:
        return Check("steal time", True, f"no CPU time counted over {seconds:g} s")
    steal, busy = shares["steal_pct"], shares["busy_pct"]
    return Check(
        "steal time",
        steal < STEAL_WARN_PCT,
        f"{steal:.1f}% stolen, {busy:.0f}% busy of all CPUs over {seconds:g} s",
        "a VM's neighbours take CPU: run on a quieter host (a dedicated or larger instance); trials with "
        f"steal >= {STEAL_WARN_PCT:.0f}% are flagged in the report",
    )


def irqbalance_check(names: list[str]) -> Check:
    """`names`: the running processes' names."""
    on = "irqbalance" in names
    return Check(
        "irqbalance",
        not on,
        "running: it moves interrupts between CPUs during a run" if on else "not running",
        "systemctl stop irqbalance for the run (start it again afterwards)",
    )


def thp_check(enabled: str | None) -> Check:
    """/sys/kernel/mm/transparent_hugepage/enabled, e.g. "always [madvise] never"."""
    if enabled is None:
        return Check("transparent huge pages", True, "not exposed")
    m = re.search(r"\[(\w+)\]", enabled)
    mode = m.group(1) if m else enabled.strip()
    return Check(
        "transparent huge pages",
        mode != "always",
        mode,
        "with `always`, khugepaged compacts memory behind the run: "
        "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
    )


def runs_check(ledgers: list[tuple[str, int | None, bool]], me: int) -> Check:
    """`ledgers`: (prefix, owner pid, alive) for each ledger file under the state directory; `me`: this
    process, left out (a run never reads its own noise)."""
    live = [(p, pid) for p, pid, alive in ledgers if alive and pid != me]
    dead = [p for p, _, alive in ledgers if not alive]
    parts = [", ".join(f"{p} (pid {pid})" for p, pid in live) + " running" if live else "none running"]
    if dead:
        parts.append(f"{len(dead)} left by killed runs")
    fix = (
        "wait for them: two runs share the CPUs and measure each other"
        if live
        else "tunbench clean removes what killed runs left"
    )
    return Check("other tunbench runs", not live, "; ".join(parts), fix)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def noise_checks(root: Path = Path("/"), *, sample_s: float = 1.0) -> list[Check]:
    """What makes this host noisy, read from `root` (/ but in tests) and psutil; sleeps `sample_s`."""
    import time

    import psutil

    from tunbench.host.ledger import all_ledgers, owner_alive
    from tunbench.monitor.hostload import cpu_shares, cpu_times

    cpu = root / "sys/devices/system/cpu"
    governors = {
        p.parent.parent.name: text
        for p in sorted(cpu.glob("cpu[0-9]*/cpufreq/scaling_governor"))
        if (text := _read(p)) is not None
    }
    names = [str(proc.info.get("name") or "") for proc in psutil.process_iter(["name"])]  # reading only
    ledgers = [
        (path.stem, led.owner_pid if led else None, led is not None and owner_alive(led)) for path, led in all_ledgers()
    ]
    before = cpu_times()
    time.sleep(sample_s)
    shares = cpu_shares(before, cpu_times())
    return [
        load_check(os.getloadavg(), os.cpu_count() or 1),
        steal_check(shares, sample_s),
        governor_check(governors),
        turbo_check(_read(cpu / "intel_pstate/no_turbo"), _read(cpu / "cpufreq/boost")),
        smt_check(_read(cpu / "smt/active")),
        irqbalance_check(names),
        thp_check(_read(root / "sys/kernel/mm/transparent_hugepage/enabled")),
        runs_check(ledgers, os.getpid()),
    ]
