"""A CPU cap on a host (remote/cap.py's RemoteCpuCap over the agent's cap_* requests), the answers passed
through JSON as over the SSH channel: the quota it writes, the processes it may hold (its place's only), and
that it goes with its place, at the agent's end and at cap_close. Real cgroups (v1 `cpu`), no SSH; the
CPU it gives is measured over SSH in tests/integration/test_multi_connect.py."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tunbench.errors import TunbenchError
from tunbench.host import ledger as ledger_mod
from tunbench.host.cgroup import V1_CPU, CpuCap
from tunbench.host.place import LocalPlace
from tunbench.remote.agent import Agent, _PlaceState
from tunbench.remote.cap import RemoteCpuCap
from tunbench.remote.place import RemotePlace

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root"),
    pytest.mark.skipif(not CpuCap.available(), reason="no cgroup-v1 cpu controller"),
]

BUSY = [sys.executable, "-c", "while True: pass"]


class Channel:
    """An AgentConnection's `call`, answered by an Agent in this process through JSON."""

    def __init__(self, agent: Agent, name: str = "hx") -> None:
        self.agent, self.name = agent, name

    def call(self, op: str, **args: Any) -> Any:
        return json.loads(json.dumps(self.agent.handle(op, json.loads(json.dumps(args)))))


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Agent, RemotePlace]]:
    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state")
    ledger = ledger_mod.Ledger.open("tbtest03")
    with contextlib.ExitStack() as stack:
        a = Agent(ledger, stack)
        stack.callback(a.close)
        a.places["p0"] = _PlaceState(LocalPlace(None, ledger, tmp_path), contextlib.ExitStack())
        yield a, RemotePlace(Channel(a), "p0", str(tmp_path), None)  # type: ignore[arg-type]
    assert not list(V1_CPU.glob("tbtest03-*")), "a cap's cgroup was left"


def cap_dir(a: Agent) -> Path:
    ((cap, _),) = a.caps.values()
    return cap.path


def test_the_cap_holds_its_places_processes_at_the_quota_asked(agent: tuple[Agent, RemotePlace]) -> None:
    a, place = agent
    busy = place.spawn(BUSY, what="busy loop", log_name="busy.log")
    with RemoteCpuCap(place, period_us=50_000) as cap:
        d = cap_dir(a)
        assert d.parent == V1_CPU and (d / "cpu.cfs_period_us").read_text().strip() == "50000"
        cap.add(place.pids("", [busy]))
        assert (d / "cgroup.procs").read_text().split() == [str(busy.pid)]
        cap.limit(10.0)
        assert (d / "cpu.cfs_quota_us").read_text().strip() == "5000"
        cap.limit(None)
        assert (d / "cpu.cfs_quota_us").read_text().strip() == "-1"
        # another process of the host (the test's own, harmless should the check ever let it in)
        with subprocess.Popen(["sleep", "30"]) as stranger:
            try:
                with pytest.raises(TunbenchError, match=rf"pid\(s\) {stranger.pid} are not processes of place p0"):
                    cap.add([stranger.pid])
            finally:
                stranger.kill()
        busy.stop()  # before the cap goes, as a tunnel stops before its cap
    assert not d.exists() and not a.caps


def test_the_cap_goes_with_its_place_and_with_the_agent(agent: tuple[Agent, RemotePlace], tmp_path: Path) -> None:
    a, place = agent
    a.places["p9"] = _PlaceState(LocalPlace(None, a.ledger, tmp_path), contextlib.ExitStack())
    other = RemotePlace(place.conn, "p9", str(tmp_path), None)
    closed_with_place = RemoteCpuCap(other).__enter__()
    d = cap_dir(a)
    a.op_place_close("p9")
    assert not d.exists() and not a.caps
    with pytest.raises(TunbenchError, match="no CPU cap"):
        closed_with_place.limit(5.0)
    closed_with_place.__exit__(None, None, None)  # closing again is harmless
    RemoteCpuCap(place).__enter__()  # left open: the agent's end (its input closed) removes it
    d = cap_dir(a)
    a.close()
    assert not d.exists() and not a.caps
    assert str(d) not in a.ledger.cgroups
