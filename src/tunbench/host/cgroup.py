"""Per-role CPU accounting cgroups (v1 cpuacct where mounted, else the v2 hierarchy).

A role's processes join its cgroup before exec (see proc.Daemon), so the cgroup's counters are the exact
CPU time of the role and all its descendants: the cross-check for the sampled per-process figures.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tunbench.errors import TrialError
from tunbench.host.ledger import Ledger

log = logging.getLogger(__name__)

V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
V1_CPU = Path("/sys/fs/cgroup/cpu")  # CPU caps (the storm workload's overload variant)
V2_CANDIDATES = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class CpuUsage:
    user_s: float
    sys_s: float

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s

    def __sub__(self, other: CpuUsage) -> CpuUsage:
        return CpuUsage(self.user_s - other.user_s, self.sys_s - other.sys_s)


def cgroup_root() -> tuple[str, Path] | None:
    """Which hierarchy to use: ("v1", cpuacct mount) or ("v2", cgroup2 mount), or None."""
    if (V1_CPUACCT / "cpuacct.usage_user").exists():
        return "v1", V1_CPUACCT
    for root in V2_CANDIDATES:
        if (root / "cgroup.controllers").exists():
            return "v2", root
    return None


def parse_v2_cpu_stat(text: str) -> CpuUsage:
    fields = dict(line.split() for line in text.splitlines() if line.strip())
    user, sys_ = int(fields.get("user_usec", 0)) / 1e6, int(fields.get("system_usec", 0)) / 1e6
    return exact_split(int(fields.get("usage_usec", 0)) / 1e6 if "usage_usec" in fields else None, user, sys_)


def exact_split(total_s: float | None, user_s: float, sys_s: float) -> CpuUsage:
    """The exact total, split in the proportion of the user/sys figures. The kernel's per-cgroup user/sys
    split comes from timer ticks (cgroup v1's cpuacct.usage_user/usage_sys are its kcpustat), whose sum
    reads up to a third under the exact runtime of a network-heavy process (measured on this kernel: 0.92
    vs 1.38 CPU-s, where the tasks' own schedstat said 1.38); cpuacct.usage and cpu.stat's usage_usec are
    the exact runtime."""
    if total_s is None:
        return CpuUsage(user_s, sys_s)
    ticks = user_s + sys_s
    if ticks <= 0:
        return CpuUsage(0.0, total_s)
    return CpuUsage(total_s * user_s / ticks, total_s * sys_s / ticks)


class RoleCgroup:
    """One cgroup per (trial, role), e.g. /sys/fs/cgroup/cpuacct/tb3fa91c-t4-server."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        found = cgroup_root()
        self.kind, root = found if found else ("none", Path("/nonexistent"))
        self.path = root / name
        self._ledger = ledger

    @property
    def available(self) -> bool:
        return self.kind != "none"

    @property
    def procs_file(self) -> Path | None:
        return self.path / "cgroup.procs" if self.available else None

    def usage(self) -> CpuUsage | None:
        try:
            if self.kind == "v1":
                user = int((self.path / "cpuacct.usage_user").read_text()) / 1e9
                sys_ = int((self.path / "cpuacct.usage_sys").read_text()) / 1e9
                total = int((self.path / "cpuacct.usage").read_text()) / 1e9
                return exact_split(total, user, sys_)
            if self.kind == "v2":
                return parse_v2_cpu_stat((self.path / "cpu.stat").read_text())
        except (OSError, ValueError):
            return None
        return None

    def pids(self) -> list[int]:
        if not self.available:
            return []
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def __enter__(self) -> RoleCgroup:
        if self.available:
            self._ledger.add_cgroup(str(self.path))
            self.path.mkdir(exist_ok=True)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self.available and remove_cgroup(self.path):
            self._ledger.drop_cgroup(str(self.path))


def remove_cgroup(path: Path, timeout_s: float = 3.0) -> bool:
    """Kill whatever is still in the cgroup (by pid) and remove it. True when gone."""
    deadline = time.monotonic() + timeout_s
    while path.exists():
        try:
            pids = [int(x) for x in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if time.monotonic() > deadline:
                log.warning("could not remove cgroup %s: %s", path, e)
                return False
            time.sleep(0.02)
    return True


class CpuCap:
    """A cgroup-v1 `cpu` group whose CFS quota caps a role's tunnel processes (the overload variant's server, a
    tunnel reference's client_cpu= / server_cpu=)."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        self.path = V1_CPU / name
        self._ledger = ledger
        self.period_us = 100_000

    @staticmethod
    def available() -> bool:
        return (V1_CPU / "cpu.cfs_quota_us").exists()

    def __enter__(self) -> CpuCap:
        if not self.available():
            raise TrialError(
                "a CPU cap (the storm's overload variant, client_cpu= / server_cpu=) needs the cgroup-v1 cpu "
                "controller (/sys/fs/cgroup/cpu)"
            )
        self._ledger.add_cgroup(str(self.path))
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(self.period_us))
        return self

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.procs").write_text(str(pid))

    def limit(self, pct_of_one_core: float | None) -> None:
        quota = -1 if pct_of_one_core is None else max(1000, int(self.period_us * pct_of_one_core / 100))
        (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        with contextlib.suppress(OSError):
            self.limit(None)
        if remove_cgroup(self.path):
            self._ledger.drop_cgroup(str(self.path))
