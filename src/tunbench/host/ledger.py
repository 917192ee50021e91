"""The run's ledger under /run/tunbench/: every kernel object and process a run creates is written here
before (or right after) it exists, so `tunbench clean` can remove what a SIGKILLed run left behind.

Names: every namespace, link, TUN device and cgroup carries the run prefix `tb<6 hex>-`. Links made in a
namespace that is not the run's own (a remote host's: an agent places a role there) are recorded as a
prefix and a namespace (`links`): everything named `<prefix>-*` there belongs to the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

STATE_DIR = Path(os.environ.get("TUNBENCH_STATE_DIR", "/run/tunbench"))
PREFIX_RE = re.compile(r"^tb[0-9a-f]{6}$")
NAME_RE = re.compile(r"^(tb[0-9a-f]{6})-")


def new_prefix() -> str:
    """A fresh run prefix such as `tb3fa91c` (8 chars; leaves 7 for suffixes within IFNAMSIZ). Short, so it
    names objects, not runs: two runs of one store share one about every 5000 runs (24 random bits)."""
    return "tb" + secrets.token_hex(3)


def new_uid(prefix: str) -> str:
    """The run's identity in a store: its prefix and 80 more random bits, `tb3fa91c-0123456789abcdef0123`
    (104 random bits in all: no two runs share one, however many runs a store holds)."""
    return f"{prefix}-{secrets.token_hex(10)}"


@dataclass
class ProcRecord:
    pid: int
    create_time: float
    what: str


@dataclass
class LinkRecord:
    """Every link named `<prefix>-*` in namespace `netns` is the run's (None: the namespace the ledger's
    owner runs in, a host's own). `prefix` may be another run's: an agent's tunnel devices carry the
    controller's prefix."""

    prefix: str
    netns: str | None


@dataclass
class Ledger:
    """What one run owns. Mutations are written through to the state file at once."""

    prefix: str
    owner_pid: int
    owner_create_time: float
    netns: list[str] = field(default_factory=list)
    procs: list[ProcRecord] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    links: list[LinkRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @classmethod
    def open(cls, prefix: str | None = None) -> Ledger:
        me = psutil.Process()
        ledger = cls(prefix=prefix or new_prefix(), owner_pid=me.pid, owner_create_time=me.create_time())
        ledger.save()
        return ledger

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.prefix}.json"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not data["links"]:  # absent when empty: a ledger an older tunbench on the same host can still read
            del data["links"]
        return data

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=STATE_DIR, prefix=f".{self.prefix}.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.to_json(), f)
            os.replace(tmp, self.path)
        except BaseException:
            # an interrupt (Ctrl-C, SIGTERM) can land between writing and renaming: never leave the temp
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _change(self, attr: str, value: Any, add: bool) -> None:
        with self._lock:
            items: list[Any] = getattr(self, attr)
            if add:
                items.append(value)
            elif value in items:
                items.remove(value)
            self.save()

    def add_netns(self, name: str) -> None:
        self._change("netns", name, True)

    def drop_netns(self, name: str) -> None:
        self._change("netns", name, False)

    def add_proc(self, pid: int, what: str) -> ProcRecord:
        try:
            ctime = psutil.Process(pid).create_time()
        except psutil.Error:
            ctime = 0.0
        rec = ProcRecord(pid=pid, create_time=ctime, what=what)
        self._change("procs", rec, True)
        return rec

    def drop_proc(self, rec: ProcRecord) -> None:
        self._change("procs", rec, False)

    def add_path(self, path: str) -> None:
        self._change("paths", path, True)

    def drop_path(self, path: str) -> None:
        self._change("paths", path, False)

    def add_cgroup(self, path: str) -> None:
        self._change("cgroups", path, True)

    def drop_cgroup(self, path: str) -> None:
        self._change("cgroups", path, False)

    def add_links(self, prefix: str, netns: str | None) -> LinkRecord:
        """Record, before any exists, that the links named `<prefix>-*` in `netns` are this run's (`prefix`
        must be a run prefix: nothing else is ever claimed). Recorded once per holder: a second place at the
        same namespace records it again, and each drops its own."""
        if not PREFIX_RE.match(prefix):
            raise ValueError(f"not a run prefix: {prefix!r}")
        rec = LinkRecord(prefix=prefix, netns=netns)
        self._change("links", rec, True)
        return rec

    def drop_links(self, rec: LinkRecord) -> None:
        self._change("links", rec, False)

    def close(self) -> None:
        """Forget the ledger once everything it lists is gone (else `tunbench clean` still needs it)."""
        if self.netns or self.procs or self.paths or self.cgroups or self.links:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        for tmp in STATE_DIR.glob(f".{self.prefix}.*"):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


LEDGER_FIELDS = ("prefix", "owner_pid", "owner_create_time", "netns", "paths", "cgroups")


def load_ledger(path: Path) -> Ledger:
    """A ledger from its file; keys a later tunbench may add are ignored (what this version knows it cleans)."""
    data = json.loads(path.read_text())
    procs = [ProcRecord(**p) for p in data.get("procs", [])]
    links = [LinkRecord(**r) for r in data.get("links", [])]
    ledger = Ledger(**{k: data[k] for k in LEDGER_FIELDS if k in data})
    ledger.procs = procs
    ledger.links = links
    return ledger


def owner_alive(ledger: Ledger) -> bool:
    try:
        p = psutil.Process(ledger.owner_pid)
        return bool(abs(p.create_time() - ledger.owner_create_time) < 0.01)
    except psutil.Error:
        return False


def all_ledgers() -> list[tuple[Path, Ledger | None]]:
    if not STATE_DIR.is_dir():
        return []
    out: list[tuple[Path, Ledger | None]] = []
    for path in sorted(STATE_DIR.glob("tb*.json")):
        try:
            out.append((path, load_ledger(path)))
        except (OSError, ValueError, TypeError):
            out.append((path, None))
    return out
