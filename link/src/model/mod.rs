//! Impairment models. Pure code: every method takes `now` and no model reads
//! a clock or sleeps.
//!
//! Contract shared by all stages (see [`Stage`]):
//! * `push(pkt, now)`: `pkt.t` is the exact time the packet reached this
//!   stage (`pkt.t <= now`); the stage uses `pkt.t`, not `now`, so a late
//!   caller gets the same schedule as a punctual one.
//! * `pop_ready(now)` returns packets whose departure time is `<= now`, in
//!   departure order, with `pkt.t` set to that departure time.
//! * `next_event()` is the earliest time `pop_ready` would return something.
//!
//! A stage's parameters are its own type (`delay::DelayParams`,
//! `loss::LossModel`, `nat::NatRule`...), taken by its `retune` method; the
//! models know nothing of the SPEC they come from (`spec` converts it).

pub mod delay;
pub mod dup;
pub mod gate;
pub mod loss;
pub mod nat;
pub mod queue;
pub mod rate;
pub mod reorder;
pub mod trace;

use crate::packet::Packet;
use crate::time::Instant;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Drop and event counters a stage keeps about itself.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StageCounters {
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    /// Lost because the link was down (a scheduled outage).
    pub dropped_outage: u64,
    /// Rewritten by a NAT rule (a rebind).
    pub rewritten: u64,
    /// Lost because they were sent to the client's address from before a
    /// rebind (the old binding is gone).
    pub dropped_stale: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// Dropped by a targeted fault (`faults`).
    pub dropped_fault: u64,
}

impl StageCounters {
    pub fn add(&mut self, o: &StageCounters) {
        self.dropped_loss += o.dropped_loss;
        self.dropped_queue += o.dropped_queue;
        self.dropped_outage += o.dropped_outage;
        self.rewritten += o.rewritten;
        self.dropped_stale += o.dropped_stale;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.dropped_fault += o.dropped_fault;
    }
}

pub trait Stage: Send {
    /// Hand a packet to the stage (it may keep, delay, drop or copy it).
    fn push(&mut self, pkt: Packet, now: Instant);
    /// The next packet due at or before `now`, if any.
    fn pop_ready(&mut self, now: Instant) -> Option<Packet>;
    /// When `pop_ready` will next return a packet (`None`: nothing held).
    fn next_event(&self) -> Option<Instant>;
    /// Packets currently held.
    fn held(&self) -> usize;
    fn counters(&self) -> StageCounters {
        StageCounters::default()
    }
    fn name(&self) -> &'static str;
    /// The schedule starts now (time 0 of a trace).
    fn start(&mut self, _origin: Instant) {}
    /// Where a bottleneck reports its packets' time in it and its queue's
    /// changes (others: nothing to report).
    fn watch_queue(&mut self, _watch: &crate::occupancy::QueueWatch, _from: Instant) {}
}

/// The PRNG every model uses.
/// The three [`Stage`] methods of a stage whose packets wait in `self.out`
/// (a [`Fifo`]) until their own time: written once for loss, duplication,
/// the outage gate and the NAT.
macro_rules! fifo_output {
    () => {
        fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
            self.out.pop_ready(now)
        }
        fn next_event(&self) -> Option<Instant> {
            self.out.next_event()
        }
        fn held(&self) -> usize {
            self.out.len()
        }
    };
}
pub(crate) use fifo_output;

pub type Rng = Xoshiro256PlusPlus;

/// An independent, reproducible stream per (seed, direction, stage), so that
/// enabling one impairment does not change the random pattern of another.
pub fn rng_for(seed: u64, stream: u64) -> Rng {
    // splitmix64 finaliser over the pair, so nearby seeds give unrelated streams.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Rng::seed_from_u64(z)
}

/// Uniform in [0, 1) with 53 random bits.
pub fn uniform01(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// True with probability `p` (`p <= 0` never, `p >= 1` always).
pub fn chance(rng: &mut Rng, p: f64) -> bool {
    p > 0.0 && (p >= 1.0 || uniform01(rng) < p)
}

/// Standard normal sample (Box-Muller; one of the pair is discarded to keep
/// the stream stateless and reproducible). Not `rand_distr`: its Ziggurat
/// sampler draws a different number of values per sample, so the same
/// `--seed` would give a different pattern than earlier versions.
pub fn std_normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - uniform01(rng); // (0, 1]: ln() is finite
    let u2 = uniform01(rng);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// FIFO of packets already due at their `t` (used by stages that release
/// packets without holding them).
#[derive(Debug, Default)]
pub(crate) struct Fifo(std::collections::VecDeque<Packet>);

impl Fifo {
    pub fn push(&mut self, p: Packet) {
        self.0.push_back(p);
    }
    pub fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        if self.0.front()?.t <= now {
            self.0.pop_front()
        } else {
            None
        }
    }
    pub fn next_event(&self) -> Option<Instant> {
        self.0.front().map(|p| p.t)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::time::{Clock, Manual};

    /// Drive one stage on a Manual clock: push `arrivals` (id, len, time),
    /// jumping the clock to the earlier of the next arrival and the stage's
    /// `next_event()`, and return every departure (id, departure time).
    pub fn run_stage(
        stage: &mut dyn Stage,
        arrivals: &[(u64, usize, Instant)],
    ) -> Vec<(u64, Instant)> {
        let clock = Manual::new(Instant::ZERO);
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let next_arrival = arrivals.get(i).map(|a| a.2);
            let next_dep = stage.next_event();
            clock.set(match (next_arrival, next_dep) {
                (None, None) => break,
                (Some(a), None) => a,
                (None, Some(d)) => d,
                (Some(a), Some(d)) => a.min(d),
            });
            let now = clock.now();
            while let Some(p) = stage.pop_ready(now) {
                assert!(p.t <= now);
                out.push((p.id, p.t));
            }
            while i < arrivals.len() && arrivals[i].2 <= now {
                let (id, len, t) = arrivals[i];
                stage.push(Packet::synthetic(id, len, t), now);
                i += 1;
            }
            while let Some(p) = stage.pop_ready(now) {
                out.push((p.id, p.t));
            }
        }
        out
    }

    /// `n` packets of `len` bytes, one every `gap`.
    pub fn periodic(n: u64, len: usize, gap_ns: u64) -> Vec<(u64, usize, Instant)> {
        (0..n)
            .map(|i| (i, len, Instant::from_nanos(i * gap_ns)))
            .collect()
    }

    /// Normal-approximation bound: `k` standard errors.
    pub fn within(x: f64, mean: f64, se: f64, k: f64) -> bool {
        (x - mean).abs() <= k * se
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_streams_are_reproducible_and_distinct() {
        let mut a = rng_for(1, 7);
        let mut b = rng_for(1, 7);
        let mut c = rng_for(1, 8);
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert_eq!(x, y);
        assert_ne!(x, z);
    }

    #[test]
    fn chance_edges() {
        let mut r = rng_for(0, 0);
        assert!((0..1000).all(|_| !chance(&mut r, 0.0)));
        assert!((0..1000).all(|_| chance(&mut r, 1.0)));
    }
}
