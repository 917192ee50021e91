"""Counted instructions (perf/instructions.py, `run --count-instructions`): the callgrind command line, the
dump's count, the ratios per payload byte, and the gate that holds them where both sides of a comparison
counted them (report/compare)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.unit.report_data import run, trial
from tunbench.monitor import callgrind as cg
from tunbench.monitor.counters import handled_bytes, instruction_ratios
from tunbench.perf import instructions as ins
from tunbench.report.compare import CPU_DELIVERED, EXIT_REGRESSED, CompareError, Gate, compare_runs
from tunbench.report.compare.metrics import INSTR
from tunbench.results import RunRecord

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  wireguard-go -f tb1-c
part: 1

desc: I1 cache:
events: Ir
summary: 0

fl=(1) ???
fn=(1) 0x0000000000401000
0 12

totals: 158734127
"""


def test_the_daemon_runs_under_callgrind_with_instrumentation_off_until_a_window(tmp_path: Path) -> None:
    argv, env = cg.wrap(
        "/usr/bin/valgrind", "client", ["wireguard-go", "-f", "tb1-c"], {"LOG_LEVEL": "error"}, tmp_path
    )
    assert argv[:3] == ["/usr/bin/valgrind", "--tool=callgrind", "--instr-atstart=no"]
    assert f"--callgrind-out-file={tmp_path / 'callgrind.client.out.%p'}" in argv
    assert "--trace-children=yes" in argv  # a build given as a wrapper script execs the real program
    assert f"--vgdb-prefix={tmp_path / 'vgdb.client'}" in argv  # its FIFOs in the trial's directory, not /tmp
    assert argv[-3:] == ["wireguard-go", "-f", "tb1-c"]
    assert env == {"LOG_LEVEL": "error", "GODEBUG": "asyncpreemptoff=1"}


def test_the_count_is_the_dumps_totals_and_the_windows_dumps_are_those_written_since_its_start(
    tmp_path: Path,
) -> None:
    assert cg.totals(DUMP) == 158734127.0
    assert cg.totals("events: Ir\n") is None
    (tmp_path / "callgrind.server.out.4242").write_text("")  # the daemon's file for its exit: empty until then
    (tmp_path / "callgrind.server.out.4242.1").write_text(DUMP)  # an earlier window's
    (tmp_path / "callgrind.server.out.4040").write_text(DUMP)  # a wrapper's `dirname`, before the window
    before = cg.role_dumps(tmp_path, "server")
    (tmp_path / "callgrind.server.out.4242.2").write_text(DUMP)  # the daemon's dump at the window's end
    (tmp_path / "callgrind.server.out.5151").write_text(DUMP)  # a connection's process that ended in the window
    (tmp_path / "callgrind.server.out.6161").write_text("")  # one still writing its dump
    (tmp_path / "callgrind.client.out.7171.1").write_text(DUMP)  # another role's
    assert cg.window_dumps(tmp_path, "server", before) == [
        tmp_path / "callgrind.server.out.4242.2",
        tmp_path / "callgrind.server.out.5151",
    ]
    assert cg.window_dumps(tmp_path, "client", set()) == [tmp_path / "callgrind.client.out.7171.1"]


def test_ratios_per_payload_byte_need_both_sides_for_the_tunnels_figure() -> None:
    both = instruction_ratios({"instr.client.count": 150e6, "instr.server.count": 160e6}, 10e6)
    assert both == pytest.approx(
        {
            "instr.client.per_byte": 15.0,
            "instr.server.per_byte": 16.0,
            "instr.client.all_per_byte": 15.0,
            "instr.server.all_per_byte": 16.0,
            "instr.per_byte": 31.0,
        }
    )
    one = instruction_ratios({"instr.client.count": 150e6}, 10e6)
    assert one == pytest.approx({"instr.client.per_byte": 15.0, "instr.client.all_per_byte": 15.0})
    assert "instr.per_byte" not in one  # never a zero for the side not counted
    assert instruction_ratios({"instr.client.count": 150e6}, None) == {}


def test_each_side_is_divided_by_its_own_devices_bytes_and_gated_outside_gos_runtime() -> None:
    metrics = {
        "instr.client.count": 80e6,
        "instr.client.runtime": 38e6,
        "instr.server.count": 88e6,
        "instr.server.runtime": 46e6,
        # the server's tunnel decrypted 4056 of the client's 4183 datagrams: 126 died in its socket's buffer
        "counters.client.dev.tc1.tx_bytes": 5_116_009.0,
        "counters.client.dev.tc1.rx_bytes": 1_081.0,
        "counters.server.dev.ts1.rx_bytes": 4_961_233.0,
        "counters.server.dev.ts1.tx_bytes": 1_129.0,
    }
    handled = handled_bytes(metrics, {"client": "tc1", "server": "ts1"})
    assert handled == {"client": 5_117_090.0, "server": 4_962_362.0}
    r = instruction_ratios(metrics, 4.9e6, handled)
    assert r["instr.client.per_byte"] == pytest.approx(42e6 / 5_117_090)
    assert r["instr.server.all_per_byte"] == pytest.approx(88e6 / 4_962_362)
    assert r["instr.per_byte"] == pytest.approx(42e6 / 5_117_090 + 42e6 / 4_962_362)
    # a side without a device (an L4 proxy) falls back to the payload delivered
    assert instruction_ratios(metrics, 4.9e6, {"client": 5_117_090.0})["instr.server.per_byte"] == pytest.approx(
        42e6 / 4.9e6
    )


NO_SPEC = SimpleNamespace(instructions=None)  # an adapter without `[instructions]`

ANNOTATED = """\
--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
88,139,915 (100.0%)  PROGRAM TOTALS

31,334,120 (35.55%)  ./chacha20poly1305_amd64.s:golang.org/x/crypto/chacha20poly1305.chacha20Poly1305Open.abi0 [/w/wg]
 2,802,466 ( 3.18%)  ./runtime/lock_spinbit.go:runtime.unlock2 [/w/wg]
   692,835 ( 0.79%)  ./internal/sync/mutex.go:internal/sync.(*Mutex).lockSlow [/w/wg]
   309,675 ( 0.35%)  ./internal/sync/mutex.go:internal/sync.(*Mutex).lockSlow'2 [/w/wg]
   343,139 ( 0.39%)  ./runtime/proc.go:internal/sync.runtime_canSpin [/w/wg]
   280,847 ( 0.32%)  ./sync/pool.go:sync.(*Pool).Get [/w/wg]
   120,000 ( 0.14%)  ???:gogo [/w/wg]
    50,000 ( 0.06%)  ./runtime/internal/atomic/x.go:runtime/internal/atomic.Xadd [/w/wg]
"""


def test_a_stripped_go_build_has_its_whole_count_judged_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "wireguard-go"
    go.write_bytes(b"\x7fELF" + b"\0" * 64 + cg.GO_BUILDINFO + b"\0" * 16)
    c = tmp_path / "openvpn"
    c.write_bytes(b"\x7fELF" + b"\0" * 64)
    hook = ins.CountInstructions(cg.Callgrind("/v", "/c", "/usr/bin/callgrind_annotate"))
    stripped = "10 (100.0%)  ???:0x0000000000475f20 [{p}]\n"
    for program, runtime, whole in ((go, None, "has no symbols (stripped)"), (c, 0.0, "")):
        dump = tmp_path / f"callgrind.client.out.1.{program.name}"
        dump.write_text(f"# callgrind format\ncmd:  {program} -f tb1-tc\npart: 1\nfn=(1) 0x475f20\n")
        out = SimpleNamespace(stdout=stripped.format(p=program))
        monkeypatch.setattr(cg, "run_cmd", lambda *a, out=out, **k: out)
        got, why, _ = hook._runtime(dump)
        assert got == runtime and (whole in why if whole else why == "")


def test_a_program_named_without_a_directory_is_found_on_path(tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.client.out.7"
    dump.write_text("# callgrind format\ncmd:  sh -c true\npart: 1\n")
    assert cg.dumped_program(dump) == shutil.which("sh")


def test_gos_runtime_is_counted_by_function_and_nothing_else_is() -> None:
    assert cg.runtime_count(ANNOTATED) == 2_802_466 + 692_835 + 309_675 + 343_139 + 120_000 + 50_000
    assert cg.runtime_count("   99 (100.0%)  ./src/openvpn.c:process_io [/usr/sbin/openvpn]\n") == 0.0


OLD_GO = """\
 3,657,000 ( 0.44%)  ???:sync.(*poolDequeue).popHead [/usr/bin/wireguard-go]
 2,961,000 ( 0.36%)  ???:sync.(*poolDequeue).pushHead [/usr/bin/wireguard-go]
 1,490,000 ( 0.18%)  ???:sync.(*poolChain).pushHead [/usr/bin/wireguard-go]
   207,000 ( 0.02%)  ???:sync.(*Pool).getSlow [/usr/bin/wireguard-go]
    41,000 ( 0.00%)  ???:sync.(*Mutex).lockSlow [/usr/bin/wireguard-go]
     8,000 ( 0.00%)  ???:sync.(*Mutex).unlockSlow [/usr/bin/wireguard-go]
 4,370,000 ( 0.53%)  ???:sync.(*Pool).Get [/usr/bin/wireguard-go]
 3,250,000 ( 0.39%)  ???:sync.(*Pool).Put [/usr/bin/wireguard-go]
 6,280,000 ( 0.76%)  ???:sync.(*RWMutex).RUnlock [/usr/bin/wireguard-go]
   990,000 ( 0.12%)  ???:sync.(*Mutex).Lock [/usr/bin/wireguard-go]
"""


def test_the_pools_per_p_queues_and_an_old_gos_mutex_slow_path_are_the_runtimes() -> None:
    """Go 1.19 (Debian 12's wireguard-go) names its mutex slow path in sync, not internal/sync; sync.Pool's
    queues are chosen by the scheduler. Get, Put and the locks' fast paths are the program's own calls."""
    assert cg.runtime_count(OLD_GO) == 3_657_000 + 2_961_000 + 1_490_000 + 207_000 + 41_000 + 8_000


@pytest.mark.parametrize(
    ("name", "runtime"),
    [
        ("sync.(*RWMutex).rUnlockSlow", True),
        ("sync.(*Pool).pinSlow", True),
        ("sync.(*Pool).pin", True),
        ("sync.poolCleanup", True),
        ("sync.indexLocal", True),
        ("sync.(*poolChain).popTail", True),
        ("sync.(*Pool).Get", False),
        ("sync.(*Pool).Put", False),
        ("sync.(*Mutex).Lock", False),
        ("sync.(*RWMutex).RUnlock", False),
        ("sync.(*WaitGroup).Wait", False),
        ("sync/atomic.(*Int32).Add", False),
        ("sync.(*Mutex).lockSlowX", False),
        ("sync.(*poolChainElt)", False),
    ],
)
def test_the_runtimes_sync_names_are_exactly_these(name: str, runtime: bool) -> None:
    assert bool(cg.GO_RUNTIME.match(name)) is runtime


def test_missing_tools_say_so() -> None:
    assert cg.Callgrind(None, None).why_not.startswith("not counted: valgrind, callgrind_control missing")
    assert cg.Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control").why_not == ""


def _counted(*, more_work: float, reps: int = 12, seed: int = 7, counted_b: bool = True) -> RunRecord:
    """base and pr, paired: instructions per byte with 0.3% noise per trial (pr: `more_work` more), CPU time
    per bit with 5% noise (the box's)."""
    rng = np.random.default_rng(seed)
    trials = []
    for rep in range(1, reps + 1):
        for label, work in (("base", 1.0), ("pr", 1.0 + more_work)):
            payload = 1e9
            cpu = payload * 8 * 1e-9 * rng.lognormal(0.0, 0.05)
            extra: dict[str, float | None] = {
                "delivered_bytes": payload, "carried_bytes": payload * 1.05,
                "trial_cpu.client.user_s": cpu / 2, "trial_cpu.server.user_s": cpu / 2,
            }  # fmt: skip
            if label == "base" or counted_b:
                extra["instr.client.count"] = 15.0 * payload * work * rng.lognormal(0.0, 0.003)
                extra["instr.server.count"] = 16.0 * payload * work * rng.lognormal(0.0, 0.003)
            trials.append(
                trial(len(trials) + 1, label, payload * 8 / 3, tunnel="wireguard-go", repetition=rep,
                      cpu_client_s=cpu / 3, cpu_server_s=cpu / 3, extra=extra)
            )  # fmt: skip
    return run(trials, uid="tbinstr0")


def test_counted_instructions_gate_in_the_main_tier_and_nothing_timed_gates() -> None:
    r = _counted(more_work=0.02)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    rows = {x.metric.name: x for x in res.rows}
    assert rows[INSTR].gated and not rows[INSTR].wide and rows[INSTR].result.family_size == 1
    assert rows["instr.client.per_byte"].gated and rows["instr.client.per_byte"].wide  # each side's count
    assert not rows[CPU_DELIVERED].gated  # the simulator's CPU time: shown only
    assert not rows["throughput_bps"].gated  # the rate offered
    assert "cpu_s_per_bit" not in rows
    assert rows[INSTR].result.regressed and res.exit_code == EXIT_REGRESSED  # +2% through 5% CPU-time noise
    assert res.gate_line().startswith("gate: instructions/byte at ±1.0% (the tunnel's own instructions per byte")


def test_a_timed_row_beside_the_work_gate_is_not_taken_for_the_direct_baseline() -> None:
    """Under the work gate the timed rows of a tunnel are shown, not gated: a real change there (socat with a
    quarter of its buffer: more syscalls, more CPU) is the tunnel's, and says nothing about the host."""
    r = _counted(more_work=0.5)
    for t in r.trials:
        if t.label == "pr":
            t.metrics = {k: v * 2 if v is not None and "cpu" in k else v for k, v in t.metrics.items()}
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    rows = {x.metric.name: x for x in res.rows}
    assert rows[CPU_DELIVERED].result.significant and not rows[CPU_DELIVERED].gated
    assert not any("direct baseline changed" in n for n in res.notes), res.notes


def test_the_work_gate_keeps_interfered_trials_and_says_so() -> None:
    r = _counted(more_work=0.0)
    for t in r.trials[:4]:
        t.metrics["interfered"] = 1.0
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert next(x for x in res.rows if x.metric.name == INSTR).result.n_pairs == 12
    assert any(n.startswith("4 interfered trial(s) kept: the work gate") for n in res.notes)
    timed = _counted(more_work=0.0, counted_b=False)  # not every trial counted: the timed gate leaves them out
    for t in timed.trials[:4]:
        t.metrics["interfered"] = 1.0
    res = compare_runs(timed, timed, label_a="base", label_b="pr", threshold=0.03)
    assert not any("kept" in n for n in res.notes)


def test_a_side_that_did_not_count_falls_back_to_the_cpu_time() -> None:
    r = _counted(more_work=0.0, counted_b=False)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    main = [x.metric.name for x in res.rows if x.gated and not x.wide]
    assert main == [CPU_DELIVERED]


def test_the_run_and_compare_say_which_role_was_not_counted() -> None:
    from tunbench.report.compare.verdicts import uncounted_notes
    from tunbench.report.work_table import instruction_lines

    r = _counted(more_work=0.0, reps=3)
    for t in r.trials:
        if t.label == "pr":
            t.metrics.pop("instr.server.count")
            t.metrics |= instruction_ratios(t.metrics, t.metrics["delivered_bytes"])
            t.params["instr"] = {"server": "not counted: no userspace daemon (a kernel tunnel's work is in the kernel)"}
        else:
            t.metrics |= instruction_ratios(t.metrics, t.metrics["delivered_bytes"])
    lines = instruction_lines(r.trials)
    assert lines[0].startswith("instructions/byte base · lan · up · 1 flow: client 1") and ", both 3" in lines[0]
    assert lines[1].startswith("instructions/byte pr · lan · up · 1 flow: client 1")
    assert "server not counted: no userspace daemon" in lines[1] and "both" not in lines[1]
    assert uncounted_notes(r.trials) == [
        "instructions of pr server not counted: no userspace daemon (a kernel tunnel's work is in the kernel)"
    ]
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.03)
    assert any(n.startswith("instructions of pr server not counted") for n in res.notes)


def test_a_trial_that_did_not_carry_the_fixed_rate_has_no_count() -> None:
    from tunbench.trial.pair import rate_short

    t = trial(1, "pr", 2.0e6, extra={"instr.client.count": 1e9, "instr.server.count": 1e8})
    t.params["workload"] = {"rate": "20mbit"}
    assert rate_short(t) == "carried 2.0 Mbit/s of the 20 Mbit/s offered (below 90% of it)"
    t.metrics["throughput_bps"] = 19.5e6
    assert rate_short(t) == ""
    t.metrics["throughput_bps"] = 29.3e6  # iperf3 catching up after a stall
    assert rate_short(t) == "carried 29.3 Mbit/s of the 20 Mbit/s offered (above 111% of it)"
    t.params["workload"] = {"rate": "500kbit"}  # a rate below 1 Mbit/s, as the run's hint may name, reads as it is
    t.metrics["throughput_bps"] = 0.3e6
    assert rate_short(t) == "carried 0.3 Mbit/s of the 0.5 Mbit/s offered (below 90% of it)"
    t.params["workload"] = {"rate": ""}  # as fast as it goes: no fixed load to hold it to
    t.metrics["throughput_bps"] = 2.0e6
    assert rate_short(t) == ""


def test_the_first_window_of_a_warm_bring_up_is_not_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    calls: list[list[str]] = []
    hook = ins.CountInstructions(cg.Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control"))
    monkeypatch.setattr(hook, "_control", lambda workdir, role, args: calls.append(args) or "")
    daemon = SimpleNamespace(pid=4242)
    topo = SimpleNamespace(ifname=lambda suffix: f"tb1-{suffix}1", prefix="tb1")
    tunnel = SimpleNamespace(daemons={"client": daemon, "server": daemon}, workdir=tmp_path, topo=topo, spec=NO_SPEC)
    here = SimpleNamespace(machine="")  # a place on this machine
    ctx = SimpleNamespace(client=here, server=here, baseline=False)
    first = trial(1, "pr", 20e6)
    first.params["warm"] = {"bringup": "t1w", "window": 1}
    with hook(ctx, tunnel, first, None):  # type: ignore[arg-type]
        pass
    assert calls == []  # instrumentation never switched on
    assert first.params["instr"] == {"client": ins.FIRST_WINDOW, "server": ins.FIRST_WINDOW}
    second = trial(2, "pr", 20e6)
    second.params["warm"] = {"bringup": "t1w", "window": 2}
    with hook(ctx, tunnel, second, None):  # type: ignore[arg-type]
        (tmp_path / "callgrind.client.out.4242.1").write_text(DUMP)  # as `-d` at the window's end writes it
    assert ["-i", "on", "4242"] in calls and ["-d", "4242"] in calls
    assert second.metrics["instr.client.count"] == 158734127.0
    assert second.params["instr_devices"] == {"client": "tc1"}  # the roles counted: the server wrote no dump
    assert second.params["instr"] == {"server": "not counted: no callgrind dump was written"}

    # the direct baseline has no tunnel: it is neither counted nor said to be "not counted"
    calls.clear()
    direct = trial(3, "direct", 20e6)
    with hook(SimpleNamespace(client=here, server=here, baseline=True), tunnel, direct, None):  # type: ignore[arg-type]
        pass
    assert calls == [] and "instr" not in direct.params


def test_a_daemon_that_forks_per_connection_counts_each_process_in_the_window(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """socat forks a process per connection: each process is switched on and off and dumped, a connection that
    closed inside the window left its dump at its exit, and the role's count is their sum."""
    from types import SimpleNamespace

    calls: list[list[str]] = []
    tree = [4242, 5151]  # the daemon and a connection's process, live at the window's start

    def control(workdir: Path, role: str, args: list[str]) -> str:
        calls.append(args)
        if args[0] == "-d":
            (workdir / f"callgrind.{role}.out.{args[1]}.1").write_text(DUMP)
        return ""

    hook = ins.CountInstructions(cg.Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control"))
    monkeypatch.setattr(hook, "_control", control)
    monkeypatch.setattr(hook, "_runtime", lambda dump: cg.Split(0.0, "", {}))
    monkeypatch.setattr(cg, "process_tree", lambda pid: list(tree))
    topo = SimpleNamespace(ifname=lambda suffix: f"tb1-{suffix}1", prefix="tb1")
    tunnel = SimpleNamespace(daemons={"client": SimpleNamespace(pid=4242)}, workdir=tmp_path, topo=topo, spec=NO_SPEC)
    here = SimpleNamespace(machine="")
    rec = trial(1, "s", 20e6)
    with hook(SimpleNamespace(client=here, server=here, baseline=False), tunnel, rec, None):  # type: ignore[arg-type]
        assert calls == [["-i", "on", "4242"], ["-i", "on", "5151"]]
        tree[:] = [4242, 6262]  # 5151's connection closed (its exit dump), 6262's opened (on from its birth)
        (tmp_path / "callgrind.client.out.5151").write_text(DUMP)
    assert ["-d", "6262"] in calls and ["-d", "5151"] not in calls
    assert rec.metrics["instr.client.count"] == 3 * 158734127.0
    assert rec.params["instr_processes"] == {"client": 3}
    assert "client" not in rec.params.get("instr", {})
    assert not list(tmp_path.glob("callgrind.client.out.*"))  # the dumps read are removed


def test_the_tunnels_figure_adds_the_sides_that_run_a_daemon() -> None:
    """socat forwards on the client and has nothing of its own on the server: its figure is the client's."""
    one = instruction_ratios({"instr.client.count": 150e6}, 10e6, sides=["client"])
    assert one["instr.per_byte"] == pytest.approx(15.0)
    assert "instr.per_byte" not in instruction_ratios({"instr.client.count": 150e6}, 10e6)  # both expected
    assert "instr.per_byte" not in instruction_ratios({"instr.client.count": 150e6}, 10e6, sides=[])  # kernel


def test_calibrate_keeps_and_says_what_the_work_gate_keeps() -> None:
    """calibrate's noise and its "left out" line decide as compare does (verdicts.work_gate_keeps)."""
    from tunbench.report.calibration import calibration_lines, noise_per_metric
    from tunbench.report.compare.verdicts import work_gate_keeps

    r = _counted(more_work=0.0, reps=6)
    for t in r.trials:
        t.label = {"base": "a", "pr": "b"}[t.label]
    r.trials[0].metrics["interfered"] = 1.0
    r.trials[0].params["interference"] = "foreign CPU 45% of a core > 10%"
    assert work_gate_keeps(Gate(), r.trials)
    noise = noise_per_metric(r, pair_s=8.0, overhead_s=5.0, target=0.01)
    assert all(nb.n_pairs == 6 for _, nb in noise)
    text = " ".join(str(x) for x in calibration_lines(r, pair_s=8.0, overhead_s=5.0, target=0.01, noise=noise))
    assert "left out" not in text


class Window:
    """A role's count made elsewhere (sites.base.Pair.instructions_elsewhere), as its host's agent answered."""

    def __init__(self, got: cg.Counted, devices: list[str]) -> None:
        self.got = got
        self.devices = devices

    def read(self) -> cg.Counted:
        return self.got


def test_roles_on_hosts_are_counted_by_their_hosts_and_divided_by_their_own_devices_bytes(tmp_path: Path) -> None:
    from tunbench.remote.instructions import RemoteInstructions
    from tunbench.trial.pair import count_instructions

    asked: list[str] = []
    answers = {
        "client": cg.Counted(1_000_000.0, 100_000.0, "", "", {"rx_bytes": 10_000.0, "tx_bytes": 90_000.0}),
        "server": cg.Counted(why="not counted: valgrind missing (Debian: apt-get install valgrind) (on h2)"),
    }
    pair = SimpleNamespace(
        instructions_elsewhere=lambda tunnel: {
            role: (lambda device, role=role: asked.append(device) or Window(answers[role], asked))
            for role in ("client", "server")
        }
    )
    hook = ins.CountInstructions(cg.Callgrind(None, None))  # this machine has no valgrind: the hosts count
    daemon = SimpleNamespace(pid=4242)
    topo = SimpleNamespace(ifname=lambda suffix: f"tb1-{suffix}1", prefix="tb1")
    tunnel = SimpleNamespace(daemons={"client": daemon, "server": daemon}, workdir=tmp_path, topo=topo, spec=NO_SPEC)
    ctx = SimpleNamespace(client=SimpleNamespace(machine="h1"), server=SimpleNamespace(machine="h2"), baseline=False)
    t = trial(1, "wg", 20e6)
    with hook(ctx, tunnel, t, pair):  # type: ignore[arg-type]
        pass
    assert asked == ["tb1-tc1", "tb1-ts1"]  # each host reads its role's own tunnel device
    assert t.metrics["instr.client.count"] == 1_000_000.0 and "instr.server.count" not in t.metrics
    assert t.metrics["counters.client.dev.tc1.rx_bytes"] == 10_000.0
    assert t.params["instr_devices"] == {"client": "tc1"}
    assert t.params["instr"] == {"server": answers["server"].why}  # never a zero
    count_instructions(t, None)
    assert t.metrics["instr.client.per_byte"] == pytest.approx(900_000 / 100_000)  # outside the runtime, per byte
    assert "instr.per_byte" not in t.metrics  # one side counted: no sum

    # the controller's side of the agent's requests: the host named in what it says
    calls: list[tuple[str, dict[str, object]]] = []
    replies = {
        "instr_on": {"count": "i3", "why": ""},
        "instr_read": {"count": 5.0, "runtime": None, "whole": "Go's runtime not separated: x", "why": "",
                       "device_bytes": {"rx_bytes": 1, "tx_bytes": 2}},
    }  # fmt: skip
    conn = SimpleNamespace(name="h1", call=lambda op, **kw: calls.append((op, kw)) or replies[op])
    place = SimpleNamespace(conn=conn, key="p1")
    from tunbench.remote.place import RemoteProc

    proc = RemoteProc(conn, "d2", 4242, "wireguard-go client")  # type: ignore[arg-type]
    got = RemoteInstructions(place, "client", [proc], "tb1-tc1").read()  # type: ignore[arg-type]
    assert calls[0] == (
        "instr_on",
        {"place": "p1", "role": "client", "procs": ["d2"], "device": "tb1-tc1", "counter": "callgrind"},
    )
    assert got == cg.Counted(5.0, None, "Go's runtime not separated: x (on h1)", "", {"rx_bytes": 1.0, "tx_bytes": 2.0})


def test_a_daemon_on_a_host_is_wrapped_with_that_hosts_valgrind_or_not_at_all(tmp_path: Path) -> None:
    runs: list[list[str]] = []

    def place(machine: str, found: str) -> SimpleNamespace:
        def run(argv: list[str], **kw: object) -> SimpleNamespace:
            runs.append(argv)
            return SimpleNamespace(stdout=found)

        return SimpleNamespace(machine=machine, workdir=tmp_path / machine, run=run)

    hook = ins.CountInstructions(cg.Callgrind("/here/valgrind", "/here/callgrind_control"))
    h2 = place("h2", "/opt/vg/bin/valgrind\n/opt/vg/bin/callgrind_control\n")
    argv, env = hook.wrap_daemon("server", ["wireguard-go", "-f", "tb1-ts1"], {}, h2)  # type: ignore[arg-type]
    assert argv[0] == "/opt/vg/bin/valgrind" and argv[-3:] == ["wireguard-go", "-f", "tb1-ts1"]
    assert f"--callgrind-out-file={tmp_path / 'h2'}/callgrind.server.out.%p" in argv
    assert env == cg.GO_ENV
    hook.wrap_daemon("server", ["x"], {}, h2)  # type: ignore[arg-type]
    assert len(runs) == 1  # a host's programs are found once
    bare = place("h3", "")  # no valgrind there: started as it is, and its window will say why
    assert hook.wrap_daemon("client", ["x"], {"A": "1"}, bare) == (["x"], {"A": "1"})  # type: ignore[arg-type]
    here = SimpleNamespace(machine="", workdir=tmp_path)
    assert hook.wrap_daemon("client", ["x"], {}, here)[0][0] == "/here/valgrind"  # type: ignore[arg-type]
    # the host's shell really asked (sh is dash on Debian, whose `command -v` answers for its first name only)
    import subprocess

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("valgrind", "callgrind_control", "callgrind_annotate"):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)

    def shell(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, env={"PATH": f"{bindir}:/usr/bin:/bin"})

    h5 = SimpleNamespace(machine="h5", workdir=tmp_path, run=shell)
    assert hook.tools_at(h5) == cg.Callgrind(  # type: ignore[arg-type]
        str(bindir / "valgrind"), str(bindir / "callgrind_control"), str(bindir / "callgrind_annotate")
    )


def test_a_read_dump_is_deleted_unless_a_directory_is_named_to_keep_it(tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.client.out.4242.2"
    dump.write_text(DUMP)
    assert cg.keep_dump(dump, "003-pr-r1", "client", keep="") is None
    assert not dump.exists()
    dump.write_text(DUMP)
    kept = cg.keep_dump(dump, "003-pr-r1", "client", keep=str(tmp_path / "kept"))
    assert kept == tmp_path / "kept" / "003-pr-r1.client.4242.2.callgrind"  # the process and its window
    assert kept.read_text() == DUMP and not dump.exists()
    (tmp_path / "openvpn-client.log").write_text("Initialization Sequence Completed\n")
    assert cg.keep_logs(tmp_path, "003-pr-r1", keep=str(tmp_path / "kept")) == [
        tmp_path / "kept" / "003-pr-r1.openvpn-client.log"
    ]


# callgrind_annotate's lines from two of OpenVPN 2.6.14's windows (the client; 4,183 packets each), one per mode
OVPN_BUSY = """\
69,868,599 (100.0%)  PROGRAM TOTALS
10,126,089 (14.49%)  ???:0x0000000000241c80 [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
 3,258,424 ( 4.66%)  ???:ERR_clear_error [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
 3,069,549 ( 4.39%)  ???:0x0000000000086f90 [/usr/sbin/openvpn]
   990,964 ( 1.42%)  ???:0x00000000000526d0 [/usr/lib/x86_64-linux-gnu/libssl.so.3]
   764,218 ( 1.09%)  ???:0x0000000000035290 [/usr/lib/x86_64-linux-gnu/libssl.so.3]
"""
OVPN_IDLE = """\
34,253,281 (100.0%)  PROGRAM TOTALS
10,126,089 (29.56%)  ???:0x0000000000241c80 [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
 1,787,478 ( 5.22%)  ???:OSSL_PARAM_locate [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
 1,162,921 ( 3.40%)  ???:0x0000000000026960 [/usr/sbin/openvpn]
"""


def test_instructions_are_added_up_by_shared_object() -> None:
    got = cg.object_counts(OVPN_BUSY)
    assert got["libssl.so.3"] == 990_964 + 764_218
    assert got["libcrypto.so.3"] == 10_126_089 + 3_258_424 and got["openvpn"] == 3_069_549
    assert "PROGRAM" not in " ".join(got) and cg.object_counts(OVPN_IDLE).get("libssl.so.3") is None


def test_a_window_outside_the_mode_the_adapter_counts_is_not_counted_and_its_share_is_kept() -> None:
    from tunbench.tunnels.adapter import InstructionsSpec

    spec = InstructionsSpec(mode_object="libssl.so", mode="the TLS state machine on every wake-up")
    busy = cg.Counted(69_868_599.0, 0.0, objects=cg.object_counts(OVPN_BUSY))
    idle = cg.Counted(34_253_281.0, 0.0, objects=cg.object_counts(OVPN_IDLE))
    rec = trial(1, "base", 20e6)
    assert ins.mode_why(spec, busy, "client", rec) == ""
    why = ins.mode_why(spec, idle, "server", rec)
    assert why.startswith("not counted: not in the mode the gate counts (the TLS state machine on every wake-up)")
    assert "0.00% of its 34.3 M instructions in libssl.so, under 1%" in why
    assert rec.params["instr_mode"] == {
        "client": pytest.approx((990_964 + 764_218) / 69_868_599, abs=1e-5),
        "server": 0.0,
    }
    # an adapter that names no mode: every counted window counts, and no share is kept
    other = trial(2, "base", 20e6)
    assert ins.mode_why(None, idle, "client", other) == "" and "instr_mode" not in other.params


def test_the_hook_leaves_a_window_in_the_other_mode_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tunbench.tunnels.adapter import InstructionsSpec

    hook = ins.CountInstructions(cg.Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control"))

    def control(workdir: Path, role: str, args: list[str]) -> str:
        if args[0] == "-d":
            (workdir / f"callgrind.{role}.out.{args[1]}.1").write_text(DUMP)
        return ""

    idle = cg.Split(0.0, "", cg.object_counts(OVPN_IDLE))
    monkeypatch.setattr(hook, "_control", control)
    monkeypatch.setattr(hook, "_runtime", lambda dump: idle)
    monkeypatch.setattr(cg, "process_tree", lambda pid: [pid])
    topo = SimpleNamespace(ifname=lambda suffix: f"tb1-{suffix}1", prefix="tb1")
    spec = SimpleNamespace(instructions=InstructionsSpec(mode_object="libssl.so", mode="busy"))
    tunnel = SimpleNamespace(daemons={"client": SimpleNamespace(pid=4242)}, workdir=tmp_path, topo=topo, spec=spec)
    here = SimpleNamespace(machine="")
    rec = trial(1, "base", 20e6)
    with hook(SimpleNamespace(client=here, server=here, baseline=False), tunnel, rec, None):  # type: ignore[arg-type]
        pass
    assert "instr.client.count" not in rec.metrics and "instr_devices" not in rec.params
    assert rec.params["instr"]["client"].startswith("not counted: not in the mode the gate counts (busy)")
    assert rec.params["instr_mode"] == {"client": 0.0} and rec.params["instr_other_mode"] == ["client"]


def test_a_trial_left_out_for_its_mode_does_not_stop_the_work_gate_keeping_interfered_trials() -> None:
    r = _counted(more_work=0.0)
    for t in r.trials[:4]:
        t.metrics["interfered"] = 1.0
    low = r.trials[5]  # a bring-up in the other mode: its count left out on purpose
    del low.metrics["instr.client.count"], low.metrics["instr.server.count"]
    low.params["instr_other_mode"] = ["client", "server"]
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert next(x for x in res.rows if x.metric.name == INSTR).result.n_pairs == 11  # its pair drops out
    assert any(n.startswith("4 interfered trial(s) kept: the work gate") for n in res.notes)
    del low.params["instr_other_mode"]  # the same gap from a failed count: the timed rule leaves them out
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert not any("kept" in n for n in res.notes)


def test_a_trial_that_did_not_carry_its_rate_drops_out_and_the_work_gate_still_keeps_interfered_trials() -> None:
    """Beside busy loops every trial is flagged as interfered; one stall must not hand the whole case to the
    timed rule, which would leave every trial out and give no verdict at all."""
    from tunbench.report.compare.metrics import stalled
    from tunbench.trial.pair import count_instructions

    r = _counted(more_work=0.0)
    for t in r.trials:
        t.metrics["interfered"] = 1.0
    slow = r.trials[5]
    slow.params["workload"] = {"rate": "20mbit"}
    slow.metrics["throughput_bps"] = 2.0e6  # a stall: 2 of the 20 Mbit/s offered
    count_instructions(slow, slow.metrics["delivered_bytes"])
    assert stalled(slow) and "instr.client.count" not in slow.metrics
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert next(x for x in res.rows if x.metric.name == INSTR).result.n_pairs == 11  # its pair drops out
    assert any(n.startswith("24 interfered trial(s) kept: the work gate") for n in res.notes), res.notes
    slow.params["instr"] = {"client": "not counted: valgrind missing"}  # not the trial's accident: timed rule,
    with pytest.raises(CompareError, match="left out 24 interfered trials"):  # which leaves every trial out here
        compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)


def test_a_window_whose_split_by_object_was_not_read_is_not_counted_rather_than_judged_in_the_other_mode() -> None:
    from tunbench.tunnels.adapter import InstructionsSpec

    spec = InstructionsSpec(mode_object="libssl.so", mode="busy")
    # callgrind_annotate missing or failed: no split by object, so no share of libssl to read the mode from
    unread = cg.Counted(69_868_599.0, None, "Go's runtime not separated: callgrind_annotate is missing")
    rec = trial(1, "base", 20e6)
    why = ins.mode_why(spec, unread, "client", rec)
    assert why.startswith("not counted: its mode (busy) could not be read") and "callgrind_annotate" in why
    assert "instr_mode" not in rec.params and "instr_other_mode" not in rec.params  # a failed count, not a mode


def test_a_role_whose_dumps_were_not_all_split_by_object_has_no_objects(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A daemon that forks (socat) is split dump by dump: one dump left unsplit leaves the role's objects
    unread, not the others' objects alone (which would understate the mode's share)."""

    def control(workdir: Path, role: str, args: list[str]) -> str:
        if args[0] == "-d":
            (workdir / f"callgrind.{role}.out.{args[1]}.1").write_text(DUMP)
        return ""

    splits = {"4242": cg.Split(0.0, "", cg.object_counts(OVPN_BUSY)), "5151": cg.Split(None, "annotate failed", None)}
    monkeypatch.setattr(cg, "process_tree", lambda pid: [4242, 5151])
    window = cg.RoleWindow(
        cg.Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control"),
        tmp_path,
        "client",
        4242,
        control_fn=control,
        runtime_fn=lambda dump: splits[dump.name.split(".")[3]],
    )
    assert window.on() == ""
    got = window.read()
    assert got.count == 2 * 158734127.0 and got.processes == 2
    assert got.objects is None and got.whole == "annotate failed"


def test_a_trial_with_one_side_in_the_other_mode_and_the_other_side_failed_is_a_failed_count() -> None:
    from tunbench.report.compare.metrics import other_mode

    r = _counted(more_work=0.0)
    for t in r.trials[:4]:
        t.metrics["interfered"] = 1.0
    low = r.trials[5]
    del low.metrics["instr.client.count"], low.metrics["instr.server.count"]
    low.params["instr_other_mode"] = ["client"]  # the server's count failed: not left out on purpose
    assert not other_mode(low)
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert not any("kept" in n for n in res.notes)
    del low.params["instr_other_mode"]
    low.metrics["instr.server.count"] = 1.0  # the server counted, the client left out for its mode
    low.params["instr_other_mode"] = ["client"]
    assert other_mode(low)


def test_a_box_too_slow_for_the_fixed_rate_is_told_the_rate_it_sustains() -> None:
    """On a VM where wireguard-go under callgrind carried 16-18 of the 20 Mbit/s offered, most pairs dropped
    out and the gate had none: the run's lines and compare's notes say how many trials fell short, the most
    one carried, and a rate of at most 60% of it (docs/work-gate.md)."""
    from tunbench.report.compare.metrics import _round_rate, rate_hint
    from tunbench.report.work_table import instruction_lines
    from tunbench.trial.pair import count_instructions

    r = _counted(more_work=0.0, reps=4)
    for t in r.trials:
        t.params["workload"] = {"rate": "20mbit"}
        t.metrics |= instruction_ratios(t.metrics, t.metrics["delivered_bytes"])
    assert rate_hint(r.trials) == ""  # every trial carried its rate: nothing to say
    for t, got in zip(r.trials[:3], (16.1e6, 17.5e6, 16.9e6), strict=True):
        t.metrics["throughput_bps"] = got
        count_instructions(t, t.metrics["delivered_bytes"])
    hint = rate_hint(r.trials)
    assert hint.startswith("3 of 8 counted trial(s) carried less than their fixed 20 Mbit/s (at most 17.5)")
    # 60% of 17.5, rounded down to 1, 2 or 5 times a power of ten, in the table of the trials' own workload
    assert '[workload.iperf3] rate = "10mbit"' in hint
    lines = instruction_lines(r.trials)
    assert lines[-1] == hint
    base, pr = lines[0], lines[1]  # one reason per side, not one per trial
    assert base.count("not counted in 2 of 4 trial(s): carried 16.1-16.9 Mbit/s of the 20 Mbit/s offered") == 2
    assert pr.count("not counted in 1 of 4 trial(s): carried 17.5 Mbit/s of the 20 Mbit/s offered") == 2
    res = compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
    assert hint in res.notes
    # a trial above its rate (iperf3 catching up after a stall) is that trial's accident, not the box's
    r2 = _counted(more_work=0.0, reps=4)
    for t in r2.trials:
        t.params["workload"] = {"rate": "20mbit"}
    r2.trials[0].metrics["throughput_bps"] = 29.3e6
    count_instructions(r2.trials[0], r2.trials[0].metrics["delivered_bytes"])
    assert rate_hint(r2.trials) == ""
    assert "(above 111% of it)" in instruction_lines(r2.trials)[0]  # its own reason, not folded into a count
    assert [_round_rate(x) for x in (10.5e6, 9.9e6, 3e6, 1.2e6, 450e3, 20)] == [
        "10mbit", "5mbit", "2mbit", "1mbit", "200kbit", "1kbit",
    ]  # fmt: skip


def test_a_run_whose_every_trial_fell_short_of_the_rate_says_what_to_offer_even_without_a_verdict() -> None:
    """Beside busy loops on a slow box every trial fell short of 20 Mbit/s: with no count, the timed rule
    judged the case and left every interfered trial out, and compare's error must say why the counts that
    would have kept them are missing."""
    from tunbench.trial.pair import count_instructions

    r = _counted(more_work=0.0, reps=4)
    for t in r.trials:
        t.metrics["interfered"] = 1.0
        t.params["workload"] = {"rate": "20mbit"}
        t.metrics["throughput_bps"] = 15.0e6
        count_instructions(t, t.metrics["delivered_bytes"])
    with pytest.raises(CompareError, match=r'left out 8 interfered trials.*8 of 8 counted trial\(s\).*rate = "5mbit"'):
        compare_runs(r, r, label_a="base", label_b="pr", threshold=0.01)
