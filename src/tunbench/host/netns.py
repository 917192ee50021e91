"""NetNamespace: a named network namespace that exists exactly as long as its context."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from pyroute2 import IPRoute, netns

from tunbench.host.ledger import Ledger

log = logging.getLogger(__name__)
T = TypeVar("T")


NETNS_DIR = Path("/run/netns")


def run_in_netns(name: str, fn: Callable[[], T]) -> T:
    """Call `fn` in a short-lived thread that has joined network namespace `name` (setns(2) moves only the
    calling thread, and the thread ends with the call), and return its result or raise its exception.

    Inside, /proc/sys/net and new sockets (netlink, ioctl) are the namespace's: sysctls are read and written
    as files, without a shell or a subprocess. `fn` never runs unless the thread is in `name` and not in the
    caller's (the root) namespace. Hand-written around pyroute2's setns because pyroute2 has no "call this in a netns"
    helper that leaves the calling thread alone (pushns/popns move the caller)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"bad namespace name {name!r}")
    box: dict[str, object] = {}
    home = os.stat("/proc/thread-self/ns/net").st_ino  # the caller's namespace: `fn` must never run there

    def body() -> None:
        try:
            fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)  # never creates a missing namespace
            try:
                target = os.fstat(fd).st_ino
                netns.setns(fd, flags=0)
            finally:
                os.close(fd)
            here = os.stat("/proc/thread-self/ns/net").st_ino
            if here != target or here == home:
                raise RuntimeError(f"could not enter network namespace {name}")
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=body, name=f"netns-{name}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def _netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def pids_in_namespaces(names: Iterable[str]) -> list[int]:
    """Every process whose network namespace is one of `names` (one pass over /proc)."""
    inodes = {ino for ino in (_netns_inode(n) for n in names) if ino is not None}
    if not inodes:
        return []
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/net").st_ino in inodes:
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def kill_in_namespaces(names: Iterable[str], timeout_s: float = 3.0) -> int:
    """SIGTERM, then SIGKILL, whatever still runs inside our namespaces (ours: we started it all)."""
    names = list(names)
    pids = pids_in_namespaces(names)
    if not pids:
        return 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline:
            _reap()
            pids = pids_in_namespaces(names)
            if not pids:
                return 0
            time.sleep(0.02)
    return len(pids)


def _reap() -> None:
    """Reap our own exited children (we are a subreaper), so zombies do not count as alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def delete_namespace(name: str) -> None:
    """End every process left inside the namespace (by pid), then delete it."""
    delete_namespaces([name])


def delete_namespaces(names: Sequence[str]) -> None:
    """End every process left inside any of the namespaces in one pass (one SIGTERM each, one shared wait,
    one SIGKILL of the rest), then delete them: the time is the slowest process's, not one grace period
    per namespace."""
    if not names:
        return
    left = kill_in_namespaces(names)
    if left:
        log.warning("%d processes would not die inside %d namespace(s)", left, len(names))
    for name in names:
        with contextlib.suppress(FileNotFoundError, OSError):
            netns.remove(name)


def remove_prefixed_links(netns: str | None, prefix: str) -> list[str]:
    """Delete the links named `<prefix>-*` (a run's own devices) in a namespace (None: this process's own),
    for a place that is not a namespace of ours and so is not deleted with its links. Nothing else is
    touched. Returns the names removed."""
    if not prefix or (netns is not None and _netns_inode(netns) is None):
        return []  # (opening a missing namespace would create it)
    gone = []
    with IPRoute(netns=netns) if netns else IPRoute() as ipr:
        for link in ipr.get_links():
            name = str(link.get_attr("IFLA_IFNAME") or "")
            if name.startswith(f"{prefix}-"):
                with contextlib.suppress(Exception):  # gone already (its process ended), or never ours to keep
                    ipr.link("del", index=link["index"])
                    gone.append(name)
    return gone


def prefixed_links(netns: str | None, prefix: str) -> list[str]:
    """The links named `<prefix>-*` in a namespace (None: this process's own) that exist now."""
    if not prefix or (netns is not None and _netns_inode(netns) is None):
        return []
    with IPRoute(netns=netns) if netns else IPRoute() as ipr:
        names = [str(link.get_attr("IFLA_IFNAME") or "") for link in ipr.get_links()]
    return [n for n in names if n.startswith(f"{prefix}-")]


class NetNamespace:
    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name = name
        self._ledger = ledger

    def __enter__(self) -> NetNamespace:
        self._ledger.add_netns(self.name)  # recorded first: a crash in between still gets cleaned
        netns.create(self.name)
        with IPRoute(netns=self.name) as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        return self

    def ipr(self) -> IPRoute:
        return IPRoute(netns=self.name)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        try:
            delete_namespace(self.name)
        except Exception as e:  # teardown must never hide the original error
            log.warning("could not delete namespace %s: %s", self.name, e)
        else:
            self._ledger.drop_netns(self.name)
