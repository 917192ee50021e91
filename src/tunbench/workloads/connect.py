"""Tunnel setup time as a distribution: bring the tunnel up K times, each in a fresh topology with fresh
keys, and time it from starting the tunnel's processes to every readiness probe passing (handshake and a
ping through the tunnel included) — the runner's per-trial `setup_s`, K times over.

It owns the topology (the runner hands it the whole trial): the measured thing is the bring-up itself.
"""

from __future__ import annotations

import contextlib
import time

from pydantic import BaseModel, ConfigDict, Field

from tunbench.errors import CommandFailed, TrialError, TunnelError
from tunbench.topology.build import Topology
from tunbench.tunnels.adapter import Tunnel
from tunbench.workloads.base import TRIAL_SETUP_S, Context, Measurement, TrialInput, Workload
from tunbench.workloads.irtt import percentile


class ConnectOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(default=10, ge=1, le=1000, description="bring-ups per trial")


def connect_metrics(times_s: list[float], failures: int) -> dict[str, float | None]:
    """Distribution of the bring-up times (pure)."""
    return {
        "connect.p50_s": percentile(times_s, 50),
        "connect.p90_s": percentile(times_s, 90),
        "connect.min_s": min(times_s) if times_s else None,
        "connect.max_s": max(times_s) if times_s else None,
        "connect.mean_s": sum(times_s) / len(times_s) if times_s else None,
        "connect.count": float(len(times_s)),
        "connect.failures": float(failures),
    }


class ConnectWorkload(Workload):
    kind = "connect"
    description = "tunnel setup time: K bring-ups (start to first packet through), p50/p90/max"
    axes = ()
    Options = ConnectOptions
    owns_topology = True

    def expected_s(self, flows: int, direction: str, options: BaseModel, duration_s: float, omit_s: float) -> float:
        count = options.count if isinstance(options, ConnectOptions) else ConnectOptions().count
        return count * TRIAL_SETUP_S

    def measure(self, ctx: Context) -> Measurement:  # pragma: no cover - run_trial does the work
        raise NotImplementedError("connect owns its topology: the runner calls run_trial()")

    def run_trial(self, trial: TrialInput) -> None:
        opts = trial.options if isinstance(trial.options, ConnectOptions) else ConnectOptions()
        rec = trial.record
        case = trial.case
        times: list[float] = []
        errors: list[str] = []
        t_start = time.monotonic()
        for i in range(1, opts.count + 1):
            workdir = trial.workdir / f"up{i}"
            workdir.mkdir()
            link = trial.link_factory(case, trial.ledger, workdir, trial.link_seed) if trial.link_factory else None
            try:
                with contextlib.ExitStack() as stack:
                    topo = stack.enter_context(
                        Topology(trial.ledger, f"t{rec.seq}u{i}", trial.topology, link_builder=link)
                    )
                    tunnel = stack.enter_context(Tunnel(case.tunnel, topo, trial.ledger, workdir, {}))
                    assert tunnel.setup_s is not None
                    times.append(tunnel.setup_s)
                    rec.params.setdefault("sysctls", topo.sysctls_applied.get(topo.client.name, {}))
            except (TunnelError, CommandFailed) as e:
                errors.append(str(e).splitlines()[0])
        rec.duration_s = time.monotonic() - t_start
        if not times:
            raise TrialError(f"no bring-up of {opts.count} succeeded: {errors[0] if errors else 'unknown'}")
        rec.metrics.update(connect_metrics(times, len(errors)))
        rec.metrics["setup_s"] = percentile(times, 50)
        rec.series["connect_s"] = [(float(i), t) for i, t in enumerate(times, 1)]
        if errors:
            rec.artifacts["connect-errors.txt"] = "\n".join(errors).encode()
