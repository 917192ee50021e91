//! A bottleneck whose capacity follows a packet-delivery trace, in the
//! format of mahimahi's `mm-link` (its man page, mm-link(1)): one integer
//! per line, a time in milliseconds at which the link may deliver one
//! MTU-sized packet. Accounting is by bytes, counted as mahimahi counts
//! them (its link queue's PACKET_SIZE of 1504 bytes per opportunity, each
//! packet its IP bytes plus the 4 bytes of the TUN packet-information header
//! its reads carry): one opportunity carries one 1500-byte IP packet, or
//! several smaller ones (34 of 40 bytes), a larger packet uses more than
//! one, and an opportunity that finds the queue empty, or comes at the very
//! moment a packet arrives, is wasted. At its end the trace starts again,
//! shifted by its last timestamp. Packets wait in the drop-tail queue
//! (`queue`, which here still counts a packet partly delivered) in between.
//!
//! The trace's time 0 is the schedule's start (see `pipeline`); until then
//! it runs from the first packet it sees.

use super::queue::{DropTailQueue, QueueLimit};
use super::{Fifo, Stage, StageCounters};
use crate::occupancy::QueueWatch;
use crate::packet::Packet;
use crate::time::{Duration, Instant};
use std::sync::Arc;

/// Bytes one delivery opportunity may carry (mahimahi's PACKET_SIZE).
pub const OPPORTUNITY_BYTES: usize = 1504;
/// What mahimahi counts on top of each IP packet (its TUN reads' header).
pub const PER_PACKET_BYTES: usize = 4;
/// The IP bytes of one full opportunity (for the mean rate).
pub const OPPORTUNITY_IP_BYTES: usize = OPPORTUNITY_BYTES - PER_PACKET_BYTES;
/// Latest time a trace may name (24 h, in ms): its arithmetic stays in u64 ns.
pub const MAX_MS: u64 = 24 * 3600 * 1000;
/// Longest trace accepted (lines), so a wrong file cannot eat the memory.
pub const MAX_LINES: usize = 10_000_000;

/// A parsed trace: the opportunities' times (ms, non-decreasing) and the
/// period after which it repeats (its last time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub path: String,
    ms: Vec<u64>,
    period_ms: u64,
}

impl Trace {
    /// Parse the text of a trace (`path` names it in errors).
    pub fn parse(path: &str, text: &str) -> Result<Trace, String> {
        let mut ms = Vec::new();
        for (no, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let t: u64 = line.parse().map_err(|_| {
                format!(
                    "{path}:{}: expected a time in ms (an integer), got {line:?}",
                    no + 1
                )
            })?;
            if t > MAX_MS {
                return Err(format!("{path}:{}: {t} ms is past 24 h", no + 1));
            }
            if ms.last().is_some_and(|&prev| t < prev) {
                return Err(format!(
                    "{path}:{}: {t} is earlier than the line before",
                    no + 1
                ));
            }
            if ms.len() == MAX_LINES {
                return Err(format!("{path}: more than {MAX_LINES} lines"));
            }
            ms.push(t);
        }
        let period_ms = *ms
            .last()
            .ok_or_else(|| format!("{path}: no delivery opportunities"))?;
        if period_ms == 0 {
            return Err(format!(
                "{path}: its last time must be above 0 ms (the trace repeats after it)"
            ));
        }
        Ok(Trace {
            path: path.to_string(),
            ms,
            period_ms,
        })
    }

    /// Mean capacity over one period (bit/s).
    pub fn mean_bps(&self) -> f64 {
        self.ms.len() as f64 * OPPORTUNITY_IP_BYTES as f64 * 8.0 / (self.period_ms as f64 / 1e3)
    }

    /// Time of opportunity `k` (counting through the repeats) after time 0.
    fn at(&self, k: u64) -> Duration {
        let n = self.ms.len() as u64;
        Duration::from_millis((k / n) * self.period_ms + self.ms[(k % n) as usize])
    }

    /// The first opportunity after `d` after time 0 (one at `d` itself is
    /// lost to a packet arriving then, as in mahimahi).
    fn first_from(&self, d: Duration) -> u64 {
        let n = self.ms.len() as u64;
        let ns = d.as_nanos();
        let period_ns = self.period_ms * 1_000_000;
        let rounds = ns / period_ns;
        let within = ns - rounds * period_ns;
        let i = self.ms.partition_point(|&m| m * 1_000_000 <= within) as u64;
        rounds * n + i
    }
}

#[derive(Debug)]
pub struct TraceLink {
    trace: Arc<Trace>,
    origin: Option<Instant>,
    /// The next opportunity.
    next: u64,
    queue: DropTailQueue,
    /// Bytes of the queue's head still to deliver (it may span
    /// opportunities).
    head_left: usize,
    out: Fifo,
    dropped: u64,
    watch: Option<QueueWatch>,
}

impl TraceLink {
    pub fn new(trace: Arc<Trace>, limit: QueueLimit) -> Self {
        TraceLink {
            trace,
            origin: None,
            next: 0,
            queue: DropTailQueue::new(limit),
            head_left: 0,
            out: Fifo::default(),
            dropped: 0,
            watch: None,
        }
    }

    /// Take the queue's `limit` from now on (a scheduled step; the trace
    /// itself never changes). Packets already queued beyond a smaller limit
    /// stay.
    pub fn retune(&mut self, limit: QueueLimit) {
        self.queue.set_limit(limit);
    }

    fn opportunity(&self) -> Option<Instant> {
        Some(self.origin? + self.trace.at(self.next))
    }

    /// Use every opportunity up to `t` on the queue as it is.
    fn advance(&mut self, t: Instant) {
        let Some(origin) = self.origin else {
            return;
        };
        while !self.queue.is_empty() {
            let Some(when) = self.opportunity().filter(|w| *w <= t) else {
                return;
            };
            let mut budget = OPPORTUNITY_BYTES;
            while budget > 0 {
                let Some(len) = self.queue.front_len() else {
                    break;
                };
                if self.head_left == 0 {
                    self.head_left = len + PER_PACKET_BYTES;
                }
                if self.head_left <= budget {
                    budget -= self.head_left;
                    self.head_left = 0;
                    let mut p = self.queue.dequeue().expect("front exists");
                    // never before its arrival (an origin set after it had queued)
                    let when = when.max(p.t);
                    if let Some(w) = &self.watch {
                        w.changed(when, self.queue.bytes());
                        w.departed(p.t, when);
                    }
                    p.t = when;
                    self.out.push(p);
                } else {
                    self.head_left -= budget;
                    budget = 0;
                }
            }
            self.next += 1;
        }
        // nothing left to carry: the opportunities up to `t` are wasted
        self.next = self
            .next
            .max(self.trace.first_from(t.saturating_duration_since(origin)));
    }
}

impl Stage for TraceLink {
    fn push(&mut self, pkt: Packet, _now: Instant) {
        let t = pkt.t;
        if self.origin.is_none() {
            self.start(t);
        }
        self.advance(t);
        if self.queue.enqueue(pkt).is_err() {
            self.dropped += 1;
        } else if let Some(w) = &self.watch {
            w.changed(t, self.queue.bytes());
        }
    }
    fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        self.advance(now);
        self.out.pop_ready(now)
    }
    fn next_event(&self) -> Option<Instant> {
        self.out.next_event().or_else(|| {
            (!self.queue.is_empty())
                .then(|| self.opportunity())
                .flatten()
        })
    }
    fn held(&self) -> usize {
        self.out.len() + self.queue.len()
    }
    fn counters(&self) -> StageCounters {
        StageCounters {
            dropped_queue: self.dropped,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "trace"
    }
    fn watch_queue(&mut self, watch: &QueueWatch, from: Instant) {
        self.watch = Some(watch.attached(from));
    }
    fn start(&mut self, origin: Instant) {
        self.origin = Some(origin);
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testutil::run_stage;

    fn link(text: &str, limit: QueueLimit) -> TraceLink {
        let mut l = TraceLink::new(Arc::new(Trace::parse("t", text).unwrap()), limit);
        l.start(Instant::ZERO);
        l
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn packets_leave_at_the_opportunities_bytes_add_up() {
        // opportunities at 1, 1, 3 ms (then 4, 4, 6 ...): two 1500 B packets
        // at 1 ms, then three of 497 B (501 counted) share the one at 3 ms,
        // and a fourth waits for 4 ms.
        let mut l = link("1\n1\n3\n", QueueLimit::Packets(100));
        let mut arr: Vec<_> = (0..2).map(|i| (i, 1500, Instant::ZERO)).collect();
        arr.extend((2..6).map(|i| (i, 497, Instant::ZERO)));
        let out = run_stage(&mut l, &arr);
        let times: Vec<u64> = out.iter().map(|(_, t)| t.as_nanos() / MS).collect();
        assert_eq!(times, [1, 1, 3, 3, 3, 4]);
    }

    #[test]
    fn a_large_packet_spans_opportunities_and_the_trace_repeats() {
        // 3000 B needs two opportunities: 2 and 4 ms (the second round's
        // first, at 2 + 2 ms).
        let mut l = link("2\n", QueueLimit::Packets(10));
        let out = run_stage(&mut l, &[(0, 3000, Instant::ZERO), (1, 100, Instant::ZERO)]);
        let times: Vec<u64> = out.iter().map(|(_, t)| t.as_nanos() / MS).collect();
        assert_eq!(times, [4, 6]);
    }

    #[test]
    fn opportunities_with_an_empty_queue_are_wasted() {
        let mut l = link("1\n2\n3\n4\n5\n10\n", QueueLimit::Packets(10));
        let out = run_stage(&mut l, &[(0, 1500, Instant::from_nanos(3 * MS + 1))]);
        assert_eq!(out[0].1, Instant::from_nanos(4 * MS));
        let out = run_stage(&mut l, &[(1, 1500, Instant::from_nanos(25 * MS))]);
        assert_eq!(
            out[0].1,
            Instant::from_nanos(30 * MS),
            "the one at 25 ms is lost to the arrival"
        );
    }

    #[test]
    fn the_mean_rate_follows_the_trace_and_the_queue_drops_tail() {
        // 12 Mbit/s: an opportunity every ms. 3000 packets of 1500 B at once:
        // 10 fit, the rest are dropped; the 10 leave 1 ms apart.
        let text: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        let t = Trace::parse("t", &text).unwrap();
        assert!((t.mean_bps() - 12e6).abs() < 1.0);
        let mut l = link(&text, QueueLimit::Packets(10));
        let arr: Vec<_> = (0..30).map(|i| (i, 1500, Instant::ZERO)).collect();
        let out = run_stage(&mut l, &arr);
        assert_eq!(out.len(), 10);
        assert_eq!(l.counters().dropped_queue, 20);
        assert_eq!(out[9].1, Instant::from_nanos(10 * MS));
    }

    #[test]
    fn bad_traces_name_the_line() {
        let cases = [
            ("", "t: no delivery opportunities"),
            ("0\n", "t: its last time must be above 0 ms"),
            ("1\nx\n", "t:2: expected a time in ms"),
            ("5\n3\n", "t:2: 3 is earlier than the line before"),
            ("1.5\n", "t:1: expected a time in ms"),
            ("1\n99999999999\n", "t:2: 99999999999 ms is past 24 h"),
        ];
        for (text, want) in cases {
            let e = Trace::parse("t", text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}
