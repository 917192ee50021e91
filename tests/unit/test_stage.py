"""The saturated stage (monitor/stage.py) from per-thread and per-CPU readings, and the thread stat parser
(monitor/threads.py) on real /proc lines."""

from __future__ import annotations

import os

import pytest

from tunbench.metrics import Metrics
from tunbench.monitor import stage
from tunbench.monitor.threads import CpuTime, ThreadTime, cpu_time, parse_task_stat, read_processes, read_threads

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
    # pinned to one CPU: the thread and the CPU's time charged to nothing known (2%) fill it
    assert stage.stage([0], use, hot).name == "thread socat"
    # its one CPU is full, but the generator (pid 20) took 35% of it: whoever filled it
    assert stage.stage([0], use, [stage.ThreadUse(1, "socat", 9, 60.0)], {9: 60.0, 20: 35.0}).name == "all cores busy"
    assert stage.stage([0, 1], use, hot).name == "thread socat"  # 74.5% of two CPUs, one thread at 97%
    assert stage.stage([0, 1], use, [stage.ThreadUse(1, "socat", 9, 60.0)]).name == "softirq CPU 1"
    assert stage.stage([0, 1], {0: (40.0, 1.0), 1: (40.0, 2.0)}, []).name == "none"


def test_what_is_known_on_a_cpu_is_all_but_the_busiest_thread() -> None:
    threads = [stage.ThreadUse(11, "worker", 9, 70.0), stage.ThreadUse(12, "worker", 9, 10.0)]
    # its process (70 + 10 + 2 of threads that ended) and the generator's: all but the busiest thread
    assert stage.known_pct(threads, {9: 82.0, 20: 15.0}) == pytest.approx(27.0)
    # the tunnel's process not among the placed ones (no placement): its other threads still count
    assert stage.known_pct(threads, {20: 15.0}) == pytest.approx(25.0)
    assert stage.known_pct([], {20: 15.0}) == pytest.approx(15.0)
    series = [(0.0, {20: th(20, "iperf3", 1.0)}), (2.0, {20: th(20, "iperf3", 1.4)})]
    placed = {"client": series, "server": series, "link": series}
    cpuset = {"client": "0", "server": "0-1", "link": ""}
    # only a placement that is this CPU alone says how much of its time was spent here
    assert stage.placed_on(0, cpuset, placed, (0.0, 2.0)) == {20: pytest.approx(20.0)}
    assert stage.placed_on(1, cpuset, placed, (0.0, 2.0)) == {}


def test_saturation_gives_metrics_and_the_stage_per_side() -> None:
    series = [cpus(0.0, (0.0, 0.0), (0.0, 0.0)), cpus(2.0, (1.98, 1.0), (0.1, 0.9))]
    threads = {
        "client": [(0.0, {5: th(5, "socat", 1.0)}), (2.0, {5: th(5, "socat", 2.96)})],
        "server": [(0.0, {6: th(6, "socat", 1.0)}), (2.0, {6: th(6, "socat", 1.5)})],
    }
    placed = {  # the server side's socat and its iperf3 (pid 60), sampled as processes
        "server": [(0.0, {6: th(6, "socat", 1.0), 60: th(60, "iperf3", 0.0)}), (2.0, {6: th(6, "socat", 1.5)})],
    }
    placed["server"][1][1][60] = th(60, "iperf3", 0.4)
    m, said = stage.saturation(threads, series, (0.0, 2.0), {"client": "0", "server": "1"}, placed=placed)
    assert said["stage"] == {"client": "thread socat", "server": "none"}
    assert said["threads"] == {"client": [["socat", 5, 98.0]], "server": [["socat", 6, 25.0]]}
    assert said["stage_detail"] == {
        "client": "socat (thread) 98% + 1% of CPU 0 not charged to any process = 99%: saturated",
        "server": "socat (thread) 25% + 5% of CPU 1 not charged to any process = 30%: not saturated",
    }
    assert m[stage.THREAD_AND_CPU.key(role="client")] == pytest.approx(99.0)
    assert m[stage.KNOWN.key(role="server")] == pytest.approx(20.0)  # iperf3; socat's own thread is T
    assert m[stage.UNCLAIMED.key(role="server")] == pytest.approx(5.0)  # 50 busy - 25 - 20
    assert m[stage.CPUS_BUSY.key(role="client")] == pytest.approx(99.0)
    assert m[stage.SOFTIRQ_MAX.key(role="server")] == pytest.approx(45.0)
    assert m[stage.SATURATED_FLAG.key(role="server")] == 0.0
    assert m[stage.CPU_BUSY.key(cpu=1)] == pytest.approx(50.0)
    # unplaced, a side may use every CPU: both together were 74.5% busy, and the thread is named
    m, said = stage.saturation(threads, series, (0.0, 2.0), {})
    assert said["stage"]["client"] == "thread socat" and "stage_detail" not in said
    assert stage.THREAD_AND_CPU.key(role="client") not in m
    assert stage.saturation(threads, [], (0.0, 2.0), {}) == ({}, {})


# socat at 1 flow on 1 core per side, 3 s apart (USER_HZ 100, 300 ticks), in the proportions measured on a
# kernel without CONFIG_IRQ_TIME_ACCOUNTING: /proc/stat's line of the side's CPU 0, /proc/PID/task/TID/stat
# of socat's one thread and /proc/PID/stat of the side's iperf3. Up, socat's thread 91% (273 ticks), the
# CPU 98% busy (294) of which 45% softirq (135), iperf3 3% (9); down, socat 74% (222), the CPU 100% busy
# (300) of which 32% softirq (96), iperf3 22% (66). Thread + softirq counts 136% and 106% of one CPU.
UP = {
    "cpu": ("cpu0 50000 10 40000 900000 200 0 10000 0 0 0", "cpu0 50020 10 40139 900006 200 0 10135 0 0 0"),
    "socat": (
        "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 1000 4000 0 0 20 0 1 0 777 9000000 400",
        "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 1012 4261 0 0 20 0 1 0 777 9000000 400",
    ),
    "iperf3": (
        "2400 (iperf3) S 2300 2400 2300 0 -1 4194304 90 0 0 0 50 100 0 0 20 0 1 0 780 9000000 300",
        "2400 (iperf3) S 2300 2400 2300 0 -1 4194304 90 0 0 0 52 107 0 0 20 0 1 0 780 9000000 300",
    ),
}
DOWN = {
    "cpu": ("cpu0 60000 10 50000 800000 200 0 20000 0 0 0", "cpu0 60050 10 50154 800000 200 0 20096 0 0 0"),
    "socat": (
        "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 2000 6000 0 0 20 0 1 0 777 9000000 400",
        "2345 (socat) R 2300 2300 2300 0 -1 4194304 310 0 0 0 2020 6202 0 0 20 0 1 0 777 9000000 400",
    ),
    "iperf3": (
        "2400 (iperf3) S 2300 2400 2300 0 -1 4194304 90 0 0 0 300 400 0 0 20 0 1 0 780 9000000 300",
        "2400 (iperf3) S 2300 2400 2300 0 -1 4194304 90 0 0 0 340 426 0 0 20 0 1 0 780 9000000 300",
    ),
}
PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


def proc_cpu(line: str) -> CpuTime:
    """A /proc/stat CPU line as the sampler reads it (psutil's per-CPU tuple, seconds)."""
    from collections import namedtuple

    ticks = [int(x) / 100 for x in line.split()[1:]]
    return cpu_time(namedtuple("scputimes", PROC_STAT_FIELDS)(*ticks))


def recorded(lines: dict[str, tuple[str, str]]) -> tuple[Metrics, dict[str, object]]:
    """saturation() over the recorded lines: the client side pinned to CPU 0 with socat and its iperf3."""
    at = {name: [parse_task_stat(line, clk_tck=100) for line in pair] for name, pair in lines.items() if name != "cpu"}
    socat = [(t, {2345: th(2345, *at["socat"][i])}) for i, t in enumerate((0.0, 3.0))]
    placed = [
        (t, {2345: th(2345, *at["socat"][i]), 2400: th(2400, *at["iperf3"][i])}) for i, t in enumerate((0.0, 3.0))
    ]
    cpus_series = [(t, {0: proc_cpu(lines["cpu"][i])}) for i, t in enumerate((0.0, 3.0))]
    return stage.saturation({"client": socat}, cpus_series, (0.0, 3.0), {"client": "0"}, placed={"client": placed})


def test_a_pinned_thread_and_its_cpus_uncharged_time_from_recorded_figures_up() -> None:
    m, said = recorded(UP)
    assert m[stage.BUSIEST_THREAD.key(role="client")] == pytest.approx(91.0)
    assert m[stage.SOFTIRQ_MAX.key(role="client")] == pytest.approx(45.0)  # 91 + 45: counted twice
    assert m[stage.KNOWN.key(role="client")] == pytest.approx(3.0)
    assert m[stage.UNCLAIMED.key(role="client")] == pytest.approx(4.0)  # 98 - 91 - 3
    assert said["stage"] == {"client": "thread socat"}
    assert said["stage_detail"] == {
        "client": "socat (thread) 91% + 4% of CPU 0 not charged to any process = 95%: saturated"
    }
    assert m[stage.SATURATED_FLAG.key(role="client")] == 1.0


def test_the_softirq_counted_twice_does_not_name_a_thread_that_shared_its_cpu_down() -> None:
    m, said = recorded(DOWN)
    assert m[stage.BUSIEST_THREAD.key(role="client")] == pytest.approx(74.0)
    assert m[stage.SOFTIRQ_MAX.key(role="client")] == pytest.approx(32.0)  # 74 + 32 = 106%: the first rule's "thread"
    assert m[stage.THREAD_AND_CPU.key(role="client")] == pytest.approx(78.0)  # 74 + (100 - 74 - 22)
    assert said["stage_detail"] == {
        "client": "socat (thread) 74% + 4% of CPU 0 not charged to any process = 78%: not saturated"
    }
    assert said["stage"] == {"client": "all cores busy"}  # the CPU was full, the thread did not fill it
    # the same thread on a side of two CPUs is judged by itself: under the bar, and the CPUs not full
    at = [parse_task_stat(line, clk_tck=100) for line in DOWN["socat"]]
    threads = {"client": [(t, {2345: th(2345, *at[i])}) for i, t in enumerate((0.0, 3.0))]}
    both = [(t, {1: CpuTime(100.0, 0.0), 0: proc_cpu(DOWN["cpu"][i])}) for i, t in enumerate((0.0, 3.0))]
    _, said = stage.saturation(threads, both, (0.0, 3.0), {"client": "0,1"})
    assert said["stage"] == {"client": "none"} and "stage_detail" not in said


def test_a_process_cpu_time_is_read_from_its_stat_line() -> None:
    mine = read_processes([os.getpid(), 999_999_999])  # one that does not exist is left out
    assert list(mine) == [os.getpid()] and mine[os.getpid()].cpu_s > 0


class RecordedSampler:
    """What an agent's thread sampler holds at its stop (monitor/sampler.py Sampler): one role's cost, its
    host's CPUs and its placements' processes per tick, on the host's own clock."""

    def __init__(self, role: str, lines: dict[str, tuple[str, str]], t0: float) -> None:
        from tunbench.host.cgroup import CpuUsage
        from tunbench.monitor.sampler import RoleCost

        at = {
            name: [parse_task_stat(line, clk_tck=100) for line in pair] for name, pair in lines.items() if name != "cpu"
        }
        ticks = (t0, t0 + 3.0)
        self.t0, self.wall_s = t0, 3.0
        self.cpus = [(t, {0: proc_cpu(lines["cpu"][i])}) for i, t in enumerate(ticks)]
        self.placed = {
            "tunnel": [(t, {2345: th(2345, *at["socat"][i])}) for i, t in enumerate(ticks)],
            "generator": [(t, {2400: th(2400, *at["iperf3"][i])}) for i, t in enumerate(ticks)],
        }
        threads = [(t, {2345: th(2345, *at["socat"][i])}) for i, t in enumerate(ticks)]
        self.results = {role: RoleCost(CpuUsage(0.0, 0.0), 0, 1, None, [], threads)}

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_side_on_each_host_is_judged_on_its_own_hosts_cpus_through_the_agents_answer() -> None:
    """Two hosts, each side pinned to CPU 0 of its own host with its generator on CPU 0 too (so known there),
    its figures the recorded ones (up on the client host, down on the server host): the agent's sample_stop
    answer, as JSON over the channel, becomes the same stage figures a local run derives from them."""
    import contextlib
    import json
    from typing import Any, cast

    from tunbench.remote.agent import Agent
    from tunbench.remote.place import role_cost

    costs = {}
    for role, lines, host_t0, shift in (("client", UP, 100.0, -95.0), ("server", DOWN, 40.0, -35.0)):
        agent = Agent(cast(Any, None), contextlib.ExitStack())
        agent.samplers["s1"] = cast(Any, RecordedSampler(role, lines, host_t0))
        agent.sampled_cpus["s1"] = {"tunnel": "0", "generator": "0"}
        answer = json.loads(json.dumps(agent.op_sample_stop("s1")))  # over the channel
        (costs[role],) = (role_cost(c, shift) for c in answer["results"].values())
    # both hosts' readings are now on this machine's clock: 5.0 to 8.0
    m, said = stage.saturation_on_hosts(costs, (5.0, 8.0), {"client": "0", "server": "0"})
    local_up, _ = recorded(UP)
    for key in (stage.BUSIEST_THREAD, stage.KNOWN, stage.UNCLAIMED, stage.THREAD_AND_CPU, stage.SOFTIRQ_MAX):
        assert m[key.key(role="client")] == pytest.approx(local_up[key.key(role="client")])
    assert said["stage"] == {"client": "thread socat", "server": "all cores busy"}
    assert said["stage_detail"] == {
        "client": "socat (thread) 91% + 4% of CPU 0 not charged to any process = 95%: saturated",
        "server": "socat (thread) 74% + 4% of CPU 0 not charged to any process = 78%: not saturated",
    }
    assert said["threads"] == {"client": [["socat", 2345, 91.0]], "server": [["socat", 2345, 74.0]]}
    # CPU 0 of each host in the params, never as one host_cpu.0.* figure
    assert not any(stage.CPU_BUSY.matches(k) or stage.CPU_SOFTIRQ.matches(k) for k in m)
    host_cpus = cast(dict[str, Any], said["host_cpus"])
    assert host_cpus["client"]["0"] == [pytest.approx(98.0), pytest.approx(45.0)]
    assert host_cpus["server"]["0"] == [pytest.approx(100.0), pytest.approx(32.0)]
    # a side without the host's CPUs (an agent asked without threads) has no stage
    assert stage.saturation_on_hosts(
        {"client": role_cost(answer["results"]["server"] | {"cpus": []}, 0.0)}, (5.0, 8.0), {}
    ) == ({}, {})
