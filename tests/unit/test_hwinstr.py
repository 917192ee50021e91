"""Counted instructions on the CPU's own counter (perf/hwinstr.py, `run --count-instructions --instr-counter`):
perf stat's CSV read, the capability probe, the choice between perf and callgrind, the window hook on perf
stat's control protocol, and compare's refusal to judge one counter's figure against the other's.

The CSV lines are perf's own output, not written by hand:
- NOT_SUPPORTED: `perf stat -x, -e instructions:u true` on this project's VM (perf 6.1.187, no PMU), captured
  2026-11-29; perf exits 0 and says `<not supported>` in the count's field.
- SPR and HYBRID: `perf stat -x, -a sleep 1` on an Intel Sapphire Rapids and on a hybrid (P- and E-core) CPU, as
  printed in Kan Liang's "[PATCH V4 0/5] New metricgroup output in perf stat default mode" (linux-kernel,
  2023-06-16, <20230616031420.3751973-1-kan.liang@linux.intel.com>), the instructions lines only. The hybrid
  one prints a line per core type, the E-cores' counter running 63% of the time.
The fields are those perf-stat(1) lists under "CSV FORMAT": count, unit, event, run time, running %, metric.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.unit.report_data import run, trial
from tunbench.monitor import pmu, work
from tunbench.monitor.callgrind import GO_BUILDINFO
from tunbench.perf import hwinstr
from tunbench.perf.instructions import FIRST_WINDOW, NO_DAEMON
from tunbench.report.compare import CompareError, compare_runs

NOT_SUPPORTED = "<not supported>,,instructions:u,0,100.00,,\n"
SPR = "37977214,,instructions,225850071251,100.00,0.73,insn per cycle\n"
HYBRID = (
    "4688595,,cpu_core/instructions/,16067558976,100.00,0.69,insn per cycle\n"
    "37487490,,cpu_atom/instructions/,10165193856,63.00,5.54,insn per cycle\n"
)
HEADER = "# started on Sun Nov 29 07:50:00 2026\n\n"  # what perf stat -o writes above its lines


def test_the_count_is_perfs_instructions_line() -> None:
    got = pmu.reading(HEADER + SPR)
    assert got == pmu.Reading(37977214.0)
    row = work.parse_stat_rows(SPR)[0]
    assert (row.event, row.running_pct, row.raw) == ("instructions", 100.0, "37977214")


def test_names_of_the_instructions_event() -> None:
    for name in ("instructions", "instructions:u", "cpu_core/instructions/u", "cpu_atom/instructions:u/"):
        assert pmu.is_instructions(name), name
    for name in ("cycles:u", "branch-instructions", "instructions-retired", "cpu_core/cycles/u"):
        assert not pmu.is_instructions(name), name


def test_a_scaled_count_is_an_estimate_and_not_counted() -> None:
    got = pmu.reading(HYBRID)
    assert got.count is None
    assert "cpu_atom/instructions/ 63%" in got.why and "scaled" in got.why and "--cpuset" in got.why
    # a hybrid CPU's core type the processes never ran on reads <not counted>: the other type's line is the count
    only_p = HYBRID.splitlines()[0] + "\n<not counted>,,cpu_atom/instructions/,0,0.00,,\n"
    assert pmu.reading(only_p) == pmu.Reading(4688595.0)


def test_a_counter_perf_could_not_read_is_never_a_zero() -> None:
    got = pmu.reading(NOT_SUPPORTED)
    assert got.count is None and got.why == "perf stat read no instructions:u (<not supported>)"
    assert pmu.reading("").why == "perf stat read no instructions:u (no instructions line)"


def test_the_probe_on_a_host_without_a_pmu() -> None:
    cap = pmu.capability("/usr/bin/perf", 0, NOT_SUPPORTED)  # perf exits 0 here
    assert not cap.available and cap.events == ()
    assert cap.why == (
        "perf cannot count instructions:u here: <not supported>, no hardware counter (a VM without a PMU, for one)"
    )
    ok = pmu.capability("/usr/bin/perf", 0, SPR)
    assert ok.available and ok.events == ("instructions:u",) and ok.hardware
    assert pmu.capability("/usr/bin/perf", 0, HYBRID).available  # it counts; a window's share is judged later
    denied = "Error:\nNo permission to enable instructions:u event.\n"
    assert pmu.capability("/usr/bin/perf", 255, denied).why.endswith(": No permission to enable instructions:u event.")
    assert pmu.probe_perf(None).why.startswith("perf is not installed")


def _fake_perf(tmp_path: Path, csv: str, exit_code: int = 0) -> Path:
    """A perf that answers as perf stat does: the probe's CSV on stderr; attached (`--control fifo:CTL,ACK`),
    `ack` to each command, and at SIGINT the CSV written to `-o`. Its last argv is kept in `perf.args`, one
    argument a line, to check the command that was built."""
    data = tmp_path / "perf.csv"
    data.write_text(csv)
    script = tmp_path / "perf"
    script.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$@" > {tmp_path / "perf.args"}\n'
        'ctl=""; out=""\n'
        'while [ $# -gt 0 ]; do case "$1" in\n'
        '  --control) c="${2#fifo:}"; ctl="${c%%,*}"; ack="${c##*,}"; shift 2;;\n'
        '  -o) out="$2"; shift 2;;\n'
        "  *) shift;;\n"
        "esac; done\n"
        f'if [ -z "$ctl" ]; then cat {data} >&2; exit {exit_code}; fi\n'
        f"trap 'cat {data} > \"$out\"; exit 0' INT\n"
        'exec 3<>"$ctl" 4<>"$ack"\n'
        "while true; do read -r -t 1 word <&3 && echo ack >&4; done\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_the_probe_runs_perf_stat_on_true(tmp_path: Path) -> None:
    assert not pmu.probe_perf(str(_fake_perf(tmp_path, NOT_SUPPORTED))).available
    assert pmu.probe_perf(str(_fake_perf(tmp_path, SPR))).available


def test_auto_takes_perf_where_it_counts_and_callgrind_elsewhere() -> None:
    none = pmu.capability("/usr/bin/perf", 0, NOT_SUPPORTED)
    some = pmu.capability("/usr/bin/perf", 0, SPR)
    assert hwinstr.choose("auto", some) == hwinstr.Choice(
        "perf", "auto: perf counts instructions:u here, a hardware counter"
    )
    auto = hwinstr.choose("auto", none)
    assert auto.counter == "callgrind" and auto.why == f"auto: {none.why}"
    assert hwinstr.choose("callgrind", None).counter == "callgrind"  # no perf needed to choose it
    forced = hwinstr.choose("perf", none)
    assert forced.counter == "perf" and forced.why.endswith(": no role will be counted")
    line = hwinstr.choice_line(auto.counter, auto.why)
    assert line.startswith("instructions counted by callgrind (auto: perf cannot count instructions:u here: <not")
    assert "Go's runtime not separated" in hwinstr.choice_line("perf", "auto: ...")
    with pytest.raises(ValueError, match="auto, perf, callgrind"):
        hwinstr.choose("papi", some)


def test_doctor_says_which_counter_counts_here_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunbench import doctor
    from tunbench.monitor import callgrind

    monkeypatch.setattr(hwinstr, "probe", lambda: pmu.capability("/usr/bin/perf", 0, SPR))
    check = doctor.instructions_check(None)
    assert check.ok and check.detail.startswith("perf: perf counts instructions:u here, a hardware counter")
    monkeypatch.setattr(hwinstr, "probe", lambda: pmu.capability("/usr/bin/perf", 0, NOT_SUPPORTED))
    monkeypatch.setattr(callgrind, "find", lambda: callgrind.Callgrind("/usr/bin/valgrind", "/usr/bin/cc"))
    check = doctor.instructions_check(None)
    assert check.ok and check.detail.startswith("callgrind, by simulation, as perf cannot count instructions:u here")
    monkeypatch.setattr(callgrind, "find", lambda: callgrind.Callgrind(None, None))
    check = doctor.instructions_check(None)
    assert not check.ok and check.detail.endswith("but valgrind, callgrind_control missing")
    assert check.fix.endswith("only needed for --count-instructions")


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, baseline: bool = False) -> SimpleNamespace:
    from tunbench.host import ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state")
    here = SimpleNamespace(machine="")  # a place on this machine
    return SimpleNamespace(
        client=here, server=here, baseline=baseline, workdir=tmp_path, ledger=ledger_mod.Ledger.open("tbhw0001")
    )


def _tunnel(pids: dict[str, list[int]]) -> SimpleNamespace:
    topo = SimpleNamespace(ifname=lambda suffix: f"tb1-{suffix}1", prefix="tb1")
    daemons = {role: SimpleNamespace(pid=ps[0]) for role, ps in pids.items() if ps}
    spec = SimpleNamespace(instructions=None)
    return SimpleNamespace(daemons=daemons, pids=lambda role: pids.get(role, []), topo=topo, spec=spec)


def test_the_hook_counts_each_role_over_the_window_through_perfs_control_fifo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each role's perf stat is attached, enabled and acknowledged, disabled and stopped; its CSV is the
    role's `instr.<role>.count`. A program without Go's runtime has 0 in it (as callgrind's path says); the
    server, with no daemon (a forward), says why it is not counted, and the tunnel's figure is the client's."""
    perf = _fake_perf(tmp_path, HEADER + SPR)
    cap = work.Capability(str(perf), (pmu.EVENT,), hardware=True)
    hook = hwinstr.Recorded(hwinstr.CountHardwareInstructions(cap), "perf")
    ctx = _ctx(tmp_path, monkeypatch)
    rec = trial(1, "pr", 20e6)
    with hook(ctx, _tunnel({"client": [os.getpid()]}), rec, None):  # type: ignore[arg-type]
        assert (tmp_path / "perf-instr-client.ctl").exists()  # attached before the window, on its own files
    assert rec.metrics["instr.client.count"] == 37977214.0
    assert rec.metrics["instr.client.runtime"] == 0.0  # python: no Go runtime
    assert "instr.server.count" not in rec.metrics
    assert rec.params["instr_counter"] == "perf"
    assert rec.params["instr_sides"] == ["client"]
    assert rec.params["instr_devices"] == {"client": "tc1"}
    assert rec.params["instr"] == {"server": NO_DAEMON}
    assert not ctx.ledger.procs  # perf stopped and forgotten


def test_a_count_perf_could_not_read_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perf = _fake_perf(tmp_path, HYBRID)
    cap = work.Capability(str(perf), (pmu.EVENT,), hardware=True)
    rec = trial(1, "pr", 20e6)
    with hwinstr.CountHardwareInstructions(cap)(
        _ctx(tmp_path, monkeypatch), _tunnel({"client": [os.getpid()]}), rec, None
    ):  # type: ignore[arg-type]
        pass
    assert "instr.client.count" not in rec.metrics
    assert rec.params["instr"]["client"].startswith("not counted: perf ran the instructions counter for part")


def test_roles_perf_cannot_count_and_the_first_warm_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = pmu.capability("/usr/bin/perf", 0, NOT_SUPPORTED)
    ctx = _ctx(tmp_path, monkeypatch)
    rec = trial(1, "pr", 20e6)
    with hwinstr.CountHardwareInstructions(none)(ctx, _tunnel({"client": [1], "server": [2]}), rec, None):  # type: ignore[arg-type]
        pass
    assert rec.params["instr"] == {"client": f"not counted: {none.why}", "server": f"not counted: {none.why}"}
    assert not any(k.startswith("instr.") for k in rec.metrics)
    warm = trial(2, "pr", 20e6)
    warm.params["warm"] = {"bringup": "t1w", "window": 1}
    some = work.Capability("/usr/bin/perf", (pmu.EVENT,), hardware=True)
    with hwinstr.CountHardwareInstructions(some)(ctx, _tunnel({"client": [1], "server": [2]}), warm, None):  # type: ignore[arg-type]
        pass
    assert warm.params["instr"] == {"client": FIRST_WINDOW, "server": FIRST_WINDOW}
    direct = trial(3, "direct", 20e6)
    hook = hwinstr.Recorded(hwinstr.CountHardwareInstructions(some), "perf")
    with hook(_ctx(tmp_path, monkeypatch, baseline=True), _tunnel({}), direct, None):  # type: ignore[arg-type]
        pass
    assert direct.params == trial(3, "direct", 20e6).params  # the baseline: nothing counted, nothing said


def test_a_go_programs_whole_count_is_judged_and_the_trial_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "wireguard-go"
    go.write_bytes(b"\x7fELF" + GO_BUILDINFO + b"\x00" * 64)  # a Go build's .go.buildinfo magic
    exes = {11: str(go), 12: sys.executable}
    monkeypatch.setattr(pmu.psutil, "Process", lambda pid: SimpleNamespace(exe=lambda: exes[pid]))
    assert pmu.whole_reason([12, 11]) == pmu.WHOLE
    assert pmu.whole_reason([12]) == ""
    rec = trial(1, "pr", 20e6)
    tunnel = _tunnel({"client": [11], "server": [12]})
    hwinstr.store(rec, tunnel, {"instr.client.count": 5e8, "instr.server.count": 4e8}, {"client": pmu.WHOLE}, {})  # type: ignore[arg-type]
    assert rec.params["instr_whole"] == {"client": pmu.WHOLE}
    assert "instr.client.runtime" not in rec.metrics and rec.metrics["instr.server.runtime"] == 0.0


def _counted_run(counter: str | None, uid: str, rid: int) -> object:
    trials = []
    for rep in range(1, 6):
        extra: dict[str, float | None] = {
            "delivered_bytes": 1e9, "instr.client.count": 1.5e10 * (1 + rep * 1e-4), "instr.server.count": 1.6e10,
        }  # fmt: skip
        t = trial(
            rep, "wg", 20e6, tunnel="wireguard-go", repetition=rep, cpu_client_s=1.0, cpu_server_s=1.0, extra=extra
        )
        if counter is not None:
            t.params["instr_counter"] = counter
        trials.append(t)
    return run(trials, uid=uid, rid=rid)


def test_compare_refuses_a_simulators_count_against_the_cpus() -> None:
    perf, callgrind = _counted_run("perf", "tbperf01", 1), _counted_run("callgrind", "tbcall01", 2)
    older = _counted_run(None, "tbold001", 3)  # stored before there was a choice: callgrind counted it
    with pytest.raises(CompareError, match="A's instructions were counted by callgrind and B's by perf"):
        compare_runs(callgrind, perf, threshold=0.01)  # type: ignore[arg-type]
    with pytest.raises(CompareError, match="by callgrind and B's by perf"):
        compare_runs(older, perf, threshold=0.01)  # type: ignore[arg-type]
    both_perf = compare_runs(perf, _counted_run("perf", "tbperf02", 4), threshold=0.01)  # type: ignore[arg-type]
    assert "instructions/byte" in [r.metric.title for r in both_perf.rows if r.gated and not r.wide]
    assert "counted by the CPU through perf, Go's runtime included" in both_perf.gate_line()
    both_callgrind = compare_runs(older, callgrind, threshold=0.01)  # type: ignore[arg-type]
    assert "counted by callgrind outside Go's runtime" in both_callgrind.gate_line()


def test_a_tunnel_with_two_modes_is_not_counted_by_perf_and_says_which_counter_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench.tunnels.adapter import InstructionsSpec

    perf = _fake_perf(tmp_path, HEADER + SPR)
    cap = work.Capability(str(perf), (hwinstr.EVENT,), hardware=True)
    tunnel = _tunnel({"client": [os.getpid()]})
    tunnel.spec = SimpleNamespace(instructions=InstructionsSpec(mode_object="libssl.so", mode="busy"))
    rec = trial(1, "pr", 20e6)
    with hwinstr.CountHardwareInstructions(cap)(_ctx(tmp_path, monkeypatch), tunnel, rec, None):  # type: ignore[arg-type]
        pass
    assert "instr.client.count" not in rec.metrics
    why = rec.params["instr"]["client"]
    assert (
        why.startswith("not counted: perf gives one total") and "(busy)" in why and "--instr-counter callgrind" in why
    )
