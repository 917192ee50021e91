"""scripts/cross_check.py's hand packet-rate search is written again from the rules docs/workloads-packets.md
states, apart from tunbench's `zero_loss_search`: over the same simulated tunnels the two must probe the same
rates and find the same one, so a disagreement measured on a real tunnel is the tunnel's or the harness's, not
a difference between the searches."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tunbench.workloads.udp import StepOutcome, zero_loss_search

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SIZE = 64


@pytest.fixture
def cross_check(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("cross_check")


def path(capacity_pps: float, overload_share: float):  # type: ignore[no-untyped-def]
    """A tunnel that carries `capacity_pps` without loss and, offered more, delivers `overload_share` of it
    (an overloaded userspace tunnel loses more than its excess: its sender takes the CPU it needs)."""

    def step(pps: float) -> tuple[float, float]:
        if pps <= capacity_pps:
            return 0.0, pps
        delivered = overload_share * capacity_pps
        return 1.0 - delivered / pps, delivered

    return step


@pytest.mark.parametrize("capacity", [800.0, 5_000.0, 22_000.0, 43_788.0, 185_000.0, 2e6])
@pytest.mark.parametrize("overload_share", [1.0, 0.9, 0.6])
def test_the_hand_search_probes_what_tunbench_probes(
    cross_check: ModuleType, capacity: float, overload_share: float
) -> None:
    step = path(capacity, overload_share)
    hand = cross_check.search(step)
    hand_probes = [s[0] for s in cross_check.STEPS]

    tb_probes: list[float] = []

    def measure(rate_bps: float) -> StepOutcome:
        tb_probes.append(rate_bps / (8 * SIZE))
        loss, delivered = step(rate_bps / (8 * SIZE))
        return StepOutcome(loss, delivered * 8 * SIZE)

    found = zero_loss_search(measure, min_bps=1000.0 * 8 * SIZE, max_bps=1e6 * 8 * SIZE)
    assert hand_probes == pytest.approx(tb_probes, rel=1e-9)
    tb = step(found.rate_bps / (8 * SIZE))[1] if found.best else 0.0  # delivered at the rate found
    assert hand == pytest.approx(tb, rel=1e-9)
