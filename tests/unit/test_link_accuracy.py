"""The emulator's accuracy verdicts, on synthetic measurements with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from tunbench.link import accuracy


def test_delay_check_errors_and_early_packets() -> None:
    owd = [10_000_000 + 5_000] * 98 + [10_000_000 + 80_000, 9_990_000]
    chk = accuracy.delay_check(owd, 10e6)
    assert chk.p50_error_us == pytest.approx(5.0)
    assert chk.early == 1 and not chk.passed
    ok = accuracy.delay_check([10_000_000 + 10_000] * 100, 10e6)
    assert ok.passed and ok.p99_error_us == pytest.approx(10.0)
    slow = accuracy.delay_check([10_000_000 + 30_000] * 100, 10e6)
    assert not slow.passed


def test_wilson_matches_known_values() -> None:
    lo, hi = accuracy.wilson(10, 1000, 0.95)
    # reference: Wilson 95% interval for 10/1000 is about [0.00544, 0.01831]
    assert lo == pytest.approx(0.00544, abs=2e-4) and hi == pytest.approx(0.01831, abs=2e-4)
    assert accuracy.wilson(0, 100)[0] == 0.0


def test_loss_runs() -> None:
    assert accuracy.loss_runs([0, 1, 4, 5, 9], 10) == [2, 3]
    assert accuracy.loss_runs([1, 2], 4) == [1, 1]
    assert accuracy.loss_runs([], 3) == [3]


def test_loss_check_accepts_the_truth_and_rejects_a_wrong_rate() -> None:
    rng = np.random.default_rng(5)
    sent = 20000
    seqs = [i for i in range(sent) if rng.random() >= 0.01]
    assert accuracy.loss_check(seqs, sent, 0.01).passed
    assert not accuracy.loss_check(seqs, sent, 0.02).passed


def test_loss_check_burst_length_of_a_gilbert_elliott_chain() -> None:
    rng = np.random.default_rng(11)
    p, r = 0.01, 0.25
    bad = False
    seqs = []
    for i in range(40000):
        bad = (rng.random() >= r) if bad else (rng.random() < p)
        if not bad:
            seqs.append(i)
    chk = accuracy.loss_check(seqs, 40000, p / (p + r), expected_burst=1 / r)
    assert chk.passed, chk
    assert not accuracy.loss_check(seqs, 40000, p / (p + r), expected_burst=8.0).passed


def test_rate_check() -> None:
    assert accuracy.RateCheck(100e6, (99.5e6, 100.4e6)).passed
    assert not accuracy.RateCheck(100e6, (98e6, 100e6)).passed
    assert not accuracy.RateCheck(100e6, ()).passed
    assert accuracy.ip_rate(1400.0, 1400) == pytest.approx(1428.0)
