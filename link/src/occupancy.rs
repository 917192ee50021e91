//! What a bottleneck tells about its queue: each packet's sojourn (into a
//! histogram) and the queue's occupancy over time (the most bytes waiting
//! in each 100 ms window), written by the forwarding thread, read by the
//! stats writer.
//!
//! The occupancy is exact in model time: the bottleneck reports every
//! change of its queue at the instant the model places it (an arrival at
//! its arrival, a dequeue when the serializer or the trace takes the
//! packet), so a window's maximum is the true maximum, whatever the event
//! loop's polling pattern.

use crate::histogram::Durations;
use crate::time::{Duration, Instant};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Width of one occupancy window.
pub const WINDOW: Duration = Duration::from_millis(100);
/// Windows kept per direction (one hour); later changes are not recorded
/// and the series says it was truncated.
pub const MAX_WINDOWS: usize = 36_000;

/// The queue's occupancy over time, per [`WINDOW`].
#[derive(Debug, Default)]
pub struct Occupancy {
    /// Whether a bottleneck reports here (directions without one have no
    /// series).
    attached: AtomicBool,
    series: Mutex<Series>,
}

#[derive(Debug, Default)]
struct Series {
    start: Instant,
    /// Most bytes waiting in each window so far.
    max: Vec<u64>,
    /// Bytes waiting since the last change.
    last: u64,
    truncated: bool,
}

/// The series as the stats document shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OccupancyView {
    pub start_ns: u64,
    pub every_ns: u64,
    pub bytes: Vec<u64>,
    pub truncated: bool,
}

impl Series {
    fn index(&self, t: Instant) -> usize {
        ((t - self.start).as_nanos() / WINDOW.as_nanos()) as usize
    }
}

impl Occupancy {
    /// A bottleneck reports here from `start` on (windows are counted from
    /// it). The first call wins.
    pub fn attach(&self, start: Instant) {
        if !self.attached.swap(true, Relaxed) {
            self.lock().start = start;
        }
    }

    /// From `t` on, the queue holds `bytes` (times never go back by more
    /// than a window; an earlier `t` counts in its own window).
    pub fn record(&self, t: Instant, bytes: u64) {
        let mut s = self.lock();
        let i = s.index(t);
        if i >= MAX_WINDOWS {
            s.truncated = true;
            return;
        }
        let last = s.last;
        while s.max.len() <= i {
            s.max.push(last); // the queue held `last` through the windows without a change
        }
        s.max[i] = s.max[i].max(bytes);
        s.last = bytes;
    }

    /// The series up to `now` (`None`: no bottleneck in this direction).
    pub fn view(&self, now: Instant) -> Option<OccupancyView> {
        if !self.attached.load(Relaxed) {
            return None;
        }
        let s = self.lock();
        let mut bytes = s.max.clone();
        let upto = s.index(now).min(MAX_WINDOWS - 1);
        while bytes.len() <= upto {
            bytes.push(s.last);
        }
        Some(OccupancyView {
            start_ns: s.start.as_nanos(),
            every_ns: WINDOW.as_nanos(),
            bytes,
            truncated: s.truncated,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handed to a bottleneck stage: where it reports its packets' sojourns and
/// its queue's changes.
#[derive(Clone, Debug)]
pub struct QueueWatch {
    pub sojourn: Arc<Durations>,
    pub occupancy: Arc<Occupancy>,
}

impl QueueWatch {
    /// This watch, its occupancy counted from `from`: what a bottleneck
    /// keeps (`Stage::watch_queue`).
    pub fn attached(&self, from: Instant) -> QueueWatch {
        self.occupancy.attach(from);
        self.clone()
    }

    /// A packet joined or left the queue at `t` (left: to the serializer
    /// or a trace opportunity); the queue now holds `bytes`.
    pub fn changed(&self, t: Instant, bytes: u64) {
        self.occupancy.record(t, bytes);
    }

    /// A packet that arrived at `arrival` left the bottleneck at `t`.
    pub fn departed(&self, arrival: Instant, t: Instant) {
        self.sojourn.record((t - arrival).as_nanos());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(1_000 * MS + ms * MS)
    }

    #[test]
    fn no_bottleneck_no_series() {
        let o = Occupancy::default();
        o.record(at(5), 100);
        assert_eq!(o.view(at(50)), None);
    }

    #[test]
    fn windows_hold_their_maximum_and_carry_the_level_through_quiet_ones() {
        let o = Occupancy::default();
        o.attach(at(0));
        o.record(at(10), 1500); // window 0: 1500
        o.record(at(20), 3000); // window 0: 3000
        o.record(at(90), 0); // back to empty in window 0
        o.record(at(250), 4500); // window 2 (window 1 empty all along)
        o.record(at(330), 1500); // window 3 started at 4500
        let v = o.view(at(520)).expect("attached");
        assert_eq!(v.start_ns, at(0).as_nanos());
        assert_eq!(v.every_ns, 100 * MS);
        assert_eq!(v.bytes, vec![3000, 0, 4500, 4500, 1500, 1500]);
        assert!(!v.truncated);
    }

    #[test]
    fn the_first_attach_sets_the_start() {
        let o = Occupancy::default();
        o.attach(at(0));
        o.attach(at(700));
        o.record(at(150), 10);
        assert_eq!(o.view(at(150)).expect("attached").bytes, vec![0, 10]);
    }

    #[test]
    fn an_hour_at_most() {
        let o = Occupancy::default();
        o.attach(at(0));
        o.record(at(100 * MAX_WINDOWS as u64), 7);
        let v = o
            .view(at(100 * MAX_WINDOWS as u64 + 5_000))
            .expect("attached");
        assert!(v.truncated);
        assert_eq!(v.bytes.len(), MAX_WINDOWS);
        assert!(v.bytes.iter().all(|b| *b == 0));
    }
}
