"""The packet workloads without a network: the pps ladder (its search over packets/s, the rung's figures, the
step it marks for the CPU per packet, compare's rows for it) and the MTU cliff (detection, bisection, the
route parsers, and the known answer: each built-in adapter's configured MTU), on synthetic steps."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tunbench.errors import TrialError
from tunbench.host.cgroup import CpuUsage
from tunbench.monitor.cost import cpu_per_unit
from tunbench.monitor.sampler import RoleCost, RoleSample
from tunbench.report.compare.gate import Gate
from tunbench.report.compare.metrics import declared_metrics
from tunbench.results import TrialRecord
from tunbench.workloads import REGISTRY, mtu, pps
from tunbench.workloads.mtu import (
    HEADERS,
    INNER_HEADERS,
    Cliff,
    SizePoint,
    expected_payload,
    find_cliff,
    known_answer,
    link_mtu,
    refine,
    route_device,
    sweep_sizes,
)
from tunbench.workloads.pps import PPS_CPU, PPS_RATE, PpsOptions, PpsWorkload
from tunbench.workloads.udp import UdpResult, UdpRun, udp_client_argv

BUILTIN = Path(__file__).parent.parent.parent / "src" / "tunbench" / "tunnels" / "builtin"
UNDERLAY_MTU = 1500  # the veth pair's MTU (topology/), the underlay every built-in tunnel runs over


class Clock:
    """A Context.mark that counts instead of reading the clock: each step's edges are two ticks apart."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def fake_ctx(options: Any, *, address: str = "198.19.0.1", run: Any = None) -> Any:
    """Enough of a Context for the workloads' measure(): options, a direction, a target, a marking clock."""
    return SimpleNamespace(
        options=options,
        direction="up",
        title="t",
        target=SimpleNamespace(address=address, port=5201),
        mark=Clock(),
        client=SimpleNamespace(run=run),
    )


def udp_run(
    *, offered_pps: float, size: int, capacity_pps: float, sender_pps: float, span: tuple[float, float]
) -> UdpRun:
    """One simulated step: the sender reaches min(offered, its own ceiling), the tunnel carries up to its
    capacity and drops the rest."""
    sent = min(offered_pps, sender_pps)
    delivered = min(sent, capacity_pps)
    packets = round(sent)
    lost = packets - round(delivered)
    raw = json.dumps({"end": {"cpu_utilization_percent": {"host_total": 40.0, "remote_total": 20.0}}})
    result = UdpResult(sent * 8 * size, lost / packets, delivered * 8 * size, 0.01, packets, lost)
    return UdpRun(result, raw, span)


def simulate_ladder(monkeypatch: pytest.MonkeyPatch, capacity: dict[int, float], sender_pps: float) -> Any:
    steps: list[tuple[int, float]] = []

    def run_udp(ctx: Any, *, rate_bps: float, size: int, **_: Any) -> UdpRun:
        steps.append((size, rate_bps))
        start, end = ctx.mark(), ctx.mark()
        offered = rate_bps / (8 * size)
        return udp_run(
            offered_pps=offered, size=size, capacity_pps=capacity[size], sender_pps=sender_pps, span=(start, end)
        )

    monkeypatch.setattr(pps, "run_udp", run_udp)
    opts = PpsOptions(sizes=sorted(capacity), max_steps=12, tolerance=0.02)
    return PpsWorkload().measure(fake_ctx(opts)), steps


def test_the_ladder_finds_each_sizes_packet_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    capacity = {64: 180_000.0, 512: 120_000.0, 1400: 60_000.0}
    m, steps = simulate_ladder(monkeypatch, capacity, sender_pps=10e6)
    for size, cap in capacity.items():
        found = m.metrics[PPS_RATE.key(size=size)]
        assert 0.98 * cap / 1.02 <= found <= cap  # within the search's tolerance, never above what was carried
        assert m.metrics[pps.PPS_SENDER_LIMITED.key(size=size)] == 0.0
        assert m.metrics[pps.PPS_LOSS.key(size=size)] <= 0.001
        assert m.metrics[pps.PPS_GENERATOR_CPU.key(size=size, role="client")] == 40.0
    assert {s for s, _ in steps} == set(capacity)
    # one part per size: the step at the rate found, its packets in millions (CPU seconds / unit = µs/packet)
    assert len(m.parts) == len(capacity)
    for part, size in zip(m.parts, sorted(capacity), strict=True):
        assert part.keys == {r: PPS_CPU.key(size=size, role=r) for r in ("client", "server")}
        assert part.end - part.start == 1.0
        assert part.units * 1e6 == pytest.approx(m.metrics[PPS_RATE.key(size=size)], rel=1e-3)


def test_a_sender_below_the_tunnel_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator's ceiling, not the tunnel's: every step passes at what iperf3 could send."""
    m, _ = simulate_ladder(monkeypatch, {64: 900_000.0}, sender_pps=120_000.0)
    assert m.metrics[PPS_RATE.key(size=64)] == pytest.approx(120_000.0, rel=1e-3)
    assert m.metrics[pps.PPS_SENDER_LIMITED.key(size=64)] == 1.0


def test_a_size_that_loses_at_the_floor_has_no_part(monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = simulate_ladder(monkeypatch, {64: 10.0}, sender_pps=10e6)  # below min_pps: even the floor loses
    assert m.metrics[PPS_RATE.key(size=64)] == 0.0
    assert m.parts == []


def test_cpu_per_packet_reads_the_samples_at_the_steps_edges() -> None:
    """Marked edges fall on samples, so the step's CPU is the cgroup's difference there, not a blend of the
    steps around it."""
    series = [
        RoleSample(0.0, 0.0, 0.0, 0, 0.0, 0.0),
        RoleSample(1.0, 0.5, 0.1, 0, 0.4, 0.1),  # the step's start
        RoleSample(2.0, 1.5, 0.6, 0, 1.2, 0.5),  # its end: 0.8 user + 0.4 sys by the cgroup
        RoleSample(3.0, 1.6, 0.6, 0, 5.0, 2.0),
    ]
    cost = RoleCost(CpuUsage(1.6, 0.6), 0, 2, CpuUsage(5.0, 2.0), series)
    assert cpu_per_unit(cost, 1.0, 2.0, 0.1) == pytest.approx(1.2 / 0.1)
    assert cpu_per_unit(cost, 1.0, 2.0, 0.0) is None
    none = RoleCost(CpuUsage(0.0, 0.0), 0, 0, None, series)  # `direct`: no tunnel process
    assert cpu_per_unit(none, 1.0, 2.0, 0.1) is None


def test_the_ladders_table_has_a_column_pair_per_size() -> None:
    cols = pps.ladder_columns([64, 1400])
    assert [c.header for c in cols] == ["64 B", "µs", "1400 B", "µs"]
    assert cols[1].key == f"{PPS_CPU.key(size=64, role='client')}|{PPS_CPU.key(size=64, role='server')}"


def record(label: str, metrics: dict[str, float | None]) -> TrialRecord:
    t = TrialRecord(1, "wireguard-go", label, "lan", "pps", 1, "up", 1, {})
    t.metrics.update(metrics)
    return t


def test_compare_judges_the_ladders_rates_and_cpu_per_packet_in_the_wide_tier() -> None:
    trials = [record("a", {PPS_RATE.key(size=64): 1e5, PPS_CPU.key(size=64, role="client"): 9.0})]
    rows = {m.name: m for m in declared_metrics(trials)}
    rate, cpu = rows[PPS_RATE.key(size=64)], rows[PPS_CPU.key(size=64, role="client")]
    assert (rate.kind, rate.higher_is_better, cpu.kind, cpu.higher_is_better) == ("throughput", True, "cpu", False)
    assert Gate().tier(rate) == "wide" and Gate().tier(cpu) == "wide"
    assert rate.title == "pps 64 B" and cpu.title == "CPU/packet 64 B client"
    assert declared_metrics(trials, ("latency",)) == []


def test_pps_options_refuse_a_ceiling_below_the_floor() -> None:
    with pytest.raises(ValueError):
        PpsOptions(min_pps=1e5, max_pps=1e3)
    with pytest.raises(ValueError):
        PpsOptions(sizes=[8])


# ---- the MTU cliff ---------------------------------------------------------------------------------------


def test_find_cliff_on_synthetic_steps() -> None:
    flat = [SizePoint(s, 2000.0) for s in (1200, 1300, 1400)]
    assert find_cliff(flat, 0.5) is None
    steps = [*flat, SizePoint(1500, 0.0, "Message too long")]
    assert find_cliff(steps, 0.5) == Cliff(1400, 1500, 1.0)
    # fragmenting at a saturating rate: the rate halves, a shallower cliff
    frag = [SizePoint(1400, 80_000.0), SizePoint(1472, 79_000.0), SizePoint(1500, 30_000.0)]
    cliff = find_cliff(list(reversed(frag)), 0.5)
    assert cliff is not None and (cliff.last_good, cliff.first_bad) == (1472, 1500)
    assert cliff.depth == pytest.approx(1 - 30_000 / 79_000)
    assert find_cliff([SizePoint(1400, 0.0), SizePoint(1500, 0.0)], 0.5) is None  # never started: not a cliff


def test_refine_finds_the_edge_to_the_byte() -> None:
    probed: list[int] = []

    def passes(size: int) -> bool:
        probed.append(size)
        return size <= 1392

    assert refine(Cliff(1360, 1400, 1.0), passes) == (1392, 1393)
    assert len(probed) == len(set(probed)) <= 6


def test_sweep_sizes_end_at_the_stop() -> None:
    assert sweep_sizes(1200, 1300, 40) == [1200, 1240, 1280, 1300]
    assert sweep_sizes(1200, 1280, 40) == [1200, 1240, 1280]


def test_route_parsers() -> None:
    assert route_device("198.19.0.1 dev tb1-wg0 src 198.19.0.2 uid 0 \n    cache \n") == "tb1-wg0"
    assert route_device("RTNETLINK answers: Network is unreachable") is None
    line = "7: tb1-wg0: <POINTOPOINT,NOARP,UP,LOWER_UP> mtu 1420 qdisc fq_codel state UNKNOWN mode DEFAULT"
    assert link_mtu(line) == 1420
    assert link_mtu("") is None


def adapter_mtus() -> dict[str, int]:
    """The MTU each built-in adapter sets on its device (its `mtu` parameter), by tunnel, from its file."""
    out = {}
    for path in sorted(BUILTIN.glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        if "mtu" in (doc.get("params") or {}):
            out[doc["name"]] = int(doc["params"]["mtu"])
    return out


def test_the_header_table_covers_the_adapters_it_names() -> None:
    mtus = adapter_mtus()
    assert {"wireguard-go", "wireguard-kernel", "boringtun", "gre", "ipip", "vxlan"} <= set(mtus)
    for name in set(HEADERS) - {"direct"}:
        assert name in mtus, f"{name}: HEADERS names a tunnel whose adapter sets no mtu"


@pytest.mark.parametrize("tunnel", sorted(set(HEADERS) - {"direct"}))
def test_each_tunnels_configured_mtu_fits_the_underlay_with_its_stated_headers(tunnel: str) -> None:
    """The known answer, from the adapters' files: an inner packet of the tunnel's MTU plus its outer headers
    fits the 1500-byte underlay, so the cliff is the tunnel's own MTU (minus 28 bytes of IPv4 and UDP)."""
    mtu_ = adapter_mtus()[tunnel]
    payload, outer = known_answer(tunnel, mtu_)
    assert outer <= UNDERLAY_MTU
    assert payload == mtu_ - 28


def simulate_cliff(monkeypatch: pytest.MonkeyPatch, path_mtu: int, route_mtu: int, address: str = "198.19.0.1") -> Any:
    """The mtu workload against a path that carries datagrams up to `path_mtu` and refuses the rest
    (EMSGSIZE), with the client's route through a device of `route_mtu`."""
    family = "ipv6" if ":" in address else "ipv4"
    sizes: list[int] = []

    def run_udp(ctx: Any, *, rate_bps: float, size: int, dont_fragment: bool, **_: Any) -> UdpRun:
        assert dont_fragment
        sizes.append(size)
        if size + INNER_HEADERS[family] > path_mtu:
            raise TrialError("iperf3 UDP client exit 1: iperf3: unable to write to stream socket: Message too long")
        pps_ = rate_bps / (8 * size)
        return UdpRun(UdpResult(rate_bps, 0.0, rate_bps, 0.0, round(pps_), 0), "{}", (0.0, 1.0))

    def run(argv: list[str], **_: Any) -> Any:
        if argv[:3] == ["ip", "route", "get"]:
            return SimpleNamespace(returncode=0, stdout=f"{argv[3]} dev tb1-t0 src 198.19.0.2 uid 0\n")
        return SimpleNamespace(returncode=0, stdout=f"9: tb1-t0: <POINTOPOINT,UP> mtu {route_mtu} qdisc noqueue\n")

    monkeypatch.setattr(mtu, "run_udp", run_udp)
    m = mtu.MtuWorkload().measure(fake_ctx(mtu.MtuOptions(), address=address, run=run))
    return m, sizes


@pytest.mark.parametrize(("tunnel", "tunnel_mtu"), [("direct", UNDERLAY_MTU), *sorted(adapter_mtus().items())])
def test_the_cliff_lands_on_each_adapters_configured_mtu(
    monkeypatch: pytest.MonkeyPatch, tunnel: str, tunnel_mtu: int
) -> None:
    m, sizes = simulate_cliff(monkeypatch, tunnel_mtu, tunnel_mtu)
    if tunnel_mtu - 28 > mtu.MtuOptions().stop:
        assert m.metrics[mtu.MTU_FOUND.name] == 0.0  # past the default sweep: no cliff, not a wrong one
        return
    assert m.metrics[mtu.MTU_MAX_PAYLOAD.name] == tunnel_mtu - 28
    assert m.metrics[mtu.MTU_PATH.name] == tunnel_mtu
    assert m.metrics[mtu.MTU_ERROR.name] == 0.0
    assert m.metrics[mtu.MTU_DEPTH.name] == 1.0
    assert len(sizes) == len(set(sizes))  # no size measured twice


def test_a_path_narrower_than_the_route_shows_as_an_error_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PMTU black hole: the route says 1420, a hop further on carries 1400."""
    m, _ = simulate_cliff(monkeypatch, 1400, 1420)
    assert m.metrics[mtu.MTU_MAX_PAYLOAD.name] == 1372
    assert m.metrics[mtu.MTU_EXPECTED.name] == 1392
    assert m.metrics[mtu.MTU_ERROR.name] == -20.0


def test_ipv6_takes_its_own_inner_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = simulate_cliff(monkeypatch, 1420, 1420, address="2001:2::1")
    assert m.metrics[mtu.MTU_MAX_PAYLOAD.name] == 1420 - 48 == expected_payload(1420, "ipv6")


def test_dont_fragment_reaches_iperf3s_argv() -> None:
    calls: list[list[str]] = []

    def spawn(argv: list[str], **_: Any) -> Any:
        return SimpleNamespace(stop=lambda: None)

    def run(argv: list[str], **_: Any) -> Any:
        calls.append(list(argv))
        return SimpleNamespace(returncode=1, stdout='{"error": "unable to write to stream socket: Message too long"}')

    ctx = fake_ctx(None, run=run)
    ctx.server = SimpleNamespace(spawn=spawn, listening=lambda proto="tcp": {5201}, port_open=lambda *a: True)
    ctx.server_port = 5201
    from tunbench.workloads import iperf3, udp

    iperf3_wait = iperf3.wait_listening
    try:
        iperf3.wait_listening = lambda *a, **k: None  # type: ignore[assignment]
        with pytest.raises(TrialError, match="Message too long"):
            udp.run_udp(ctx, rate_bps=1e6, size=1500, duration_s=1, tag="t", buffer="", dont_fragment=True)
    finally:
        iperf3.wait_listening = iperf3_wait  # type: ignore[assignment]
    assert calls[0][-1] == "--dont-fragment"
    assert calls[0][:-1] == udp_client_argv("198.19.0.1", 5201, rate_bps=1e6, size=1500, duration_s=1, reverse=False)


def test_both_workloads_are_registered_with_their_tables() -> None:
    assert REGISTRY["pps"].own_table and REGISTRY["mtu"].own_table
    assert REGISTRY["pps"].one_way and REGISTRY["mtu"].one_way


def test_the_cliff_refuses_a_reverse_test_with_dont_fragment() -> None:
    """iperf3 sets DF on its client's socket only: a `down` sweep would measure fragmentation, not the cliff."""
    ctx = fake_ctx(mtu.MtuOptions())
    ctx.direction = "down"
    with pytest.raises(TrialError, match="client's socket only"):
        mtu.MtuWorkload().measure(ctx)


def test_a_refused_datagram_is_not_tried_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def run_udp(ctx: Any, *, size: int, **_: Any) -> UdpRun:
        calls.append(size)
        raise TrialError("iperf3 UDP client exit 1: iperf3: unable to write to stream socket: Message too long")

    monkeypatch.setattr(mtu, "run_udp", run_udp)
    point = mtu.MtuWorkload()._step(fake_ctx(None), mtu.MtuOptions(), 1500)
    assert (point.delivered_pps, calls) == (0.0, [1500]) and mtu.REFUSED in point.note
