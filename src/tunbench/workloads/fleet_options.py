"""Options of the multi-client workloads (`[workload.clients]`, `[workload.storm]`) and the sweep axes they
add to the matrix (plan.expand reads them from the validated options): each client count, and each storm
variant, is a case of its own."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tunbench.topology.layout import MAX_CLIENTS

Variant = Literal["connect", "reconnect", "overload"]
Protocol = Literal["udp", "tcp"]


class SweepOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    clients: list[int] = Field(default_factory=lambda: [5, 20, 50, 100], min_length=1)

    @field_validator("clients")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        for n in v:
            if not 1 <= n <= MAX_CLIENTS:
                raise ValueError(f"client counts must be between 1 and {MAX_CLIENTS} (got {n})")
        if len(set(v)) != len(v):
            raise ValueError("a client count is listed twice")
        return v


class ClientsOptions(SweepOptions):
    """MP-style: N clients connected, each pushing traffic through its own tunnel over one window."""

    protocols: list[Protocol] = Field(default_factory=lambda: list[Protocol](["udp", "tcp"]), min_length=1)
    # per client. The wiki's MP tests pushed ~1 MB/s each; on one host the N tunnel clients' crypto shares
    # the CPUs with the server, so N x rate must stay well below one tunnel's maximum (see host_cpu_saturated)
    udp_rate_bps: float = Field(default=2e6, gt=0, le=10e9)
    udp_len_bytes: int = Field(default=1200, ge=64, le=8900)  # below every tunnel's inner MTU
    ready_timeout_s: float = Field(default=60.0, gt=0, le=600)
    warmup_s: float | None = Field(default=None, ge=0, le=600)  # default: the run's omit_s


class StormOptions(SweepOptions):
    """C-style: N clients start at once (or `rate_per_s`); time to a working tunnel for each."""

    clients: list[int] = Field(default_factory=lambda: [50], min_length=1)
    variants: list[Variant] = Field(default_factory=lambda: list[Variant](["connect"]), min_length=1)
    rate_per_s: float = Field(default=0.0, ge=0, le=100000)  # 0: all at once
    timeout_s: float = Field(default=60.0, gt=0, le=900)
    probe_interval_s: float = Field(default=0.1, ge=0.01, le=5)
    overload_cpu_pct: float = Field(default=5.0, gt=0, le=100)  # server CPU cap during the overload
    overload_s: float = Field(default=10.0, gt=0, le=600)  # how long the cap holds after the storm begins
    # between hosts: how far apart the client hosts' starts may be (the clocks' uncertainty included); a run
    # whose clocks are known less well is refused, a storm that started further apart is warned about
    start_tolerance_s: float = Field(default=0.05, gt=0, le=10)

    @field_validator("variants")
    @classmethod
    def _unique(cls, v: list[Variant]) -> list[Variant]:
        if len(set(v)) != len(v):
            raise ValueError("a variant is listed twice")
        return v
