//! A lock-free histogram of the emulator's timer lateness (how long after
//! its scheduled departure a packet was handed to the TUN write), so the
//! stats can state percentiles of the emulator's own delay error rather
//! than only a mean and a maximum.
//!
//! Buckets: 1 µs wide below 256 µs (where the accuracy targets live), then
//! 16 log-spaced buckets per octave up to 2^24 µs (~17 s); anything later
//! lands in the last bucket. A percentile is reported as the upper edge of
//! its bucket, i.e. "at most", never flattering.
//!
//! Hand-written because it must be written by the forwarding thread and
//! read by the main thread without a lock: `hdrhistogram` records through
//! `&mut` (its `SyncHistogram` needs a refresh handshake with the reader).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const LINEAR: usize = 256;
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const FIRST_OCTAVE: u32 = 8; // 2^8 = 256 µs = LINEAR
const OCTAVES: usize = 16;
pub const BUCKETS: usize = LINEAR + SUB * OCTAVES;

/// Bucket index of a lateness in nanoseconds.
pub fn bucket(late_ns: u64) -> usize {
    let us = late_ns / 1000;
    if us < LINEAR as u64 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros(); // >= FIRST_OCTAVE
    let o = (octave - FIRST_OCTAVE) as usize;
    if o >= OCTAVES {
        return BUCKETS - 1;
    }
    let frac = ((us >> (octave - SUB_BITS)) as usize) & (SUB - 1);
    LINEAR + o * SUB + frac
}

/// The exclusive upper edge of bucket `i`, in whole microseconds.
pub fn upper_us(i: usize) -> u64 {
    if i < LINEAR {
        return i as u64 + 1;
    }
    let o = ((i - LINEAR) / SUB) as u32;
    let frac = ((i - LINEAR) % SUB) as u64;
    let base = 1u64 << (o + FIRST_OCTAVE);
    base + (frac + 1) * (base >> SUB_BITS)
}

#[derive(Debug)]
pub struct Histogram {
    counts: Vec<AtomicU64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Histogram {
    pub fn record(&self, late_ns: u64) {
        self.counts[bucket(late_ns)].fetch_add(1, Relaxed);
    }

    /// The `q` quantile (0 < q <= 1) as an upper bound in µs; 0 when empty.
    /// `max_ns` (the largest lateness seen) bounds the last, open-ended
    /// bucket, so an overflow is never reported below what happened.
    pub fn quantile_us(&self, q: f64, max_ns: u64) -> u64 {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        let last = upper_us(BUCKETS - 1).max(max_ns.div_ceil(1000));
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return if i == BUCKETS - 1 { last } else { upper_us(i) };
            }
        }
        last
    }
}

/// A histogram with its maximum: what a bottleneck records of each
/// packet's time in it (its queue sojourn: waiting plus serialization),
/// shared with the stats reader.
#[derive(Debug, Default)]
pub struct Durations {
    pub hist: Histogram,
    pub max_ns: AtomicU64,
}

impl Durations {
    pub fn record(&self, ns: u64) {
        self.hist.record(ns);
        self.max_ns.fetch_max(ns, Relaxed);
    }

    /// The `q` quantile in µs (an upper bound; 0 when empty).
    pub fn quantile_us(&self, q: f64) -> u64 {
        self.hist.quantile_us(q, self.max_ns.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_ordered() {
        // every bucket's upper edge is the next bucket's lower edge
        for us in [
            0u64,
            1,
            17,
            255,
            256,
            257,
            271,
            272,
            511,
            512,
            1000,
            65_535,
            1 << 23,
        ] {
            let i = bucket(us * 1000);
            assert!(
                upper_us(i) > us,
                "{us} µs -> bucket {i} ends at {}",
                upper_us(i)
            );
            if i > 0 {
                assert!(
                    upper_us(i - 1) <= us,
                    "{us} µs -> bucket {i}, previous ends at {}",
                    upper_us(i - 1)
                );
            }
        }
        for i in 1..BUCKETS {
            assert!(upper_us(i) > upper_us(i - 1));
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn log_buckets_are_within_one_sixteenth() {
        for i in LINEAR..BUCKETS {
            let lower = upper_us(i - 1);
            let width = upper_us(i) - lower;
            assert!(
                width * 16 <= lower,
                "bucket {i}: width {width} at {lower} µs"
            );
        }
    }

    #[test]
    fn quantiles_of_a_known_mix() {
        let h = Histogram::default();
        assert_eq!(h.quantile_us(0.5, 0), 0);
        for _ in 0..90 {
            h.record(3_400); // 3.4 µs -> [3, 4)
        }
        for _ in 0..9 {
            h.record(50_000);
        }
        h.record(2_000_000); // 2 ms
        assert_eq!(h.quantile_us(0.5, 2_000_000), 4);
        assert_eq!(h.quantile_us(0.9, 2_000_000), 4);
        assert_eq!(h.quantile_us(0.99, 2_000_000), 51);
        let top = h.quantile_us(1.0, 2_000_000);
        assert!((2000..=2000 + 2000 / 16).contains(&top), "{top}");
    }

    #[test]
    fn an_overflow_is_reported_at_its_true_size() {
        let h = Histogram::default();
        let sixty_s = 60_000_000_000;
        h.record(sixty_s);
        assert_eq!(h.quantile_us(0.5, sixty_s), 60_000_000);
    }
}
