//! The stages of one direction, chained in the fixed order
//! [faults -> nat -> outage gate ->] loss -> bottleneck (queue + rate, or a trace) ->
//! delay/jitter -> reorder -> duplicate.
//! Absent impairments add no stage; an empty pipeline passes packets
//! through unchanged at their arrival time.
//!
//! A schedule (see `schedule`) makes the chain the union of the stages its
//! states need (a rebind's rewriting and the outage gate among them), and
//! retunes every stage at
//! each step's time: packets that left a stage before the step saw its old
//! parameters, packets entering it from then on the new. Steps count from
//! the moment the pipeline is armed. Each stage retunes from its own
//! parameters, which [`Chained::retune_from`] takes out of the step's spec.

use crate::classify::Classifier;
use crate::faults::{Fault, FaultStage};
use crate::model::delay::{Delay, DelaySampler};
use crate::model::dup::Duplicate;
use crate::model::gate::Gate;
use crate::model::loss::Loss;
use crate::model::nat::{Nat, Side};
use crate::model::rate::Bottleneck;
use crate::model::reorder::Reorder;
use crate::model::trace::TraceLink;
use crate::model::{rng_for, Fifo, Stage, StageCounters};
use crate::occupancy::QueueWatch;
use crate::packet::Packet;
use crate::schedule::{Applied, Step};
use crate::spec::DirSpec;
use crate::time::{Duration, Instant};
use std::sync::Arc;

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

/// A stage as the chain holds it: at a step it takes its own parameters
/// out of the step's spec (and the link's up/down state) and retunes from
/// them, keeping the packets it holds. A stage whose impairment the spec
/// lacks passes packets unchanged.
trait Chained: Stage {
    fn retune_from(&mut self, spec: &DirSpec, down: bool);
}

impl Chained for Nat {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(&spec.nat);
    }
}

impl Chained for Gate {
    fn retune_from(&mut self, _spec: &DirSpec, down: bool) {
        self.retune(down);
    }
}

impl Chained for Loss {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.loss);
    }
}

impl Chained for Bottleneck {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.rate_params());
    }
}

impl Chained for TraceLink {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.queue);
    }
}

impl Chained for Delay {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.delay_params());
    }
}

impl Chained for Reorder {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.reorder_params());
    }
}

impl Chained for Duplicate {
    fn retune_from(&mut self, spec: &DirSpec, _down: bool) {
        self.retune(spec.dup);
    }
}

pub struct Pipeline {
    /// Targeted faults (and classification), ahead of every stage.
    front: Option<FaultStage>,
    stages: Vec<Box<dyn Chained>>,
    /// Used only when there are no stages.
    passthrough: Fifo,
    /// Whether anything here runs on the schedule's clock (steps, a trace).
    timed: bool,
    steps: Vec<Step>,
    /// The next step to apply.
    next_step: usize,
    /// When the schedule started (`None`: not armed yet).
    origin: Option<Instant>,
    /// Packets that left the chain while a step was applied, before the
    /// caller polled.
    done: Fifo,
    /// Steps applied and not yet taken by [`Pipeline::take_applied`].
    applied: Vec<Applied>,
    /// Ids of classified non-data messages a stage lost (loss, queue,
    /// outage, stale address) since [`Pipeline::take_link_drops`].
    link_drops: Vec<u64>,
}

/// The first of `specs` that needs a stage, if any does.
fn first<'a>(specs: &[&'a DirSpec], needs: impl Fn(&DirSpec) -> bool) -> Option<&'a DirSpec> {
    specs.iter().copied().find(|s| needs(s))
}

impl Pipeline {
    /// The chain for `spec`, and for every state of `steps` (empty: no
    /// schedule).
    pub fn build(spec: &DirSpec, steps: &[Step], seed: u64, dir: Direction) -> Self {
        // stream = direction * 16 + stage: one RNG per (direction, stage)
        let rng = |stage: u64| rng_for(seed, dir.index() * 16 + stage);
        let specs: Vec<&DirSpec> = std::iter::once(spec)
            .chain(steps.iter().map(|s| &s.spec))
            .collect();
        let mut stages: Vec<Box<dyn Chained>> = Vec::new();
        if first(&specs, |s| !s.nat.is_empty()).is_some() {
            let side = match dir {
                Direction::AtoB => Side::Source,
                Direction::BtoA => Side::Destination,
            };
            stages.push(Box::new(Nat::new(side)));
        }
        if steps.iter().any(|s| s.down) {
            stages.push(Box::<Gate>::default());
        }
        if let Some(model) = first(&specs, |s| s.loss.is_some()).and_then(|s| s.loss) {
            stages.push(Box::new(Loss::new(model, rng(1))));
        }
        if let Some(trace) = &spec.trace {
            // events cannot change a trace (schedule::parse), nor add a rate to it
            stages.push(Box::new(TraceLink::new(Arc::clone(trace), spec.queue)));
        } else if let Some(s) = first(&specs, |s| s.rate_bps.is_some()) {
            stages.push(Box::new(Bottleneck::new(s.rate_bps.unwrap_or(1), s.queue)));
        }
        if let Some(s) = first(&specs, |s| {
            s.delay > Duration::ZERO || s.jitter > Duration::ZERO
        }) {
            stages.push(Box::new(Delay::new(DelaySampler::new(
                s.delay_params(),
                rng(3),
            ))));
        }
        if let Some(s) = first(&specs, |s| s.reorder > 0.0) {
            stages.push(Box::new(Reorder::new(s.reorder_params(), rng(4))));
        }
        if let Some(s) = first(&specs, |s| s.dup > 0.0) {
            stages.push(Box::new(Duplicate::new(s.dup, rng(5))));
        }
        for s in &mut stages {
            s.retune_from(spec, false);
        }
        Pipeline {
            front: None,
            stages,
            passthrough: Fifo::default(),
            timed: !steps.is_empty() || spec.trace.is_some(),
            steps: steps.to_vec(),
            next_step: 0,
            origin: None,
            done: Fifo::default(),
            applied: Vec::new(),
            link_drops: Vec::new(),
        }
    }

    /// Put a fault stage first in the chain: it classifies every packet
    /// with `classifier` and applies `faults` before any other stage
    /// (corruption draws from its own RNG stream).
    pub fn with_faults(
        mut self,
        classifier: Classifier,
        faults: Vec<Fault>,
        seed: u64,
        dir: Direction,
    ) -> Self {
        let stage = FaultStage::new(classifier, faults, rng_for(seed, dir.index() * 16 + 6));
        self.timed |= stage.timed();
        self.front = Some(stage);
        self
    }

    /// The fault stage, if any (its per-class counters).
    pub fn faults(&self) -> Option<&FaultStage> {
        self.front.as_ref()
    }

    /// What the fault stage recorded since the last call (faults fired,
    /// non-data messages seen).
    pub fn take_fault_records(&mut self) -> Vec<crate::faults::Record> {
        match &mut self.front {
            Some(f) if f.has_records() => f.take_records(),
            _ => Vec::new(),
        }
    }

    /// Ids of classified non-data messages the link's own stages dropped
    /// since the last call.
    pub fn take_link_drops(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.link_drops)
    }

    /// Start the schedule at `origin` (once; later calls do nothing).
    pub fn arm(&mut self, origin: Instant) {
        if self.origin.is_none() {
            self.origin = Some(origin);
            if let Some(f) = &mut self.front {
                f.start(origin);
            }
            for s in &mut self.stages {
                s.start(origin);
            }
        }
    }

    /// Whether anything here runs on the schedule's clock (steps, a trace).
    pub fn timed(&self) -> bool {
        self.timed
    }

    /// Whether the pipeline has a schedule (or a trace) that has not started
    /// yet.
    pub fn waiting_to_arm(&self) -> bool {
        self.origin.is_none() && self.timed
    }

    /// When the next step is due (`None`: none left, or not armed).
    fn step_due(&self) -> Option<Instant> {
        Some(self.origin? + self.steps.get(self.next_step)?.at)
    }

    /// Apply every step due at or before `t`: first move what the chain
    /// releases before the step's time on (into `done`), then retune.
    fn apply_due(&mut self, t: Instant, now: Instant) {
        while let Some(at) = self.step_due().filter(|at| *at <= t) {
            let done = &mut self.done;
            let chain = Chain {
                front: self.front.as_mut(),
                stages: &mut self.stages,
                passthrough: &mut self.passthrough,
                link_drops: &mut self.link_drops,
            };
            chain.flow(at, |p| done.push(p));
            let step = &self.steps[self.next_step];
            for s in &mut self.stages {
                s.retune_from(&step.spec, step.down);
            }
            self.applied.push(Applied {
                event: step.event,
                kind: step.kind,
                at: step.at,
                late: now.saturating_duration_since(at),
            });
            self.next_step += 1;
        }
    }

    /// Report every packet's time in the bottleneck (queue and serialization) and the queue's occupancy
    /// from `from` on to `watch`.
    pub fn watch_queue(&mut self, watch: &QueueWatch, from: Instant) {
        for s in &mut self.stages {
            s.watch_queue(watch, from);
        }
    }

    /// The steps applied since the last call.
    pub fn take_applied(&mut self) -> Vec<Applied> {
        std::mem::take(&mut self.applied)
    }

    pub fn stage_names(&self) -> Vec<&'static str> {
        let front = self.front.as_ref().map(|f| f.name());
        front
            .into_iter()
            .chain(self.stages.iter().map(|s| s.name()))
            .collect()
    }

    /// Hand a packet to the first stage; `pkt.t` is its arrival time.
    /// Call [`Pipeline::poll`] afterwards to collect what is due.
    pub fn push(&mut self, pkt: Packet, now: Instant) {
        self.apply_due(pkt.t, now);
        match &mut self.front {
            Some(f) => {
                let t = pkt.t;
                f.push(pkt, now);
                // what the faults pass at once enters the chain now, as
                // it would without them
                while let Some(p) = f.pop_ready(t) {
                    enter(
                        &mut self.stages,
                        &mut self.passthrough,
                        &mut self.link_drops,
                        p,
                        now,
                    );
                }
            }
            None => match self.stages.first_mut() {
                Some(s) => s.push(pkt, now),
                None => self.passthrough.push(pkt),
            },
        }
    }

    /// Move every packet due at or before `now` through the chain and hand
    /// the ones leaving the last stage to `out`, in departure order.
    pub fn poll(&mut self, now: Instant, mut out: impl FnMut(Packet)) {
        self.apply_due(now, now);
        while let Some(p) = self.done.pop_ready(now) {
            out(p);
        }
        let chain = Chain {
            front: self.front.as_mut(),
            stages: &mut self.stages,
            passthrough: &mut self.passthrough,
            link_drops: &mut self.link_drops,
        };
        chain.flow(now, out);
    }

    /// Earliest time any stage has something to release, or a step is due.
    pub fn next_event(&self) -> Option<Instant> {
        self.stages
            .iter()
            .filter_map(|s| s.next_event())
            .chain(self.front.as_ref().and_then(|f| f.next_event()))
            .chain(self.passthrough.next_event())
            .chain(self.done.next_event())
            .chain(self.step_due())
            .min()
    }

    /// Packets held in all stages.
    pub fn held(&self) -> usize {
        self.stages.iter().map(|s| s.held()).sum::<usize>()
            + self.front.as_ref().map_or(0, |f| f.held())
            + self.passthrough.len()
            + self.done.len()
    }

    pub fn counters(&self) -> StageCounters {
        let mut c = StageCounters::default();
        if let Some(f) = &self.front {
            c.add(&f.counters());
        }
        for s in &self.stages {
            c.add(&s.counters());
        }
        c
    }
}

/// Packets a stage loses to the link itself (not to a fault).
fn lost(c: &StageCounters) -> u64 {
    c.dropped_loss + c.dropped_queue + c.dropped_outage + c.dropped_stale
}

/// Hand `p` to `stage`; a classified non-data message it drops is noted
/// in `link_drops` (the others are not looked at: this is per packet).
fn push_noting(stage: &mut dyn Chained, p: Packet, now: Instant, link_drops: &mut Vec<u64>) {
    if p.class.is_data() {
        return stage.push(p, now);
    }
    let (id, before) = (p.id, lost(&stage.counters()));
    stage.push(p, now);
    if lost(&stage.counters()) > before {
        link_drops.push(id);
    }
}

/// Hand a packet leaving the fault stage to the first stage (or, with
/// none, to the passthrough queue).
fn enter(
    stages: &mut [Box<dyn Chained>],
    passthrough: &mut Fifo,
    link_drops: &mut Vec<u64>,
    p: Packet,
    now: Instant,
) {
    match stages.first_mut() {
        Some(s) => push_noting(s.as_mut(), p, now, link_drops),
        None => passthrough.push(p),
    }
}

/// The chain's parts, borrowed for one [`Chain::flow`].
struct Chain<'a> {
    front: Option<&'a mut FaultStage>,
    stages: &'a mut [Box<dyn Chained>],
    passthrough: &'a mut Fifo,
    link_drops: &'a mut Vec<u64>,
}

impl Chain<'_> {
    /// Move every packet due at or before `now` through the chain, handing
    /// the ones leaving the last stage to `out` in departure order.
    fn flow(self, now: Instant, mut out: impl FnMut(Packet)) {
        let Chain {
            front,
            stages,
            passthrough,
            link_drops,
        } = self;
        if let Some(f) = front {
            while let Some(p) = f.pop_ready(now) {
                enter(stages, passthrough, link_drops, p, now);
            }
        }
        if stages.is_empty() {
            while let Some(p) = passthrough.pop_ready(now) {
                out(p);
            }
            return;
        }
        for i in 0..stages.len() {
            let (head, tail) = stages.split_at_mut(i + 1);
            let s = &mut head[i];
            while let Some(p) = s.pop_ready(now) {
                match tail.first_mut() {
                    Some(next) => push_noting(next.as_mut(), p, now, link_drops),
                    None => out(p),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::StepKind;
    use crate::spec::parse;

    #[test]
    fn stage_order_follows_the_spec() {
        let p = Pipeline::build(
            &parse("dup=1%,reorder=1%,delay=1ms,rate=1mbit,loss=1%").unwrap(),
            &[],
            1,
            Direction::AtoB,
        );
        assert_eq!(
            p.stage_names(),
            vec!["loss", "rate", "delay", "reorder", "dup"]
        );
        let p = Pipeline::build(&parse("").unwrap(), &[], 1, Direction::AtoB);
        assert!(p.stage_names().is_empty());
    }

    #[test]
    fn a_schedule_builds_every_stage_its_states_need_and_retunes_them() {
        let steps = crate::schedule::parse("delay=1ms", "at=1s,loss=100%;at=2s,outage=1s").unwrap();
        let mut p = Pipeline::build(&parse("delay=1ms").unwrap(), &steps, 1, Direction::AtoB);
        assert_eq!(p.stage_names(), vec!["outage", "loss", "delay"]);
        assert!(p.waiting_to_arm());
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        // before the start no step is due, and the loss stage is off
        let mut got = Vec::new();
        p.push(Packet::synthetic(0, 100, ms(0)), ms(0));
        p.poll(ms(0), |x| got.push(x.id));
        assert_eq!(p.next_event(), Some(ms(1)));
        p.arm(ms(10));
        p.poll(ms(1), |x| got.push(x.id));
        assert_eq!(got, vec![0]);
        // from 1010 ms on every packet is lost (loss=100%), from 2010 ms the link is down too
        assert_eq!(p.next_event(), Some(ms(1010)));
        p.push(Packet::synthetic(1, 100, ms(1009)), ms(1009));
        p.push(Packet::synthetic(2, 100, ms(1010)), ms(1010));
        p.poll(ms(1011), |x| got.push(x.id));
        assert_eq!(got, vec![0, 1]);
        let applied = p.take_applied();
        assert_eq!(applied.len(), 1);
        assert_eq!(
            (applied[0].kind, applied[0].late),
            (StepKind::Set, Duration::ZERO)
        );
        p.poll(ms(4000), |x| got.push(x.id));
        let kinds: Vec<_> = p.take_applied().iter().map(|a| (a.kind, a.late)).collect();
        assert_eq!(
            kinds,
            vec![
                (StepKind::Down, Duration::from_millis(1990)),
                (StepKind::Up, Duration::from_millis(990))
            ]
        );
        assert_eq!(p.counters().dropped_loss, 1);
        assert_eq!(p.next_event(), None);
    }

    #[test]
    fn empty_pipeline_passes_immediately() {
        let mut p = Pipeline::build(&parse("").unwrap(), &[], 1, Direction::AtoB);
        let t = Instant::from_nanos(5);
        p.push(Packet::synthetic(0, 100, t), t);
        let mut got = Vec::new();
        p.poll(t, |x| got.push(x.id));
        assert_eq!(got, vec![0]);
        assert_eq!(p.next_event(), None);
    }
}
