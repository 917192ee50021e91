"""Interference on a run's hosts (`--hosts`): the other tunbench runs live on each host and the agents' own
CPU over a measured window, read from each host's agent at the window's edges (`op_edge`), added to what
monitor/interference.py records on this machine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from tunbench.errors import TunbenchError
from tunbench.metrics import declare
from tunbench.monitor.interference import INTERFERED, OTHER_RUNS
from tunbench.remote.connection import AgentConnection

REMOTE_HARNESS_CPU = declare(
    "harness.remote_cpu_pct", "%", "lower", "info", "The hosts' agents' CPU over the window, % of one core (--hosts)."
)


def _edges(conns: Sequence[AgentConnection], exclude: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for conn in conns:
        with contextlib.suppress(TunbenchError, OSError):
            out[conn.name] = conn.call("edge", exclude=exclude)
    return out


def merge(
    metrics: dict[str, float | None], params: dict[str, Any], start: dict[str, dict[str, Any]], end: dict[str, Any]
) -> None:
    """Fold the hosts' edges into a trial's figures (pure): `host:prefix` runs join the other runs and make
    the window interfered; `harness.remote_cpu_pct` is the agents' CPU in % of one core."""
    runs = sorted({f"{host}:{r}" for edges in (start, end) for host, e in edges.items() for r in e.get("runs", [])})
    agent_s = sum(float(end[h]["cpu_s"]) - float(start[h]["cpu_s"]) for h in end if h in start)
    walls = [float(end[h]["mono"]) - float(start[h]["mono"]) for h in end if h in start]
    if walls and max(walls) > 0:
        metrics[REMOTE_HARNESS_CPU.name] = 100.0 * max(0.0, agent_s) / max(walls)
    if not runs:
        return
    detail = params.setdefault("interference_detail", {})
    detail["remote_runs"] = runs
    metrics[OTHER_RUNS.name] = (metrics.get(OTHER_RUNS.name) or 0.0) + len(runs)
    why = f"another tunbench run live on a host ({', '.join(runs)})"
    params["interference"] = "; ".join(x for x in (str(params.get("interference") or ""), why) if x)
    metrics[INTERFERED.name] = 1.0


@contextlib.contextmanager
def remote_interference(
    conns: Sequence[AgentConnection], metrics: dict[str, float | None], params: dict[str, Any], own_prefix: str
) -> Iterator[None]:
    """Around a window on hosts: enter it before monitor.interference's (it exits after, and adds to it)."""
    mine = run_prefixes(conns, own_prefix)
    start = _edges(conns, mine)
    yield None
    merge(metrics, params, start, _edges(conns, mine))


def run_prefixes(conns: Sequence[AgentConnection], own_prefix: str) -> list[str]:
    """This run's prefixes: the controller's and each agent's (an agent on the controller's machine, or two
    on one host, is this run, not another)."""
    return sorted({own_prefix, *(c.info.prefix for c in conns if c.info is not None)})
