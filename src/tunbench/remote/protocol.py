"""The agent protocol: one JSON object per line each way over the SSH channel.

Request `{"id": 7, "op": "spawn", "args": {...}}`; answer `{"id": 7, "ok": true, "result": ...}` or
`{"id": 7, "ok": false, "error": {"type": "TunnelError", "message": "..."}}`. An error keeps its tunbench
type across the channel, so a remote failure fails a trial exactly as the same failure does locally.
"""

from __future__ import annotations

import hashlib
import traceback
from functools import cache
from importlib import resources
from typing import Any

from tunbench import errors

# error types that cross the channel as themselves; anything else arrives as a RemoteError
_TYPES: dict[str, type[errors.TunbenchError]] = {
    t.__name__: t
    for t in (
        errors.TunbenchError,
        errors.ConfigError,
        errors.DependencyMissing,
        errors.TunnelError,
        errors.TrialError,
        errors.RetryTrial,
    )
}


class RemoteError(errors.TrialError):
    """Something failed on a remote host that has no tunbench error type (a bug there, or an OS error)."""


class HostLost(errors.MachineLost):
    """The SSH connection to a host ended (or the agent stopped answering): its trial fails, or, where the
    host held only some of a fleet's clients, loses them (sites/hosts_fleet.py)."""


def error_answer(req_id: object, e: BaseException) -> dict[str, Any]:
    kind = type(e).__name__
    message = str(e)
    if isinstance(e, errors.CommandFailed):
        kind = "TrialError"  # its argv/output are in the message already
    elif not isinstance(e, errors.TunbenchError):  # a bug or an OS error: where it happened, for the report
        where = traceback.format_exception(e)[-6:-1]
        message = f"{type(e).__name__}: {e}\n" + "".join(where)
    return {"id": req_id, "ok": False, "error": {"type": kind, "message": message}}


def error_from(err: dict[str, Any], host: str) -> errors.TunbenchError:
    """The exception a remote error answer stands for, its message prefixed with the host's name."""
    message = f"{host}: {err.get('message', '')}"
    cls = _TYPES.get(str(err.get("type")))
    if cls is errors.ConfigError:
        return errors.ConfigError(message)
    if cls is not None:
        return cls(message)
    return RemoteError(f"{message} ({err.get('type')})")


@cache
def build_id() -> str:
    """A digest of this installation's Python sources: two hosts speak the same protocol only if equal
    (the version number alone does not change between commits)."""
    h = hashlib.sha256()
    root = resources.files("tunbench")
    stack = [root]
    files = []
    while stack:
        d = stack.pop()
        for entry in d.iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                stack.append(entry)
            elif entry.name.endswith((".py", ".toml")):
                files.append(entry)
    for f in sorted(files, key=lambda e: str(e)):
        h.update(str(f).removeprefix(str(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
