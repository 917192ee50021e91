"""A tunnel's handshakes, as its adapter declares them (`[handshakes]`, docs/adapters.md "Handshakes"): one
reading is a number, a running count of handshakes or the time of the latest one; a `HandshakeSampler`
reads it before, during and after a measurement, and says how many handshakes completed after a moment.

Three ways to read, none of them knowing a tunnel by name:
- `log`: the lines of a role's daemon log that match a pattern (OpenVPN's "Control Channel: TLS...", one
  per completed TLS handshake; charon's "IKE_SA ... established");
- `cmd`: a command's output, the numbers a pattern finds (`wg show DEV latest-handshakes`);
- `socket`: a request to a unix socket on the role's machine, the numbers a pattern finds in the reply
  (WireGuard's UAPI socket, /var/run/wireguard/DEV.sock: `get=1`, `last_handshake_time_sec=`/`_nsec=`).

What the numbers are (`value`): `count`, handshakes so far (their sum is the reading); `time`, each peer's
latest handshake in Unix seconds, 0 for none (the reading is the latest; any change is a new handshake);
`age`, the seconds since each peer's latest handshake (boringtun's UAPI reports that, not a time: the
reading is the time it implies, and a new handshake moves it on by more than AGE_SLACK_S).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from tunbench.tunnels.adapter import HandshakeValue

# an `age` reading of the same handshake moves by the time a reading takes (and, in whole seconds, by its
# rounding): two handshakes closer than this count as one (WireGuard's are REKEY_TIMEOUT, 5 s, apart)
AGE_SLACK_S = 1.5
SAMPLE_INTERVAL_S = 0.5
SOCKET_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Reading:
    """One reading, taken at `at_ns` (wall clock, when the read returned): a count or a time (see the module), or
    None when it could not be read (the command failed, the socket refused)."""

    at_ns: int
    value: float | None


def numbers(pattern: str, text: str) -> list[float]:
    """The numbers `pattern` finds in `text` (multi-line): each match's first group, plus its second group
    as nanoseconds when it has one; a match whose groups are not numbers is skipped."""
    out = []
    for m in re.finditer(pattern, text, re.MULTILINE):
        groups = [g for g in m.groups() if g is not None]
        try:
            n = float(groups[0]) if groups else None
            if n is not None and len(groups) > 1:
                n += float(groups[1]) / 1e9
        except ValueError:
            continue
        if n is not None:
            out.append(n)
    return out


def log_count(pattern: str, text: str) -> int:
    """The lines of a log that match `pattern`: a `log` counter's reading."""
    rx = re.compile(pattern)
    return sum(1 for line in text.splitlines() if rx.search(line))


def reading_value(value: HandshakeValue, nums: Sequence[float], at_s: float) -> float:
    """A `cmd` or `socket` counter's reading from the numbers it found (taken at `at_s`, Unix seconds):
    the count, or the time of the latest handshake (0: none yet)."""
    if value == "count":
        return float(sum(nums))
    if value == "time":
        return max(nums, default=0.0)
    return at_s - min(nums) if nums else 0.0  # age: the time it implies


def completed(value: HandshakeValue, readings: Sequence[Reading], since_ns: int) -> int | None:
    """How many handshakes completed from `since_ns` (wall clock) to the last reading (pure), counted from
    the last reading taken before `since_ns`: by how much a count grew (one that goes down started again
    from 0: its process was restarted), or how often the latest handshake's time changed (an age's: moved
    on by more than AGE_SLACK_S). Readings that failed are skipped. None: no reading before `since_ns`, or
    the last one failed (nothing vouches for the end)."""
    before = [r.value for r in readings if r.at_ns <= since_ns and r.value is not None]
    if not before or not readings or readings[-1].value is None:
        return None
    prev, n = before[-1], 0
    for r in readings:
        v = r.value
        if r.at_ns <= since_ns or v is None:
            continue
        if value == "count":
            n += round(v - prev) if v >= prev else round(v)
        elif v == 0:  # none (any more): what comes back is compared with the handshake before
            continue
        elif prev == 0 or (v != prev if value == "time" else v > prev + AGE_SLACK_S):
            n += 1
        else:  # the same handshake (an age's time, read again, moves by the time reading takes)
            continue
        prev = v
    return n


class HandshakeReader:
    """One tunnel's declared counter: `read()` takes one reading. `text` fetches what the reading is made
    of (a log, a command's output, a socket's reply; None: it failed) and `parse` makes it a number."""

    def __init__(self, value: HandshakeValue, text: Callable[[], str | None], parse: Callable[[str, float], float]):
        self.value = value
        self._text = text
        self._parse = parse

    def read(self) -> Reading:
        try:
            text = self._text()
        except Exception:  # a reading that fails is a gap in the readings, never the trial's end
            text = None
        # stamped when the read returned: a reading that may hold state from after a moment is never taken
        # as the state before it (a read can take seconds: a command's, a socket's timeout)
        at = time.time_ns()
        return Reading(at, None if text is None else self._parse(text, at / 1e9))


def socket_reply(path: str, send: str, until: str, timeout_s: float = SOCKET_TIMEOUT_S) -> str | None:
    """Send `send` to the unix socket at `path` and return the reply, up to where it ends with `until` (or
    the socket's end); None if the socket cannot be reached or stays silent past `timeout_s`."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(path)
            if send:
                s.sendall(send.encode())
            data = b""
            while not (until and data.endswith(until.encode())):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data.decode(errors="replace")
    except OSError:
        return None


class HandshakeSampler:
    """`with HandshakeSampler(reader) as s:` reads on entry, every `interval_s` in a thread, and on exit;
    `s.since(t_ns)` is then how many handshakes completed after wall time `t_ns` (None: unknown)."""

    def __init__(self, reader: HandshakeReader, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.reader = reader
        self.interval_s = interval_s
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="handshakes", daemon=True)

    def __enter__(self) -> HandshakeSampler:
        self.readings.append(self.reader.read())
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.readings.append(self.reader.read())

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self.readings.append(self.reader.read())

    def since(self, t_ns: int) -> int | None:
        return completed(self.reader.value, list(self.readings), t_ns)
