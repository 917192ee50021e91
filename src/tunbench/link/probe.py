"""A UDP one-way-delay probe, run inside the namespaces: `python -m tunbench.link.probe send|recv ...`.

Each datagram carries a sequence number and the sender's CLOCK_REALTIME (ns) just before sendto; the
receiver takes the kernel's receive timestamp (SO_TIMESTAMPNS, also CLOCK_REALTIME). Both namespaces run
on one host and share the clock, so receive - send is the true one-way delay, no clock sync needed.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")  # seq, send time (ns)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def send(to: str, port: int, count: int, interval_us: float, size: int, burst: int = 1) -> int:
    """Send the probes, probe `seq` at `start + (seq // burst) * interval` (CLOCK_MONOTONIC: `burst`
    probes per tick); returns `start`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, size - HEADER.size)
    start = time.monotonic_ns()
    for seq in range(count):
        due = start + int(seq // burst * interval_us * 1000)
        while (left := due - time.monotonic_ns()) > 0:
            if left > 200_000:
                time.sleep((left - 100_000) / 1e9)
        sock.sendto(HEADER.pack(seq, time.clock_gettime_ns(time.CLOCK_REALTIME)) + pad, (to, port))
    return start


def recv(port: int, count: int, idle_timeout_s: float, times: bool = False) -> dict[str, object]:
    """Receive up to `count` probes (until `idle_timeout_s` without one). With `times`, any UDP datagram
    of at least 16 bytes counts, and the answer also lists each one's kernel receive time (`rx_ns`,
    CLOCK_REALTIME) and size (`bytes`, UDP payload): what a trace-driven link delivered, and when."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(idle_timeout_s)
    print("ready", flush=True)
    seqs: list[int] = []
    owd_ns: list[int] = []
    rx_ns: list[int] = []
    sizes: list[int] = []
    try:
        while len(seqs) < count:
            data, anc, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(16))
            rx = next(
                (
                    struct.unpack("qq", d[:16])
                    for lvl, typ, d in anc
                    if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS
                ),
                None,
            )
            if rx is None or len(data) < HEADER.size:
                continue
            if times:
                rx_ns.append(rx[0] * 1_000_000_000 + rx[1])
                sizes.append(len(data))
            seq, tx = HEADER.unpack_from(data)
            seqs.append(seq)
            owd_ns.append(rx[0] * 1_000_000_000 + rx[1] - tx)
    except TimeoutError:
        pass
    if times:
        return {"seqs": seqs, "owd_ns": owd_ns, "rx_ns": rx_ns, "bytes": sizes}
    return {"seqs": seqs, "owd_ns": owd_ns}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tunbench.link.probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, default=7000)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--interval-us", type=float, default=1000.0)
    s.add_argument("--size", type=int, default=64)
    s.add_argument("--burst", type=int, default=1, help="probes sent back to back at each interval")
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=7000)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--idle-timeout", type=float, default=2.0)
    r.add_argument("--times", action="store_true", help="also list each datagram's receive time and size")
    a = ap.parse_args(argv)
    if a.cmd == "send":
        start = send(a.to, a.port, a.count, a.interval_us, a.size, a.burst)
        json.dump({"start_mono_ns": start}, sys.stdout)
    else:
        json.dump(recv(a.port, a.count, a.idle_timeout, a.times), sys.stdout)


if __name__ == "__main__":
    main()
