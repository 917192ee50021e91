"""A line channel to a child process (the `ssh HOST tunbench agent` of a multi-host run): its stdin and
stdout carry one line per message, its stderr goes to a log file; it runs in a process group of its own,
recorded in the ledger, so `tunbench clean` ends it if the run is killed."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tunbench.errors import DependencyMissing
from tunbench.host.ledger import Ledger
from tunbench.host.proc import stop_group


class ChannelClosed(Exception):
    """The child's output ended (or it did not answer in time)."""


class LineChannel:
    def __init__(self, argv: Sequence[str], *, ledger: Ledger, err_path: Path, what: str) -> None:
        self.argv = list(argv)
        self._ledger = ledger
        self._buf = b""
        with open(err_path, "ab") as err:
            try:
                self._proc = subprocess.Popen(
                    self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True
                )
            except FileNotFoundError as e:
                raise DependencyMissing(f"{what}: `{self.argv[0]}` is not installed here") from e
        self._rec = ledger.add_proc(self._proc.pid, what)
        self._open = True

    @property
    def pid(self) -> int:
        return self._proc.pid

    def send(self, line: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise ChannelClosed("the channel is closed") from None

    def readline(self, deadline: float) -> bytes:
        """The next line (without its newline); ChannelClosed at EOF or past `deadline` (time.monotonic())."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelClosed("no answer in time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ChannelClosed("the connection closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def close(self, wait_s: float = 20.0) -> None:
        """Close the child's stdin (the agent's cue to tear down and exit), wait for it, then end its group."""
        if not self._open:
            return
        self._open = False
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=wait_s)
        stop_group(self._proc.pid, leader=self._proc)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._ledger.drop_proc(self._rec)
