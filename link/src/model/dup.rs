//! Duplication: with probability `p` a packet is followed by an identical
//! copy (same departure time).

use super::{chance, Fifo, Rng, Stage, StageCounters};
use crate::packet::Packet;
use crate::time::Instant;

#[derive(Debug)]
pub struct Duplicate {
    p: f64,
    rng: Rng,
    out: Fifo,
    duplicated: u64,
}

impl Duplicate {
    pub fn new(p: f64, rng: Rng) -> Self {
        Duplicate {
            p,
            rng,
            out: Fifo::default(),
            duplicated: 0,
        }
    }

    /// Duplicate with probability `p` from now on (a scheduled step).
    pub fn retune(&mut self, p: f64) {
        self.p = p;
    }
}

impl Stage for Duplicate {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        if chance(&mut self.rng, self.p) {
            self.duplicated += 1;
            self.out.push(pkt.clone());
        }
        self.out.push(pkt);
    }
    super::fifo_output!();
    fn counters(&self) -> StageCounters {
        StageCounters {
            duplicated: self.duplicated,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "dup"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rng_for;
    use crate::model::testutil::{periodic, run_stage, within};

    #[test]
    fn duplicate_count_within_binomial_ci() {
        let n = 200_000u64;
        let p = 0.005;
        let mut d = Duplicate::new(p, rng_for(8, 8));
        let out = run_stage(&mut d, &periodic(n, 100, 1_000));
        let dups = d.counters().duplicated;
        assert_eq!(out.len() as u64, n + dups);
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(within(dups as f64, n as f64 * p, sd, 5.0), "{dups}");
        // copies follow their original immediately, same time
        let mut seen_dup = 0;
        for w in out.windows(2) {
            if w[0].0 == w[1].0 {
                assert_eq!(w[0].1, w[1].1);
                seen_dup += 1;
            }
        }
        assert_eq!(seen_dup, dups);
    }
}
