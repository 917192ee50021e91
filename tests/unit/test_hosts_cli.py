"""`clean --hosts` and `doctor --hosts` (cli/agent.py) on an inventory of several client hosts, with the agent
connections faked: every host of the inventory is reached (client hosts beyond the first, hosts without a role),
and each client host's addresses are checked."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from tunbench.cli import agent as cli_agent
from tunbench.errors import TunbenchError

LAB = """\
gw ansible_host=192.0.2.254
[client]
c1 tunbench_address=10.10.0.1 tunbench_client_addresses=10.10.0.100-10.10.0.149 tunbench_client_weight=2
c2 tunbench_address=10.10.0.2 tunbench_client_addresses=10.10.0.150-10.10.0.199
c3 tunbench_address=10.10.0.3 tunbench_client_addresses=10.10.0.200-10.10.0.249
[server]
srv tunbench_address=10.10.0.9
"""


class FakeConnection:
    """An AgentConnection that answers every request at once, and logs (host, op, args)."""

    calls: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []
    unreachable: ClassVar[set[str]] = set()
    # when set, each connect (each clean) waits here for the other hosts': it passes only if they run at once
    # (one after the other, the first would wait out the timeout and the test fail on BrokenBarrierError)
    connect_together: ClassVar[threading.Barrier | None] = None
    clean_together: ClassVar[threading.Barrier | None] = None

    def __init__(self, host: Any, ledger: object, logdir: Path, ssh_config: str | None) -> None:
        self.name = host.name
        self.info = SimpleNamespace(version="0", build="b")
        self.clock = SimpleNamespace(wall_s=0.0, uncertainty_s=0.0)

    def __enter__(self) -> FakeConnection:
        if self.connect_together is not None:
            self.connect_together.wait(timeout=30)
        if self.name in self.unreachable:
            raise TunbenchError(f"{self.name}: ssh: connect to host: No route to host")
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, op: str, **args: Any) -> Any:
        self.calls.append((self.name, op, args))
        if op == "clean" and self.clean_together is not None:
            self.clean_together.wait(timeout=30)
        answers: dict[str, Any] = {
            "clean": {"processes": 1 if self.name == "c3" else 0},
            "capabilities": {"root": True, "tun": True, "cgroup": "v2", "tunbench_link": True, "netem": False},
            "tools": {p: True for p in args.get("programs", [])},
            "count_capability": {"perf": "perf", "events": [], "why": ""},
            "instr_capability": {"perf": "perf", "why": "perf cannot count instructions:u here: <not supported>"},
            "check_addresses": "",
        }
        return answers[op]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[FakeConnection]:
    @contextlib.contextmanager
    def scope() -> Iterator[object]:
        yield object()

    @contextlib.contextmanager
    def workdir(ledger: object, tag: str) -> Iterator[Path]:
        yield tmp_path

    monkeypatch.setattr("tunbench.host.scope.run_scope", scope)
    monkeypatch.setattr("tunbench.host.workdir.workdir", workdir)
    monkeypatch.setattr("tunbench.remote.connection.AgentConnection", FakeConnection)
    monkeypatch.setattr(FakeConnection, "calls", [])
    monkeypatch.setattr(FakeConnection, "unreachable", set())
    monkeypatch.setattr(FakeConnection, "connect_together", None)
    monkeypatch.setattr(FakeConnection, "clean_together", None)
    return FakeConnection


def lab(tmp_path: Path, text: str = LAB) -> Path:
    path = tmp_path / "lab.ini"
    path.write_text(text)
    return path


def test_clean_hosts_reaches_every_host_of_the_inventory(
    fake: type[FakeConnection], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.unreachable = {"c2"}
    fake.connect_together = threading.Barrier(5)  # the five hosts connect at once
    fake.clean_together = threading.Barrier(4)  # and the four reachable ones clean at once
    assert cli_agent.clean_hosts(lab(tmp_path)) == 1  # the one host not cleaned
    assert sorted(h for h, op, _ in fake.calls if op == "clean") == ["c1", "c3", "gw", "srv"]
    out, err = capsys.readouterr()
    assert "c2: not cleaned" in err and "No route to host" in err
    assert out.splitlines() == [  # in the inventory's order, whichever answered first
        "gw: nothing to clean",
        "c1: nothing to clean",
        "c3: removed 0 run ledger(s), 1 process(es), 0 namespace(s), 0 link(s), 0 cgroup(s), 0 path(s)",
        "srv: nothing to clean",
    ]


def test_doctor_hosts_checks_every_client_hosts_addresses(
    fake: type[FakeConnection], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_agent.doctor_hosts(lab(tmp_path)) == 0
    asked = {h for h, op, _ in fake.calls if op == "capabilities"}
    assert asked == {"gw", "c1", "c2", "c3", "srv"}  # every host, a host without a role too
    checked = [
        (h, a["addresses"][0], len(a["addresses"]), a["server"]) for h, op, a in fake.calls if op == "check_addresses"
    ]
    assert checked == [
        ("c1", "10.10.0.100", 50, "10.10.0.9"),
        ("c2", "10.10.0.150", 50, "10.10.0.9"),
        ("c3", "10.10.0.200", 50, "10.10.0.9"),
    ]
    out = " ".join(capsys.readouterr().out.split())
    assert "tunbench_client_weight: 2 of 4, 50% of a fleet's clients" in out
    assert "tunbench_client_weight: 1 of 4, 25% of a fleet's clients" in out


def test_doctor_hosts_refuses_client_pools_that_overlap_or_hold_a_hosts_address(
    fake: type[FakeConnection], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overlap = LAB.replace("10.10.0.200-10.10.0.249", "10.10.0.190-10.10.0.239")
    assert cli_agent.doctor_hosts(lab(tmp_path, overlap)) == 2  # c2's and c3's
    out = " ".join(capsys.readouterr().out.split())
    assert "✗ tunbench_client_addresses: 10.10.0.190-10.10.0.199 are c3's too" in out
    assert "✗ tunbench_client_addresses: 10.10.0.190-10.10.0.199 are c2's too" in out
    own = LAB.replace("srv tunbench_address=10.10.0.9", "srv tunbench_address=10.10.0.120")
    assert cli_agent.doctor_hosts(lab(tmp_path, own)) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "✗ tunbench_client_addresses: holds 10.10.0.120, srv's own address" in out


def test_one_client_host_gets_no_weight_line(
    fake: type[FakeConnection], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = "[client]\nc1 tunbench_address=10.10.0.1 tunbench_client_addresses=10.10.0.100-10.10.0.149\n"
    assert cli_agent.doctor_hosts(lab(tmp_path, one + "[server]\nsrv tunbench_address=10.10.0.9\n")) == 0
    out = capsys.readouterr().out
    assert "tunbench_client_weight" not in out and "tunbench_client_addresses" in out
    assert [h for h, op, _ in fake.calls if op == "check_addresses"] == ["c1"]
