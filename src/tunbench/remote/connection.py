"""The controller's end of one host: `ssh HOST tunbench agent` with the system OpenSSH client, so the
user's ~/.ssh/config, agent, jump hosts and ControlMaster work as they do for ssh itself.

`AgentConnection` sends requests and waits for their answers with a deadline; an ended channel (EOF,
the ssh client exited, or no answer in time) raises HostLost naming the host and ssh's own last words.
On connect it checks the agent's version and measures the clock offset between the hosts.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tunbench import __version__
from tunbench.errors import TunbenchError
from tunbench.host.channel import ChannelClosed, LineChannel
from tunbench.host.ledger import Ledger
from tunbench.remote.clock import ClockOffset, estimate_offset
from tunbench.remote.inventory import Host
from tunbench.remote.protocol import HostLost, build_id, error_from

CONNECT_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0


class VersionMismatch(TunbenchError):
    exit_code = 2


@dataclass(frozen=True)
class AgentInfo:
    version: str
    build: str
    pid: int
    prefix: str


class AgentConnection:
    """`with AgentConnection(host, ledger, logdir) as conn:` an agent runs on the host until the block ends."""

    def __init__(self, host: Host, ledger: Ledger, logdir: Path, ssh_config: str | None = None) -> None:
        self.host = host
        self.name = host.name
        self._ledger = ledger
        self._argv = [*host.ssh_argv(ssh_config), f"{host.command} agent"]
        self._err_path = logdir / f"ssh-{host.name}.log"
        self._chan: LineChannel | None = None
        self._next = 0
        self._send = threading.Lock()  # one request written at a time
        self._turn = threading.Condition()  # who reads the next answer; the answers read for other callers
        self._reading = False
        self._answers: dict[int, dict[str, Any] | None] = {}
        self.info: AgentInfo | None = None
        self.clock: ClockOffset | None = None
        self.lost = False  # the channel ended: every later request fails, so the run stops
        self.lost_why = ""  # what ended it, first seen

    # ---- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> AgentConnection:
        self._chan = LineChannel(self._argv, ledger=self._ledger, err_path=self._err_path, what=f"ssh {self.name}")
        try:
            hello = self.call("hello", wait_s=CONNECT_TIMEOUT_S)
            self.info = AgentInfo(hello["version"], hello["build"], int(hello["pid"]), hello["prefix"])
            self._check_version(self.info)
            self.measure_clock()
        except BaseException:
            self.close()
            raise
        return self

    def measure_clock(self) -> ClockOffset:
        """The host's clock offset measured (again): kept in `clock`, and returned."""
        self.clock = estimate_offset(lambda: self.call("clock", wait_s=10.0))
        return self.clock

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the agent's stdin (it tears down what it started and exits), then end ssh."""
        chan, self._chan = self._chan, None
        if chan is not None:
            chan.close()

    def _check_version(self, info: AgentInfo) -> None:
        if info.version == __version__ and info.build == build_id():
            return
        raise VersionMismatch(
            f"{self.name} runs tunbench {info.version} (build {info.build}); this is {__version__} "
            f"(build {build_id()}). Install the same version there, e.g. copy this checkout and run "
            f"`make venv` in it, then point tunbench_command at it, or `pip install tunbench=={__version__}` "
            f"from the same commit."
        )

    # ---- requests -----------------------------------------------------------------------------------
    def call(self, op: str, *, wait_s: float = CALL_TIMEOUT_S, **args: Any) -> Any:
        """Send one request and wait for its answer. Callers on several threads each have a request in
        flight (the agent answers the ones that only read or run a command side by side): whichever waiting
        caller is free reads the next answer and hands it to its caller."""
        chan = self._chan
        if chan is None:
            raise HostLost(f"{self.name}: not connected", self.name)
        try:
            with self._send:
                self._next += 1
                req_id = self._next
                self._answers[req_id] = None
                chan.send(json.dumps({"id": req_id, "op": op, "args": args}).encode())
            answer = self._await(chan, req_id, time.monotonic() + wait_s)
        except ChannelClosed as e:
            raise self._lost(str(e)) from None
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM while the agent works on a request (a 20 s iperf3 client): the agent cannot
            # take a teardown request before it ends, but it tears down at once when its input closes
            self.close()
            raise
        finally:
            with self._turn:
                self._answers.pop(req_id, None)  # (an answer to a request given up on is dropped)
        if answer.get("ok"):
            return answer.get("result")
        raise error_from(answer.get("error") or {}, self.name)

    def _await(self, chan: LineChannel, req_id: int, deadline: float) -> dict[str, Any]:
        """The answer to `req_id`: read by this thread when no other is reading, else handed over by the one
        that is."""
        while True:
            with self._turn:
                while self._reading and self._answers.get(req_id) is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelClosed("no answer in time")
                    self._turn.wait(min(left, 1.0))
                got = self._answers.get(req_id)
                if got is not None:
                    return got
                self._reading = True
            try:
                line = chan.readline(deadline)
            finally:
                with self._turn:
                    self._reading = False
                    self._turn.notify_all()
            answer = json.loads(line)
            if answer.get("id") == req_id:
                return dict(answer)
            with self._turn:
                if answer.get("id") in self._answers:
                    self._answers[answer["id"]] = answer
                    self._turn.notify_all()

    def _lost(self, why: str) -> HostLost:
        self.lost = True
        self.lost_why = self.lost_why or why
        tail = ""
        with contextlib.suppress(OSError):
            lines = self._err_path.read_text(errors="replace").strip().splitlines()
            tail = "; ssh said: " + " / ".join(lines[-3:]) if lines else ""
        hint = ""
        if "Permission denied" in tail:
            hint = " (the key was refused: check ansible_user / ansible_ssh_private_key_file or your ssh agent)"
        elif "command not found" in tail or "No such file" in tail:
            hint = f" (is tunbench installed there? the inventory says to run `{self.host.command}`)"
        cmd = shlex.join(self._argv)
        return HostLost(f"{self.name}: {why}{tail}{hint} [{cmd}]", self.name)
