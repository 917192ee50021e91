"""Small pure helpers shared by the exporters: unit formatting, case names, per-trial fairness."""

from __future__ import annotations

import math
from statistics import median
from typing import Any

from tunbench.results import CaseKey, TrialRecord
from tunbench.stats import jain_index
from tunbench.units import fmt_bps as fmt_bps  # written in units.py, where the metric registry finds it


def is_num(x: float | None) -> bool:
    """True for a finite number (not None, NaN or inf)."""
    return x is not None and math.isfinite(x)


def fmt_ratio(x: float | None) -> str:
    """A ratio (to the direct path) with three significant digits: 0.0123, 0.930, 1.05, 12.3, 123. Two decimals
    read 0.01 or 0.02 for every L3 VPN on a fast veth pair, which told them apart poorly."""
    if x is None or not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    r = float(f"{x:.3g}")  # round first: 9.996 is 10.0, not 10.00
    if abs(r) >= 100:
        return f"{r:,.0f}"
    return f"{r:.{2 - math.floor(math.log10(abs(r)))}f}"


def fmt_num(x: float | None, spec: str = ".3g") -> str:
    return format(x, spec) if is_num(x) else "–"


def direction_text(direction: str) -> str:
    return {"up": "up (client → server)", "down": "down (server → client)", "bidir": "bidirectional"}.get(
        direction, direction
    )


def flows_text(flows: int) -> str:
    return f"{flows} flow" + ("" if flows == 1 else "s")


def count_of(case: CaseKey) -> int:
    """The case's count axis: its parallel flows, or a multi-client workload's clients."""
    return case.clients if case.clients != 1 else case.flows


def count_text(case: CaseKey) -> str:
    """'4 flows', or '50 clients' for a multi-client case."""
    return f"{case.clients} clients" if case.clients != 1 else flows_text(case.flows)


def mode_of(case: CaseKey) -> str:
    """The case's second axis: a storm's variant, else its direction ('-' for a workload without one)."""
    return case.variant or case.direction


def trial_jain(t: TrialRecord) -> float | None:
    """Jain's index across the trial's parallel flows (the worse direction for bidir); None if not measurable."""
    by_dir: dict[str, list[float]] = {}
    for _stream, direction, received_bps, _retr in t.streams:
        if received_bps is not None and math.isfinite(received_bps) and received_bps >= 0:
            by_dir.setdefault(direction, []).append(received_bps)
    values = [jain_index(xs) for xs in by_dir.values() if xs]
    values = [v for v in values if math.isfinite(v)]
    return min(values) if values else None


def median_or_none(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    return float(median(vals)) if vals else None


def host_lines(provenance: dict[str, Any]) -> list[str]:
    """One line per host of a multi-host run (`run --hosts`): its role, kernel, CPU and governor, the NIC
    carrying its underlay (driver, MTU, offloads) and its clock offset with the offset's uncertainty."""
    out = []
    for name, h in sorted((provenance.get("hosts") or {}).items()):
        cpu, nic, clock = h.get("cpu") or {}, h.get("nic") or {}, h.get("clock") or {}
        offl = nic.get("offloads") or {}
        on = [k.split("-")[0] for k, v in offl.items() if v == "on"]
        nic_text = f"{nic.get('device') or '?'}"
        if nic.get("driver"):
            nic_text += f" ({nic['driver']})"
        nic_text += f" MTU {nic.get('mtu') or '?'}" + (f", offloads on: {' '.join(on)}" if offl else "")
        clock_text = (
            f"clock {clock['wall_s'] * 1e3:+.3f} ms ± {clock['uncertainty_s'] * 1e3:.3f} ms"
            if "wall_s" in clock
            else "clock not measured"
        )
        kernel = (h.get("host") or {}).get("kernel", "?")
        out.append(
            f"{name} ({h.get('role', '?')}): {h.get('address', '')}, kernel {kernel}, "
            f"{cpu.get('model', '?')} × {cpu.get('cores', '?')} ({cpu.get('governor', '?')}), {nic_text}, {clock_text}"
        )
    return out


def placement_line(trials: list[TrialRecord]) -> str:
    """The run's CPU placement (`[run] cpuset`, recorded in each trial's params.cpuset), or "" when off; on
    the cores axis, each value's ("cores 1: client side on CPU 0, ...; cores 2: ..."). On hosts each side's
    CPUs are its host's, named with it, and its generator's beside them ("client side on bench1 CPU 0
    (generator CPU 3)"; params.cpuset_hosts, params.cpuset_generator)."""
    names = {"client": "client side", "server": "server side", "link": "emulator"}

    def text(placed: dict[str, str]) -> str:
        return ", ".join(f"{name} on {placed[r]}" for r, name in names.items() if r in placed)

    by_cores: dict[int, set[tuple[tuple[str, str], ...]]] = {}
    for t in trials:
        by_cores.setdefault(t.cores, set()).add(tuple(sorted(_placed_cpus(t.params).items())))
    if all(n for n in by_cores) and all(len(seen) == 1 for seen in by_cores.values()):
        return "; ".join(f"cores {n}: {text(dict(next(iter(by_cores[n]))))}" for n in sorted(by_cores))
    seen = {p for ps in by_cores.values() for p in ps}
    placed = [dict(p) for p in seen if p]
    if not placed:
        return ""
    if len(placed) > 1 or len(seen) > 1:
        return "cpuset: differs between trials (see each trial's params.cpuset)"
    return "cpuset: " + text(placed[0])


def _placed_cpus(params: dict[str, Any]) -> dict[str, str]:
    """Each placed role's CPUs in words: "CPU 0", or on a host "h1 CPU 0 (generator CPU 1)"."""
    hosts, generator = params.get("cpuset_hosts") or {}, params.get("cpuset_generator") or {}
    out = {}
    for role, cpus in (params.get("cpuset") or {}).items():
        if role not in hosts:
            out[role] = f"CPU {cpus}"
            continue
        out[role] = f"{hosts[role]} CPU {cpus}" + (f" (generator CPU {generator[role]})" if generator.get(role) else "")
    return out


def baseline_line(trials: list[TrialRecord]) -> str:
    """How the direct baseline's traffic was generated, when not as the tunnels' was (params.generator:
    more processes of its program, so one process's sending thread is not what it measures), or ""."""
    direct = [t for t in trials if t.status == "ok" and t.tunnel == "direct"]
    spread = [(t, g) for t in direct if int((g := t.params.get("generator") or {}).get("processes", 1)) > 1]
    if not spread:
        return ""
    procs = sorted({int(g["processes"]) for _, g in spread})
    program = "/".join(sorted({str(g.get("program") or "generator") for _, g in spread}))
    version = sorted({str(g.get("version") or "") for _, g in spread} - {""})
    kinds = "/".join(sorted({t.workload for t, _ in spread}))
    return (
        f"direct: traffic from {'/'.join(map(str, procs))} {program} processes at once "
        f"({', '.join(version) or program}; the flows spread over them, at least one each), so the baseline is "
        f"the path's and not one {program} thread's; the tunnels: one {program} process ([workload.{kinds}] "
        "baseline_processes)"
    )
