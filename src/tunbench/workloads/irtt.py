"""irtt (isochronous round-trip tester): argv builders, a server owned by a context manager, one client
run, and a pure parser of its JSON output (tested on committed outputs in tests/data/irtt-*.json).

irtt timestamps every packet at the server too, so besides the RTT it gives one-way delays; the two
namespaces share one host clock, so those are exact (no clock sync needed).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from tunbench.errors import TrialError
from tunbench.metrics import latency as lat
from tunbench.stats import percentile
from tunbench.workloads.base import Context
from tunbench.workloads.iperf3 import ServerProc

IRTT_PORT = 2112
INTERVAL = "10ms"


def server_argv(port: int = IRTT_PORT) -> list[str]:
    # all addresses (the tunnel's inner address is among them); -i 0: accept any client interval;
    # --timeout: a vanished client's connection is closed after this long
    return ["irtt", "server", "-b", f":{port}", "-i", "0", "--timeout=30s"]


def client_argv(
    address: str, duration_s: float, out: Path, *, port: int = IRTT_PORT, interval: str = INTERVAL
) -> list[str]:
    host = f"[{address}]" if ":" in address else address
    return [
        "irtt",
        "client",
        "-Q",
        "-i",
        interval,
        "-d",
        f"{max(duration_s, 0.05):.3f}s",
        # wait for late replies: 3x the largest RTT seen (1 s if none came back)
        "--wait=3x1s",
        "-o",
        str(out),
        f"{host}:{port}",
    ]


@dataclass(frozen=True)
class IrttResult:
    rtt_ms: list[float]  # per received reply, in send order
    t_s: list[float]  # send time of each, seconds since the first packet was sent
    send_ms: list[float]  # one-way client -> server, where the server timestamped
    receive_ms: list[float]  # one-way server -> client
    packets_sent: int
    packets_received: int
    version: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def loss(self) -> float:
        """Fraction of packets sent whose reply never came back (either direction lost it)."""
        if self.packets_sent <= 0:
            return math.nan
        return max(0.0, 1.0 - self.packets_received / self.packets_sent)


def parse(text: str) -> IrttResult:
    """irtt's JSON (`-o file.json`): per-packet round trips; lost ones have `lost` != "false"."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TrialError(f"irtt wrote no valid JSON ({e}): {text[:200]!r}") from e
    if not isinstance(doc, dict) or "round_trips" not in doc:
        raise TrialError("irtt JSON has no round_trips (test did not run)")
    stats = doc.get("stats") or {}
    rtt: list[float] = []
    ts: list[float] = []
    snd: list[float] = []
    rcv: list[float] = []
    t0: int | None = None
    for rt in doc.get("round_trips") or []:
        sent = ((rt.get("timestamps") or {}).get("client") or {}).get("send") or {}
        wall = sent.get("wall")
        if t0 is None and wall is not None:
            t0 = int(wall)
        if rt.get("lost", "false") != "false":
            continue
        delay = rt.get("delay") or {}
        if "rtt" not in delay:
            continue
        rtt.append(delay["rtt"] / 1e6)
        ts.append((int(wall) - t0) / 1e9 if wall is not None and t0 is not None else float(len(ts)))
        if "send" in delay:
            snd.append(delay["send"] / 1e6)
        if "receive" in delay:
            rcv.append(delay["receive"] / 1e6)
    sent_n = int(stats.get("packets_sent", len(doc.get("round_trips") or [])))
    recv_n = int(stats.get("packets_received", len(rtt)))
    return IrttResult(
        rtt_ms=rtt,
        t_s=ts,
        send_ms=snd,
        receive_ms=rcv,
        packets_sent=sent_n,
        packets_received=recv_n,
        version=str((doc.get("version") or {}).get("irtt", "")),
        extra={
            "upstream_loss": float(stats.get("upstream_loss_percent", 0.0)) / 100.0,
            "downstream_loss": float(stats.get("downstream_loss_percent", 0.0)) / 100.0,
        },
    )


def rtt_metrics(r: IrttResult, clock_skew: tuple[float, float] | None = None) -> dict[str, float | None]:
    """p50/p90/p99/max/mean of the RTT, loss, and the one-way delays' p50/p90/p99 where irtt has them.

    irtt's one-way delays subtract the client's clock from the server's. `clock_skew` = (server clock -
    client clock, its uncertainty) in seconds, when the two run on different hosts: the delays are corrected
    by it, and left out (`latency.one_way_withheld` = 1) when the uncertainty is not well below them."""
    m: dict[str, float | None] = {}
    for q in (50, 90, 99):
        m[lat.LATENCY.key(q=q)] = percentile(r.rtt_ms, q)
    m[lat.STAT.key(stat="min")] = min(r.rtt_ms) if r.rtt_ms else None
    m[lat.LATENCY_MAX.name] = max(r.rtt_ms) if r.rtt_ms else None
    m[lat.STAT.key(stat="mean")] = sum(r.rtt_ms) / len(r.rtt_ms) if r.rtt_ms else None
    m[lat.LATENCY_LOSS.name] = r.loss
    m[lat.PACKETS_SENT.name] = float(r.packets_sent)
    skew_ms, unc_ms = ((clock_skew[0] * 1e3, clock_skew[1] * 1e3)) if clock_skew else (0.0, 0.0)
    if clock_skew:
        m[lat.CLOCK.key(what="skew")], m[lat.CLOCK.key(what="uncertainty")] = skew_ms, unc_ms
    one_way = {
        "send": [x - skew_ms for x in r.send_ms],  # server stamp - client stamp: remove the server's lead
        "receive": [x + skew_ms for x in r.receive_ms],
    }
    medians = [p for xs in one_way.values() if xs and (p := percentile(xs, 50)) is not None]
    lowest = min(medians, default=None)
    if clock_skew and (lowest is None or unc_ms * ONE_WAY_MARGIN > lowest):
        m[lat.ONE_WAY_WITHHELD.name] = 1.0  # the clocks are not known well enough for one-way figures
        return m
    for name, xs in one_way.items():
        if xs:
            for q in (50, 90, 99):
                m[lat.LATENCY_DIR.key(way=name, q=q)] = percentile(xs, q)
    return m


# one-way delays are shown only when the clock offset's uncertainty is at most a tenth of them
ONE_WAY_MARGIN = 10.0


class IrttServer(ServerProc):
    """A fresh `irtt server` in the server namespace for one trial."""

    def __init__(self, ctx: Context, port: int = IRTT_PORT) -> None:
        super().__init__(ctx, server_argv(port), port=port, what="irtt server", log_name="irtt-server.log", proto="udp")


def run_client(ctx: Context, duration_s: float, name: str, interval: str = INTERVAL) -> tuple[IrttResult, bytes]:
    """One irtt client run from the client namespace to the target; returns the result and the raw JSON."""
    out = f"{name}.json"
    res = ctx.client.run(
        client_argv(ctx.target.address, duration_s, ctx.client.workdir / out, interval=interval),
        timeout_s=duration_s + 30.0,  # open timeouts (1+2+4+8 s) + the wait for late replies
        check=False,
        what=f"irtt client ({ctx.title})",
    )
    raw = ctx.client.read(out) if res.returncode == 0 else None
    if raw is None:
        raise TrialError(f"irtt client exit {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
    return parse(raw.decode()), raw


def rtt_series(r: IrttResult, t_offset_s: float = 0.0) -> list[tuple[float, float]]:
    return [(t + t_offset_s, v) for t, v in zip(r.t_s, r.rtt_ms, strict=True)]
