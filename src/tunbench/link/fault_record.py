"""What a profile's faults did, from tunbench-link's stats file (pure): the faults that fired (kept with the
trial), and how the tunnel recovered from the first of them (`faults.*` metrics).

The stats file has, per direction (`a2b` = up, `b2a` = down), `faults` (each fault that fired: its index
among the direction's faults, the message's class, its ordinal in its class, its time), `messages` (every
message that is not data: class, time, fate: sent, dropped_fault, dropped_link or in_flight) and
`data_marks` (the first data message delivered after each other message or fault). Each record has two
times (link/README.md, "Fault records"): `since_start_ns` from the emulator's start (every record has it:
the figures below use it) and `at_ns` from the schedule's start (`schedule.start_ns`, CLOCK_MONOTONIC; null
before it), which places a record on a trial's time axis.

The recovery from the first fault (at t0, class C), whatever the workload:
- `faults.handshake_ms`: t0 to the delivery of the answer that completes the exchange C belongs to, in either
  direction (ANSWERS): a WireGuard `wg.response`, OpenVPN's `ovpn.hard_reset_server`, the IKEv2 response of
  the same exchange. For a fault on any other class (data, OpenVPN's control and ack packets) there is none.
- `faults.first_data_ms`: t0 to the first data message delivered after that answer, in either direction
  (where C has no answer, the first delivered after t0 in D): the tunnel carrying traffic again.
- `faults.retransmits`: the messages of class C the faulted direction sent after t0 up to that answer (to
  the end when none came): the tunnel's retransmissions.
- `faults.start_to_data_ms`: from the first message the emulator classified (the tunnel's first handshake
  packet) to the first data delivered, faults or not (`classify = true` measures it without faults: the
  undisturbed bring-up to compare with).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunbench.link.faults import DATA_CLASSES, ProfileFault, fault_indexes
from tunbench.metrics.registry import Chart, Format, Metrics, declare

_MS = Format(4, 1.0, " ms")

FAULT_MS = declare(
    "faults.{span}_ms", "ms", "lower", "wide",
    "From the first fault a profile's `[[faults]]` made to the tunnel's recovery (docs/faults.md): `handshake`, "
    "the answer that completes the faulted exchange delivered (a WireGuard response, OpenVPN's server reset, "
    "the IKEv2 response); `first_data`, the first data delivered after it.",
    title="fault to {span}", fmt=_MS, chart=Chart("ms"), words=("faster", "slower"),
    choices={"span": ("handshake", "first_data")},
)  # fmt: skip
START_TO_DATA = declare(
    "faults.start_to_data_ms", "ms", "lower", "wide",
    "From the tunnel's first classified message (its first handshake packet) to the first data delivered, "
    "with the profile's faults in force or none (`classify = true`).",
    title="first message to data", fmt=_MS, chart=Chart("ms"), words=("faster", "slower"),
)  # fmt: skip
RETRANSMITS = declare(
    "faults.retransmits", "count", "none", "info",
    "The messages of the first fault's class its direction sent after it, until the exchange completed.",
)  # fmt: skip
FIRED = declare("faults.fired", "count", "none", "info", "The faults of a profile that fired, both directions.")

WIRES = (("a2b", "up"), ("b2a", "down"))

ANSWERS = {
    "wg.initiation": "wg.response",
    "wg.response": "wg.response",
    "wg.cookie": "wg.response",
    "ovpn.hard_reset_client": "ovpn.hard_reset_server",
    "ovpn.hard_reset_server": "ovpn.hard_reset_server",
    **{
        f"ike.{x}.{way}": f"ike.{x}.response"
        for x in ("sa_init", "auth", "create_child_sa", "informational")
        for way in ("request", "response")
    },
}
"""A handshake message's class -> the class whose delivery completes its exchange."""


@dataclass(frozen=True)
class Message:
    """One non-data message the emulator saw: its direction (up/down), time (ns since the emulator's
    start), class, fate."""

    direction: str
    t_ns: int
    cls: str
    fate: str


@dataclass(frozen=True)
class Fired:
    """One fault that fired: its direction, which of the profile's faults (index in `[[faults]]`), the
    message it hit (class, ordinal in its class from 1, size, key id) and when (ns since the emulator's
    start; `at_ns` since the schedule's start, None before it)."""

    direction: str
    fault: int
    t_ns: int
    at_ns: int | None
    cls: str
    ordinal: int
    action: str
    size: int
    key_id: int | None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _records(stats: dict[str, Any] | None, part: str) -> list[tuple[str, dict[str, Any]]]:
    """(direction, record) of one list of both directions' records, those with their time."""
    return [
        (direction, r)
        for wire, direction in WIRES
        for r in ((stats or {}).get(wire) or {}).get(part) or []
        if isinstance(r, dict) and _int(r.get("since_start_ns")) is not None
    ]


def fired(stats: dict[str, Any] | None, faults: list[ProfileFault]) -> list[Fired]:
    """The faults that fired, in time order (`faults`: the profile's, to map tunbench-link's per-direction
    index back to the profile's)."""
    out = []
    for direction, f in _records(stats, "faults"):
        mine = fault_indexes(faults, direction)
        n = _int(f.get("fault"))
        if n is None:
            continue
        out.append(
            Fired(
                direction,
                mine[n] if 0 <= n < len(mine) else n,
                _int(f.get("since_start_ns")) or 0,
                _int(f.get("at_ns")),
                str(f.get("class", "")),
                _int(f.get("ordinal")) or 0,
                str(f.get("action", "")),
                _int(f.get("size")) or 0,
                _int(f.get("key_id")),
            )
        )
    return sorted(out, key=lambda x: x.t_ns)


def messages(stats: dict[str, Any] | None) -> list[Message]:
    """Every non-data message of both directions, in time order."""
    out = [
        Message(direction, _int(m.get("since_start_ns")) or 0, str(m.get("class", "")), str(m.get("fate", "")))
        for direction, m in _records(stats, "messages")
    ]
    return sorted(out, key=lambda x: x.t_ns)


def data_marks(stats: dict[str, Any] | None, direction: str | None = None) -> list[int]:
    """The times of the data messages the emulator marked as delivered (both directions, or one), in order."""
    return sorted(
        _int(m.get("since_start_ns")) or 0
        for d, m in _records(stats, "data_marks")
        if str(m.get("class", "")) in DATA_CLASSES and direction in (None, d)
    )


def truncated(stats: dict[str, Any] | None) -> bool:
    """Whether the emulator stopped recording faults, messages or data marks in either direction."""
    return any(
        bool(((stats or {}).get(wire) or {}).get(f"{part}_truncated"))
        for wire, _ in WIRES
        for part in ("faults", "messages", "data_marks")
    )


def schedule_offset_ns(stats: dict[str, Any] | None) -> int | None:
    """The schedule's start minus the emulator's start (ns), from any record that has both its times."""
    for part in ("faults", "messages", "data_marks"):
        for _, r in _records(stats, part):
            if (at := _int(r.get("at_ns"))) is not None:
                return (_int(r.get("since_start_ns")) or 0) - at
    return None


def monotonic_ns(stats: dict[str, Any] | None, t_ns: int) -> int | None:
    """A record's time (ns since the emulator's start) on CLOCK_MONOTONIC, through the schedule's start
    (`schedule.start_ns`); None when the stats cannot place it."""
    start = _int(((stats or {}).get("schedule") or {}).get("start_ns"))
    offset = schedule_offset_ns(stats)
    return None if start is None or offset is None else start + t_ns - offset


def fault_metrics(stats: dict[str, Any] | None, faults: list[ProfileFault]) -> Metrics:
    """The `faults.*` figures of a trial (module docstring); {} when the emulator classified nothing."""
    hits = fired(stats, faults)
    msgs = messages(stats)
    marks = data_marks(stats)
    out: Metrics = {}
    if faults:
        out[FIRED.name] = float(len(hits))
    if msgs and marks and marks[-1] >= msgs[0].t_ns:
        first = next(t for t in marks if t >= msgs[0].t_ns)
        out[START_TO_DATA.name] = (first - msgs[0].t_ns) / 1e6
    if not hits:
        return out
    hit = hits[0]
    answer = ANSWERS.get(hit.cls)
    done = next((m.t_ns for m in msgs if answer and m.cls == answer and m.fate == "sent" and m.t_ns > hit.t_ns), None)
    if done is not None:
        out[FAULT_MS.key(span="handshake")] = (done - hit.t_ns) / 1e6
    after = done if done is not None else hit.t_ns
    # after a handshake, data in either direction; after a fault on anything else (data), its direction's
    data = next((t for t in (marks if answer else data_marks(stats, hit.direction)) if t >= after), None)
    if data is not None and (answer is None or done is not None):
        out[FAULT_MS.key(span="first_data")] = (data - hit.t_ns) / 1e6
    end = done if done is not None else max((m.t_ns for m in msgs), default=hit.t_ns)
    # the faulted class's messages of its direction after the one the fault hit (its ordinal-th), to the end
    same = [m for m in msgs if m.direction == hit.direction and m.cls == hit.cls]
    out[RETRANSMITS.name] = float(sum(1 for m in same[hit.ordinal :] if m.t_ns <= end))
    return out


def fired_params(stats: dict[str, Any] | None, hits: list[Fired], origin_ns: int | None) -> list[dict[str, Any]]:
    """The faults that fired as a trial keeps them (`params["faults_fired"]`): each with its time `t_s` on
    the trial's series axis (seconds after `origin_ns`, the measurement's start on CLOCK_MONOTONIC; negative:
    before it, in the bring-up), None where the stats cannot place it, and `since_start_s` after the
    emulator's start."""
    out = []
    for h in hits:
        mono = monotonic_ns(stats, h.t_ns) if origin_ns is not None else None
        out.append(
            {
                "direction": h.direction,
                "fault": h.fault,
                "class": h.cls,
                "ordinal": h.ordinal,
                "action": h.action,
                "size": h.size,
                "key_id": h.key_id,
                "since_start_s": round(h.t_ns / 1e9, 6),
                "t_s": round((mono - origin_ns) / 1e9, 6) if mono is not None and origin_ns is not None else None,
            }
        )
    return out
