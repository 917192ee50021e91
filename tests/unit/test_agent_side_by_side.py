"""Requests answered side by side: the agent answers commands and reads on a pool (a fleet's clients
settle at once on a client host), and a connection hands each answer to the caller that asked for it."""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from typing import Any

import pytest

from tunbench.host.channel import ChannelClosed
from tunbench.remote.connection import AgentConnection
from tunbench.remote.inventory.model import Host


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent opens a run scope (root)")
def test_a_short_command_is_answered_before_a_slow_one_sent_earlier() -> None:
    from tunbench.remote.agent import serve

    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    inp, out = os.fdopen(r_in, "r"), os.fdopen(w_out, "w")
    t = threading.Thread(target=serve, args=(inp, out), daemon=True)
    t.start()
    send, recv = os.fdopen(w_in, "w", buffering=1), os.fdopen(r_out, "r")

    def ask(req_id: int, op: str, **args: Any) -> None:
        send.write(json.dumps({"id": req_id, "op": op, "args": args}) + "\n")

    ask(1, "place_open", tag="sbs", netns=None, roles=["server"], link_prefix="tb0000aa")
    opened = json.loads(recv.readline())
    assert opened["ok"], opened
    place = opened["result"]["place"]
    run = {"place": place, "stdin": None, "timeout_s": 10, "check": True, "what": "", "env": None}
    ask(2, "run", argv=["sh", "-c", "sleep 3; echo slow"], **run)
    ask(3, "run", argv=["echo", "quick"], **run)
    answers = [json.loads(recv.readline()) for _ in range(2)]
    # the quick command's answer overtakes the slow one's, sent before it
    assert [a["id"] for a in answers] == [3, 2], answers
    assert answers[0]["result"]["stdout"] == "quick\n" and answers[1]["result"]["stdout"] == "slow\n"
    ask(4, "place_close", place=place)
    assert json.loads(recv.readline())["id"] == 4
    send.close()
    t.join(timeout=30)
    assert not t.is_alive()


class Chan:
    """The far end of a connection: answers come back in the order the test puts them in."""

    def __init__(self) -> None:
        self.sent: queue.Queue[dict[str, Any]] = queue.Queue()
        self.lines: queue.Queue[bytes | None] = queue.Queue()

    def send(self, line: bytes) -> None:
        self.sent.put(json.loads(line))

    def readline(self, deadline: float) -> bytes:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ChannelClosed("no answer in time") from None
        if line is None:
            raise ChannelClosed("the connection closed")
        return line

    def close(self) -> None:
        pass


def connection(chan: Chan) -> AgentConnection:
    host = Host("h9", "h9", None, None, None, (), None, None, frozenset({"client"}), "tunbench", "x:1")
    conn = AgentConnection.__new__(AgentConnection)
    AgentConnection.__init__(conn, host, None, __import__("pathlib").Path("/nonexistent"))  # type: ignore[arg-type]
    conn._chan = chan  # type: ignore[assignment]
    return conn


def test_each_caller_gets_its_own_answer_whoever_reads_it() -> None:
    chan = Chan()
    conn = connection(chan)
    got: dict[str, Any] = {}

    def call(name: str) -> None:
        got[name] = conn.call("read", place="p1", rel=name)

    threads = [threading.Thread(target=call, args=(n,)) for n in ("a", "b", "c")]
    for th in threads:
        th.start()
    reqs = [chan.sent.get(timeout=5) for _ in threads]
    for r in reversed(reqs):  # answered last first
        chan.lines.put(json.dumps({"id": r["id"], "ok": True, "result": r["args"]["rel"] * 2}).encode())
    for th in threads:
        th.join(timeout=5)
    assert got == {"a": "aa", "b": "bb", "c": "cc"}


def test_an_answer_given_up_on_is_dropped_and_a_closed_channel_fails_every_caller() -> None:
    chan = Chan()
    conn = connection(chan)
    with pytest.raises(Exception, match="no answer in time"):
        conn.call("read", wait_s=0.2, place="p1", rel="x")
    late = chan.sent.get(timeout=1)
    chan.lines.put(json.dumps({"id": late["id"], "ok": True, "result": "late"}).encode())
    errors: list[BaseException] = []

    def call() -> None:
        try:
            conn.call("read", wait_s=5, place="p1", rel="y")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for th in threads:
        th.start()
    for _ in threads:
        chan.sent.get(timeout=5)
    chan.lines.put(None)  # the connection ends
    chan.lines.put(None)
    for th in threads:
        th.join(timeout=10)
    assert len(errors) == 2 and all("closed" in str(e) for e in errors), errors
    assert conn.lost
