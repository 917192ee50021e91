"""perf's hardware instruction counter on hosts (`run --hosts ... --count-instructions --instr-counter perf|auto`):
the agent's `instr_on` / `instr_read` with counter "perf" (remote/agent.py, monitor/pmu.py) driven by the
controller's RemoteInstructions, the answers passed through JSON as over the SSH channel; the choice of one
counter for a run's hosts (remote/instructions.py) and what `doctor --hosts` says.

This machine has no PMU (perf answers `<not supported>`): the refusals run for real; the counting path runs
against a stand-in perf that speaks perf stat's control FIFO and writes perf stat's documented CSV (`-x,`:
value, unit, event, run time, % running). Unverified against a real PMU."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.test_hwinstr import _fake_perf
from tests.unit.test_remote_work import agent  # noqa: F401 (the fixture: an agent answering through JSON)
from tunbench.errors import DependencyMissing
from tunbench.monitor import pmu, work
from tunbench.perf import hwinstr
from tunbench.remote.agent import Agent
from tunbench.remote.instructions import RemoteInstructions, host_counter, instructions_verdict, run_counter
from tunbench.remote.place import RemotePlace, RemoteProc
from tunbench.results import TrialRecord

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the agent's processes need root")

NOT_SUPPORTED = "<not supported>,,instructions:u,0,100.00,,\n"  # a VM without a PMU
COUNTED = "# started on Sun Nov 29 07:50:00 2026\n\n812345678,,instructions:u,2002123456,100.00,,\n"
NO_PMU = pmu.capability("/usr/bin/perf", 0, NOT_SUPPORTED)


def fake_perf(tmp_path: Path, csv: str) -> tuple[Path, Path]:
    """test_hwinstr's stand-in perf, and the file its argv is kept in."""
    return _fake_perf(tmp_path, csv), tmp_path / "perf.args"


def sleeper(place: RemotePlace) -> RemoteProc:
    proc = place.spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"], what="a tunnel", log_name="tunnel.log", role="client"
    )
    assert isinstance(proc, RemoteProc)
    return proc


def test_a_host_without_a_pmu_says_so_for_its_role_never_a_zero(agent: tuple[Agent, RemotePlace]) -> None:  # noqa: F811
    a, place = agent
    a._instr_cap = NO_PMU
    got = RemoteInstructions(place, "client", [], "lo", counter="perf").read()
    assert got.count is None
    assert got.why == (
        "not counted: perf cannot count instructions:u here: <not supported>, no hardware counter (a VM without a "
        "PMU, for one) (on hx)"
    )
    assert place.conn.call("instr_capability")["why"] == NO_PMU.why


def test_the_agent_counts_a_roles_processes_with_perf_stat_over_the_window(
    agent: tuple[Agent, RemotePlace],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The command the agent builds (the local path's: CSV, counters off until enabled through the control FIFO,
    instructions:u, the role's pids) and the count it reads from perf's CSV, with the tunnel device's bytes."""
    a, place = agent
    perf, args = fake_perf(tmp_path, COUNTED)
    a._instr_cap = work.Capability(str(perf), (pmu.EVENT,), hardware=True)
    proc = sleeper(place)
    try:
        window = RemoteInstructions(place, "client", [proc], "lo", counter="perf")
        assert window.key is not None and window.why == ""
        argv = args.read_text().split("\n")
        assert argv[:5] == ["stat", "-x,", "--no-big-num", "-D", "-1"]  # counters off until enabled
        assert argv[argv.index("-e") + 1] == "instructions:u" and argv[argv.index("-p") + 1] == str(proc.pid)
        assert argv[argv.index("--control") + 1].startswith(f"fifo:{tmp_path}/perf-instr-client.ctl,")
        got = window.read()
        assert got.count == 812345678.0 and got.why == ""
        assert got.runtime == 0.0 and got.whole == ""  # not a Go program: nothing to leave out, as locally
        assert set(got.device_bytes) == {"rx_bytes", "tx_bytes"}  # lo's, over the same span
        assert not a.instr  # stopped and forgotten
    finally:
        proc.stop()


def test_a_scaled_count_is_not_a_count(agent: tuple[Agent, RemotePlace], tmp_path: Path) -> None:  # noqa: F811
    a, place = agent
    perf, _ = fake_perf(tmp_path, "61234567,,instructions:u,1001061728,50.00,,\n")
    a._instr_cap = work.Capability(str(perf), (pmu.EVENT,), hardware=True)
    proc = sleeper(place)
    try:
        got = RemoteInstructions(place, "client", [proc], "lo", counter="perf").read()
    finally:
        proc.stop()
    assert got.count is None
    assert got.why.startswith("not counted: perf ran the instructions counter for part of the window only")
    assert got.why.endswith("(on hx)")


def test_the_hook_counts_a_role_on_a_host_by_its_agent(
    agent: tuple[Agent, RemotePlace],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CountHardwareInstructions: the client, on host hx, counted by hx's perf through the pair's
    instructions_elsewhere(counter="perf"), whatever this machine's perf can do; its count and its device."""
    from tunbench.host import ledger as ledger_mod

    a, place = agent
    perf, _ = fake_perf(tmp_path, COUNTED)
    a._instr_cap = work.Capability(str(perf), (pmu.EVENT,), hardware=True)
    proc = sleeper(place)
    asked: list[str] = []

    def elsewhere(tunnel: Any, counter: str) -> dict[str, Any]:
        asked.append(counter)
        return {"client": functools.partial(RemoteInstructions, place, "client", [proc], counter=counter)}

    topo = SimpleNamespace(ifname=lambda suffix: "lo" if suffix == "tc" else f"tb1-{suffix}", prefix="tb1")
    tunnel = SimpleNamespace(
        daemons={"client": proc}, pids=lambda role: [], topo=topo, spec=SimpleNamespace(instructions=None)
    )
    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state2")
    ctx = SimpleNamespace(
        client=place, server=SimpleNamespace(machine=""), baseline=False, workdir=tmp_path, ledger=None
    )
    rec = TrialRecord(1, "wg", "wg", "lan", "iperf3", 1, "up", 0, {})
    try:
        with hwinstr.CountHardwareInstructions(NO_PMU)(
            ctx, tunnel, rec, SimpleNamespace(instructions_elsewhere=elsewhere)
        ):  # type: ignore[arg-type]
            pass
    finally:
        proc.stop()
    assert asked == ["perf"]
    assert rec.metrics["instr.client.count"] == 812345678.0 and rec.metrics["instr.client.runtime"] == 0.0
    assert rec.params["instr_devices"] == {"client": "lo"}
    assert rec.params["instr"] == {"server": hwinstr.NO_DAEMON}  # this machine's perf is not asked for hx's role


def test_one_counter_for_the_hosts_of_a_run() -> None:
    assert run_counter("auto", {"h1": "", "h2": ""}) == (
        "perf",
        "auto: perf counts instructions:u on h1, h2, a hardware counter",
    )
    counter, why = run_counter("auto", {"h1": "", "h2": NO_PMU.why})
    assert counter == "callgrind"  # one side without a PMU: both by callgrind, and why
    assert why.startswith("auto: host h2: perf cannot count instructions:u here: <not supported>")
    assert why.endswith("(one counter for both sides: callgrind on h1, h2)")
    with pytest.raises(DependencyMissing, match=r"--instr-counter perf: host h2 cannot count instructions:u: perf"):
        run_counter("perf", {"h1": "", "h2": NO_PMU.why})
    assert run_counter("perf", {"h1": ""})[0] == "perf"
    assert run_counter("callgrind", {"h1": ""}) == ("callgrind", "--instr-counter callgrind")
    assert host_counter("auto", NO_PMU.why) == ("callgrind", f"auto: {NO_PMU.why}")
    assert host_counter("perf", NO_PMU.why)[0] == ""  # refused there


def test_doctor_hosts_says_which_counter_a_host_uses_and_why(
    agent: tuple[Agent, RemotePlace],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tunbench.cli.agent import pair_counter_line

    a, place = agent
    a._instr_cap = NO_PMU
    monkeypatch.setattr("tunbench.remote.facts.tools", lambda programs: dict.fromkeys(programs, True))
    assert instructions_verdict(place.conn) == (
        True,
        "counted instructions (--count-instructions)",
        f"callgrind, by simulation, as {NO_PMU.why}",
        "",
    )
    a._instr_cap = work.Capability("/usr/bin/perf", (pmu.EVENT,), hardware=True)
    ok, _, text, _ = instructions_verdict(place.conn)
    assert ok and text == "perf: perf counts instructions:u there, a hardware counter; the tunnel runs natively"
    inv = SimpleNamespace(for_role=lambda role: SimpleNamespace(name={"client": "h1", "server": "h2"}[role]))
    line = pair_counter_line(inv, {"h1": "", "h2": NO_PMU.why})
    assert line.startswith("counted instructions of a run's pair (h1, h2): callgrind (auto: host h2: perf cannot")
    assert pair_counter_line(inv, {"h1": ""}) == ""  # h2 unreachable: nothing said of the pair
