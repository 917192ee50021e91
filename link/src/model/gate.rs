//! The link's on/off switch (a scheduled outage): while the link is down,
//! packets entering it are lost (`dropped_outage`); packets already past
//! the gate are delivered, as if they were on the wire. Only a schedule
//! with an outage adds this stage (first in the chain, after a rebind's
//! address rewriting).

use super::{Fifo, Stage, StageCounters};
use crate::packet::Packet;
use crate::time::Instant;

#[derive(Debug, Default)]
pub struct Gate {
    down: bool,
    out: Fifo,
    dropped: u64,
}

impl Gate {
    /// Whether the link is down from now on (a scheduled outage's start or
    /// end).
    pub fn retune(&mut self, down: bool) {
        self.down = down;
    }
}

impl Stage for Gate {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        if self.down {
            self.dropped += 1;
        } else {
            self.out.push(pkt);
        }
    }
    super::fifo_output!();
    fn counters(&self) -> StageCounters {
        StageCounters {
            dropped_outage: self.dropped,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "outage"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testutil::{periodic, run_stage};

    #[test]
    fn drops_only_while_down() {
        let mut g = Gate::default();
        assert_eq!(run_stage(&mut g, &periodic(3, 100, 10)).len(), 3);
        g.retune(true);
        assert!(run_stage(&mut g, &periodic(4, 100, 10)).is_empty());
        g.retune(false);
        assert_eq!(run_stage(&mut g, &periodic(2, 100, 10)).len(), 2);
        assert_eq!(g.counters().dropped_outage, 4);
    }
}
