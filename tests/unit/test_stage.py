"""The saturated stage (monitor/stage.py) from per-thread and per-CPU readings, and the thread stat parser
(monitor/threads.py) on real /proc lines."""

from __future__ import annotations

import os

import pytest

from tunbench.monitor import stage
from tunbench.monitor.threads import CpuTime, ThreadTime, cpu_time, parse_task_stat, read_threads

# /proc/PID/task/TID/stat of a wireguard-go worker and of a thread whose name holds ") (" (comm may)
WG_LINE = (
    "4242 (wireguard-go) S 4240 4240 4240 0 -1 4194624 512 0 0 0 731 268 0 0 20 0 9 0 123456 "
    "1234567 1500 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 -1 1 0 0 0 0 0"
)
ODD_LINE = "77 (a) (b c) R 1 1 1 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 5 0 0 0"


def test_the_stat_line_gives_the_name_and_the_cpu_seconds() -> None:
    assert parse_task_stat(WG_LINE, clk_tck=100) == ("wireguard-go", pytest.approx(9.99))
    assert parse_task_stat(ODD_LINE, clk_tck=100) == ("a) (b c", pytest.approx(1.5))
    with pytest.raises(ValueError):
        parse_task_stat("garbage")


def test_this_process_has_its_threads_read() -> None:
    mine = read_threads([os.getpid()])
    assert os.getpid() in mine and mine[os.getpid()].cpu_s > 0


def th(pid: int, comm: str, s: float) -> ThreadTime:
    return ThreadTime(pid, comm, s)


def test_a_thread_cpu_is_interpolated_at_the_window_edges() -> None:
    series = [
        (0.0, {10: th(10, "main", 0.0), 11: th(10, "worker", 5.0)}),
        (1.0, {10: th(10, "main", 0.1), 11: th(10, "worker", 6.0)}),
        (2.0, {10: th(10, "main", 0.2), 11: th(10, "worker", 7.0), 12: th(10, "late", 0.5)}),
        (3.0, {10: th(10, "main", 0.3), 11: th(10, "worker", 7.5), 12: th(10, "late", 1.0)}),
    ]
    used = stage.thread_use(series, 0.5, 2.5)
    assert [u.comm for u in used] == ["worker", "late", "main"]
    assert used[0].pct == pytest.approx(100.0 * (7.25 - 5.5) / 2.0)
    # born between 1.0 and 2.0: counted from 0 at the first reading, so at 2.5 it had 0.75 s, at 0.5 0.125 s
    assert used[1].pct == pytest.approx(100.0 * (0.75 - 0.125) / 2.0)


def cpus(t: float, busy: tuple[float, float], soft: tuple[float, float]) -> tuple[float, dict[int, CpuTime]]:
    return t, {0: CpuTime(busy[0], soft[0]), 1: CpuTime(busy[1], soft[1])}


def test_the_stages_in_order() -> None:
    use = {0: (99.0, 10.0), 1: (50.0, 96.0)}
    hot = [stage.ThreadUse(1, "socat", 9, 97.0)]
    # pinned to one CPU: the thread with that CPU's softirq fills it, the thread is named
    assert stage.stage([0], use, hot).name == "thread socat"
    # its one CPU is full, but not by the thread and softirq: whoever filled it
    assert stage.stage([0], use, [stage.ThreadUse(1, "socat", 9, 60.0)]).name == "all cores busy"
    assert stage.stage([0, 1], use, hot).name == "thread socat"  # 74.5% of two CPUs, one thread at 97%
    assert stage.stage([0, 1], use, [stage.ThreadUse(1, "socat", 9, 60.0)]).name == "softirq CPU 1"
    assert stage.stage([0, 1], {0: (40.0, 1.0), 1: (40.0, 2.0)}, []).name == "none"


def test_saturation_gives_metrics_and_the_stage_per_side() -> None:
    series = [cpus(0.0, (0.0, 0.0), (0.0, 0.0)), cpus(2.0, (1.98, 1.0), (0.1, 0.9))]
    threads = {
        "client": [(0.0, {5: th(5, "socat", 1.0)}), (2.0, {5: th(5, "socat", 2.96)})],
        "server": [(0.0, {6: th(6, "socat", 1.0)}), (2.0, {6: th(6, "socat", 1.5)})],
    }
    m, said = stage.saturation(threads, series, (0.0, 2.0), {"client": "0", "server": "1"})
    assert said["stage"] == {"client": "thread socat", "server": "none"}
    assert said["threads"] == {"client": [["socat", 5, 98.0]], "server": [["socat", 6, 25.0]]}
    assert said["stage_detail"] == {
        "client": "socat (thread) 98% + softirq 5% of CPU 0 = 100%: saturated",
        "server": "socat (thread) 25% + softirq 45% of CPU 1 = 70%: not saturated",
    }
    assert m[stage.THREAD_SOFTIRQ.key(role="client")] == pytest.approx(100.0)  # 98 + 5, capped
    assert m[stage.CPUS_BUSY.key(role="client")] == pytest.approx(99.0)
    assert m[stage.SOFTIRQ_MAX.key(role="server")] == pytest.approx(45.0)
    assert m[stage.SATURATED_FLAG.key(role="server")] == 0.0
    assert m[stage.CPU_BUSY.key(cpu=1)] == pytest.approx(50.0)
    # unplaced, a side may use every CPU: both together were 74.5% busy, and the thread is named
    m, said = stage.saturation(threads, series, (0.0, 2.0), {})
    assert said["stage"]["client"] == "thread socat" and "stage_detail" not in said
    assert stage.THREAD_SOFTIRQ.key(role="client") not in m
    assert stage.saturation(threads, [], (0.0, 2.0), {}) == ({}, {})


# /proc/stat's line of CPU 1 and /proc/PID/task/TID/stat of socat's one thread, 3 s apart (USER_HZ 100),
# in the proportions socat showed at 1 flow on 1 core: its thread 93% of the CPU, the CPU's softirq 5%
CPU1_AT_0 = "cpu1 41210 12 30876 912345 140 0 8123 0 0 0"
CPU1_AT_3 = "cpu1 41336 12 31031 912349 140 0 8138 0 0 0"
SOCAT_AT_0 = "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 1290 5410 0 0 20 0 1 0 777 9000000 400"
SOCAT_AT_3 = "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 1331 5648 0 0 20 0 1 0 777 9000000 400"
PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


def proc_cpu(line: str) -> CpuTime:
    """A /proc/stat CPU line as the sampler reads it (psutil's per-CPU tuple, seconds)."""
    from collections import namedtuple

    ticks = [int(x) / 100 for x in line.split()[1:]]
    return cpu_time(namedtuple("scputimes", PROC_STAT_FIELDS)(*ticks))


def test_a_thread_just_under_the_bar_with_its_cpus_softirq_is_saturated_from_recorded_figures() -> None:
    comm, at0 = parse_task_stat(SOCAT_AT_0, clk_tck=100)
    _, at3 = parse_task_stat(SOCAT_AT_3, clk_tck=100)
    threads = {"client": [(0.0, {2345: th(2345, comm, at0)}), (3.0, {2345: th(2345, comm, at3)})]}
    cpus_series = [(0.0, {1: proc_cpu(CPU1_AT_0)}), (3.0, {1: proc_cpu(CPU1_AT_3)})]
    m, said = stage.saturation(threads, cpus_series, (0.0, 3.0), {"client": "1"})
    # alone the thread is under 95% (279 of 300 ticks), with the CPU's 15 ticks of softirq it is at 98%
    assert m[stage.BUSIEST_THREAD.key(role="client")] == pytest.approx(93.0)
    assert m[stage.SOFTIRQ_MAX.key(role="client")] == pytest.approx(5.0)
    assert said["stage"] == {"client": "thread socat"}
    assert said["stage_detail"] == {"client": "socat (thread) 93% + softirq 5% of CPU 1 = 98%: saturated"}
    assert m[stage.SATURATED_FLAG.key(role="client")] == 1.0
    # the same thread on a side of two CPUs is judged by itself: under the bar, and the CPUs not full
    both = [(t, {0: CpuTime(100.0, 0.0), **c}) for t, c in cpus_series]  # CPU 0 idle
    _, said = stage.saturation(threads, both, (0.0, 3.0), {"client": "0,1"})
    assert said["stage"] == {"client": "none"} and "stage_detail" not in said
