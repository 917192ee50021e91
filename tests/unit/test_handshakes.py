"""Handshake counters (tunnels/handshakes.py): each built-in's declared reading against what the real tunnel
printed (tests/data/handshakes/, captured from trials here: wireguard-go's and boringtun's UAPI replies and
`wg show`, the client logs of openvpn-udp, strongSwan and fastd), and the counting of handshakes from
readings, the part the recovery workload's `recovery.handshakes` stands on."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tunbench.errors import ConfigError
from tunbench.tunnels.adapter import CmdHandshakes, LogHandshakes, SocketHandshakes, load_adapter
from tunbench.tunnels.handshakes import (
    AGE_SLACK_S,
    HandshakeReader,
    HandshakeSampler,
    Reading,
    completed,
    log_count,
    numbers,
    reading_value,
    socket_reply,
)
from tunbench.tunnels.registry import builtin_names, parse_ref

DATA = Path(__file__).parent.parent / "data" / "handshakes"
S = 1_000_000_000


def _spec(name: str) -> LogHandshakes | CmdHandshakes | SocketHandshakes:
    hs = parse_ref(name).adapter.spec.handshakes
    assert hs is not None, f"{name} declares no handshake counter"
    return hs


def test_which_builtins_declare_a_handshake_counter() -> None:
    """The tunnels with a handshake declare how to count it; the others have none (a kernel encapsulation,
    static SAs, a proxy or ssh: no handshake to repeat, or none that shows), so theirs is absent, never 0."""
    declared = {n for n in builtin_names() if parse_ref(n).adapter.spec.handshakes is not None}
    assert declared == {
        "wireguard-go",
        "boringtun",
        "wireguard-kernel",
        "openvpn-udp",
        "openvpn-tcp",
        "strongswan",
        "fastd",
    }


def test_wireguard_go_uapi_reply_is_a_unix_time_in_nanoseconds() -> None:
    hs = _spec("wireguard-go")
    assert isinstance(hs, SocketHandshakes) and hs.value == "time" and hs.send == "get=1\n\n"
    nums = numbers(hs.pattern, (DATA / "wireguard-go-uapi.txt").read_text())
    assert nums == [pytest.approx(1795530790.210840338, abs=1e-6)]
    assert reading_value("time", nums, 1795530800.0) == nums[0]


def test_boringtun_uapi_reply_is_an_age() -> None:
    """boringtun 0.7 writes the time since the handshake (0 s and 514,939,600 ns, half a second after it)
    where wireguard-go writes the handshake's Unix time: its reading is the time that age implies."""
    hs = _spec("boringtun")
    assert isinstance(hs, SocketHandshakes) and hs.value == "age"
    nums = numbers(hs.pattern, (DATA / "boringtun-uapi.txt").read_text())
    assert nums == [pytest.approx(0.5149396)]
    assert reading_value("age", nums, 1000.0) == pytest.approx(999.4850604)
    # before its first handshake boringtun leaves the lines out: no handshake yet
    assert reading_value("age", numbers(hs.pattern, "public_key=aa\nrx_bytes=0\nerrno=0\n\n"), 1000.0) == 0


def test_wireguard_kernel_reads_wg_show() -> None:
    """`wg show DEV latest-handshakes` (the kernel's table; run against wireguard-go it printed the same
    second as the UAPI). Against boringtun it prints 0, the whole seconds of its age: why boringtun reads
    its socket."""
    hs = _spec("wireguard-kernel")
    assert isinstance(hs, CmdHandshakes) and hs.value == "time" and hs.ns == "client"
    assert numbers(hs.pattern, (DATA / "wireguard-go-wgshow.txt").read_text()) == [1795530790]
    assert numbers(hs.pattern, (DATA / "boringtun-wgshow.txt").read_text()) == [0]
    # a public key is base64 and may hold digits: only the number after the tab counts
    assert numbers(hs.pattern, "a1B2c3=\t17\nd4E5f6=\t0\n") == [17, 0]


@pytest.mark.parametrize(
    ("name", "log"),
    [
        ("openvpn-udp", "openvpn-udp-client.log"),
        ("openvpn-tcp", "openvpn-udp-client.log"),
        ("strongswan", "strongswan-client.log"),
        ("fastd", "fastd-client.log"),
    ],
)
def test_a_clients_log_after_bring_up_holds_one_handshake(name: str, log: str) -> None:
    """The client's log right after the tunnel came up: one handshake (and not, for OpenVPN, its "Peer
    Connection Initiated" nor "Initialization Sequence Completed"; for fastd, not its "connection ...
    established", which a new session after a rebind does not repeat)."""
    hs = _spec(name)
    assert isinstance(hs, LogHandshakes) and hs.role == "client"
    text = (DATA / log).read_text()
    assert log_count(hs.pattern, text) == 1
    assert log_count(hs.pattern, text + text) == 2


def _r(t_s: float, value: float | None) -> Reading:
    return Reading(int(t_s * S), value)


def test_a_count_grows_by_the_handshakes_after_the_moment() -> None:
    readings = [_r(0, 1), _r(0.5, 1), _r(1, 2), _r(1.5, 2), _r(2, 4)]
    assert completed("count", readings, int(0.7 * S)) == 3  # from the reading at 0.5 s
    assert completed("count", readings, int(1.2 * S)) == 2
    assert completed("count", readings, int(5 * S)) == 0  # nothing after it
    # a count that goes down started again (its process restarted): 1 -> 0 -> 1 is one handshake
    assert completed("count", [_r(0, 1), _r(1, 0), _r(2, 1)], int(0.5 * S)) == 1


def test_a_time_that_changes_is_a_new_handshake() -> None:
    t0, t1, t2 = 1795530790.2, 1795530811.3, 1795530833.9
    readings = [_r(0, t0), _r(0.5, t0), _r(1, t1), _r(1.5, t1), _r(2, t2)]
    assert completed("time", readings, int(0.2 * S)) == 2
    assert completed("time", readings, int(1.2 * S)) == 1
    # 0 is "none yet": the first handshake counts; one that vanishes and comes back is the same one
    assert completed("time", [_r(0, 0), _r(1, t0), _r(2, 0), _r(3, t0)], int(0.5 * S)) == 1
    assert completed("time", [_r(0, t0), _r(1, 0), _r(2, t0), _r(3, t1)], int(0.5 * S)) == 1


def test_an_age_counts_when_the_time_it_implies_moves_on() -> None:
    """Read again, an age implies the same time give or take the reading's own delay (a few ms here, once
    25 ms under load): that is no handshake; a new one moves it by seconds."""
    h0, h1 = 1795530413.8498, 1795530435.3269
    readings = [_r(0, h0), _r(0.5, h0 + 0.001), _r(1, h0 - 0.025), _r(1.5, h0 + AGE_SLACK_S / 2), _r(2, h1)]
    assert completed("age", readings, int(0.2 * S)) == 1
    assert completed("age", [_r(0, 0), _r(1, h0), _r(2, h0 + 0.002)], int(0.5 * S)) == 1  # none, then one


def test_unknown_is_none_not_zero() -> None:
    """No reading before the moment, or a last reading that failed: the figure is unknown. A failed reading
    in between is skipped."""
    assert completed("count", [_r(1, 1), _r(2, 2)], int(0.5 * S)) is None
    assert completed("count", [_r(0, None), _r(1, 1)], int(0.5 * S)) is None
    assert completed("count", [_r(0, 1), _r(1, 2), _r(2, None)], int(0.5 * S)) is None
    assert completed("count", [_r(0, 1), _r(1, None), _r(2, 2)], int(0.5 * S)) == 1
    assert completed("count", [], 0) is None


def test_numbers_skip_what_is_not_one() -> None:
    assert numbers(r"n=(\S+)", "n=3\nn=x\nn=4.5\n") == [3, 4.5]
    assert numbers(r"s=(\d+) ns=(\d+)", "s=2 ns=500000000") == [2.5]


def test_a_reader_that_fails_gives_a_gap() -> None:
    def boom() -> str | None:
        raise OSError("gone")

    assert HandshakeReader("count", boom, lambda t, _: 1.0).read().value is None
    assert HandshakeReader("count", lambda: None, lambda t, _: 1.0).read().value is None
    assert HandshakeReader("count", lambda: "x x", lambda t, _: float(len(t.split()))).read().value == 2.0


def test_the_sampler_reads_before_during_and_after() -> None:
    counts = iter(range(1000))
    reader = HandshakeReader("count", lambda: "", lambda t, _: float(next(counts)))
    with HandshakeSampler(reader, interval_s=0.01) as s:
        threading.Event().wait(0.1)
    values = [r.value for r in s.readings]
    assert len(values) >= 3 and values == sorted(values) and values[0] == 0
    assert s.since(s.readings[0].at_ns) == len(values) - 1


def test_socket_reply_reads_up_to_the_blank_line(tmp_path: Path) -> None:
    """A UAPI-like server that keeps the connection open after its reply: the read stops at "\\n\\n"."""
    path = str(tmp_path / "u.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    got: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            got.append(conn.recv(100))
            conn.sendall(b"last_handshake_time_sec=7\n")
            conn.sendall(b"errno=0\n\n")
            done.wait(5)  # open until the client is done

    t = threading.Thread(target=serve)
    t.start()
    try:
        assert socket_reply(path, "get=1\n\n", "\n\n") == "last_handshake_time_sec=7\nerrno=0\n\n"
    finally:
        done.set()
        t.join()
        srv.close()
    assert got == [b"get=1\n\n"]
    assert socket_reply(str(tmp_path / "none.sock"), "get=1\n\n", "\n\n") is None


HEAD = "name = 'x'\nlayer = 'l3'\n[target]\naddress = '{inner_server}'\n"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[handshakes]\nkind = 'cmd'\nrun = 'wg show'\npattern = 'x'\n", "needs one group"),
        ("[handshakes]\nkind = 'cmd'\nrun = 'wg show'\npattern = '(a)(b)(c)'\n", "needs one group"),
        ("[handshakes]\nkind = 'log'\npattern = '('\n", "invalid regular expression"),
        ("[handshakes]\nkind = 'log'\npattern = 'x'\n", "role 'client' has no daemon"),
        ("[handshakes]\nkind = 'socket'\npath = 'p'\npattern = '(\\d+)'\nvalue = 'rate'\n", "value"),
    ],
)
def test_a_bad_declaration_fails_at_load(tmp_path: Path, body: str, needle: str) -> None:
    p = tmp_path / "a.toml"
    p.write_text(HEAD + body)
    with pytest.raises(ConfigError) as e:
        load_adapter(p)
    assert needle in str(e.value) and "handshakes" in str(e.value)


def test_a_declaration_with_a_daemon_loads(tmp_path: Path) -> None:
    p = tmp_path / "a.toml"
    p.write_text(HEAD + "[client]\ndaemon = 'vpn'\n[handshakes]\nkind = 'log'\npattern = 'up'\n")
    assert isinstance(load_adapter(p).spec.handshakes, LogHandshakes)
