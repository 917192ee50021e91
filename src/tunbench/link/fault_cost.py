"""What a profile's counted faults (`nth`, `first`, `every`) cost one bring-up of a tunnel, for the run's time
estimate and a bring-up workload's time limit (pure).

A counted fault counts from the emulator's start, so it reaches the tunnel's first handshake: each handshake
message it drops (or corrupts: the receiver rejects it) is sent again when the protocol's retransmission timer
fires, and a `delay` holds the bring-up back by its delay, or by the timer when the timer fires first (the
retransmitted message overtakes the held one). The timers are the ones measured on the built-in profiles
(docs/faults.md, "Known answers": the difference of the medians with and without the fault, 6 bring-ups
each), per family of tunbench-link's message classes; a tunnel says which family its messages are in with its
adapter's `messages` key (docs/adapters.md). Faults on data messages (the readiness ping's) and faults of a
family the tunnel does not speak cost nothing here, as do `dup` and the faults that follow the schedule
(`during`: they start with the traffic, after the bring-up).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tunbench.link.faults import DATA_CLASSES, ProfileFault
from tunbench.units import parse_duration_s


@dataclass(frozen=True)
class RetryTimer:
    """A protocol's retransmission of an unanswered handshake message: the first retry `first_s` after the
    lost message, each next one `backoff` times the previous wait."""

    first_s: float
    backoff: float = 1.0

    def wait_s(self, n: int) -> float:
        """The wait before the retry that follows the n-th lost message (n from 1)."""
        return self.first_s * self.backoff ** (n - 1)


RETRY = {
    # WireGuard: REKEY_TIMEOUT 5 s + 0-333 ms jitter; measured 10.16 s (wireguard-go) and 10.48 s (boringtun)
    # for two lost initiations, 5.16 s each on average (docs/faults.md)
    "wg": RetryTimer(5.16),
    # OpenVPN: --tls-timeout 2 s, doubling, on a whole-second clock; measured 1.90 s for one lost hard reset
    "ovpn": RetryTimer(1.9, 2.0),
    # strongSwan (IKEv2): retransmit_timeout 4 s x retransmit_base 1.8 ^ (n-1); measured 4.00 s for one
    "ike": RetryTimer(4.0, 1.8),
}
"""The retransmission timer of each family of message classes (tunbench.link.faults.FAMILIES)."""

ENDLESS = 1000
"""Selections past this many messages (`every = 1`) count as losing every retry: the bring-up then lasts until
its readiness wait gives up."""


def handshake_hit(fault: ProfileFault, family: str) -> bool:
    """Whether `fault` is aimed at the handshake messages of `family` (a class of it other than data and
    IKE's keepalive, the family itself, or any message)."""
    if fault.match in ("any", f"{family}.*"):
        return True
    return fault.match.startswith(f"{family}.") and fault.match not in (*DATA_CLASSES, "ike.keepalive")


def selects(fault: ProfileFault, n: int) -> bool:
    """Whether a counted fault picks the n-th message it looks at (n from 1)."""
    if fault.first is not None:
        return n <= fault.first
    if fault.nth is not None:
        return n == fault.nth
    return fault.every is not None and n % fault.every == 0


def lost_cost_s(faults: list[ProfileFault], timer: RetryTimer, limit_s: float) -> float:
    """The delay the faults on one class put on a bring-up: its first messages are sent one after another, each
    retry after the timer, for as long as the faults lose them; a delayed one holds the bring-up back by its
    delay or the timer, whichever is shorter, and ends the run of losses. Capped at `limit_s`."""
    cost = 0.0
    for n in range(1, ENDLESS + 1):
        hit = [f for f in faults if selects(f, n)]
        if not hit or cost >= limit_s:
            break
        wait = timer.wait_s(n)
        if all(f.action == "delay" for f in hit):
            held = min(parse_duration_s(f.delay or "0s") for f in hit)
            cost += min(held, wait)
            if held < wait:
                break
        else:
            cost += wait
    return min(cost, limit_s)


def bringup_fault_s(faults: list[ProfileFault], family: str | None, limit_s: float) -> float:
    """The seconds a profile's counted faults add to one bring-up of a tunnel whose messages are in `family`
    (None: a tunnel tunbench-link does not classify, which no fault can aim at), at most `limit_s` (the
    tunnel's readiness wait). The faults on each class (or family, or `any`) add up; those on one class make
    one run of lost messages."""
    if family is None or family not in RETRY:
        return 0.0
    by_match: dict[str, list[ProfileFault]] = defaultdict(list)
    for f in faults:
        if not f.timed and f.action != "dup" and handshake_hit(f, family):
            by_match[f.match].append(f)
    total = sum(lost_cost_s(group, RETRY[family], limit_s) for group in by_match.values())
    return min(total, limit_s)
