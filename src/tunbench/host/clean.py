"""`tunbench clean`: remove what crashed or SIGKILLed runs left behind.

Sources: the ledgers under /run/tunbench/ (namespaces, processes by pid + start time, temp dirs,
cgroups, and the links named with a prefix in a namespace that is not the run's own, such as a host's own
where an agent placed a role), plus a sweep for objects named with a run prefix whose run is no longer alive
(a crash can come between creating an object and writing its ledger). Live runs are never touched unless
--force.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pyroute2 import netns

from tunbench.host.cgroup import V1_CPU, V1_CPUACCT, V1_CPUSET, V2_CANDIDATES, remove_cgroup
from tunbench.host.ledger import NAME_RE, STATE_DIR, Ledger, all_ledgers, owner_alive
from tunbench.host.netns import delete_namespaces, pids_in_namespaces, remove_prefixed_links
from tunbench.host.proc import stop_groups

WG_SOCKETS = Path("/var/run/wireguard")


@dataclass
class CleanReport:
    runs: list[str] = field(default_factory=list)
    processes: int = 0
    namespaces: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.runs or self.processes or self.namespaces or self.paths or self.cgroups or self.links)

    def summary(self) -> str:
        """What was removed, in one line (`tunbench clean`, and per host with --hosts)."""
        return (
            f"{len(self.runs)} run ledger(s), {self.processes} process(es), {len(self.namespaces)} namespace(s), "
            f"{len(self.links)} link(s), {len(self.cgroups)} cgroup(s), {len(self.paths)} path(s)"
        )


def _kill_recorded(ledger: Ledger) -> int:
    """End the ledger's recorded processes that still run (pid and start time must both match, or the pid
    now belongs to someone else), all at once: one SIGTERM each, one shared wait, one SIGKILL of the rest."""
    mine: list[int] = []
    for rec in ledger.procs:
        try:
            p = psutil.Process(rec.pid)
            if rec.create_time and abs(p.create_time() - rec.create_time) > 0.01:
                continue  # the pid was reused by an unrelated process
        except psutil.Error:
            continue
        mine.append(rec.pid)
    stop_groups(mine, term_timeout_s=1.0)
    for pid in mine:  # a leader that left its group (setsid) is not in the group signalled above
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(mine)


def _cgroup_dirs() -> list[Path]:
    roots = [V1_CPUACCT, V1_CPU, V1_CPUSET, *V2_CANDIDATES]
    out: list[Path] = []
    for root in roots:
        if root.is_dir():
            out.extend(p for p in root.iterdir() if p.is_dir() and NAME_RE.match(p.name))
    return out


def clean_ledger(ledger: Ledger, report: CleanReport | None = None) -> CleanReport:
    """Remove whatever the ledger lists that still exists: processes (by recorded pid and start time),
    links by prefix (in a namespace not its own: a host's), namespaces, paths and cgroups."""
    report = report or CleanReport()
    report.processes += _kill_recorded(ledger)
    existing = set(netns.listnetns())
    for rec in ledger.links:  # after the processes: a TUN device goes with the process that holds it
        if rec.netns is None or rec.netns in existing:
            report.links += remove_prefixed_links(rec.netns, rec.prefix)
    gone = [ns for ns in ledger.netns if ns in existing]
    delete_namespaces(gone)
    report.namespaces.extend(gone)
    for p in ledger.paths:
        if os.path.lexists(p):
            shutil.rmtree(p, ignore_errors=True)
            report.paths.append(p)
    for cg in ledger.cgroups:
        if Path(cg).exists() and remove_cgroup(Path(cg)):
            report.cgroups.append(cg)
    return report


def finish_ledger(ledger: Ledger) -> None:
    """At the end of a run, after its own teardown: remove anything an interrupted teardown missed (an
    interrupt can land between recording an object and handing it to its owner), then forget the ledger."""
    clean_ledger(ledger)
    # wireguard-go removes its UAPI socket when it exits cleanly; one killed by the escalation to SIGKILL
    # leaves it: the run's own sockets go with the run (its processes are gone by now)
    if WG_SOCKETS.is_dir():
        for sock in WG_SOCKETS.glob(f"{ledger.prefix}-*"):
            sock.unlink(missing_ok=True)
    ledger.netns.clear()
    ledger.procs.clear()
    ledger.paths.clear()
    ledger.cgroups.clear()
    ledger.links.clear()
    ledger.close()


def clean(force: bool = False) -> CleanReport:
    """Every dead run's ledger and the sweep. `live` holds the prefixes nothing may be removed by: each live
    run's own, and the prefixes its ledger's link records name: on an agent's host the tunnels of a live
    remote run carry the controller's prefix (their devices, WireGuard's UAPI sockets), not the agent's."""
    report = CleanReport()
    live: set[str] = set()
    for path, ledger in all_ledgers():
        if ledger is not None and owner_alive(ledger) and not force:
            live.add(ledger.prefix)
            live.update(rec.prefix for rec in ledger.links)
            report.skipped_live.append(ledger.prefix)
            continue
        if ledger is not None:
            report.runs.append(ledger.prefix)
            clean_ledger(ledger, report)
        path.unlink(missing_ok=True)
    # the sweep: prefixed names whose run is not alive
    dead = [ns for ns in netns.listnetns() if (m := NAME_RE.match(ns)) and m.group(1) not in live]
    report.processes += len(pids_in_namespaces(dead))
    delete_namespaces(dead)
    report.namespaces.extend(dead)
    for cgdir in _cgroup_dirs():
        m = NAME_RE.match(cgdir.name)
        if m and m.group(1) not in live and remove_cgroup(cgdir):
            report.cgroups.append(str(cgdir))
    # half-written ledger files (a run killed between writing its ledger and renaming it into place)
    if STATE_DIR.is_dir():
        for tmp_ledger in STATE_DIR.glob(".tb*"):
            m = re.match(r"^\.(tb[0-9a-f]{6})\.", tmp_ledger.name)
            if m and m.group(1) not in live:
                tmp_ledger.unlink(missing_ok=True)
                report.paths.append(str(tmp_ledger))
    if WG_SOCKETS.is_dir():
        for sock in WG_SOCKETS.iterdir():
            m = NAME_RE.match(sock.name)
            if m and m.group(1) not in live:
                sock.unlink(missing_ok=True)
                report.paths.append(str(sock))
    for tmp in Path(tempfile.gettempdir()).iterdir():
        m = NAME_RE.match(tmp.name)
        if m and m.group(1) not in live and tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            report.paths.append(str(tmp))
    return report
