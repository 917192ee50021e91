//! Random loss: Bernoulli (i.i.d.) or Gilbert-Elliott (bursty).

use super::{chance, Fifo, Rng, Stage, StageCounters};
use crate::packet::Packet;
use crate::time::Instant;

/// Gilbert-Elliott parameters (all probabilities are fractions in [0, 1]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct GilbertElliott {
    /// P(good -> bad) per packet.
    pub p: f64,
    /// P(bad -> good) per packet.
    pub r: f64,
    /// Loss probability in the bad state.
    pub h: f64,
    /// Loss probability in the good state.
    pub k: f64,
}

impl GilbertElliott {
    /// Long-run loss rate: pi_bad * h + pi_good * k, pi_bad = p / (p + r).
    pub fn stationary_loss(&self) -> f64 {
        if self.p + self.r == 0.0 {
            return self.k; // never leaves the good state
        }
        let pi_bad = self.p / (self.p + self.r);
        pi_bad * self.h + (1.0 - pi_bad) * self.k
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LossModel {
    Bernoulli(f64),
    GilbertElliott(GilbertElliott),
}

/// Decides, per packet, whether it is lost. Kept separate from the stage so
/// the process itself can be tested on millions of draws cheaply.
#[derive(Debug)]
pub struct LossProcess {
    model: LossModel,
    rng: Rng,
    bad: bool,
}

impl LossProcess {
    pub fn new(model: LossModel, rng: Rng) -> Self {
        LossProcess {
            model,
            rng,
            bad: false,
        }
    }

    /// True if the next packet is lost. Gilbert-Elliott: the loss draw uses
    /// the current state, then the chain makes its transition.
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::Bernoulli(p) => chance(&mut self.rng, p),
            LossModel::GilbertElliott(ge) => {
                let lost = chance(&mut self.rng, if self.bad { ge.h } else { ge.k });
                let flip = chance(&mut self.rng, if self.bad { ge.r } else { ge.p });
                if flip {
                    self.bad = !self.bad;
                }
                lost
            }
        }
    }

    pub fn in_bad_state(&self) -> bool {
        self.bad
    }
}

/// Loss as a pipeline stage: survivors pass through at their arrival time.
#[derive(Debug)]
pub struct Loss {
    process: LossProcess,
    /// False while a schedule has taken the loss away.
    active: bool,
    out: Fifo,
    dropped: u64,
}

impl Loss {
    pub fn new(model: LossModel, rng: Rng) -> Self {
        Loss {
            process: LossProcess::new(model, rng),
            active: true,
            out: Fifo::default(),
            dropped: 0,
        }
    }

    /// Take `model` from now on (a scheduled step); `None` takes the loss
    /// away (packets pass).
    pub fn retune(&mut self, model: Option<LossModel>) {
        self.active = model.is_some();
        if let Some(m) = model {
            self.process.model = m;
        }
    }
}

impl Stage for Loss {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        if self.active && self.process.lose() {
            self.dropped += 1;
        } else {
            self.out.push(pkt);
        }
    }
    super::fifo_output!();
    fn counters(&self) -> StageCounters {
        StageCounters {
            dropped_loss: self.dropped,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "loss"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rng_for;
    use crate::model::testutil::{periodic, run_stage, within};

    #[test]
    fn bernoulli_rate_within_binomial_ci() {
        // n = 1e6 draws at p = 1%: binomial sd of the count is
        // sqrt(n p (1-p)) ~ 99.5; accept +-5 sd (false-failure odds ~ 6e-7,
        // and the seed is fixed anyway).
        let n = 1_000_000u64;
        let p = 0.01;
        let mut lp = LossProcess::new(LossModel::Bernoulli(p), rng_for(42, 1));
        let lost = (0..n).filter(|_| lp.lose()).count() as f64;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(within(lost, n as f64 * p, sd, 5.0), "lost {lost}");
    }

    #[test]
    fn bernoulli_edges() {
        let mut all = LossProcess::new(LossModel::Bernoulli(1.0), rng_for(1, 1));
        let mut none = LossProcess::new(LossModel::Bernoulli(0.0), rng_for(1, 1));
        assert!((0..10_000).all(|_| all.lose()));
        assert!((0..10_000).all(|_| !none.lose()));
    }

    /// Gilbert-Elliott with h = 1, k = 0 ("simple Gilbert"): the loss rate is
    /// the bad-state occupancy pi = p / (p + r) and loss bursts are the bad
    /// sojourns, geometric with mean 1 / r.
    #[test]
    fn gilbert_elliott_stationary_loss_and_burst_length() {
        let ge = GilbertElliott {
            p: 0.01,
            r: 0.3,
            h: 1.0,
            k: 0.0,
        };
        let n = 2_000_000u64;
        let mut lp = LossProcess::new(LossModel::GilbertElliott(ge), rng_for(7, 1));
        let mut lost = 0u64;
        let mut bursts = 0u64;
        let mut prev = false;
        for _ in 0..n {
            let l = lp.lose();
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        let pi = ge.p / (ge.p + ge.r);
        assert!((ge.stationary_loss() - pi).abs() < 1e-12);
        // The state indicator is a two-state Markov chain with lag-1
        // autocorrelation lambda = 1 - p - r, so the variance of its sample
        // mean is pi (1 - pi) / n * (1 + lambda) / (1 - lambda). Accept 5 sd.
        let lambda = 1.0 - ge.p - ge.r;
        let se = (pi * (1.0 - pi) / n as f64 * (1.0 + lambda) / (1.0 - lambda)).sqrt();
        let rate = lost as f64 / n as f64;
        assert!(
            within(rate, pi, se, 5.0),
            "loss rate {rate} vs {pi} (se {se})"
        );
        // Burst lengths are geometric(r): mean 1/r, sd sqrt(1 - r)/r; the
        // mean of `bursts` of them has se = sd / sqrt(bursts). Accept 5 se.
        let mean_burst = lost as f64 / bursts as f64;
        let se_burst = (1.0 - ge.r).sqrt() / ge.r / (bursts as f64).sqrt();
        assert!(
            within(mean_burst, 1.0 / ge.r, se_burst, 5.0),
            "mean burst {mean_burst} vs {} (se {se_burst}, {bursts} bursts)",
            1.0 / ge.r
        );
    }

    #[test]
    fn gilbert_elliott_general_h_k() {
        // h < 1, k > 0: loss rate = pi h + (1 - pi) k. Loss draws add
        // Bernoulli noise on top of the chain; a 5-sd bound using the chain's
        // variance inflated by the Bernoulli term is conservative.
        let ge = GilbertElliott {
            p: 0.05,
            r: 0.2,
            h: 0.6,
            k: 0.01,
        };
        let n = 2_000_000u64;
        let mut lp = LossProcess::new(LossModel::GilbertElliott(ge), rng_for(9, 1));
        let lost = (0..n).filter(|_| lp.lose()).count() as f64;
        let expect = ge.stationary_loss();
        let pi = ge.p / (ge.p + ge.r);
        let lambda = 1.0 - ge.p - ge.r;
        let chain_var = (ge.h - ge.k).powi(2) * pi * (1.0 - pi) * (1.0 + lambda) / (1.0 - lambda);
        let draw_var = expect * (1.0 - expect);
        let se = ((chain_var + draw_var) / n as f64).sqrt();
        assert!(within(lost / n as f64, expect, se, 5.0));
    }

    #[test]
    fn stage_counts_drops_and_passes_in_order() {
        let mut s = Loss::new(LossModel::Bernoulli(0.25), rng_for(3, 1));
        let arr = periodic(10_000, 1000, 1_000);
        let out = run_stage(&mut s, &arr);
        assert_eq!(out.len() as u64 + s.counters().dropped_loss, 10_000);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        // survivors leave at their arrival time
        assert!(out.iter().all(|(id, t)| t.as_nanos() == id * 1_000));
    }

    #[test]
    fn same_seed_same_pattern() {
        let run = |seed| {
            let mut lp = LossProcess::new(
                LossModel::GilbertElliott(GilbertElliott {
                    p: 0.02,
                    r: 0.25,
                    h: 1.0,
                    k: 0.0,
                }),
                rng_for(seed, 1),
            );
            (0..10_000).map(|_| lp.lose()).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
