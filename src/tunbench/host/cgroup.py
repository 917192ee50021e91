"""Per-role CPU accounting cgroups (v1 cpuacct where mounted, else the v2 hierarchy), and the CPU
placement (cpuset) a role's side may get.

A role's processes join its cgroup before exec (see proc.Daemon), so the cgroup's counters are the exact
CPU time of the role and all its descendants: the cross-check for the sampled per-process figures.

Placement (`[run] cpuset`, docs/precision.md): a RoleCgroup given `cpus` also confines the role's side (the
tunnel's processes and the side's other processes, e.g. iperf3, which are not accounted to the tunnel) to
those CPUs. On cgroup v1 that is a cgroup of the cpuset hierarchy named like the accounting one, with
cpuset.cpus and cpuset.mems written before any task joins; every process of the side joins it. On cgroup v2
(one hierarchy, one cgroup per process) the accounting cgroup itself gets cpuset.cpus and the side's other
processes join a sibling `<name>-load` with the same CPUs; both are children of the v2 root, which must
already hand the cpuset controller to its children (its cgroup.subtree_control): tunbench never changes the
root's settings, it refuses instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tunbench.errors import TrialError
from tunbench.host.ledger import Ledger

log = logging.getLogger(__name__)

V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
V1_CPU = Path("/sys/fs/cgroup/cpu")  # CPU caps (the storm workload's overload variant)
V1_CPUSET = Path("/sys/fs/cgroup/cpuset")  # CPU placement ([run] cpuset)
V2_CANDIDATES = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class CpuUsage:
    user_s: float
    sys_s: float
    raw: tuple[float, float, float] | None = field(default=None, compare=False, repr=False)
    """(the exact total, the user ticks, the system ticks) as read, where the split was made from them
    (exact_split): a window's split is made from the window's own ticks."""

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s

    def __sub__(self, other: CpuUsage) -> CpuUsage:
        """The usage over a window. Split cumulative readings cannot be subtracted field by field: each
        reading splits its exact total in that reading's proportion, which drifts, so a window with little
        CPU could read a negative user time. The window's exact total is split in its own ticks' proportion."""
        if self.raw is not None and other.raw is not None:
            total, user, sys_ = (a - b for a, b in zip(self.raw, other.raw, strict=True))
            return exact_split(total, max(user, 0.0), max(sys_, 0.0))
        return CpuUsage(self.user_s - other.user_s, self.sys_s - other.sys_s)


def cgroup_root() -> tuple[str, Path] | None:
    """Which hierarchy to use: ("v1", cpuacct mount) or ("v2", cgroup2 mount), or None."""
    if (V1_CPUACCT / "cpuacct.usage_user").exists():
        return "v1", V1_CPUACCT
    for root in V2_CANDIDATES:
        if (root / "cgroup.controllers").exists():
            return "v2", root
    return None


def cpuset_root() -> tuple[str, Path] | None:
    """Where a cpuset can be set: ("v1", the cpuset mount), or ("v2", the cgroup2 mount) when the accounting
    cgroups are v2 and the root already hands the cpuset controller to its children; else None."""
    if (V1_CPUSET / "cpuset.cpus").exists():
        return "v1", V1_CPUSET
    found = cgroup_root()
    if found is not None and found[0] == "v2":
        try:
            if "cpuset" in (found[1] / "cgroup.subtree_control").read_text().split():
                return found
        except OSError:
            return None
    return None


def cpuset_refusal() -> str:
    """Why this host cannot place roles on CPUs (`[run] cpuset`), naming what it lacks; "" when it can. The
    plan refuses with it before a run starts (sites.cpuset.resolve_cpuset), a trial where the host changed since."""
    if cpuset_root() is not None:
        return ""
    found = cgroup_root()
    if found is not None and found[0] == "v2":
        root = found[1]
        try:
            offered = (root / "cgroup.controllers").read_text().split()
            handed = (root / "cgroup.subtree_control").read_text().split()
        except OSError:
            offered, handed = [], []
        if "cpuset" not in offered:
            why = (
                f"the cgroup v2 root at {root} does not offer the cpuset controller (its controllers: "
                f"{' '.join(offered) or 'none'}; a cgroup-v1 hierarchy holds it, or the kernel lacks it) and "
                f"there is no cgroup-v1 cpuset mount at {V1_CPUSET}"
            )
        else:
            why = (
                f"the cgroup v2 root at {root} does not hand cpuset to its children (its cgroup.subtree_control: "
                f"{' '.join(handed) or 'empty'}), and tunbench does not change the root's settings: "
                f"echo +cpuset > {root}/cgroup.subtree_control allows it"
            )
    else:
        why = f"there is neither a cgroup-v1 cpuset mount at {V1_CPUSET} nor a cgroup v2 hierarchy"
    return f"no cpuset controller to place roles on CPUs: {why}"


def parse_cpu_list(text: str) -> list[int]:
    """The kernel's CPU list format, "0-2,4" -> [0, 1, 2, 4]; ValueError when malformed or empty."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list such as 0, 0-1 or 0,2")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"{text!r}: {part.strip()} runs backwards")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def online_cpus() -> list[int]:
    """The CPUs tunbench may place roles on: the cpuset root's (v1) or this process's affinity."""
    found = cpuset_root()
    if found is not None:
        name = "cpuset.effective_cpus" if found[0] == "v1" else "cpuset.cpus.effective"
        with contextlib.suppress(OSError, ValueError):
            return parse_cpu_list((found[1] / name).read_text())
    return sorted(os.sched_getaffinity(0))


PLACED_ROLES = ("client", "server", "link")
"""The sides a placement names: the client's (tunnel client + traffic client), the server's, the emulator."""


def split_placement(cpus: list[int]) -> tuple[dict[str, str], str]:
    """`cpuset = "split"` on these CPUs: the client side on the first, the server side on the second, the
    emulator on a third where there is one, else on the server's; and a note when it shares."""
    if len(cpus) < 2:
        raise ValueError(f"split placement needs 2 CPUs, this host offers {len(cpus)}")
    place = {"client": str(cpus[0]), "server": str(cpus[1])}
    if len(cpus) >= 3:
        return {**place, "link": str(cpus[2])}, ""
    return {
        **place,
        "link": str(cpus[1]),
    }, f"only {len(cpus)} CPUs: the emulator shares CPU {cpus[1]} with the server side"


def cores_placement(cpus: list[int], cores: int, *, emulator: bool = True) -> tuple[dict[str, str], str]:
    """The cores axis on these CPUs (docs/scaling.md): the client side on the first `cores`, the server side
    on the last `cores` (the same CPUs, in part or whole, when 2 x cores is more than there are), and with
    an `emulator` the emulator on the CPUs between where some are left, else on the server's; and a note of
    what shares. ValueError when there are fewer CPUs than `cores`."""
    if not 1 <= cores <= len(cpus):
        raise ValueError(f"{cores} core(s) per side, this host offers {len(cpus)} CPU(s) ({_cpu_text(cpus)})")
    client, server = cpus[:cores], cpus[len(cpus) - cores :]
    rest = cpus[cores : len(cpus) - cores]
    place = {"client": _cpu_text(client), "server": _cpu_text(server)}
    if emulator:
        place["link"] = _cpu_text(rest or server)
    if shared := sorted(set(client) & set(server)):
        also = " and the emulator" if emulator else ""
        return place, f"both sides share CPU {_cpu_text(shared)}, with their traffic generators{also}"
    if emulator and not rest:
        return place, f"the emulator shares CPU {_cpu_text(server)} with the server side"
    return place, ""


def _cpu_text(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


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
    raw = (total_s, user_s, sys_s)
    ticks = user_s + sys_s
    if ticks <= 0:
        return CpuUsage(0.0, total_s, raw)
    return CpuUsage(total_s * user_s / ticks, total_s * sys_s / ticks, raw)


class RoleCgroup:
    """One cgroup per (trial, role), e.g. /sys/fs/cgroup/cpuacct/tb3fa91c-t4-server.

    `cpus` (a CPU list, "" for none): the role's side is confined to those CPUs (module docstring); the role's
    own processes join `procs_files`, the side's other processes `placement_files`. `account=False`: no
    accounting cgroup, the placement alone (the emulator's). Raises TrialError on entry when a placement is
    asked for and the host has no cpuset controller tunbench may use.
    """

    def __init__(self, name: str, ledger: Ledger, *, cpus: str = "", account: bool = True) -> None:
        found = cgroup_root()
        self.kind, root = found if found else ("none", Path("/nonexistent"))
        self.path = root / name
        self.account = account
        self.cpus = cpus
        self._ledger = ledger
        self._made: list[Path] = []
        placed = cpuset_root() if cpus else None
        self.cpuset_kind = placed[0] if placed else "none"
        self.cpuset_path: Path | None = None  # the cgroup whose cpuset.cpus confines the side
        self.load_path: Path | None = None  # where the side's other processes go
        if placed is not None and placed[0] == "v1":
            self.cpuset_path = self.load_path = placed[1] / name
        elif placed is not None:  # v2: one cgroup per process; the accounting one is placed, the rest beside it
            self.cpuset_path = self.path
            self.load_path = self.path.with_name(f"{name}-load") if account else self.path

    @property
    def available(self) -> bool:
        return self.kind != "none" and self.account

    @property
    def procs_file(self) -> Path | None:
        return self.path / "cgroup.procs" if self.available else None

    @property
    def procs_files(self) -> list[Path]:
        """What a process of the role joins before exec: its accounting cgroup and, on v1, its cpuset."""
        own = [self.path / "cgroup.procs"] if self.available else []
        if self.cpuset_kind == "v1" and self.cpuset_path is not None:
            own.append(self.cpuset_path / "cgroup.procs")
        return own

    @property
    def placement_files(self) -> list[Path]:
        """What the side's other processes (the traffic generator) join: the placement, never the accounting."""
        return [self.load_path / "cgroup.procs"] if self.load_path is not None else []

    def join(self, pid: int) -> None:
        """Move a running process (all its threads) into the placement, e.g. the emulator once it runs."""
        for procs in self.placement_files:
            procs.write_text(str(pid))

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

    def placed_pids(self) -> list[int]:
        """Every process on the placement's CPUs: the role's own and the side's others (the generator); []
        when the side is not placed."""
        out: dict[int, None] = {}
        for path in dict.fromkeys(p for p in (self.cpuset_path, self.load_path) if p is not None):
            try:
                out.update(dict.fromkeys(int(x) for x in (path / "cgroup.procs").read_text().split()))
            except (OSError, ValueError):
                continue
        return list(out)

    def __enter__(self) -> RoleCgroup:
        if self.cpus and self.cpuset_kind == "none":
            raise TrialError(f'cpuset {self.cpus}: {cpuset_refusal()}; set [run] cpuset = "off"')
        try:
            if self.available:
                self._make(self.path)
            if self.cpuset_path is not None:
                self._make(self.cpuset_path)
                self._place(self.cpuset_path)
            if self.load_path is not None and self.load_path != self.cpuset_path:
                self._make(self.load_path)
                self._place(self.load_path)
        except BaseException:
            self._remove()
            raise
        return self

    def _make(self, path: Path) -> None:
        if path in self._made:
            return
        self._ledger.add_cgroup(str(path))  # recorded before it exists
        path.mkdir(exist_ok=True)
        self._made.append(path)

    def _place(self, path: Path) -> None:
        """cpuset.cpus (and on v1 cpuset.mems, the parent's) before any task joins: v1 refuses tasks in a
        cpuset without both."""
        try:
            if self.cpuset_kind == "v1":
                (path / "cpuset.cpus").write_text(self.cpus)
                (path / "cpuset.mems").write_text((path.parent / "cpuset.mems").read_text().strip())
            else:
                (path / "cpuset.cpus").write_text(self.cpus)
        except OSError as e:
            raise TrialError(f"could not place {path.name} on CPU(s) {self.cpus}: {e}") from e

    def _remove(self) -> None:
        for path in reversed(self._made):
            if remove_cgroup(path):
                self._ledger.drop_cgroup(str(path))
        self._made.clear()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._remove()


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

    def __init__(self, name: str, ledger: Ledger, period_us: int = 100_000) -> None:
        self.path = V1_CPU / name
        self._ledger = ledger
        self.period_us = period_us  # the CFS period the quota is spent over (the kernel's default: 100 ms)

    @staticmethod
    def available() -> bool:
        return (V1_CPU / "cpu.cfs_quota_us").exists()

    def __enter__(self) -> CpuCap:
        if self.available() and V1_CPU.resolve() == V1_CPUACCT.resolve():
            # co-mounted (cpu,cpuacct): joining the cap would take the processes out of their accounting cgroup
            raise TrialError(
                "a CPU cap needs cgroup v1's cpu controller mounted apart from cpuacct; here they share one "
                f"hierarchy ({V1_CPU.resolve()}), so a capped process would leave its role's accounting cgroup"
            )
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
