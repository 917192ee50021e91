"""`tunbench run --count-instructions` on real tunnels: each role's tunnel daemon runs under callgrind, its
instructions over the trial are counted, Go's runtime apart (named from the installed, stripped wireguard-go's
own pclntab), and divided by the bytes each side's tunnel device handled; a daemon that forks per connection
(socat) is counted process by process; a role with no userspace daemon says so instead of counting zero; the
same trial on two SSH hosts (tests/sshhosts.py), each role counted by its host's agent, agrees with the local
one; and nothing is left behind (the helpers check the host after each run)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from tests.integration.helpers import run_json
from tunbench.session.defaults import INSTRUCTIONS_RATE
from tunbench.units import parse_rate

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
    reason="needs valgrind (callgrind_control): make deps",
)


HOSTS_BOUND = 0.05
"""How far one trial's instructions per byte on the test hosts may be from one local trial's, per side. Over the
work gate's UDP line, 6 trials of each placement alternated (scripts/bench_hosts_instructions.py,
docs/work-gate.md#measured-on-hosts), each side's figure spread over 0.5-2.0% within one placement and the
medians were 0.2% (client) and 0.7% (server) apart; this trial is over TCP, whose ACKs add to the spread. A
count of the wrong span (a daemon's start-up, or a sliver of the window) would be off by far more."""


def test_wireguard_go_and_socat_count_their_instructions_per_byte(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        "-t", "wireguard-go[label=wg]", "-t", "socat[label=s]", "--no-direct", "--duration", "2", "--omit", "0",
        "--repeat", "1", "--direction", "up", "--count-instructions",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    by = {t["label"]: t for t in doc["trials"]}
    wg = by["wg"]["metrics"]
    # under callgrind wireguard-go carries the fixed rate the run offers, not its usual speed
    offered = parse_rate(INSTRUCTIONS_RATE)
    assert 0.75 * offered < wg["throughput_bps"] < 1.1 * offered, wg["throughput_bps"]
    for role in ("client", "server"):
        assert wg[f"instr.{role}.count"] > 1e6, wg
        # Go's runtime counted apart, from a stripped build: a real share of the count, not 0 and not all of it
        assert 0.05 < wg[f"instr.{role}.runtime"] / wg[f"instr.{role}.count"] < 0.8, wg
        # tens of instructions per byte (seen: 13-16 per side in all); a count of the whole program's start
        # (millions before any traffic) or a count of nothing would fall outside
        assert 2.0 < wg[f"instr.{role}.per_byte"] < wg[f"instr.{role}.all_per_byte"] < 200.0, wg
    assert math.isclose(wg["instr.per_byte"], wg["instr.client.per_byte"] + wg["instr.server.per_byte"])
    assert set(by["wg"]["params"]["instr_devices"]) == {"client", "server"}
    assert "instr" not in by["wg"]["params"] and "instr_whole" not in by["wg"]["params"]
    s = by["s"]
    # socat: the listener and a process per connection (iperf3's control and data connections), added up,
    # per payload byte (a forward has no tunnel device); its figure is the client's alone
    assert s["params"]["instr_processes"]["client"] >= 3, s["params"]
    assert s["params"]["instr_sides"] == ["client"]
    assert 0.05 < s["metrics"]["instr.client.per_byte"] < 20.0, s["metrics"]
    assert s["metrics"]["instr.per_byte"] == s["metrics"]["instr.client.per_byte"]
    assert "client" not in s["params"]["instr"], s["params"]
    assert s["params"]["instr"]["server"].startswith("not counted: no userspace daemon"), s["params"]
    assert "instructions: each role's tunnel daemon counted by callgrind" not in res.stdout  # only in a dry run

    # the same wireguard-go trial on two hosts (the client on h1, the server on h2), each role counted by its
    # host's agent and divided by its own tunnel device's bytes there
    from tests.integration.test_multi_host import agent_prefixes, nothing_left, run_hosts
    from tests.sshhosts import ssh_hosts

    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        pytest.skip("sshd is not installed (make deps)")
    args = ("-t", "wireguard-go[label=wg]", "--no-direct", "--duration", "2", "--omit", "0", "--repeat", "1")
    (there := tmp_path / "hosts").mkdir()
    with ssh_hosts(there) as hosts:
        res, hdoc = run_hosts(there, hosts.inventory, *args, "--direction", "up", "--count-instructions")
        assert res.returncode == 0, res.stdout + res.stderr
        # the hosts have no PMU (perf answers <not supported>): auto counts both sides with callgrind, and says why
        said = " ".join(res.stdout.split())
        assert "counted instructions on the hosts: callgrind (auto: host h1: perf cannot count" in said, res.stdout
        nothing_left(hosts, agent_prefixes(hdoc))
    (h,) = hdoc["trials"]
    assert h["status"] == "ok", h["error"]
    assert "instr" not in h["params"] and set(h["params"]["instr_devices"]) == {"client", "server"}
    assert h["params"]["instr_counter"] == "callgrind"
    hm = h["metrics"]
    for role in ("client", "server"):
        assert hm[f"instr.{role}.count"] > 1e6 and 0.05 < hm[f"instr.{role}.runtime"] / hm[f"instr.{role}.count"] < 0.8
        # the same program at the same fixed load, counted on another "host" of this machine: within BOUND of
        # the local trial's figure per side
        assert hm[f"instr.{role}.per_byte"] == pytest.approx(wg[f"instr.{role}.per_byte"], rel=HOSTS_BOUND), role
