//! Reordering: with probability `p` a packet is held back until `gap` later
//! packets have passed it (it then departs right behind the `gap`-th), or
//! until `MAX_HOLD` has elapsed, whichever comes first. At most one packet is
//! held at a time. Without this stage the pipeline never reorders.

use super::{chance, Fifo, Rng, Stage, StageCounters};
use crate::packet::Packet;
use crate::time::{Duration, Instant};

/// Longest a held packet waits for `gap` successors (keeps a quiet flow
/// from stalling on its last packet).
pub const MAX_HOLD: Duration = Duration::from_millis(10);

/// The reorder stage's parameters.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ReorderParams {
    /// Probability that a packet is held back.
    pub p: f64,
    /// How many later packets pass a held one (at least 1).
    pub gap: u32,
}

#[derive(Debug)]
struct Held {
    pkt: Packet,
    passed: u32,
    deadline: Instant,
}

#[derive(Debug)]
pub struct Reorder {
    p: f64,
    gap: u32,
    rng: Rng,
    held: Option<Held>,
    out: Fifo,
    reordered: u64,
}

impl Reorder {
    pub fn new(params: ReorderParams, rng: Rng) -> Self {
        assert!(params.gap >= 1);
        Reorder {
            p: params.p,
            gap: params.gap,
            rng,
            held: None,
            out: Fifo::default(),
            reordered: 0,
        }
    }

    /// Take `params` from now on (a scheduled step); a packet held keeps
    /// waiting for the new gap.
    pub fn retune(&mut self, params: ReorderParams) {
        self.p = params.p;
        self.gap = params.gap;
    }

    fn release(&mut self, t: Instant) {
        if let Some(mut h) = self.held.take() {
            if h.passed > 0 {
                self.reordered += 1;
            }
            h.pkt.t = t;
            self.out.push(h.pkt);
        }
    }

    fn release_expired(&mut self, t: Instant) {
        if let Some(d) = self.held.as_ref().map(|h| h.deadline) {
            if d <= t {
                self.release(d);
            }
        }
    }
}

impl Stage for Reorder {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        let t = pkt.t;
        self.release_expired(t);
        if self.held.is_none() && chance(&mut self.rng, self.p) {
            self.held = Some(Held {
                pkt,
                passed: 0,
                deadline: t + MAX_HOLD,
            });
            return;
        }
        self.out.push(pkt);
        if let Some(h) = self.held.as_mut() {
            h.passed += 1;
            if h.passed >= self.gap {
                self.release(t);
            }
        }
    }
    fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        self.release_expired(now);
        self.out.pop_ready(now)
    }
    fn next_event(&self) -> Option<Instant> {
        let h = self.held.as_ref().map(|h| h.deadline);
        match (self.out.next_event(), h) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn held(&self) -> usize {
        self.out.len() + usize::from(self.held.is_some())
    }
    fn counters(&self) -> StageCounters {
        StageCounters {
            reordered: self.reordered,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "reorder"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rng_for;
    use crate::model::testutil::{periodic, run_stage, within};

    #[test]
    fn held_packet_departs_after_gap_successors() {
        let mut r = Reorder::new(ReorderParams { p: 1.0, gap: 3 }, rng_for(1, 1));
        let out = run_stage(&mut r, &periodic(8, 100, 1_000));
        // p = 1: 0 held, 1 2 3 pass, 0 follows 3; then 4 held, 5 6 7 pass, 4.
        let ids: Vec<u64> = out.iter().map(|o| o.0).collect();
        assert_eq!(ids, vec![1, 2, 3, 0, 5, 6, 7, 4]);
        assert_eq!(r.counters().reordered, 2);
        // the released packet leaves with the packet that completed the gap
        assert_eq!(out[3].1, Instant::from_nanos(3_000));
    }

    #[test]
    fn hold_times_out() {
        let mut r = Reorder::new(ReorderParams { p: 1.0, gap: 5 }, rng_for(1, 1));
        let out = run_stage(&mut r, &[(0, 100, Instant::ZERO)]);
        assert_eq!(out, vec![(0, Instant::ZERO + MAX_HOLD)]);
        assert_eq!(r.counters().reordered, 0); // nobody overtook it
    }

    #[test]
    fn reorder_count_matches_probability() {
        // A packet is eligible only when none is held; with gap 2 and
        // p = 2%, the fraction of packets reordered is p / (1 + gap * p)
        // (renewal argument: each hold takes 1 + gap packets, each free
        // packet starts one with prob p). Binomial-ish 5 se bound.
        let n = 200_000u64;
        let (p, gap) = (0.02, 2u32);
        let mut r = Reorder::new(ReorderParams { p, gap }, rng_for(5, 5));
        let out = run_stage(&mut r, &periodic(n, 100, 1_000));
        assert_eq!(out.len() as u64, n);
        let expect = p / (1.0 + gap as f64 * p);
        let got = r.counters().reordered as f64 / n as f64;
        let se = (expect * (1.0 - expect) / n as f64).sqrt();
        assert!(within(got, expect, se, 5.0), "{got} vs {expect}");
        // out of order departures equal the reordered count
        let late = out
            .iter()
            .scan(0u64, |max, (id, _)| {
                let late = *id < *max;
                *max = (*max).max(*id);
                Some(late)
            })
            .filter(|&l| l)
            .count() as u64;
        assert_eq!(late, r.counters().reordered);
        assert!(out.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn zero_probability_keeps_order() {
        let mut r = Reorder::new(ReorderParams { p: 0.0, gap: 3 }, rng_for(1, 1));
        let out = run_stage(&mut r, &periodic(1000, 100, 10));
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
