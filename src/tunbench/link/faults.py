"""A profile's `[[faults]]`: faults aimed at one kind of tunnel message (the second WireGuard handshake
initiation, OpenVPN's first hard reset, an IKE_SA_INIT response), each a table -> tunbench-link's
`--a2b-faults` / `--b2a-faults` SPEC (pure).

tunbench-link classifies each UDP datagram it forwards (WireGuard, OpenVPN, IKEv2/ESP; docs/faults.md has
the classes) and applies a fault to the messages of its class that its selection picks: the `nth`, the
`first` N, `every` Nth (counted per direction from the emulator's start), or all of them `during` a span
of the profile's schedule (which starts with the trial's traffic, as events do).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FAMILIES = ("wg", "ovpn", "ike")
CLASSES = (
    "wg.initiation",
    "wg.response",
    "wg.cookie",
    "wg.data",
    "ovpn.hard_reset_client",
    "ovpn.hard_reset_server",
    "ovpn.soft_reset",
    "ovpn.control",
    "ovpn.ack",
    "ovpn.data",
    "ovpn.control_wkc",
    "ike.sa_init.request",
    "ike.sa_init.response",
    "ike.auth.request",
    "ike.auth.response",
    "ike.create_child_sa.request",
    "ike.create_child_sa.response",
    "ike.informational.request",
    "ike.informational.response",
    "ike.other",
    "esp",
    "ike.keepalive",
    "other",
)
"""The message classes of tunbench-link's classifier (its own list is the truth: `tunbench-link check`
judges a `match`)."""

DATA_CLASSES = ("wg.data", "ovpn.data", "esp")
"""The classes that carry the tunnel's traffic (the rest set up or keep up its keys)."""

_DURATION = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:ns|us|ms|s)$")
_SIZE = re.compile(r"^[0-9]+-[0-9]+$")
_MATCH = re.compile(r"^(?:any|[a-z]+(?:\.[a-z_]+)*(?:\.\*)?)$")
SELECTIONS = ("nth", "first", "every", "during")


class ProfileFault(BaseModel):
    """One fault: the messages of class `match` (a class, a family `wg.*`, or `any`) in `direction` (up:
    client -> server, down, or both: each direction counts its own), optionally only those to or from UDP
    `port` and of an IP size within `size` ("60-200" bytes); which of them, by exactly one of `nth`,
    `first`, `every` or `during` = [from, to] (times after the schedule's start); and what happens to them:
    `action` drop (the default), delay (by `delay`), dup or corrupt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str
    direction: Literal["up", "down", "both"] = "both"
    port: int | None = Field(default=None, ge=1, le=65535)
    size: str | None = None
    nth: int | None = Field(default=None, ge=1)
    first: int | None = Field(default=None, ge=1)
    every: int | None = Field(default=None, ge=1)
    during: tuple[str, str] | None = None
    action: Literal["drop", "delay", "dup", "corrupt"] = "drop"
    delay: str | None = None

    @model_validator(mode="after")
    def _one_selection(self) -> ProfileFault:
        if not _MATCH.match(self.match):
            raise ValueError(f"match: bad value {self.match!r} (a class such as wg.initiation, a family wg.*, or any)")
        chosen = [k for k in SELECTIONS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "a fault selects its messages by exactly one of nth, first, every or during"
                + (f" (it has {', '.join(chosen)})" if chosen else "")
            )
        if self.size is not None and not _SIZE.match(self.size):
            raise ValueError(f'size: bad value {self.size!r} (bytes, from-to: "60-200")')
        for t in self.during or ():
            if not _DURATION.match(t):
                raise ValueError(f'during: bad time {t!r} (e.g. "2s", "1500ms")')
        if (self.action == "delay") != (self.delay is not None):
            raise ValueError('action = "delay" takes a `delay` (and only it does)')
        if self.delay is not None and not _DURATION.match(self.delay):
            raise ValueError(f'delay: bad value {self.delay!r} (e.g. "500ms")')
        return self

    @property
    def timed(self) -> bool:
        """Whether it follows the profile's schedule (`during`), which starts with the trial's traffic."""
        return self.during is not None

    def applies_to(self, direction: str) -> bool:
        return self.direction in ("both", direction)

    def spec(self) -> str:
        """tunbench-link's form: `match=wg.initiation,first=2,action=drop`."""
        items: dict[str, object] = {"match": self.match}
        if self.port is not None:
            items["port"] = self.port
        if self.size is not None:
            items["size"] = self.size
        for key in ("nth", "first", "every"):
            if (n := getattr(self, key)) is not None:
                items[key] = n
        if self.during is not None:
            items["during"] = f"{self.during[0]}..{self.during[1]}"
        items["action"] = self.action
        if self.delay is not None:
            items["delay"] = self.delay
        return ",".join(f"{k}={v}" for k, v in items.items())

    def describe(self) -> str:
        """One line for a dry run and `tunbench profiles`: 'up: drop the first 2 wg.initiation'."""
        if self.nth is not None:
            which = f"the {ordinal(self.nth)}"
        elif self.first is not None:
            which = f"the first {self.first}" if self.first > 1 else "the first"
        elif self.every is not None:
            which = "every" if self.every == 1 else f"every {ordinal(self.every)}"
        else:
            assert self.during is not None
            which = "every"
        what = self.match if self.match != "any" else "message"
        where = "".join([f" on port {self.port}" if self.port else "", f" of {self.size} bytes" if self.size else ""])
        when = f" from {self.during[0]} to {self.during[1]}" if self.during else ""
        action = f"delay by {self.delay}" if self.action == "delay" else self.action
        return f"{self.direction}: {action} {which} {what}{where}{when}"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def faults_spec(faults: list[ProfileFault], direction: str) -> str:
    """tunbench-link's FAULTS for one direction (`;`-separated)."""
    return ";".join(f.spec() for f in faults if f.applies_to(direction))


def fault_indexes(faults: list[ProfileFault], direction: str) -> list[int]:
    """Which of `faults` apply to one direction, in order (tunbench-link numbers them per direction)."""
    return [i for i, f in enumerate(faults) if f.applies_to(direction)]
