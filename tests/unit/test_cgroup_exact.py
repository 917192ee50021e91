"""The cgroup CPU figure is the kernel's exact runtime (cpuacct.usage, cpu.stat usage_usec), split into
user and system in the proportion of the tick-based user/sys counters, whose sum can read far lower."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.host import cgroup


class _NoLedger:
    def add_cgroup(self, path: str) -> None: ...
    def drop_cgroup(self, path: str) -> None: ...


def test_v1_total_is_cpuacct_usage_not_the_tick_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup, "cgroup_root", lambda: ("v1", tmp_path))
    cg = cgroup.RoleCgroup("tbx-t1-server", _NoLedger())  # type: ignore[arg-type]
    cg.path.mkdir()
    # ticks saw 0.9 s (0.3 user + 0.6 sys); the exact runtime was 1.38 s (as measured on this kernel)
    (cg.path / "cpuacct.usage_user").write_text("300000000\n")
    (cg.path / "cpuacct.usage_sys").write_text("600000000\n")
    (cg.path / "cpuacct.usage").write_text("1380000000\n")
    u = cg.usage()
    assert u is not None
    assert u.total_s == pytest.approx(1.38)
    assert u.user_s == pytest.approx(0.46) and u.sys_s == pytest.approx(0.92)


def test_v2_total_is_usage_usec() -> None:
    u = cgroup.parse_v2_cpu_stat("usage_usec 3000000\nuser_usec 1000000\nsystem_usec 1000000\n")
    assert u.total_s == pytest.approx(3.0) and u.user_s == pytest.approx(1.5)
    assert cgroup.parse_v2_cpu_stat("user_usec 1000000\nsystem_usec 2000000\n").total_s == pytest.approx(3.0)


def test_a_windows_split_comes_from_its_own_ticks_and_is_never_negative() -> None:
    """Each reading splits its exact total in its own ticks' proportion; subtracting the splits of two
    readings could give a small window a negative user time (seen: -0.15 ms of user in a 5 s window of an
    idle tunnel). The window's exact total is split in the proportion of the window's ticks."""
    before = cgroup.parse_v2_cpu_stat("usage_usec 1000000\nuser_usec 500000\nsystem_usec 500000\n")
    after = cgroup.parse_v2_cpu_stat("usage_usec 1010000\nuser_usec 500000\nsystem_usec 520000\n")
    assert after.user_s - before.user_s < 0  # the splits, subtracted field by field
    window = after - before
    assert window.user_s == pytest.approx(0.0) and window.sys_s == pytest.approx(0.010)
    assert window.total_s == pytest.approx(0.010)  # the exact runtime over the window
