"""Counted work on a host (`run --hosts ... --count-work`): the agent's count_open / count_start /
count_stop requests (remote/agent.py) driven by the controller's RemoteCounting (remote/work.py), the
answers passed through JSON as over the SSH channel. Real perf on a real process where this host lets
perf count; the refusals everywhere."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tunbench.host import ledger as ledger_mod
from tunbench.host.place import LocalPlace
from tunbench.monitor import pmu, work
from tunbench.remote.agent import Agent, _PlaceState
from tunbench.remote.place import RemotePlace, RemoteProc
from tunbench.remote.work import RemoteCounting, count_verdict

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the agent's processes and perf need root")


class Channel:
    """An AgentConnection's `call`, answered by an Agent in this process through JSON."""

    def __init__(self, agent: Agent, name: str = "hx") -> None:
        self.agent, self.name = agent, name

    def call(self, op: str, **args: Any) -> Any:
        return json.loads(json.dumps(self.agent.handle(op, json.loads(json.dumps(args)))))


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Agent, RemotePlace]]:
    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state")
    ledger = ledger_mod.Ledger.open("tbtest02")
    with contextlib.ExitStack() as stack:
        a = Agent(ledger, stack)
        stack.callback(a.close)
        a.places["p0"] = _PlaceState(LocalPlace(None, ledger, tmp_path), contextlib.ExitStack())
        yield a, RemotePlace(Channel(a), "p0", str(tmp_path), None)  # type: ignore[arg-type]


def test_a_host_that_cannot_count_says_so_and_the_trial_goes_on(agent: tuple[Agent, RemotePlace]) -> None:
    a, place = agent
    a._count_cap = work.probe(None)  # this host's probe: no perf
    metrics: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    with work.count_roles({"client": lambda: RemoteCounting(place, "client", [])}, metrics, notes):
        pass
    assert metrics == {}
    assert notes["client"] == "not counted: perf is not installed (Debian: apt install linux-perf) (on hx)"
    assert not a.counts


@pytest.mark.skipif(not work.probe(shutil.which("perf")).available, reason="perf cannot count syscalls here")
def test_the_agent_counts_a_role_with_the_local_argv_and_parser(
    agent: tuple[Agent, RemotePlace], tmp_path: Path
) -> None:
    """A daemon the agent started writes 1000 times once told to (a file appears), inside the window: every
    write is counted there, and the metrics come back as a local count's."""
    a, place = agent
    go, done = tmp_path / "go", tmp_path / "done"
    code = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "for _ in range(1000): os.write(2, b'x')\n"
        f"open({str(done)!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    proc = place.spawn([sys.executable, "-c", code], what="writer", log_name="writer.log", role="client")
    assert isinstance(proc, RemoteProc)
    metrics: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    try:
        with work.count_roles({"client": lambda: RemoteCounting(place, "client", [proc])}, metrics, notes):
            go.touch()
            while not done.exists():
                time.sleep(0.01)
        assert metrics["work.client.syscalls.write"] == 1000
        assert metrics["work.client.processes"] == 1 and metrics["work.client.exited"] == 0
        assert notes == {} and not a.counts  # stopped and forgotten by the agent
    finally:
        proc.stop()


def test_a_role_without_a_process_on_its_host_is_not_counted(agent: tuple[Agent, RemotePlace]) -> None:
    a, place = agent
    a._count_cap = work.Capability("perf", ("raw_syscalls:sys_enter",))  # as if it could: no pid to count
    r = RemoteCounting(place, "server", [])
    assert r.key is None and r.why == "no tunnel process on this side (on hx)"


def test_doctor_hosts_line_says_what_the_host_can_count_or_the_fix(agent: tuple[Agent, RemotePlace]) -> None:
    a, place = agent
    a._count_cap = work.probe(None)
    ok, name, text, fix = count_verdict(place.conn)
    assert (ok, name, text) == (
        False,
        "counted work (perf stat)",
        "perf is not installed (Debian: apt install linux-perf)",
    )
    assert fix == "install perf; only needed for --count-work"
    a._count_cap = work.Capability("perf", ("raw_syscalls:sys_enter", "syscalls:sys_enter_write"))
    assert count_verdict(place.conn) == (
        True, "counted work (perf stat)", "software events, 1 syscall tracepoints; no hardware counters", ""
    )  # fmt: skip


def test_the_window_hook_counts_a_remote_role_through_its_agent(
    agent: tuple[Agent, RemotePlace], tmp_path: Path
) -> None:
    """perf/count_work.CountWork: a role placed on a host goes to that host's agent (whose perf may differ
    from this machine's), a local one to this machine's perf; each trial says where."""
    from types import SimpleNamespace

    from tunbench.perf.count_work import CountWork
    from tunbench.results import TrialRecord

    a, place = agent
    a._count_cap = work.probe(None)  # the host cannot count; this machine "can" (it is never asked here)
    rec = TrialRecord(0, "socat", "socat", "lan", "iperf3", 1, "up", 0, {})
    tunnel = SimpleNamespace(pids=lambda role: [], daemons={})
    ctx = SimpleNamespace(workdir=tmp_path, ledger=None, client=place, server=SimpleNamespace(machine=""))
    # the pair says which roles their own machine counts: here the client, on hx
    pair = SimpleNamespace(
        counted_elsewhere=lambda t: {"client": functools.partial(RemoteCounting, place, "client", [])}
    )
    with CountWork(work.Capability("perf", ("raw_syscalls:sys_enter",)))(ctx, tunnel, rec, pair):  # type: ignore[arg-type]
        pass
    assert rec.params["work_host"] == {"client": "hx"}
    assert rec.params["work"]["client"] == "not counted: perf is not installed (Debian: apt install linux-perf) (on hx)"
    assert rec.params["work"]["server"] == "not counted: no tunnel process on this side"  # the local role


def test_a_hosts_pair_counts_every_role_by_its_hosts_agent(agent: tuple[Agent, RemotePlace]) -> None:
    """sites.hosts.HostsPair.counted_elsewhere: each role's counting is attached through the agent of the host
    its place is on (its reason, when the host cannot count, names the host)."""
    from types import SimpleNamespace

    from tunbench.sites.hosts import HostsPair

    a, place = agent
    a._count_cap = work.probe(None)
    pair = HostsPair(SimpleNamespace(place=lambda role: place), {}, None)  # type: ignore[arg-type]
    counts = pair.counted_elsewhere(SimpleNamespace(daemons={}))  # type: ignore[arg-type]
    assert set(counts) == {"client", "server"}
    client = counts["client"]()
    assert client.role == "client" and client.why.endswith("(on hx)")


def test_counted_instructions_on_a_host_without_valgrind_say_so_and_doctor_names_the_fix(
    agent: tuple[Agent, RemotePlace], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench.monitor.callgrind import Callgrind
    from tunbench.remote.instructions import RemoteInstructions, instructions_verdict

    a, place = agent
    a._callgrind = Callgrind(None, None)  # this host's programs: no valgrind
    got = RemoteInstructions(place, "client", [], "tb1-tc").read()
    assert got.count is None  # never a zero
    assert got.why == ("not counted: valgrind, callgrind_control missing (Debian: apt-get install valgrind) (on hx)")
    a._callgrind = Callgrind("/usr/bin/valgrind", "/usr/bin/callgrind_control")  # as if it could: no daemon
    assert RemoteInstructions(place, "client", [], "tb1-tc").read().why == (
        "not counted: the role's daemon is not running here (on hx)"
    )
    monkeypatch.setattr("tunbench.remote.facts.tools", lambda programs: dict.fromkeys(programs, False))
    a._instr_cap = pmu.capability("/usr/bin/perf", 0, "<not supported>,,instructions:u,0,100.00,,\n")  # no PMU
    ok, name, text, fix = instructions_verdict(place.conn)
    assert (ok, name) == (False, "counted instructions (--count-instructions)")
    assert text == (f"callgrind ({a._instr_cap.why}), but missing valgrind, callgrind_control, callgrind_annotate")
    assert "only needed for --count-instructions" in fix
