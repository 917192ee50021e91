"""Options and guards several commands share."""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from tunbench.report.compare import Gate
from tunbench.units import parse_fraction

DbOpt = Annotated[
    str,
    typer.Option(
        "--db",
        help="Result store: an SQLite file, or a PostgreSQL URL (postgresql://user@host/dbname).",
        envvar="TUNBENCH_DB",
    ),
]
DEFAULT_DB = "tunbench.db"
_BUDGET = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|sec|m|min|h)?\s*$", re.I)


CpusetOpt = Annotated[
    str | None,
    typer.Option(
        "--cpuset",
        help="CPU placement of each side ([run] cpuset): off (default); split (client side: tunnel client + "
        "iperf3 client on one CPU, server side on another, the emulator on a third where there is one, else "
        "with the server); or client=0,server=1,link=1. Recorded with every trial.",
    ),
]


GateOpt = Annotated[
    str,
    typer.Option(
        "--gate",
        help="Which comparisons gate: cost (default): the tunnel's own instructions per byte, each side's added, "
        "where both A and B counted them (run --count-instructions), else its CPU per bit of payload delivered, "
        "client and server together, over whole trials (CPU per bit of goodput where a trial did not count its "
        "payload; and latency), at the threshold, the quietest figure of its speed on a shared host, and "
        "throughput, the wire overhead (bytes on the wire per byte delivered) and each side's CPU per bit at 2x "
        "the threshold in a Holm family of their own; all: every metric at the threshold, one family "
        "(docs/precision.md, the gate).",
    ),
]


def gate_flag(name: str) -> Gate:
    """--gate as a report.compare.Gate; a bad name is a usage error naming the flag (exit 2)."""
    from tunbench.report.compare import parse_gate

    try:
        return parse_gate(name)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--gate") from None


RunArg = Annotated[str | None, typer.Argument(metavar="RUN", help="Run id, uid or name (default: latest).")]


def parse_budget(text: str) -> float:
    """'60s', '2m', '1.5min', '1h' -> seconds (> 0). A bare number is refused, as `--target-mde 3` is: `--budget
    2` meant two minutes to some and ran for two seconds."""
    m = _BUDGET.match(text)
    if not m or float(m.group(1)) <= 0.0:
        raise typer.BadParameter(f"{text!r}: expected a time such as 60s, 2m or 1.5min", param_hint="--budget")
    if not m.group(2):
        n = m.group(1)
        raise typer.BadParameter(
            f"{text!r}: give a unit: {n}s for {n} seconds, {n}m for {n} minutes (a bare number is ambiguous)",
            param_hint="--budget",
        )
    scale = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[(m.group(2) or "").lower()]
    return float(m.group(1)) * scale


def parse_until(text: str, now: datetime.datetime | None = None) -> float:
    """'14:30', '14:30:15' (the next time the local clock shows it: today, or tomorrow if already past) or an
    ISO date and time '2026-11-24T14:30' -> seconds from `now` until then (> 0)."""
    now = now or datetime.datetime.now()
    raw = text.strip()
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", raw):
            hour, minute, *sec = (int(x) for x in raw.split(":"))
            t = datetime.time(hour, minute, sec[0] if sec else 0)
            at = datetime.datetime.combine(now.date(), t)
            if at <= now:
                at += datetime.timedelta(days=1)
        else:
            at = datetime.datetime.fromisoformat(raw)
            if at.tzinfo is not None:  # an offset given: that instant on this machine's local clock
                at = at.astimezone().replace(tzinfo=None)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: expected a local time such as 14:30 or 14:30:15, or 2026-11-24T14:30", param_hint="--until"
        ) from None
    left = (at - now).total_seconds()
    if left <= 0:
        raise typer.BadParameter(f"{text!r} is in the past", param_hint="--until")
    return left


def parse_share(text: str, flag: str) -> float:
    """A share flag's value ('3%' or the fraction 0.03; `--target-mde`, `--target`, `--redo-steal`,
    `--foreign-cpu`) as a fraction above 0, parsed here once for every command that takes one; a bad value
    is a usage error naming the flag."""
    try:
        value = parse_fraction(text, flag)
    except ValueError as e:
        raise typer.BadParameter(str(e).removeprefix(f"{flag} "), param_hint=flag) from None
    if value <= 0.0:
        raise typer.BadParameter(f"{text!r}: must be above 0%, e.g. 3%", param_hint=flag)
    return value
