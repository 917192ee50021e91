"""The tunbench-link binary: where it is, and its own judgement of a profile (`check --json`)."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tunbench.errors import DependencyMissing, TunnelError
from tunbench.host.proc import run_cmd

REPO_BINARY = Path(__file__).resolve().parents[3] / "link" / "target" / "release" / "tunbench-link"


def scripts_binary() -> Path:
    """Where tunbench's wheel installs tunbench-link: the scripts directory of the environment this Python
    runs in, beside the `tunbench` command (found there also when that environment is not on PATH)."""
    return Path(sysconfig.get_path("scripts")) / "tunbench-link"


def link_binary_or_none() -> Path | None:
    """TUNBENCH_LINK if set; else the checkout's build (make build); else the one installed with tunbench's
    wheel; else the first on PATH."""
    env = os.environ.get("TUNBENCH_LINK")
    if env:
        return Path(env) if Path(env).is_file() else None
    if REPO_BINARY.is_file():
        return REPO_BINARY
    if scripts_binary().is_file():
        return scripts_binary()
    found = shutil.which("tunbench-link")
    return Path(found) if found else None


def find_link_binary() -> Path:
    path = link_binary_or_none()
    if path is None:
        raise DependencyMissing(
            "emulated profiles need the tunbench-link binary: tunbench's wheel carries it; in a checkout run "
            "`make build` (or set TUNBENCH_LINK=/path/to/tunbench-link)"
        )
    return path


@dataclass(frozen=True)
class Problem:
    """One complaint of `tunbench-link check --json`: the direction ("a2b"/"b2a", None for the command
    line itself), which of its events or faults (None: its SPEC), the SPEC key and value it is about when it is
    about one, and the message."""

    direction: str | None
    event: int | None  # the direction's bad event (0-based), None: its SPEC
    key: str | None
    value: str | None
    message: str
    fault: int | None = None  # the direction's bad fault (0-based), when it is about one


def check(args: list[str]) -> list[Problem]:
    """What tunbench-link says is wrong with these `--a2b`/`--b2a` arguments (empty: nothing)."""
    res = run_cmd([str(find_link_binary()), "check", "--json", *args], check=False, timeout_s=10)
    try:
        answer = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise TunnelError(
            f"tunbench-link check gave no JSON answer (exit {res.returncode}): {(res.stderr or res.stdout).strip()}"
        ) from None
    if answer.get("ok"):
        return []
    return [
        Problem(
            p.get("direction"),
            p.get("event"),
            p.get("key"),
            p.get("value"),
            str(p.get("message", "invalid")),
            p.get("fault"),
        )
        for p in answer.get("errors", [])
    ] or [Problem(None, None, None, None, "invalid")]
