"""Host counters that explain loss: kernel UDP/TCP counters (/proc/net/snmp) and per-interface drops
(/proc/net/dev, tunnel and TUN devices included), read in both namespaces before and after the measured
window; their deltas become trial metrics (`counters.client.udp_rcvbuf_errors`,
`counters.server.dev.tc.rx_dropped`, ...), and the interfaces' byte counters (`...dev.vs.rx_bytes`) feed
the byte cross-checks (monitor/crosscheck.py); their packet counters (`...rx_packets`) the packets per
syscall of counted work (monitor/work.py). The parsers are pure and tested on committed samples.

Interface names lose the run prefix (`tb3fa91c-tc` -> `tc`) so metric names stay comparable across runs.
Cheap: one `cat` per namespace at each edge of the window.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from tunbench.errors import CommandFailed
from tunbench.host.proc import run_cmd
from tunbench.metrics import Format, declare

log = logging.getLogger(__name__)

# (protocol line, field) -> metric suffix; every one of these is stored, zero or not
SNMP_FIELDS: dict[tuple[str, str], str] = {
    ("Udp", "InDatagrams"): "udp_in_datagrams",  # delivered to a socket (counted work's packets per recv)
    ("Udp", "RcvbufErrors"): "udp_rcvbuf_errors",
    ("Udp", "SndbufErrors"): "udp_sndbuf_errors",
    ("Udp", "InErrors"): "udp_in_errors",
    ("Udp", "NoPorts"): "udp_no_ports",
    ("Tcp", "RetransSegs"): "tcp_retrans_segs",
    ("Tcp", "InErrs"): "tcp_in_errs",
}
DEV_FIELDS = (
    "rx_dropped",
    "tx_dropped",
    "rx_errors",
    "tx_errors",
    "rx_fifo",
    "tx_fifo",
    "rx_bytes",
    "tx_bytes",
    "rx_packets",
    "tx_packets",
)
_DEV_COLUMNS = {  # index in the 16 numbers of a /proc/net/dev line
    "rx_bytes": 0,
    "rx_packets": 1,
    "tx_packets": 9,
    "tx_bytes": 8,
    "rx_errors": 2,
    "rx_dropped": 3,
    "rx_fifo": 4,
    "tx_errors": 10,
    "tx_dropped": 11,
    "tx_fifo": 12,
}
Snapshot = tuple[dict[tuple[str, str], int], dict[str, dict[str, int]]]


def parse_snmp(text: str) -> dict[tuple[str, str], int]:
    """/proc/net/snmp: pairs of lines `Proto: names...` / `Proto: values...` -> {(proto, name): value}."""
    out: dict[tuple[str, str], int] = {}
    lines = [ln.split() for ln in text.splitlines() if re.match(r"^[A-Za-z][A-Za-z0-9]*:\s", ln)]
    for head, vals in itertools.pairwise(lines):
        if head[0] != vals[0] or not all(re.fullmatch(r"-?\d+", v) for v in vals[1:]):
            continue
        if any(re.fullmatch(r"-?\d+", h) for h in head[1:]):
            continue  # a value line followed by the next protocol's header
        proto = head[0].rstrip(":")
        for name, value in zip(head[1:], vals[1:], strict=False):
            out[(proto, name)] = int(value)
    return out


def parse_dev(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/dev -> {ifname: {rx_dropped, tx_dropped, rx_errors, ...}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([^\s:|]+):\s*((?:\d+\s+){15}\d+)\s*$", line)
        if not m:
            continue
        nums = [int(x) for x in m.group(2).split()]
        out[m.group(1)] = {k: nums[i] for k, i in _DEV_COLUMNS.items()}
    return out


def parse_both(text: str) -> Snapshot:
    """`cat /proc/net/snmp /proc/net/dev` output, split at the /proc/net/dev header."""
    i = text.find("Inter-|")
    snmp, dev = (text, "") if i < 0 else (text[:i], text[i:])
    return parse_snmp(snmp), parse_dev(dev)


COUNTER = declare(
    "counters.{role}.{counter}", "count", "none", "info",
    "A side's SNMP counter delta over the window (/proc/net/snmp: udp_in_datagrams, udp_rcvbuf_errors, "
    "tcp_retrans_segs, ...).",
)  # fmt: skip
DEV = declare(
    "counters.{role}.dev.{device}.{field}", "", "none", "info",
    "A side's interface counter delta over the window (/proc/net/dev: bytes, packets, drops, errors).",
)  # fmt: skip
INSTR_COUNT = declare(
    "instr.{role}.count", "count", "lower", "info",
    "The instructions of a side's tunnel processes over the workload call, counted by callgrind or by the CPU's "
    "counter through perf (`run --count-instructions`; the trial's params.instr_counter says which).",
)  # fmt: skip
INSTR_RUNTIME = declare(
    "instr.{role}.runtime", "count", "lower", "info",
    "Of a side's counted instructions, those in Go's runtime (its scheduler, channels, locks' slow paths, "
    "sync.Pool's queues, allocator and collector): they depend on timing, so the gate judges the rest (0 for other "
    "languages).",
)  # fmt: skip
INSTR_SIDE = declare(
    "instr.{role}.per_byte", "", "lower", "wide",
    "A side's counted instructions outside Go's runtime, per byte its tunnel device handled (the inner packets, "
    "both ways), or per payload byte delivered where the side has no tunnel device.",
    title="instructions/byte {role}", fmt=Format(4), words=("less work", "more work"),
)  # fmt: skip
INSTR_ALL_SIDE = declare(
    "instr.{role}.all_per_byte", "", "lower", "wide",
    "A side's counted instructions, Go's runtime included, per byte as instructions/byte {role}: the figure "
    "the gate does not judge, because the runtime's share moves with timing.",
    title="instructions/byte {role}, runtime included", fmt=Format(4), words=("less work", "more work"),
)  # fmt: skip
INSTR = declare(
    "instr.per_byte", "", "lower", "gate",
    "The tunnel's counted instructions outside Go's runtime, per byte, each side's figure added: where both A "
    "and B have it, what the cost gate holds, as a count the box's noise does not reach.",
    title="instructions/byte", fmt=Format(4), words=("less work", "more work"),
)  # fmt: skip
ROLES = ("client", "server")


def short_ifname(name: str, prefix: str) -> str:
    return name[len(prefix) + 1 :] if prefix and name.startswith(prefix + "-") else name


def deltas(role: str, before: Snapshot, after: Snapshot, prefix: str = "") -> dict[str, float | None]:
    """Metrics from two snapshots (pure): every SNMP counter of SNMP_FIELDS, and the non-zero
    per-interface drop/error deltas (an interface present at both edges only)."""
    m: dict[str, float | None] = {}
    (s0, d0), (s1, d1) = before, after
    for key, name in SNMP_FIELDS.items():
        if key in s0 and key in s1:
            m[COUNTER.key(role=role, counter=name)] = float(s1[key] - s0[key])
    for ifname in sorted(set(d0) & set(d1)):
        for f in DEV_FIELDS:
            diff = d1[ifname][f] - d0[ifname][f]
            if diff:
                m[DEV.key(role=role, device=short_ifname(ifname, prefix), field=f)] = float(diff)
    return m


CARRIED = declare(
    "carried_bytes", "bytes", "none", "info",
    "Bytes the tunnel carried: both directions of the client's underlay link over the counters' span (the "
    "whole workload call), what the tunnel's CPU per bit carried divides by.",
)  # fmt: skip


def carried_bytes(metrics: Mapping[str, float | None], device: str, role: str = "client") -> float | None:
    """The bytes `role`'s underlay `device` moved both ways (its rx + tx counters; `deltas` keeps non-zero ones
    only, so a missing one is 0, and None when both are): every packet the tunnel sent or received there,
    retransmissions and packets later dropped included, so it counts the tunnel's work, not the goodput."""
    rx, tx = (metrics.get(DEV.key(role=role, device=device, field=f"{f}_bytes")) for f in ("rx", "tx"))
    return None if rx is None and tx is None else (rx or 0.0) + (tx or 0.0)


DELIVERED = declare(
    "delivered_bytes", "bytes", "none", "info",
    "Payload bytes the traffic generator moved through the tunnel, both directions, over the whole test: what "
    "the tunnel's CPU per bit delivered divides by (padding, headers and retransmissions are not in it).",
)  # fmt: skip


def delivered_bytes(metrics: Mapping[str, float | None], sent_keys: Iterable[str]) -> float | None:
    """The sum of the generator's whole-test bytes per direction (`sent_keys`: the metric names, its
    Generator.sent_bytes per direction); None when it recorded none, or only zeros."""
    values = [v for k in sent_keys if (v := metrics.get(k)) is not None and math.isfinite(v)]
    total = sum(values)
    return total if values and total > 0 else None


def handled_bytes(metrics: Mapping[str, float | None], devices: Mapping[str, str]) -> dict[str, float]:
    """The bytes each role's tunnel device handled over the window (`devices`: role -> its name, as the
    instruction counter recorded them): its rx + tx counters, the inner packets both ways. A role whose device
    has no counter is left out."""
    out = {}
    for role, device in devices.items():
        values = [metrics.get(DEV.key(role=role, device=device, field=f)) for f in ("rx_bytes", "tx_bytes")]
        total = sum(v for v in values if v is not None and math.isfinite(v))
        if total > 0:
            out[role] = total
    return out


def instruction_ratios(
    metrics: Mapping[str, float | None],
    delivered: float | None,
    handled: Mapping[str, float] | None = None,
    sides: Sequence[str] = ROLES,
) -> dict[str, float | None]:
    """`instr.<role>.per_byte` for each role whose tunnel instructions were counted over the workload call
    (`instr.<role>.count`, perf/instructions.py): its count outside Go's runtime (`instr.<role>.runtime`) per
    byte its tunnel device handled (`handled`, handled_bytes), else per payload byte delivered; the same with
    the runtime included (`instr.<role>.all_per_byte`); and, when every side with a daemon (`sides`: both, or
    the client alone for a forward with nothing of its own on the server, as socat) was counted,
    `instr.per_byte`, those sides' figures added. Each side is divided by its own packets: a datagram lost
    before the server's tunnel read it was encrypted by the client but never decrypted. Nothing without a
    denominator."""
    out: dict[str, float | None] = {}
    counted: dict[str, float] = {}
    for role in ROLES:
        n = metrics.get(INSTR_COUNT.key(role=role))
        per = (handled or {}).get(role) or delivered
        if n is None or not math.isfinite(n) or not per or not math.isfinite(per) or per <= 0:
            continue
        in_runtime = metrics.get(INSTR_RUNTIME.key(role=role))
        own = n - in_runtime if in_runtime is not None and math.isfinite(in_runtime) else n
        out[INSTR_SIDE.key(role=role)] = own / per
        out[INSTR_ALL_SIDE.key(role=role)] = n / per
        counted[role] = own / per
    if sides and all(role in counted for role in sides):
        out[INSTR.name] = sum(counted[role] for role in sides)
    return out


def snapshot(netns: str) -> Snapshot:
    res = run_cmd(["cat", "/proc/net/snmp", "/proc/net/dev"], netns=netns, timeout_s=5, what="host counters")
    return parse_both(res.stdout)


@contextlib.contextmanager
def namespace_counters(
    namespaces: Mapping[str, str], metrics: dict[str, float | None], *, prefix: str, key_prefix: str = ""
) -> Iterator[None]:
    """Counter deltas over the `with` block for each role's namespace, written into `metrics` as
    `{key_prefix}counters.{role}.*`. Counters explain results: they never fail a trial."""
    try:
        before = {role: snapshot(ns) for role, ns in namespaces.items()}
    except CommandFailed as e:
        log.warning("host counters unavailable: %s", e)
        yield None
        return
    yield None
    try:
        for role, ns in namespaces.items():
            got = deltas(role, before[role], snapshot(ns), prefix)
            metrics.update({key_prefix + k: v for k, v in got.items()})
    except CommandFailed as e:
        log.warning("host counters unavailable after the window: %s", e)
