"""Readiness through the tunnel, for hundreds of clients from one thread: one raw ICMP socket per client
namespace (created by a helper thread that enters each namespace with setns(2); a socket stays in the
namespace it was born in), echo requests to the server's inner address every `interval_s` until the first
reply. "Ready" is the first answered echo: traffic really passes, not just a log line.

Pure parts (packet building and parsing) are tested without root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

CLONE_NEWNET = 0x40000000
ICMP_ECHO_REQUEST = 8
ICMP_ECHO_REPLY = 0


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes = b"tunbench") -> bytes:
    header = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident & 0xFFFF, seq & 0xFFFF)
    csum = checksum(header + payload)
    return struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, csum, ident & 0xFFFF, seq & 0xFFFF) + payload


def parse_reply(packet: bytes) -> tuple[str, int] | None:
    """(source address, identifier) of an ICMP echo reply in a raw IPv4 packet, else None."""
    if len(packet) < 20:
        return None
    ihl = (packet[0] & 0x0F) * 4
    if len(packet) < ihl + 8 or packet[9] != socket.IPPROTO_ICMP:
        return None
    icmp_type, _code, _csum, ident, _seq = struct.unpack("!BBHHH", packet[ihl : ihl + 8])
    if icmp_type != ICMP_ECHO_REPLY:
        return None
    return socket.inet_ntoa(packet[12:16]), ident


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def open_sockets(namespaces: dict[int, str]) -> dict[int, socket.socket]:
    """A raw ICMP socket inside each named namespace (key -> socket), made from a short-lived thread so
    the caller's own namespace never changes."""
    out: dict[int, socket.socket] = {}
    errors: list[BaseException] = []

    def work() -> None:
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            for key, name in namespaces.items():
                fd = os.open(Path("/run/netns") / name, os.O_RDONLY)
                try:
                    _setns(fd)
                finally:
                    os.close(fd)
                s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                s.setblocking(False)
                out[key] = s
        except BaseException as e:  # reported to the caller below
            errors.append(e)
        finally:
            with contextlib.suppress(OSError):
                _setns(home)
            os.close(home)

    t = threading.Thread(target=work, name="tunbench-netns-sockets")
    t.start()
    t.join()
    if errors:
        for s in out.values():
            s.close()
        raise errors[0]
    return out


class ReadyProbe:
    """`with ReadyProbe(namespaces, address) as p:` then `p.watch(keys)` starts probing those clients (again,
    e.g. after a reconnect); `p.ready_at[key]` is the monotonic time of the first reply since watch()."""

    def __init__(self, namespaces: dict[int, str], address: str, interval_s: float = 0.1) -> None:
        self.address = address
        self.interval_s = interval_s
        self._namespaces = namespaces
        self._socks: dict[int, socket.socket] = {}
        self._by_fd: dict[int, int] = {}
        self.ready_at: dict[int, float] = {}
        self.sent: dict[int, int] = {}
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tunbench-ready-probe", daemon=True)
        self._ident = os.getpid() & 0xFFFF

    def __enter__(self) -> ReadyProbe:
        self._socks = open_sockets(self._namespaces)
        self._by_fd = {s.fileno(): k for k, s in self._socks.items()}
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        for s in self._socks.values():
            s.close()

    def watch(self, keys: Iterable[int]) -> None:
        with self._lock:
            for k in keys:
                self.ready_at.pop(k, None)
                self.sent[k] = 0
                self._pending.add(k)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def wait(self, keys: Iterable[int], deadline: float) -> bool:
        """Until every key is ready or the (monotonic) deadline passes; True when all are ready."""
        keys = set(keys)
        while time.monotonic() < deadline:
            with self._lock:
                if keys <= self.ready_at.keys():
                    return True
            time.sleep(0.02)
        with self._lock:
            return keys <= self.ready_at.keys()

    def _send_all(self, seq: int) -> None:
        with self._lock:
            pending = list(self._pending)
        for k in pending:
            pkt = echo_request(self._ident, seq)
            with contextlib.suppress(OSError):  # no route yet (tunnel device not up): not ready
                self._socks[k].sendto(pkt, (self.address, 0))
                self.sent[k] = self.sent.get(k, 0) + 1

    def _loop(self) -> None:
        poller = select.epoll()
        for fd in self._by_fd:
            poller.register(fd, select.EPOLLIN)
        seq = 0
        next_send = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_send:
                    seq += 1
                    self._send_all(seq)
                    next_send = now + self.interval_s
                for fd, _ in poller.poll(max(0.0, min(0.05, next_send - time.monotonic()))):
                    self._drain(fd)
        finally:
            poller.close()

    def _drain(self, fd: int) -> None:
        key = self._by_fd[fd]
        sock = self._socks[key]
        while True:
            try:
                data = sock.recv(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            got = parse_reply(data)
            if got and got[0] == self.address and got[1] == self._ident:
                with self._lock:
                    if key in self._pending:
                        self._pending.discard(key)
                        self.ready_at[key] = time.monotonic()
