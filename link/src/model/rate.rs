//! Bottleneck link: a drop-tail queue in front of a serializer at R bit/s.
//!
//! A packet of L IP bytes occupies the link for L*8/R seconds (no L2
//! overhead is added) and departs when its last bit is sent. The model is
//! exact for any polling pattern: before each arrival it replays every
//! departure up to the arrival's own time (mahimahi's `rationalize(now)`).

use super::queue::{DropTailQueue, QueueLimit};
use super::{Fifo, Stage, StageCounters};
use crate::occupancy::QueueWatch;
use crate::packet::Packet;
use crate::time::{Duration, Instant};

/// The bottleneck's parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RateParams {
    /// `None`: no rate limit (a schedule took it away).
    pub rate_bps: Option<u64>,
    pub queue: QueueLimit,
}

#[derive(Debug)]
pub struct Bottleneck {
    /// `None`: a schedule took the rate limit away (no serialization time).
    rate_bps: Option<u64>,
    queue: DropTailQueue,
    /// Packet on the wire and the instant its last bit leaves.
    in_service: Option<(Packet, Instant)>,
    /// When the link becomes idle.
    busy_until: Instant,
    /// Sub-nanosecond remainder (in units of 1/rate_bps ns) carried between
    /// packets, so rounding never accumulates into rate drift.
    carry: u64,
    out: Fifo,
    dropped: u64,
    watch: Option<QueueWatch>,
}

impl Bottleneck {
    pub fn new(rate_bps: u64, limit: QueueLimit) -> Self {
        assert!(rate_bps > 0, "rate must be positive");
        Bottleneck {
            rate_bps: Some(rate_bps),
            queue: DropTailQueue::new(limit),
            in_service: None,
            busy_until: Instant::ZERO,
            carry: 0,
            out: Fifo::default(),
            dropped: 0,
            watch: None,
        }
    }

    fn tx_time(&mut self, len: usize) -> Duration {
        let Some(r) = self.rate_bps else {
            return Duration::ZERO;
        };
        let num = len as u128 * 8 * 1_000_000_000 + self.carry as u128;
        let r = r as u128;
        self.carry = (num % r) as u64;
        Duration::from_nanos((num / r) as u64)
    }

    /// Replay the link up to `t`: finish transmissions, start the next.
    fn advance(&mut self, t: Instant) {
        loop {
            if let Some((_, fin)) = &self.in_service {
                if *fin > t {
                    return;
                }
                let (mut p, fin) = self.in_service.take().expect("checked");
                if let Some(w) = &self.watch {
                    w.departed(p.t, fin); // p.t: its arrival
                }
                p.t = fin;
                self.out.push(p);
            }
            let Some(p) = self.queue.dequeue() else {
                return;
            };
            let start = self.busy_until.max(p.t);
            if let Some(w) = &self.watch {
                w.changed(start, self.queue.bytes());
            }
            let fin = start + self.tx_time(p.len());
            self.busy_until = fin;
            self.in_service = Some((p, fin));
        }
    }

    /// Take `params` from now on (a scheduled step). The packet being
    /// serialized finishes at the old rate; the next one starts at the new.
    /// Packets already queued beyond a smaller queue limit stay (only
    /// arrivals are refused).
    pub fn retune(&mut self, params: RateParams) {
        if self.rate_bps != params.rate_bps {
            self.rate_bps = params.rate_bps;
            self.carry = 0;
        }
        self.queue.set_limit(params.queue);
    }

    /// Packets waiting (excluding the one being serialized).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

impl Stage for Bottleneck {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        let t = pkt.t;
        self.advance(t);
        let queued = self.queue.enqueue(pkt).is_ok();
        if !queued {
            self.dropped += 1;
        }
        self.advance(t);
        if let (true, Some(w)) = (queued, &self.watch) {
            // after the advance: a packet straight into service never counts as waiting
            w.changed(t, self.queue.bytes());
        }
    }
    fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        self.advance(now);
        self.out.pop_ready(now)
    }
    fn next_event(&self) -> Option<Instant> {
        self.out
            .next_event()
            .or_else(|| self.in_service.as_ref().map(|(_, fin)| *fin))
    }
    fn held(&self) -> usize {
        self.out.len() + self.queue.len() + usize::from(self.in_service.is_some())
    }
    fn counters(&self) -> StageCounters {
        StageCounters {
            dropped_queue: self.dropped,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "rate"
    }
    fn watch_queue(&mut self, watch: &QueueWatch, from: Instant) {
        self.watch = Some(watch.attached(from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testutil::{periodic, run_stage};

    #[test]
    fn the_queue_reports_its_occupancy_and_sojourns() {
        // 1500 B at 12 Mbit/s = 1 ms each. A lone packet goes straight into
        // service (never waiting); three at 150 ms: one in service, two
        // waiting (3000 B), one waiting from 151 ms, none from 152 ms.
        let watch = QueueWatch {
            sojourn: Default::default(),
            occupancy: Default::default(),
        };
        let mut b = Bottleneck::new(12_000_000, QueueLimit::Packets(10));
        b.watch_queue(&watch, Instant::ZERO);
        let ms = |m: u64| Instant::from_nanos(m * 1_000_000);
        let out = run_stage(
            &mut b,
            &[
                (0, 1500, ms(10)),
                (1, 1500, ms(150)),
                (2, 1500, ms(150)),
                (3, 1500, ms(150)),
            ],
        );
        assert_eq!(out.len(), 4);
        let v = watch.occupancy.view(ms(250)).expect("attached");
        assert_eq!(v.bytes, vec![0, 3000, 0]);
        assert_eq!(
            watch
                .sojourn
                .max_ns
                .load(std::sync::atomic::Ordering::Relaxed),
            3_000_000
        );
        // the lone packet's 1 ms, as its histogram bucket's upper edge
        assert!((1_000..=1_024).contains(&watch.sojourn.quantile_us(0.25)));
    }

    #[test]
    fn single_packet_serialization_time() {
        // 1500 B at 100 Mbit/s = 120 us
        let mut b = Bottleneck::new(100_000_000, QueueLimit::Packets(10));
        let out = run_stage(&mut b, &[(0, 1500, Instant::from_nanos(1_000))]);
        assert_eq!(out, vec![(0, Instant::from_nanos(121_000))]);
    }

    #[test]
    fn rate_conformance_under_overload() {
        // Offer 2x the rate (1500 B every 60 us into 100 Mbit/s) with a big
        // queue: departures are exactly back-to-back, so bits delivered in
        // any window between departures equal rate * window up to one packet
        // (12,000 bits) of quantization and the ns rounding carry.
        let rate = 100_000_000u64;
        let mut b = Bottleneck::new(rate, QueueLimit::Packets(100_000));
        let out = run_stage(&mut b, &periodic(20_000, 1500, 60_000));
        assert_eq!(out.len(), 20_000);
        let first = out[0].1;
        let last = out[out.len() - 1].1;
        let bits = (out.len() as u64 - 1) * 1500 * 8;
        let measured = bits as f64 / (last - first).as_secs_f64();
        assert!((measured / rate as f64 - 1.0).abs() < 1e-6, "{measured}");
        // every gap is exactly one serialization time
        assert!(out
            .windows(2)
            .all(|w| (w[1].1 - w[0].1) == Duration::from_nanos(120_000)));
    }

    #[test]
    fn awkward_rate_does_not_drift() {
        // 7 Mbit/s: 1500 B takes 1714285.71.. ns; the carry keeps the total
        // within 1 ns of exact after 10,000 packets.
        let rate = 7_000_000u64;
        let mut b = Bottleneck::new(rate, QueueLimit::Packets(1_000_000));
        let out = run_stage(&mut b, &periodic(10_000, 1500, 1));
        let last = out.last().unwrap().1.as_nanos() as f64;
        let exact = 10_000.0 * 1500.0 * 8.0 / rate as f64 * 1e9;
        assert!((last - exact).abs() <= 1.0 + 1.0, "{last} vs {exact}");
    }

    #[test]
    fn underload_passes_with_only_serialization_delay() {
        let mut b = Bottleneck::new(1_000_000_000, QueueLimit::Packets(1));
        // 1000 B every 100 us into 1 Gbit/s (8 us each): never queues
        let out = run_stage(&mut b, &periodic(1000, 1000, 100_000));
        assert_eq!(b.counters().dropped_queue, 0);
        assert!(out
            .iter()
            .all(|(id, t)| t.as_nanos() == id * 100_000 + 8_000));
    }

    #[test]
    fn queue_packets_limit_drops_exactly() {
        // Burst of 10 at t=0 into a 3-packet queue: 1 in service + 3 queued.
        let mut b = Bottleneck::new(1_000_000, QueueLimit::Packets(3));
        let arr: Vec<_> = (0..10).map(|i| (i, 1000, Instant::ZERO)).collect();
        let out = run_stage(&mut b, &arr);
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(b.counters().dropped_queue, 6);
    }

    #[test]
    fn queue_bytes_limit_drops_exactly() {
        // 4000 B of queue: after the first packet enters service, four
        // 1000 B packets fit and the fifth does not.
        let mut b = Bottleneck::new(1_000_000, QueueLimit::Bytes(4000));
        let arr: Vec<_> = (0..10).map(|i| (i, 1000, Instant::ZERO)).collect();
        let out = run_stage(&mut b, &arr);
        assert_eq!(out.len(), 5);
        assert_eq!(b.counters().dropped_queue, 5);
    }

    #[test]
    fn late_polling_gives_same_schedule() {
        let arr = periodic(500, 1200, 7_000);
        let mut a = Bottleneck::new(1_000_000_000, QueueLimit::Packets(50));
        let exact = run_stage(&mut a, &arr);
        // Push everything first, pop once at the very end.
        let mut b = Bottleneck::new(1_000_000_000, QueueLimit::Packets(50));
        for &(id, len, t) in &arr {
            b.push(Packet::synthetic(id, len, t), t);
        }
        let mut late = Vec::new();
        while let Some(p) = b.pop_ready(Instant::from_nanos(u64::MAX / 2)) {
            late.push((p.id, p.t));
        }
        assert_eq!(exact, late);
    }
}
