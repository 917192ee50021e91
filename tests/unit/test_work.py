"""Counted work (monitor/work.py): the perf stat CSV parser, the argv, the per-role metrics and the ratios,
on perf stat output captured on this kind of host (software events and syscall tracepoints counted,
hardware counters `<not supported>`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.monitor import work

DATA = Path(__file__).parent.parent / "data"
CAPTURED = (DATA / "perf-stat-busy-loop.csv").read_text()


def test_parse_captured_output() -> None:
    counts = work.parse_stat_csv(CAPTURED)
    assert counts["raw_syscalls:sys_enter"] == 717180
    assert counts["context-switches"] == 18
    assert counts["syscalls:sys_enter_write"] == 65201
    assert counts["syscalls:sys_enter_sendmmsg"] == 0
    assert counts["instructions"] is None and counts["cycles"] is None  # <not supported>
    assert len(counts) == 4 + len(work.SYSCALLS) + 2  # the "# started on" header is no event


def test_parse_not_counted_and_decimal() -> None:
    text = "<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n12.50,msec,task-clock,1000,100.00,,\n\n"
    assert work.parse_stat_csv(text) == {"raw_syscalls:sys_enter": None, "task-clock": 12.5}


def test_role_metrics_names() -> None:
    m = work.role_metrics("client", work.parse_stat_csv(CAPTURED))
    assert m["work.client.syscalls"] == 717180
    assert m["work.client.ctx_switches"] == 18
    assert m["work.client.migrations"] == 0 and m["work.client.page_faults"] == 0
    assert m["work.client.syscalls.write"] == 65201
    assert m["work.client.instructions"] is None  # counted as "not available", not as 0


def test_argv_starts_disabled_and_is_driven_by_fifos() -> None:
    argv = work.stat_argv("perf", [10, 11], ["context-switches"], Path("o.csv"), Path("c"), Path("a"))
    assert argv[:3] == ["perf", "stat", "-x,"]
    assert argv[argv.index("-D") + 1] == "-1"
    assert argv[argv.index("--control") + 1] == "fifo:c,a"
    assert argv[argv.index("-p") + 1] == "10,11"
    assert argv[argv.index("-o") + 1] == "o.csv"


def test_preempted_switches_are_their_own_filtered_event() -> None:
    args = work.event_args(["context-switches", work.PREEMPTED, "page-faults"])
    assert args == ["-e", "context-switches,page-faults", "-e", "sched:sched_switch", "--filter", "prev_state == 0"]
    assert work.event_args(["context-switches"]) == ["-e", "context-switches"]


def test_voluntary_is_the_total_less_the_preempted() -> None:
    m = work.role_metrics("server", {"context-switches": 100.0, work.PREEMPTED: 30.0, "raw_syscalls:sys_enter": 5.0})
    assert m["work.server.ctx_switches.involuntary"] == 30
    assert m["work.server.ctx_switches.voluntary"] == 70
    assert "work.server.ctx_switches.voluntary" not in work.role_metrics("server", {"context-switches": 100.0})


def _metrics(**over: float) -> dict[str, float | None]:
    m: dict[str, float | None] = {
        "work.client.syscalls": 3000.0,
        "work.client.ctx_switches": 100.0,
        "work.client.ctx_switches.voluntary": 80.0,
        "work.client.syscalls.sendmmsg": 50.0,
        "work.client.syscalls.sendto": 50.0,
        "work.client.syscalls.recvmmsg": 10.0,
        "work.client.syscalls.read": 400.0,
        "work.client.syscalls.write": 200.0,
        "counters.client.dev.vc.rx_bytes": 500_000.0,
        "counters.client.dev.vc.tx_bytes": 1_500_000.0,
        "counters.client.dev.vc.rx_packets": 40.0,
        "counters.client.dev.vc.tx_packets": 1600.0,
    }
    m.update(over)
    return m


def test_ratios_over_the_underlay_both_directions() -> None:
    r = work.ratios(_metrics(), {"client": "vc", "server": "vs"})
    assert r["work.client.syscalls_per_mb"] == pytest.approx(1500.0)  # 3000 over 2 MB
    assert r["work.client.ctx_switches_per_mb"] == pytest.approx(50.0)
    assert r["work.client.read_per_mb"] == pytest.approx(200.0)
    assert r["work.client.write_per_mb"] == pytest.approx(100.0)
    assert r["work.client.bytes_per_wakeup"] == pytest.approx(25_000.0)  # 2 MB / 80 voluntary switches
    assert r["work.client.packets_per_send"] == pytest.approx(16.0)  # 1600 tx packets / (50 + 50) sends
    assert r["work.client.packets_per_recv"] == pytest.approx(4.0)  # 40 rx packets / 10 recvmmsg
    assert not [k for k in r if k.startswith("work.server.")]  # the server was not counted


def test_packets_the_socket_buffer_dropped_are_no_batching() -> None:
    # wireguard-go (one recvmsg per datagram) receiving faster than it reads: 147,390 packets reached the device,
    # 20,029 overflowed its socket's buffer, 127,350 recvmsg calls read the rest (docs/benchmarks/counted-work.md's
    # A/A run)
    m = _metrics(**{"counters.client.dev.vc.rx_packets": 147_390.0, "counters.client.udp_rcvbuf_errors": 20_029.0})
    m["work.client.syscalls.recvmmsg"] = 127_350.0
    assert work.ratios(m, {"client": "vc"})["work.client.packets_per_recv"] == pytest.approx(1.0, abs=1e-4)


def test_drops_of_fragmented_datagrams_are_scaled_to_packets() -> None:
    # openvpn-udp with --tun-mtu 6000 on an MTU-1500 underlay: each datagram arrives as 5 IP fragments; the
    # server's socket buffer dropped 5,407 datagrams (27,035 fragments) and 55,600 recvfrom read the rest
    # (a counted run of tests/integration/test_counted_work.py's case); 1 datagram, 5 packets per recvfrom
    m = _metrics(
        **{
            "counters.client.dev.vc.rx_packets": 304_953.0,
            "counters.client.udp_rcvbuf_errors": 5_407.0,
            "counters.client.udp_in_datagrams": 55_600.0,
        }
    )
    m["work.client.syscalls.recvmmsg"] = 55_600.0
    assert work.ratios(m, {"client": "vc"})["work.client.packets_per_recv"] == pytest.approx(4.999, abs=1e-3)
    # unfragmented, the scaling is the subtraction: 147,390 packets, 20,029 dropped, 127,361 delivered
    m.update({"counters.client.dev.vc.rx_packets": 147_390.0, "counters.client.udp_rcvbuf_errors": 20_029.0})
    m.update({"counters.client.udp_in_datagrams": 127_361.0, "work.client.syscalls.recvmmsg": 127_361.0})
    assert work.ratios(m, {"client": "vc"})["work.client.packets_per_recv"] == pytest.approx(1.0)


def test_ratios_leave_out_what_has_no_input() -> None:
    m = _metrics(**{"work.client.syscalls.sendmmsg": 0.0, "work.client.syscalls.sendto": 0.0})
    del m["work.client.syscalls.recvmmsg"]
    del m["counters.client.dev.vc.rx_bytes"], m["counters.client.dev.vc.tx_bytes"]
    r = work.ratios(m, {"client": "vc"})
    assert "work.client.packets_per_send" not in r  # no send syscall: no batching to speak of
    assert "work.client.packets_per_recv" not in r
    assert "work.client.syscalls_per_mb" not in r  # no bytes counted: no per-MB figure (not infinity)


def test_softirq_per_mb_only_where_attributed() -> None:
    assert "work.client.softirq_ms_per_mb" not in work.ratios(_metrics(), {"client": "vc"})
    r = work.ratios(_metrics(**{"work.client.softirq_s": 0.23}), {"client": "vc"})
    assert r["work.client.softirq_ms_per_mb"] == pytest.approx(115.0)  # 230 ms over 2 MB


def test_hardware_ratios_only_where_counted() -> None:
    assert "work.client.instructions_per_byte" not in work.ratios(_metrics(), {"client": "vc"})
    r = work.ratios(_metrics(**{"work.client.instructions": 4e6}), {"client": "vc"})
    assert r["work.client.instructions_per_byte"] == pytest.approx(2.0)


def test_present_syscalls_from_tracefs(tmp_path: Path) -> None:
    for name in ("sys_enter_sendmmsg", "sys_enter_read", "sys_exit_read"):
        (tmp_path / "events" / "syscalls" / name).mkdir(parents=True)
    assert work.present_syscalls([tmp_path / "absent", tmp_path]) == ("sendmmsg", "read")
    assert work.present_syscalls([tmp_path / "absent"]) == ()


def test_uncountable_host_marks_each_role_and_goes_on(tmp_path: Path) -> None:
    cap = work.probe(None)
    assert not cap.available and "linux-perf" in cap.why
    metrics: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    with work.counted(cap, {"client": [1], "server": []}, tmp_path, None, metrics, notes):  # type: ignore[arg-type]
        pass
    assert metrics == {}
    assert notes["client"].startswith("not counted: perf is not installed")
    assert notes["server"].startswith("not counted:")


def _perf_counts() -> bool:
    import shutil

    return work.probe(shutil.which("perf")).available


@pytest.mark.skipif(not _perf_counts(), reason="perf cannot count syscalls here")
def test_real_perf_counts_up_to_an_exit_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two local processes (no namespace): one ends inside the window when told to, the other stays; perf
    is attached before either writes, so every write is counted, the ended one's up to its exit."""
    import shutil
    import subprocess
    import sys

    from tunbench.host import ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "STATE_DIR", tmp_path / "state")
    ledger = ledger_mod.Ledger.open("tbtest01")
    code = "import os,sys\nsys.stdin.readline()\nfor _ in range(1000): os.write(1, b'x')\nsys.stdin.readline()\n"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in "ab"
    ]
    try:
        cap = work.probe(shutil.which("perf"))
        metrics: dict[str, float | None] = {}
        notes: dict[str, str] = {}
        with work.counted(cap, {"client": [p.pid for p in procs]}, tmp_path, ledger, metrics, notes):
            for p in procs:  # each writes 1000 times, then waits again
                assert p.stdin is not None
                p.stdin.write(b"go\n")
                p.stdin.flush()
            for p in procs:  # every write done inside the window, however slow the box (not a race with its end)
                assert p.stdout is not None
                got = b""
                while len(got) < 1000 and (chunk := p.stdout.read(1000 - len(got))):
                    got += chunk
            assert procs[0].stdin is not None
            procs[0].stdin.close()  # the first one's second readline gets EOF: it exits in the window
            procs[0].wait(10)
        assert metrics["work.client.syscalls.write"] == 2000
        assert metrics["work.client.syscalls"] is not None and metrics["work.client.syscalls"] > 2000
        assert metrics["work.client.processes"] == 2 and metrics["work.client.exited"] == 1
        assert (metrics["work.client.ctx_switches.voluntary"] or 0) >= 1  # the one left blocks on its stdin again
        assert notes["client"] == "1 of 2 processes exited during the window (counted up to their exit)"
        assert not ledger.procs  # perf stopped and forgotten
    finally:
        for p in procs:
            p.kill()
            p.wait()


# ---- faults: perf missing or not permitted ------------------------------------------------------------


def test_remedy_names_what_to_set() -> None:
    denied = "Error:\tNo permissions to read /sys/kernel/tracing/events/raw_syscalls/sys_enter"
    fix = work.remedy(denied, paranoid=2, lockdown=None, tracefs=True)
    assert "kernel.perf_event_paranoid is 2" in fix and "CAP_PERFMON" in fix and "mode=755" in fix
    limited = "Error:\nAccess to performance monitoring and observability operations is limited."
    assert "perf_event_paranoid=-1" in work.remedy(limited, paranoid=4, lockdown="none", tracefs=True)
    assert "lockdown=confidentiality" in work.remedy(denied, paranoid=2, lockdown="confidentiality", tracefs=True)
    assert "mount -t tracefs" in work.remedy("event syntax error", paranoid=-1, lockdown=None, tracefs=False)
    assert "perf stat -e raw_syscalls:sys_enter true" in work.remedy("?", paranoid=-1, lockdown=None, tracefs=True)


def test_lockdown_mode_is_the_bracketed_word(tmp_path: Path) -> None:
    f = tmp_path / "lockdown"
    f.write_text("none integrity [confidentiality]\n")
    assert work._lockdown(f) == "confidentiality"
    assert work._lockdown(tmp_path / "absent") is None


def _nobody_perf(tmp_path: Path) -> Path:
    """perf run as nobody: the kernel really refuses its tracepoints (perf_event_paranoid > -1, tracefs 0700)."""
    import shutil

    perf, setpriv = shutil.which("perf"), shutil.which("setpriv")
    if perf is None or setpriv is None:
        pytest.skip("needs perf and setpriv")
    wrapper = tmp_path / "perf"
    wrapper.write_text(f'#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups {perf} "$@"\n')
    wrapper.chmod(0o755)
    if work.probe(str(wrapper)).available:
        pytest.skip("this host lets an unprivileged user count syscalls (perf_event_paranoid -1, tracefs readable)")
    return wrapper


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="drops to nobody from root")
def test_perf_not_permitted_says_why_and_doctor_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench import doctor
    from tunbench.perf import flamegraph as perf_mod

    wrapper = _nobody_perf(tmp_path)
    cap = work.probe(str(wrapper))
    assert cap.why.startswith("perf stat cannot count syscalls here: ")
    assert "perf_event_paranoid" in cap.fix
    monkeypatch.setattr(perf_mod, "find_tool", lambda name: str(wrapper))
    check = doctor.count_work_check(None)
    assert not check.ok and check.detail == cap.why
    assert check.fix.startswith(cap.fix) and check.fix.endswith("only needed for --count-work")
    metrics: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    with work.counted(cap, {"client": [1]}, tmp_path, None, metrics, notes):  # type: ignore[arg-type]
        pass
    assert metrics == {} and notes["client"] == f"not counted: {cap.why}"
