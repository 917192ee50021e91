"""Pure checks of the emulator's accuracy: measured samples in, verdicts with their numbers out.

Tolerances are statistical where the quantity is random (loss: a Wilson interval on the measured rate must
contain the configured probability) and the issue's targets where it is not (delay error, rate error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class DelayCheck:
    n: int
    expected_us: float
    p50_error_us: float
    p99_error_us: float
    max_error_us: float
    early: int  # packets delivered before their due time (must be 0)
    p50_bound_us: float
    p99_bound_us: float

    @property
    def passed(self) -> bool:
        return (
            self.n > 0
            and self.early == 0
            and abs(self.p50_error_us) <= self.p50_bound_us
            and abs(self.p99_error_us) <= self.p99_bound_us
        )


DELAY_P50_US = 20.0  # the emulator's delay-error targets (issue: one-way delay error <= 20 µs p50, 100 µs p99)
DELAY_P99_US = 100.0


def delay_check(
    owd_ns: list[int],
    expected_ns: float,
    *,
    p50_bound_us: float = DELAY_P50_US,
    p99_bound_us: float = DELAY_P99_US,
    slack_ns: float = 0.0,
) -> DelayCheck:
    """Error = measured one-way delay - expected. `slack_ns` tolerates clock reading noise for `early`."""
    if not owd_ns:
        return DelayCheck(0, expected_ns / 1e3, math.nan, math.nan, math.nan, 0, p50_bound_us, p99_bound_us)
    err = (np.asarray(owd_ns, dtype=float) - expected_ns) / 1e3
    return DelayCheck(
        n=len(owd_ns),
        expected_us=expected_ns / 1e3,
        p50_error_us=float(np.percentile(err, 50)),
        p99_error_us=float(np.percentile(err, 99)),
        max_error_us=float(err.max()),
        early=int((err < -slack_ns / 1e3).sum()),
        p50_bound_us=p50_bound_us,
        p99_bound_us=p99_bound_us,
    )


def wilson(k: int, n: int, confidence: float = 0.99) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (scipy's)."""
    if n == 0:
        return (math.nan, math.nan)
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


@dataclass(frozen=True)
class LossCheck:
    sent: int
    received: int
    expected: float
    ci_low: float
    ci_high: float
    mean_burst: float
    expected_burst: float | None
    burst_ci: tuple[float, float] = (math.nan, math.nan)

    @property
    def measured(self) -> float:
        return 1 - self.received / self.sent if self.sent else math.nan

    @property
    def passed(self) -> bool:
        ok = self.sent > 0 and self.ci_low <= self.expected <= self.ci_high
        if self.expected_burst is not None:
            ok = ok and self.burst_ci[0] <= self.expected_burst <= self.burst_ci[1]
        return ok


def loss_runs(seqs: list[int], sent: int) -> list[int]:
    """Lengths of the runs of consecutive lost sequence numbers in 0..sent-1."""
    got = received_mask(seqs, sent)
    runs: list[int] = []
    current = 0
    for ok in got:
        if ok:
            if current:
                runs.append(current)
            current = 0
        else:
            current += 1
    if current:
        runs.append(current)
    return runs


def received_mask(seqs: list[int], sent: int) -> np.ndarray:
    got = np.zeros(sent, dtype=bool)
    got[np.asarray([s for s in seqs if 0 <= s < sent], dtype=int)] = True
    return got


def regenerative_ci(got: np.ndarray, confidence: float) -> tuple[float, float]:
    """CI of the loss fraction for bursty (Markov) loss, where losses are not independent and a binomial
    interval would be far too narrow. Each cycle (a run of deliveries followed by a run of losses) is an
    independent regeneration of the Gilbert-Elliott chain, so the loss fraction is a ratio of cycle sums;
    its standard error comes from the delta method over cycles (the regenerative method)."""
    lost, cycle = [], []
    i, n = 0, len(got)
    while i < n:
        j = i
        while j < n and got[j]:
            j += 1
        k = j
        while k < n and not got[k]:
            k += 1
        lost.append(k - j)
        cycle.append(k - i)
        i = k
    b, c = np.asarray(lost, float), np.asarray(cycle, float)
    if len(c) < 3:
        return (math.nan, math.nan)
    ratio = b.sum() / c.sum()
    d = b - ratio * c
    se = math.sqrt(float((d**2).sum()) / (len(c) * (len(c) - 1))) / float(c.mean())
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    return (max(0.0, ratio - z * se), min(1.0, ratio + z * se))


def loss_check(
    seqs: list[int], sent: int, expected: float, *, expected_burst: float | None = None, confidence: float = 0.99
) -> LossCheck:
    """Bernoulli loss (no expected_burst): Wilson interval. Bursty loss: the regenerative interval."""
    got = received_mask(seqs, sent)
    received = int(got.sum())
    if expected_burst is None:
        lo, hi = wilson(sent - received, sent, confidence)
    else:
        lo, hi = regenerative_ci(got, confidence)
    runs = loss_runs(seqs, sent)
    mean = float(np.mean(runs)) if runs else 0.0
    ci = (math.nan, math.nan)
    if len(runs) > 1:
        z = float(sps.norm.ppf(0.5 + confidence / 2))
        half = z * float(np.std(runs, ddof=1)) / math.sqrt(len(runs))
        ci = (mean - half, mean + half)
    return LossCheck(sent, received, expected, lo, hi, mean, expected_burst, ci)


@dataclass(frozen=True)
class RateCheck:
    configured_bps: float
    seconds_bps: tuple[float, ...]
    bound: float = 0.01

    @property
    def worst_error(self) -> float:
        if not self.seconds_bps:
            return math.nan
        return max(abs(w / self.configured_bps - 1) for w in self.seconds_bps)

    @property
    def mean_bps(self) -> float:
        return float(np.mean(self.seconds_bps)) if self.seconds_bps else math.nan

    @property
    def passed(self) -> bool:
        return bool(self.seconds_bps) and self.worst_error <= self.bound


def ip_rate(payload_bps: float, payload_bytes: int) -> float:
    """UDP payload rate -> IP packet rate (the emulator serializes whole IP packets: +8 UDP, +20 IPv4)."""
    return payload_bps * (payload_bytes + 28) / payload_bytes
