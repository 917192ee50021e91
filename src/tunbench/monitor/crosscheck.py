"""In-run cross-checks: two independent measurements of the same thing, compared per trial and stored
(`check.*` metrics), with a warning in the table and the report when they disagree. Pure functions.

* CPU: a role's cgroup counters (exact, every descendant) vs its 10 Hz per-process sampling (psutil),
  over the same measured window. They agree within `CPU_TOLERANCE_S` or `CPU_TOLERANCE_REL` of the cgroup
  figure, whichever is larger.
* Bytes: what the traffic generator's receiver (iperf3's) counted in the measured seconds vs the byte
  counter of the receiving namespace's underlay interface (the veth, or the emulator's TUN device) over
  the whole workload call, and, on emulated links, vs the emulator's delivered bytes in that direction.
  Every payload byte the receiver counted crossed that interface, headers and tunnel encapsulation on top,
  so the counter must be at least the payload (`BYTES_LOW`). It cannot exceed what the sender put on the
  wire over the whole test (warm-up included) by more than the per-packet overhead (`BYTES_OVERHEAD`:
  inner TCP/IP headers, the tunnel's encapsulation, outer headers, Ethernet, and a TCP-carrying tunnel's
  own ACKs), plus `BYTES_SLACK` for the handshake, control connection and probes. The stored ratio is the
  counter over the sender's whole-test bytes: the bytes on that wire per payload byte (the tunnel's
  overhead).
* Latency under load (rrul over an emulated link): the loaded RTT should be the idle RTT (propagation and
  the host's own path) plus what the emulator's bottleneck queues held the packets, up and down (their
  median sojourn, `link.<dir>.sojourn_us_p50`). The rest is the residual (`check.rtt.residual_ms`): time
  spent elsewhere under load (the tunnel's own queues, the host's CPU); it may be as large as
  `RTT_TOLERANCE_MS` or `RTT_TOLERANCE_REL` of the loaded RTT.
"""

from __future__ import annotations

from collections.abc import Mapping

from tunbench.metrics import declare, link
from tunbench.metrics import latency as lat
from tunbench.monitor.counters import DEV

BYTES_RATIO = declare(
    "check.bytes.{direction}.{source}.ratio", "ratio", "none", "info",
    "A receiving counter (`dev`: the underlay device, `link`: the emulator) over the generator's payload.",
    choices={"source": ("dev", "link")},
)  # fmt: skip
BYTES_OK = declare(
    "check.bytes.{direction}.{source}.ok", "flag", "none", "info",
    "1 when a receiving counter agrees with the generator's bytes (docs/cross-checks.md).",
    choices={"source": ("dev", "link")},
)  # fmt: skip
RTT_RESIDUAL = declare(
    "check.rtt.residual_ms", "ms", "none", "info",
    "rrul's loaded p50 minus its idle p50 minus the emulator's queueing: what the queues do not explain.",
)  # fmt: skip
RTT_OK = declare(
    "check.rtt.ok",
    "flag",
    "none",
    "info",
    "1 when rrul's RTT residual is within tolerance (a bottleneck both ways).",
)
CPU_DIFF = declare(
    "check.cpu.{role}.diff_s", "s", "none", "info", "Cgroup CPU minus sampled CPU of a side, measured window."
)
CPU_OK = declare(
    "check.cpu.{role}.ok", "flag", "none", "info", "1 when a side's cgroup and sampled CPU agree (cross-checks)."
)
CHECKS = (CPU_OK, BYTES_OK, RTT_OK)
"""The cross-checks' verdicts: 1 agreed, 0 disagreed."""
FIGURES = (CPU_DIFF, CPU_OK, BYTES_RATIO, BYTES_OK, RTT_RESIDUAL, RTT_OK)
"""Every figure of the cross-checks (`check.*`), the verdicts and what they compared."""

CPU_TOLERANCE_S = 0.05
CPU_TOLERANCE_REL = 0.05
BYTES_LOW = 0.999  # the counter may read 0.1 % under the payload (no more: the payload crossed it)
BYTES_OVERHEAD = 0.5  # at most 50 % on top of the payload (measured here: direct ~1 %, openvpn-udp ~20 %,
# wireguard-go ~26 % on the underlay veth; see docs/benchmarks/throughput.md)
BYTES_SLACK = 1_000_000  # bytes: handshakes, iperf3's control connection, readiness probes
RTT_TOLERANCE_MS = 2.0
RTT_TOLERANCE_REL = 0.2


def cpu_check(cgroup_s: float, sampled_s: float) -> tuple[float, bool]:
    """(sampled - cgroup CPU seconds, whether they agree)."""
    diff = sampled_s - cgroup_s
    return diff, abs(diff) <= max(CPU_TOLERANCE_S, CPU_TOLERANCE_REL * abs(cgroup_s))


def bytes_check(payload: float, wire_upper: float, counter: float) -> tuple[float, bool]:
    """(counter / wire_upper, whether the counter lies in [payload * BYTES_LOW, wire_upper * (1 +
    BYTES_OVERHEAD) + BYTES_SLACK]). `payload`: bytes received in the measured seconds; `wire_upper`: the
    sender's bytes over the whole test."""
    if payload <= 0 or wire_upper <= 0:
        return float("nan"), counter <= BYTES_SLACK
    ratio = counter / wire_upper
    return ratio, payload * BYTES_LOW <= counter <= wire_upper * (1.0 + BYTES_OVERHEAD) + BYTES_SLACK


def byte_checks(
    metrics: Mapping[str, float | None],
    underlay: Mapping[str, str],
    emulated: bool,
    generator: Mapping[str, tuple[str, str]],
) -> dict[str, float | None]:
    """`check.bytes.<dir>.{dev,link}.ratio|ok` from a trial's metrics: the traffic generator's bytes per
    direction (`generator`: direction -> the names of its payload and its whole-test sent bytes, as its
    workload declares them: Workload.generator), the receiving namespace's underlay counter
    (`counters.<role>.dev.<dev>.rx_bytes`) and the emulator's (`link.<dir>.delivered_bytes`). `underlay`
    maps role -> the underlay device's short name."""
    out: dict[str, float | None] = {}
    for direction, receiver in (("up", "server"), ("down", "client")):
        payload_key, sent_key = generator.get(direction, ("", ""))
        payload, upper = metrics.get(payload_key), metrics.get(sent_key)
        if payload is None or upper is None:
            continue
        sources = {"dev": metrics.get(DEV.key(role=receiver, device=underlay.get(receiver), field="rx_bytes"))}
        if emulated:
            sources["link"] = metrics.get(link.DELIVERED.key(direction=direction))
        for name, counter in sources.items():
            if counter is None:
                continue
            ratio, ok = bytes_check(payload, upper, counter)
            out[BYTES_RATIO.key(direction=direction, source=name)] = ratio
            out[BYTES_OK.key(direction=direction, source=name)] = 1.0 if ok else 0.0
    return out


def rtt_checks(metrics: Mapping[str, float | None]) -> dict[str, float | None]:
    """The loaded RTT taken apart (rrul through the emulator): `latency.loaded_queue_ms` (the bottleneck
    queues' median sojourn, up + down), `check.rtt.residual_ms` (loaded p50 - idle p50 - that) and, where
    both directions have a bottleneck (`link.<dir>.bottleneck`), `check.rtt.ok`. Empty without an rrul
    trial's RTTs or the emulator's sojourn figures."""
    idle, loaded = metrics.get(lat.PHASE.key(phase="idle", q=50)), metrics.get(lat.PHASE.key(phase="loaded", q=50))
    up, down = metrics.get(link.SOJOURN_P50.key(direction="up")), metrics.get(link.SOJOURN_P50.key(direction="down"))
    if idle is None or loaded is None or up is None or down is None:
        return {}
    queue_ms = (up + down) / 1000.0
    residual = loaded - idle - queue_ms
    out: dict[str, float | None] = {lat.LOADED_QUEUE.name: queue_ms, RTT_RESIDUAL.name: residual}
    if metrics.get(link.BOTTLENECK.key(direction="up")) and metrics.get(link.BOTTLENECK.key(direction="down")):
        # judged only where both directions have an emulated bottleneck: without one, the whole increase is
        # queueing elsewhere (the tunnel's own queues), a finding, not a disagreement
        ok = abs(residual) <= max(RTT_TOLERANCE_MS, RTT_TOLERANCE_REL * loaded)
        out[RTT_OK.name] = 1.0 if ok else 0.0
    return out


def failed_checks(metrics: Mapping[str, float | None]) -> list[str]:
    """Names of the cross-checks that disagreed in a trial (`check.cpu.server`, `check.bytes.up.dev`, ...)."""
    return sorted(k.removesuffix(".ok") for k, v in metrics.items() if v == 0.0 and any(c.matches(k) for c in CHECKS))


def bytes_checked(metrics: Mapping[str, float | None]) -> bool:
    """Whether a trial has any byte cross-check (`check.bytes.*`)."""
    return any(BYTES_OK.matches(k) or BYTES_RATIO.matches(k) for k in metrics)
