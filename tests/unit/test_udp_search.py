"""The UDP workloads without a network: the rate parser, the iperf3 UDP parser on real outputs, and the
RFC 2544 zero-loss search against simulated tunnels."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunbench.errors import TrialError
from tunbench.units import parse_rate
from tunbench.workloads.udp import StepOutcome, parse_udp, udp_client_argv, zero_loss_search

DATA = Path(__file__).parent.parent / "data"


@pytest.mark.parametrize(
    ("text", "bps"),
    [("500mbit", 5e8), ("1gbit", 1e9), ("1.5Gbit", 1.5e9), ("200M", 2e8), ("64k", 64e3), ("1000", 1e3), (2e6, 2e6)],
)
def test_parse_rate(text: str | float, bps: float) -> None:
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["", "fast", "0", "-5mbit", "5 parsecs"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_udp_argv_never_uses_the_default_rate() -> None:
    argv = udp_client_argv("198.19.0.1", 5201, rate_bps=5e8, size=1200, duration_s=2.4, reverse=True, buffer="2M")
    assert argv[argv.index("-b") + 1] == "500000000"
    assert argv[argv.index("-l") + 1] == "1200"
    assert "-u" in argv and "-R" in argv
    assert argv[argv.index("-t") + 1] == "2"  # iperf3 reads whole seconds (0.5 would mean forever)
    assert argv[argv.index("-w") + 1] == "2M"
    assert "-w" not in udp_client_argv("x", 1, rate_bps=1e6, size=64, duration_s=0.4, reverse=False)


def test_parse_udp_real_output_with_loss() -> None:
    r = parse_udp((DATA / "iperf3-udp-up-direct-loss.json").read_text())
    assert r.packets == 104143 and r.lost_packets == 7438
    assert r.loss == pytest.approx(7438 / 104143)
    assert r.sent_bps == pytest.approx(499_868_654, rel=1e-3)
    assert r.delivered_bps == pytest.approx(8 * 116_046_000 / 2.000071)  # what arrived, over the sender's seconds
    assert 0 < r.jitter_ms < 1
    w = parse_udp((DATA / "iperf3-udp-up-wireguard-go-loss.json").read_text())
    assert w.loss > r.loss
    # the receiver saw 104,090 of the 104,129 datagrams sent (the rest still in the tunnel at the end) and ran
    # 51 ms longer than the sender: what arrived (66,135,600 B) over the sender's 2.000089 s, neither the sent
    # rate times (1 - loss) nor the receiver's own rate
    assert w.delivered_bps == pytest.approx(8 * 66_135_600 / 2.000089)
    assert w.delivered_bps < w.sent_bps * (1 - w.loss) and w.delivered_bps > 257_876_800


def test_parse_udp_errors() -> None:
    with pytest.raises(TrialError, match="unable to connect"):
        parse_udp('{"error": "unable to connect to server"}')
    with pytest.raises(TrialError):
        parse_udp("garbage")


def tunnel(capacity_bps: float, calls: list[float] | None = None, noise: float = 0.0):  # type: ignore[no-untyped-def]
    """A simulated tunnel: no loss up to its capacity, then it drops the excess."""

    def measure(rate: float) -> StepOutcome:
        if calls is not None:
            calls.append(rate)
        delivered = min(rate, capacity_bps)
        return StepOutcome(loss=max(0.0, 1 - delivered / rate) + noise, delivered_bps=delivered)

    return measure


@pytest.mark.parametrize("capacity", [3e6, 87e6, 412e6, 1.3e9])
def test_search_converges_within_tolerance_and_steps(capacity: float) -> None:
    calls: list[float] = []
    res = zero_loss_search(tunnel(capacity, calls), min_bps=1e6, max_bps=2e9, max_steps=8, tolerance=0.05)
    assert res.converged
    assert len(res.steps) <= 8 and len(calls) == len(res.steps)
    assert capacity / 1.05 <= res.rate_bps <= capacity  # never above what passes, within 5% below
    best = res.best
    assert best is not None and best.passed and best.rate_bps == res.rate_bps
    assert all(s.passed == (s.rate_bps <= capacity) for s in res.steps)


def test_search_ceiling_passes_in_one_step() -> None:
    res = zero_loss_search(tunnel(5e9), min_bps=1e6, max_bps=2e9)
    assert res.rate_bps == 2e9 and len(res.steps) == 1 and res.converged


def test_search_nothing_passes() -> None:
    res = zero_loss_search(tunnel(1e9, noise=0.01), min_bps=1e6, max_bps=2e9, max_steps=30)
    assert res.rate_bps == 0.0 and res.best is None and res.converged
    assert res.steps[-1].rate_bps == 1e6  # it tried the floor before giving up


def test_search_plain_loss_callable_and_step_bound() -> None:
    """`measure` may return a bare loss; without the delivered hint it bisects, and stops at max_steps."""
    calls: list[float] = []

    def measure(rate: float) -> float:
        calls.append(rate)
        return 0.0 if rate <= 123e6 else 0.2

    res = zero_loss_search(measure, min_bps=1e6, max_bps=2e9, max_steps=4, tolerance=0.001)
    assert len(calls) == 4 and not res.converged
    assert res.rate_bps <= 123e6
    full = zero_loss_search(measure, min_bps=1e6, max_bps=2e9, max_steps=20, tolerance=0.05)
    assert full.converged and 123e6 / 1.05 <= full.rate_bps <= 123e6


def test_search_threshold_allows_small_loss() -> None:
    def measure(rate: float) -> float:
        return 0.0005 if rate <= 500e6 else 0.05

    res = zero_loss_search(measure, min_bps=1e6, max_bps=1e9, threshold=0.001, max_steps=12)
    assert 500e6 / 1.05 <= res.rate_bps <= 500e6
    strict = zero_loss_search(measure, min_bps=1e6, max_bps=1e9, threshold=0.0, max_steps=12)
    assert strict.rate_bps == 0.0


def test_search_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError):
        zero_loss_search(tunnel(1e9), min_bps=2e9, max_bps=1e9)
    with pytest.raises(ValueError):
        zero_loss_search(tunnel(1e9), min_bps=1e6, max_bps=1e9, max_steps=0)


def test_a_failed_delivered_rate_guess_halves_at_most() -> None:
    """A tunnel whose capacity wobbles: 40,000 packets/s, 3% less during the second step, so the 0.98 guess
    loses a little. The limit is near: the search halves at most and climbs back, to 35,947 in 6 steps,
    not to the midpoint down to the floor (6,261 packets/s: such a search ended at 22,239)."""
    size, capacity = 64 * 8, 40_000.0
    step_no = 0

    def measure(rate_bps: float) -> StepOutcome:
        nonlocal step_no
        step_no += 1
        cap = capacity * (0.97 if step_no == 2 else 1.0)
        pps = rate_bps / size
        delivered = min(pps, cap)
        return StepOutcome(1.0 - delivered / pps, delivered * size)

    r = zero_loss_search(measure, min_bps=1000.0 * size, max_bps=1e6 * size, max_steps=6)
    probes = [s.rate_bps / size for s in r.steps]
    assert probes[1] == pytest.approx(0.98 * capacity) and not r.steps[1].passed  # the guess, under 3% less
    assert probes[2] == pytest.approx(0.49 * capacity)  # half of it, not sqrt(1000 * 39,200) = 6,261
    assert r.rate_bps / size > 0.85 * capacity
