"""netperf's request/response tests (TCP_RR, UDP_RR, TCP_CRR): argv builders, a netserver owned by a context
manager, one client run, and a pure parser of its omni key=value output (tested on committed outputs in
tests/data/netperf-*.txt).

netperf runs a test over two connections: a control connection to netserver's port (`-p`), and a data
connection netserver opens on a port of its own for each test. An L4 proxy forwards one TCP port, so through
one (`Route`, `route`) the control connection goes to netserver directly over the underlay and the data
connection through the proxy, on the forwarded port (`-- -H 0.0.0.0 -P ,PORT`). Its omni tests print the
figures asked for with `-- -k SELECTORS`, one `NAME=value` a line; `-j` makes it keep the per-transaction latencies its
MIN/MEAN/P50/P90/P99/MAX_LATENCY selectors read (in µs). Debian's netperf 2.7.0 is built with burst support
(`-- -b N`: N more transactions in flight) but without its histogram (`-v 2` prints none), so p99.9 is not
to be had from it: the largest transaction time is the figure above p99 (sockperf has it, workloads/sockperf.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tunbench.errors import TrialError
from tunbench.tunnels.tunnel import Target
from tunbench.workloads.base import Context
from tunbench.workloads.iperf3 import ServerProc

Test = Literal["TCP_RR", "UDP_RR", "TCP_CRR"]

SELECTORS = (
    "TRANSACTION_RATE",
    "MIN_LATENCY",
    "MEAN_LATENCY",
    "P50_LATENCY",
    "P90_LATENCY",
    "P99_LATENCY",
    "MAX_LATENCY",
    "STDDEV_LATENCY",
    "ELAPSED_TIME",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "BURST_SIZE",
    "PROTOCOL",
    "LOCAL_TRANSPORT_RETRANS",
    "LOCAL_BYTES_RECVD",
)
"""The omni output selectors every test asks for (netperf -- -k)."""


@dataclass(frozen=True)
class NetperfParams:
    """One netperf request/response test: what runs, against which netserver, for how long."""

    test: Test
    duration_s: int
    request_bytes: int = 1
    response_bytes: int = 1
    burst: int = 0  # transactions in flight beyond the first (-- -b); TCP_RR and UDP_RR only
    nodelay: bool = True  # TCP_NODELAY on both ends (-- -D): a request leaves at once, as an RPC's does

    @property
    def timeout_s(self) -> float:
        """How long before a silent netperf is declared hung: the test, its control exchanges and slack."""
        return self.duration_s + 20.0


CONTROL_PORT = 12865
"""netserver's control port when the data connection goes through an L4 proxy (netperf's own default port):
the proxy's forwarded port ({iperf_port}) is then the data connection's."""

ANY = {"127.0.0.1": ("0.0.0.0", "4"), "::1": ("::", "6")}
"""The explicit data address netperf is given for a proxy listening on a loopback address, and its family.
netperf sends an explicit data address to netserver, which binds its data socket to it (nettest_omni.c's
recv_omni), and connects to it itself: the unspecified address binds netserver to every address of the
server's side (where the proxy's server side connects, the loopback or the underlay address), and Linux
connects a socket aimed at the unspecified address to the loopback (ip_route_connect), where the proxy's
client side listens."""


@dataclass(frozen=True)
class Route:
    """Where netperf's two connections go: the control connection to netserver at `control`, the data
    connection to `data` when it is fixed (an L4 proxy's forwarded port), else to the control's address on a
    port netserver picks (an L3 tunnel or direct carries both)."""

    control: Target
    data: Target | None = None


def route(ctx: Context) -> Route:
    """The route through the case's tunnel: both connections to the tunnel's target (L3, direct), or the
    control connection straight to netserver over the underlay and the data connection through the proxy
    (L4), whose target must be a loopback address and keep the port it forwards to: netperf connects its data
    connection to the same port number netserver listens on."""
    if ctx.layer != "l4":
        return Route(Target(ctx.target.address, ctx.target.port))
    t = ctx.target
    if not ctx.underlay_server:
        raise TrialError("netperf through an L4 proxy needs the server's underlay address for its control connection")
    if t.address not in ANY:
        raise TrialError(
            f"netperf through an L4 proxy needs the proxy to listen on a loopback address (127.0.0.1 or ::1): "
            f"the adapter's target is {t.address}"
        )
    if t.port != ctx.server_port:
        raise TrialError(
            f"netperf through an L4 proxy needs the proxy to listen on the port it forwards to: the adapter's "
            f"target port is {t.port}, the port it forwards to ({{iperf_port}}) is {ctx.server_port} "
            f"(listen on {{proxy_port}})"
        )
    return Route(Target(ctx.underlay_server, CONTROL_PORT), Target(ANY[t.address][0], t.port))


def control_port(ctx: Context) -> int:
    """Where netserver listens for netperf's control connection in the server's place."""
    return CONTROL_PORT if ctx.layer == "l4" else ctx.server_port


def server_argv(port: int) -> list[str]:
    # -D: stay in the foreground (the Daemon owns it); -p: the control port, on every address
    return ["netserver", "-D", "-p", str(port)]


def client_argv(r: Route, p: NetperfParams) -> list[str]:
    """netperf's argv for one test: globals (-H -p -t -l -j -P 0 and the family), then after `--` the test's
    own (-k selectors, -r sizes, -b burst, -D nodelay, and a fixed data connection's -H address,family and
    -P ,port)."""
    address, port = r.control.address, r.control.port
    family = "-6" if ":" in address else "-4"
    argv = ["netperf", "-H", address, "-p", str(port), family, "-t", p.test, "-l", str(p.duration_s), "-j", "-P", "0"]
    argv += ["--", "-k", ",".join(SELECTORS), "-r", f"{p.request_bytes},{p.response_bytes}"]
    if r.data is not None:
        argv += ["-H", f"{r.data.address},{'6' if ':' in r.data.address else '4'}", "-P", f",{r.data.port}"]
    if p.burst:
        if p.test == "TCP_CRR":
            raise ValueError("TCP_CRR opens one connection per transaction: it has no burst")
        argv += ["-b", str(p.burst)]
    if p.nodelay and p.test != "UDP_RR":
        argv.append("-D")
    return argv


@dataclass(frozen=True)
class NetperfResult:
    """One test's figures as netperf printed them: the transaction rate over its elapsed seconds, and the
    transaction times in µs."""

    transactions_per_s: float
    elapsed_s: float
    latency_us: dict[str, float]  # min, mean, p50, p90, p99, max, stddev
    request_bytes: int
    response_bytes: int
    burst: int
    protocol: str
    retransmits: int | None  # TCP_RR: the client's retransmitted segments; None where netperf has none (-1)
    received_bytes: float | None = None  # the responses' bytes netperf received; None where it printed none

    @property
    def transactions(self) -> float:
        return self.transactions_per_s * self.elapsed_s


_LATENCY = {"MIN": "min", "MEAN": "mean", "P50": "p50", "P90": "p90", "P99": "p99", "MAX": "max", "STDDEV": "stddev"}


def parse(text: str) -> NetperfResult:
    """netperf's `-k` output: `NAME=value` lines (anything else, such as a warning, is skipped). A test that
    printed no transaction rate did not run, and that is a TrialError."""
    kv: dict[str, str] = {}
    for line in text.splitlines():
        name, eq, value = line.strip().partition("=")
        if eq and name.isupper():
            kv[name] = value.strip()
    rate = _number(kv.get("TRANSACTION_RATE"))
    if rate is None:
        raise TrialError(f"netperf printed no TRANSACTION_RATE: {text.strip()[-300:]!r}")
    latency = {mine: v for theirs, mine in _LATENCY.items() if (v := _number(kv.get(f"{theirs}_LATENCY"))) is not None}
    retrans = _number(kv.get("LOCAL_TRANSPORT_RETRANS"))
    return NetperfResult(
        transactions_per_s=rate,
        elapsed_s=_number(kv.get("ELAPSED_TIME")) or 0.0,
        latency_us=latency,
        request_bytes=int(_number(kv.get("REQUEST_SIZE")) or 0),
        response_bytes=int(_number(kv.get("RESPONSE_SIZE")) or 0),
        burst=int(_number(kv.get("BURST_SIZE")) or 0),
        protocol=kv.get("PROTOCOL", ""),
        retransmits=int(retrans) if retrans is not None and retrans >= 0 else None,
        received_bytes=_number(kv.get("LOCAL_BYTES_RECVD")),
    )


def _number(text: str | None) -> float | None:
    """A figure netperf printed, None where it printed none or not a finite number."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class Netserver(ServerProc):
    """A fresh netserver in the server namespace (or host) for one trial, listening on the workload's port."""

    def __init__(self, ctx: Context) -> None:
        port = control_port(ctx)
        super().__init__(ctx, server_argv(port), port=port, what="netserver", log_name="netserver.log")


def run_client(ctx: Context, p: NetperfParams, name: str) -> tuple[NetperfResult, str]:
    """One netperf test from the client's place to the target's netserver: its result and its output."""
    res = ctx.client.run(
        client_argv(route(ctx), p),
        timeout_s=p.timeout_s,
        check=False,
        what=f"netperf {p.test} {name} ({ctx.title})",
    )
    if res.returncode != 0:
        raise TrialError(f"netperf {p.test} exit {res.returncode}: {(res.stderr or res.stdout).strip()[-400:]}")
    r = parse(res.stdout)
    if why := no_transactions(r, p, ctx.layer, route(ctx)):
        raise TrialError(why)
    return r, res.stdout


ANSWERED = 0.99
"""The share of its transactions' response bytes a test must have received: netperf counts a TCP_CRR
transaction whose connection was closed before its response as done (through a proxy that could not reach
netserver it printed 1,912 transactions/s with LOCAL_BYTES_RECVD=0), and a test's last transaction may be cut
short at its end."""


def no_transactions(r: NetperfResult, p: NetperfParams, layer: str, via: Route | None = None) -> str:
    """Why a test that exited 0 measured nothing ("" when its transactions were answered): netperf reports a
    test whose data connection was closed before its first transaction as 0 transactions in 0 seconds, and
    counts TCP_CRR connections closed before their response as transactions (`ANSWERED`). Through an L4 proxy
    over an IPv6 underlay (`via`: the control connection to an IPv6 address, the data connection to the IPv4
    unspecified address) it says why a proxy that connects to the server's IPv6 address cannot reach
    netserver: netserver binds its data socket to the very address netperf connects its data connection to
    (nettest_omni.c sends netserver that address and family), so one address serves both ends; netserver's
    own -L and -6 set its control socket only."""
    where = (
        " (through an L4 proxy: the proxy closed the data connection, or its server side could not reach "
        "netserver's data port)"
        if layer == "l4"
        else ""
    )
    data = via.data if via is not None else None
    v6_underlay = via is not None and ":" in via.control.address
    if layer == "l4" and v6_underlay and data is not None and ":" not in data.address:
        where = (
            " (through an L4 proxy over an IPv6 underlay: netserver's data socket listens on IPv4 only "
            f"({data.address}, the address netperf also connects to, to reach the proxy's 127.0.0.1), so a "
            "proxy whose server side connects to the server's IPv6 address cannot reach it; stunnel and "
            "ssh-forward connect to 127.0.0.1 there and run, or run this proxy over IPv4)"
        )
    if r.transactions_per_s <= 0:
        return f"netperf {p.test} completed no transaction in {r.elapsed_s:g} s{where}"
    expected = r.transactions * r.response_bytes
    if r.received_bytes is not None and r.received_bytes < ANSWERED * expected:
        return (
            f"netperf {p.test} counted {r.transactions:.0f} transactions but received {r.received_bytes:.0f} of "
            f"their {expected:.0f} response bytes: most were never answered{where}"
        )
    return ""
