//! The stages of one direction, chained in the fixed order
//! loss -> bottleneck (queue + rate) -> delay/jitter -> reorder -> duplicate.
//! Absent impairments add no stage; an empty pipeline passes packets
//! through unchanged at their arrival time.

use crate::model::delay::{Delay, DelaySampler};
use crate::model::dup::Duplicate;
use crate::model::loss::Loss;
use crate::model::rate::Bottleneck;
use crate::model::reorder::Reorder;
use crate::model::{rng_for, Fifo, Stage, StageCounters};
use crate::packet::Packet;
use crate::spec::DirSpec;
use crate::time::{Duration, Instant};

/// Direction index used to derive independent RNG streams.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    AtoB,
    BtoA,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::AtoB => "a2b",
            Direction::BtoA => "b2a",
        }
    }
    fn index(self) -> u64 {
        match self {
            Direction::AtoB => 1,
            Direction::BtoA => 2,
        }
    }
}

pub struct Pipeline {
    stages: Vec<Box<dyn Stage>>,
    /// Used only when there are no stages.
    passthrough: Fifo,
}

impl Pipeline {
    pub fn build(spec: &DirSpec, seed: u64, dir: Direction) -> Self {
        // stream = direction * 16 + stage: one RNG per (direction, stage)
        let rng = |stage: u64| rng_for(seed, dir.index() * 16 + stage);
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        if let Some(model) = spec.loss {
            stages.push(Box::new(Loss::new(model, rng(1))));
        }
        if let Some(rate) = spec.rate_bps {
            stages.push(Box::new(Bottleneck::new(rate, spec.queue)));
        }
        if spec.delay > Duration::ZERO || spec.jitter > Duration::ZERO {
            stages.push(Box::new(Delay::new(DelaySampler::new(
                spec.delay,
                spec.jitter,
                spec.jitter_dist,
                rng(3),
            ))));
        }
        if spec.reorder > 0.0 {
            stages.push(Box::new(Reorder::new(
                spec.reorder,
                spec.reorder_gap,
                rng(4),
            )));
        }
        if spec.dup > 0.0 {
            stages.push(Box::new(Duplicate::new(spec.dup, rng(5))));
        }
        Pipeline {
            stages,
            passthrough: Fifo::default(),
        }
    }

    pub fn stage_names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Hand a packet to the first stage; `pkt.t` is its arrival time.
    /// Call [`Pipeline::poll`] afterwards to collect what is due.
    pub fn push(&mut self, pkt: Packet, now: Instant) {
        match self.stages.first_mut() {
            Some(s) => s.push(pkt, now),
            None => self.passthrough.push(pkt),
        }
    }

    /// Move every packet due at or before `now` through the chain and hand
    /// the ones leaving the last stage to `out`, in departure order.
    pub fn poll(&mut self, now: Instant, mut out: impl FnMut(Packet)) {
        if self.stages.is_empty() {
            while let Some(p) = self.passthrough.pop_ready(now) {
                out(p);
            }
            return;
        }
        let n = self.stages.len();
        for i in 0..n {
            let (head, tail) = self.stages.split_at_mut(i + 1);
            let s = &mut head[i];
            while let Some(p) = s.pop_ready(now) {
                match tail.first_mut() {
                    Some(next) => next.push(p, now),
                    None => out(p),
                }
            }
        }
    }

    /// Earliest time any stage has something to release.
    pub fn next_event(&self) -> Option<Instant> {
        self.stages
            .iter()
            .filter_map(|s| s.next_event())
            .chain(self.passthrough.next_event())
            .min()
    }

    /// Packets held in all stages.
    pub fn held(&self) -> usize {
        self.stages.iter().map(|s| s.held()).sum::<usize>() + self.passthrough.len()
    }

    pub fn counters(&self) -> StageCounters {
        let mut c = StageCounters::default();
        for s in &self.stages {
            c.add(&s.counters());
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    #[test]
    fn stage_order_follows_the_spec() {
        let p = Pipeline::build(
            &parse("dup=1%,reorder=1%,delay=1ms,rate=1mbit,loss=1%").unwrap(),
            1,
            Direction::AtoB,
        );
        assert_eq!(
            p.stage_names(),
            vec!["loss", "rate", "delay", "reorder", "dup"]
        );
        let p = Pipeline::build(&parse("").unwrap(), 1, Direction::AtoB);
        assert!(p.stage_names().is_empty());
    }

    #[test]
    fn empty_pipeline_passes_immediately() {
        let mut p = Pipeline::build(&parse("").unwrap(), 1, Direction::AtoB);
        let t = Instant::from_nanos(5);
        p.push(Packet::synthetic(0, 100, t), t);
        let mut got = Vec::new();
        p.poll(t, |x| got.push(x.id));
        assert_eq!(got, vec![0]);
        assert_eq!(p.next_event(), None);
    }
}
