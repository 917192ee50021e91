"""`connect` on several client hosts: its bring-ups taken in turn over the site's client machines, and the
metrics per host beside the aggregate; on this machine alone nothing of that appears. A fake bring-up
stands for the site's (no namespaces, no hosts)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tunbench.errors import TrialError, TunnelError
from tunbench.results import TrialRecord
from tunbench.units import Window
from tunbench.workloads.base import BringupContext
from tunbench.workloads.connect import ConnectOptions, ConnectWorkload, host_metrics, hosts_in, turns


def test_turns_go_round_the_hosts_and_keep_the_local_names() -> None:
    assert turns(2, ()) == [("u1", None), ("u2", None)]
    assert turns(2, ("a", "b.lab", "c")) == [
        ("h1u1", "a"),
        ("h2u1", "b.lab"),
        ("h3u1", "c"),
        ("h1u2", "a"),
        ("h2u2", "b.lab"),
        ("h3u2", "c"),
    ]


def test_host_metrics_and_the_hosts_they_name() -> None:
    m = host_metrics("b.lab", [0.3, 0.1, 0.2], 1)
    assert m == {
        "connect.host.b.lab.p50_s": pytest.approx(0.2),
        "connect.host.b.lab.max_s": 0.3,
        "connect.host.b.lab.count": 3.0,
        "connect.host.b.lab.failures": 1.0,
    }
    none = host_metrics("a", [], 2)
    assert none["connect.host.a.p50_s"] is None and none["connect.host.a.failures"] == 2.0
    assert hosts_in({**m, **none, "connect.p50_s": 0.2}) == ["a", "b.lab"]


def context(
    machines: tuple[str, ...], setup_s: dict[str | None, float], fail: tuple[str | None, ...] = ()
) -> BringupContext:
    """A BringupContext whose bring-ups take setup_s[machine] (plus 0.01 per earlier one there) and fail on
    the machines in `fail`; it logs (name, machine) in order on `ctx.log`."""
    log: list[tuple[str, str | None]] = []

    @contextlib.contextmanager
    def bring_up(name: str, machine: str | None) -> Iterator[SimpleNamespace]:
        n = sum(1 for _, m in log if m == machine)
        log.append((name, machine))
        if machine in fail:
            raise TunnelError(f"handshake timed out\nlog of {name}")
        yield SimpleNamespace(setup_s=setup_s[machine] + 0.01 * n)

    ctx = BringupContext(
        bring_up=bring_up,  # type: ignore[arg-type]
        ledger=None,  # type: ignore[arg-type]
        workdir=Path("/nonexistent"),
        title="connect",
        window=Window(1, 0),
        options=ConnectOptions(count=3),
        machines=machines,
    )
    ctx.log = log  # type: ignore[attr-defined]
    return ctx


def test_on_several_hosts_each_gets_count_bring_ups_and_its_own_metrics() -> None:
    ctx = context(("h2", "h3", "h4"), {"h2": 0.1, "h3": 0.2, "h4": 0.3}, fail=("h4",))
    m = ConnectWorkload().measure(ctx)
    assert [mach for _, mach in ctx.log] == ["h2", "h3", "h4"] * 3  # interleaved
    assert m.metrics["connect.count"] == 6 and m.metrics["connect.failures"] == 3
    assert m.metrics["connect.host.h2.p50_s"] == pytest.approx(0.11)
    assert m.metrics["connect.host.h3.max_s"] == pytest.approx(0.22)
    assert m.metrics["connect.host.h3.count"] == 3 and m.metrics["connect.host.h3.failures"] == 0
    assert m.metrics["connect.host.h4.count"] == 0 and m.metrics["connect.host.h4.failures"] == 3
    assert m.metrics["connect.host.h4.p50_s"] is None
    assert m.metrics["connect.max_s"] == pytest.approx(0.22)
    assert [t for _, t in m.series["connect_s"]] == pytest.approx([0.1, 0.2, 0.11, 0.21, 0.12, 0.22])
    assert m.artifacts["connect-errors.txt"].decode().splitlines() == ["h4: handshake timed out"] * 3
    assert m.params["client_hosts"] == ["h2", "h3", "h4"]


def test_on_this_machine_alone_nothing_per_host_appears() -> None:
    ctx = context((), {None: 0.1})
    m = ConnectWorkload().measure(ctx)
    assert ctx.log == [("u1", None), ("u2", None), ("u3", None)]  # type: ignore[attr-defined]
    assert not [k for k in m.metrics if k.startswith("connect.host.")]
    assert "client_hosts" not in m.params and m.metrics["connect.count"] == 3


def test_no_bring_up_anywhere_fails_the_trial() -> None:
    with pytest.raises(TrialError, match="no bring-up of 3 succeeded: handshake timed out"):
        ConnectWorkload().measure(context((), {None: 0.1}, fail=(None,)))


def test_the_table_shows_each_hosts_p50_only_with_several_hosts() -> None:
    w = ConnectWorkload()
    rec = TrialRecord(1, "wireguard-go", "wg", "lan", "connect", 1, "-", 1, {})
    rec.metrics = {**host_metrics("h2", [0.1], 0), **host_metrics("h3", [0.2], 0)}
    assert [c.key for c in w.table_columns([rec])][-2:] == ["connect.host.h2.p50_s", "connect.host.h3.p50_s"]
    rec.metrics = host_metrics("h2", [0.1], 0)
    assert w.table_columns([rec]) == list(w.columns)
    assert ConnectWorkload.on_hosts()
