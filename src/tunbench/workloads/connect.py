"""Tunnel setup time as a distribution: bring the tunnel up K times, each in a fresh topology with fresh
keys, and time it from starting the tunnel's processes to every readiness probe passing (handshake and a
ping through the tunnel included) — the pair shape's per-trial `setup_s`, K times over.

The measured thing is the bring-up itself: the runner hands it its own pair bring-up (a BringupContext).
Between hosts (`--hosts`), each bring-up is a fresh topology between one client host and the server host;
with several client hosts, each gets `count` bring-ups, taken in turn (host 1, 2, 3, 1, 2, 3...) so that
whatever drifts over the trial (the server's state, the network, the controller) falls on every host
alike. The metrics are then the aggregate over all hosts and, per host, `connect.host.<name>.*`.

Each bring-up on this machine has an emulator of its own (an emulated profile), so a profile's counted
faults (`first = 2` WireGuard initiations) hit every bring-up alike; the `faults.*` figures are then the
median over the bring-ups, and the faults that fired are kept per bring-up (docs/faults.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from tunbench.errors import CommandFailed, TrialError, TunnelError
from tunbench.link.emulator import LinkEmulator
from tunbench.link.fault_record import fault_metrics, fired, fired_params
from tunbench.metrics import declare
from tunbench.metrics.core import SETUP_S
from tunbench.results import TrialRecord
from tunbench.stats import percentile
from tunbench.units import Window, fmt
from tunbench.workloads.base import TRIAL_SETUP_S, BringupContext, CaseAxes, Column, Measurement, Workload

CONNECT_S = declare(
    "connect.{stat}_s", "s", "lower", "info", "Bring-up times of the connect workload.",
    choices={"stat": ("p50", "p90", "min", "max", "mean")},
)  # fmt: skip
CONNECT_COUNT = declare(
    "connect.{outcome}", "count", "none", "info", "Bring-ups that succeeded (`count`) or failed.",
    choices={"outcome": ("count", "failures")},
)  # fmt: skip
CONNECT_HOST = declare(
    "connect.host.{host}.{figure}", "", "none", "info", "The bring-up figures of one client host.",
    choices={"figure": ("p50_s", "max_s", "count", "failures")},
)  # fmt: skip


class ConnectOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(default=10, ge=1, le=1000, description="bring-ups per trial")


def connect_metrics(times_s: list[float], failures: int) -> dict[str, float | None]:
    """Distribution of the bring-up times (pure)."""
    return {
        CONNECT_S.key(stat="p50"): percentile(times_s, 50),
        CONNECT_S.key(stat="p90"): percentile(times_s, 90),
        CONNECT_S.key(stat="min"): min(times_s) if times_s else None,
        CONNECT_S.key(stat="max"): max(times_s) if times_s else None,
        CONNECT_S.key(stat="mean"): sum(times_s) / len(times_s) if times_s else None,
        CONNECT_COUNT.key(outcome="count"): float(len(times_s)),
        CONNECT_COUNT.key(outcome="failures"): float(failures),
    }


PREFIX = CONNECT_COUNT.name.partition("{")[0]  # connect.
HOST_KEY = CONNECT_HOST.name.partition("{")[0]  # connect.host.
HOST_FIELDS = ("p50_s", "max_s", "count", "failures")


def host_metrics(host: str, times_s: list[float], failures: int) -> dict[str, float | None]:
    """One client host's share of the bring-ups (pure): `connect.host.<host>.p50_s`, `.max_s`, `.count`,
    `.failures`."""
    m = connect_metrics(times_s, failures)
    return {CONNECT_HOST.key(host=host, figure=f): m[f"{PREFIX}{f}"] for f in HOST_FIELDS}


def hosts_in(metrics: Iterable[str]) -> list[str]:
    """The client hosts named by per-host metrics, in order (a host name may hold dots)."""
    found = {CONNECT_HOST.values(k).get("host") for k in metrics if k.startswith(HOST_KEY)}
    return sorted(h for h in found if h is not None and CONNECT_HOST.key(host=h, figure="p50_s") in metrics)


def turns(count: int, machines: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """The bring-ups in order, (name, machine), round-robin over the machines (pure); on this machine alone
    (no machines) `u1`, `u2`...; between hosts `h<j>u<i>`, j the client host's place in the list."""
    if not machines:
        return [(f"u{i}", None) for i in range(1, count + 1)]
    return [(f"h{j}u{i}", m) for i in range(1, count + 1) for j, m in enumerate(machines, 1)]


class ConnectWorkload(Workload[BringupContext, ConnectOptions]):
    kind = "connect"
    description = "tunnel setup time: K bring-ups (start to first packet through), p50/p90/max"
    axes = ()
    Options = ConnectOptions
    owns_bringup = True
    requires = ()
    columns = (
        Column("setup p50 ms", CONNECT_S.key(stat="p50"), "s"),
        Column("p90", CONNECT_S.key(stat="p90"), "s"),
        Column("max", CONNECT_S.key(stat="max"), "s"),
        Column("bring-ups", CONNECT_COUNT.key(outcome="count"), "n"),
        Column("failed", CONNECT_COUNT.key(outcome="failures"), "n"),
    )
    caption = "tunnel bring-up: start of its processes to a packet through it"

    @classmethod
    def on_hosts(cls) -> bool:
        return True  # each bring-up between a client host and the server host (sites/hosts.py bare_pair)

    def table_columns(self, trials: Sequence[TrialRecord]) -> list[Column]:
        """The aggregate columns, then each client host's p50 where the trials ran on several."""
        hosts = sorted({h for t in trials for h in hosts_in(t.metrics)})
        per_host = (
            [Column(f"{h} p50", CONNECT_HOST.key(host=h, figure="p50_s"), "s") for h in hosts] if len(hosts) > 1 else []
        )
        return [*self.columns, *per_host]

    def headline(self, rec: TrialRecord) -> str:
        m = rec.metrics
        p50, top = m.get(CONNECT_S.key(stat="p50")), m.get(CONNECT_S.key(stat="max"))
        return f"setup p50 {fmt(p50, 's')} ms, max {fmt(top, 's')} ms"

    def bringups(self, options: BaseModel) -> int:
        return self.opts(options).count

    def estimate(self, case: CaseAxes, options: BaseModel, window: Window) -> float:
        return self.bringups(options) * TRIAL_SETUP_S

    def measure(self, ctx: BringupContext) -> Measurement:
        opts = self.opts(ctx.options)
        rec = Measurement()
        times: list[float] = []
        errors: list[str] = []
        by_host: dict[str, tuple[list[float], list[str]]] = {m: ([], []) for m in ctx.machines}
        faulted: list[dict[str, float | None]] = []
        t_start = time.monotonic()
        for name, machine in turns(opts.count, ctx.machines):
            try:
                with ctx.bring_up(name, machine) as tunnel:
                    assert tunnel.setup_s is not None
                    times.append(tunnel.setup_s)
                    if machine is not None:
                        by_host[machine][0].append(tunnel.setup_s)
                emu = getattr(
                    getattr(tunnel, "topo", None), "link", None
                )  # stopped with the bring-up: its records are complete
                if isinstance(emu, LinkEmulator) and emu.profile.classified() and emu.stats:
                    faulted.append(fault_metrics(emu.stats, emu.profile.faults))
                    hits = fired_params(emu.stats, fired(emu.stats, emu.profile.faults), None)
                    rec.params.setdefault("faults_fired", []).extend({**h, "bringup": name} for h in hits)
            except (TunnelError, CommandFailed) as e:
                why = str(e).splitlines()[0]
                errors.append(why if machine is None else f"{machine}: {why}")
                if machine is not None:
                    by_host[machine][1].append(why)
        rec.window = (t_start, time.monotonic())
        if not times:
            raise TrialError(f"no bring-up of {len(errors)} succeeded: {errors[0] if errors else 'unknown'}")
        rec.metrics.update(connect_metrics(times, len(errors)))
        for host, (host_times, host_errors) in by_host.items():
            rec.metrics.update(host_metrics(host, host_times, len(host_errors)))
        if ctx.machines:
            rec.params["client_hosts"] = list(ctx.machines)
        rec.metrics[SETUP_S.name] = percentile(times, 50)
        for key in sorted({k for m in faulted for k in m}):  # the recovery from the faults: the bring-ups' median
            rec.metrics[key] = percentile([v for m in faulted if (v := m.get(key)) is not None], 50)
            if key.endswith("_ms"):  # and each bring-up's, as connect_s keeps each one's time
                rec.series[key] = [(float(i), v) for i, m in enumerate(faulted, 1) if (v := m.get(key)) is not None]
        rec.series["connect_s"] = [(float(i), t) for i, t in enumerate(times, 1)]
        if errors:
            rec.artifacts["connect-errors.txt"] = "\n".join(errors).encode()
        return rec
