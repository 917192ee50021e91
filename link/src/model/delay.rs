//! One-way delay with optional jitter.
//!
//! Each packet gets `delay + X`, where X is uniform on [-jitter, +jitter] or
//! normal with sd = jitter; the total is truncated at zero. Packets stay in
//! order: a packet never departs before its predecessor (its departure is
//! raised to the predecessor's), so with jitter the mean delay is slightly
//! above `delay` when packets are closer together than the jitter. Reordering
//! is the separate `reorder` stage's job.

use super::{std_normal, uniform01, Rng, Stage};
use crate::packet::Packet;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum JitterDist {
    Uniform,
    Normal,
}

impl JitterDist {
    pub fn as_str(self) -> &'static str {
        match self {
            JitterDist::Uniform => "uniform",
            JitterDist::Normal => "normal",
        }
    }
}

/// The delay stage's parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DelayParams {
    pub delay: Duration,
    pub jitter: Duration,
    pub dist: JitterDist,
}

/// Draws per-packet delays.
#[derive(Debug)]
pub struct DelaySampler {
    params: DelayParams,
    rng: Rng,
}

impl DelaySampler {
    pub fn new(params: DelayParams, rng: Rng) -> Self {
        DelaySampler { params, rng }
    }

    pub fn sample(&mut self) -> Duration {
        let DelayParams {
            delay,
            jitter,
            dist,
        } = self.params;
        if jitter == Duration::ZERO {
            return delay;
        }
        let j = jitter.as_nanos() as f64;
        let x = match dist {
            JitterDist::Uniform => (2.0 * uniform01(&mut self.rng) - 1.0) * j,
            JitterDist::Normal => std_normal(&mut self.rng) * j,
        };
        let total = delay.as_nanos() as f64 + x;
        Duration::from_nanos(total.max(0.0).round() as u64)
    }
}

#[derive(Debug)]
pub struct Delay {
    sampler: DelaySampler,
    q: VecDeque<Packet>,
    last_departure: Instant,
}

impl Delay {
    pub fn new(sampler: DelaySampler) -> Self {
        Delay {
            sampler,
            q: VecDeque::new(),
            last_departure: Instant::ZERO,
        }
    }

    /// Take `params` from now on (a scheduled step). Packets already inside
    /// keep their departure times; later ones never leave before them (a
    /// shorter delay does not reorder).
    pub fn retune(&mut self, params: DelayParams) {
        self.sampler.params = params;
    }
}

impl Stage for Delay {
    fn push(&mut self, mut pkt: Packet, _now: Instant) {
        let dep = (pkt.t + self.sampler.sample()).max(self.last_departure);
        self.last_departure = dep;
        pkt.t = dep;
        self.q.push_back(pkt);
    }
    fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        if self.q.front()?.t <= now {
            self.q.pop_front()
        } else {
            None
        }
    }
    fn next_event(&self) -> Option<Instant> {
        self.q.front().map(|p| p.t)
    }
    fn held(&self) -> usize {
        self.q.len()
    }
    fn name(&self) -> &'static str {
        "delay"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rng_for;
    use crate::model::testutil::{periodic, run_stage, within};

    fn params(delay: Duration, jitter: Duration, dist: JitterDist) -> DelayParams {
        DelayParams {
            delay,
            jitter,
            dist,
        }
    }

    fn stats(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt())
    }

    fn samples(dist: JitterDist, delay_ms: u64, jitter_ms: u64, n: usize) -> Vec<f64> {
        let mut s = DelaySampler::new(
            params(
                Duration::from_millis(delay_ms),
                Duration::from_millis(jitter_ms),
                dist,
            ),
            rng_for(11, 3),
        );
        (0..n).map(|_| s.sample().as_nanos() as f64 / 1e6).collect()
    }

    #[test]
    fn fixed_delay_is_exact() {
        let mut d = Delay::new(DelaySampler::new(
            params(
                Duration::from_millis(50),
                Duration::ZERO,
                JitterDist::Uniform,
            ),
            rng_for(1, 1),
        ));
        let out = run_stage(&mut d, &periodic(100, 100, 1_000));
        assert!(out
            .iter()
            .all(|(id, t)| t.as_nanos() == id * 1_000 + 50_000_000));
    }

    #[test]
    fn uniform_jitter_mean_and_sd() {
        // U[50-10, 50+10] ms: mean 50, sd 20/sqrt(12) = 5.7735. n = 200k:
        // se(mean) = 5.77/sqrt(n) = 0.0129 ms; se(sd) ~ sd*sqrt((k-1)/(4n))
        // with kurtosis k = 1.8 for the uniform: 0.0058 ms. Accept 5 se.
        let n = 200_000;
        let xs = samples(JitterDist::Uniform, 50, 10, n);
        let (m, sd) = stats(&xs);
        let sd_true = 20.0 / 12f64.sqrt();
        assert!(
            within(m, 50.0, sd_true / (n as f64).sqrt(), 5.0),
            "mean {m}"
        );
        let se_sd = sd_true * (0.8 / (4.0 * n as f64)).sqrt();
        assert!(within(sd, sd_true, se_sd, 5.0), "sd {sd}");
        assert!(xs.iter().all(|&x| (40.0..=60.0).contains(&x)));
    }

    #[test]
    fn normal_jitter_mean_and_sd() {
        // N(50, 5) ms, truncation at 0 is 10 sd away (negligible). n = 200k:
        // se(mean) = 5/sqrt(n) = 0.0112 ms, se(sd) = 5/sqrt(2n) = 0.0079 ms.
        let n = 200_000;
        let xs = samples(JitterDist::Normal, 50, 5, n);
        let (m, sd) = stats(&xs);
        assert!(within(m, 50.0, 5.0 / (n as f64).sqrt(), 5.0), "mean {m}");
        assert!(
            within(sd, 5.0, 5.0 / (2.0 * n as f64).sqrt(), 5.0),
            "sd {sd}"
        );
        // about 68.3% within one sd: binomial se = sqrt(.683*.317/n) ~ 0.001
        let inside = xs.iter().filter(|&&x| (45.0..=55.0).contains(&x)).count() as f64 / n as f64;
        assert!(within(inside, 0.6827, 0.00104, 5.0), "{inside}");
    }

    #[test]
    fn normal_jitter_truncated_at_zero() {
        let xs = samples(JitterDist::Normal, 1, 10, 10_000);
        assert!(xs.iter().all(|&x| x >= 0.0));
        assert!(xs.contains(&0.0));
    }

    #[test]
    fn jitter_never_reorders() {
        // Packets 100 us apart with +-20 ms jitter would reorder massively
        // if delays were independent; FIFO clamping keeps the order.
        for dist in [JitterDist::Uniform, JitterDist::Normal] {
            let mut d = Delay::new(DelaySampler::new(
                params(Duration::from_millis(30), Duration::from_millis(20), dist),
                rng_for(2, 2),
            ));
            let out = run_stage(&mut d, &periodic(20_000, 100, 100_000));
            assert_eq!(out.len(), 20_000);
            assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        }
    }

    #[test]
    fn sparse_packets_see_the_sampled_distribution() {
        // 50 ms apart with +-5 ms jitter: clamping never binds, so the
        // measured one-way delays are the sampler's (mean 20 ms).
        let mut d = Delay::new(DelaySampler::new(
            params(
                Duration::from_millis(20),
                Duration::from_millis(5),
                JitterDist::Uniform,
            ),
            rng_for(4, 4),
        ));
        let n = 20_000u64;
        let gap = 50_000_000;
        let out = run_stage(&mut d, &periodic(n, 100, gap));
        let delays: Vec<f64> = out
            .iter()
            .map(|(id, t)| (t.as_nanos() - id * gap) as f64 / 1e6)
            .collect();
        let (m, _) = stats(&delays);
        let se = 10.0 / 12f64.sqrt() / (n as f64).sqrt();
        assert!(within(m, 20.0, se, 5.0), "{m}");
    }
}
