//! Per-direction counters shared between a forwarding thread (writer) and
//! the main thread (reader), and the stats JSON.

use crate::histogram::{Durations, Histogram};
use crate::json::{self, Float};
use crate::model::StageCounters;
use crate::occupancy::{Occupancy, OccupancyView};
use crate::records::{FaultLog, FaultReport};
use crate::schedule::Applied;
use crate::spec::Normalized;
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Units: "packets" are what the models see. On the passthrough and
/// whole-delay paths a GSO super-packet counts as one packet; on the
/// segmented path it counts as its MTU-sized segments. Bytes are IP bytes
/// (no virtio-net header, no L2 framing).
#[derive(Debug, Default)]
pub struct DirStats {
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub delivered_packets: AtomicU64,
    pub delivered_bytes: AtomicU64,
    /// Copied from the model counters by the forwarding thread.
    pub dropped_loss: AtomicU64,
    pub dropped_queue: AtomicU64,
    pub dropped_outage: AtomicU64,
    pub rewritten: AtomicU64,
    pub dropped_stale: AtomicU64,
    /// The emulator's own failures: TUN write errors, internal overflow,
    /// malformed super-packets. Never folded into the loss counters.
    pub dropped_emulator: AtomicU64,
    pub duplicated: AtomicU64,
    pub reordered: AtomicU64,
    /// Dropped by a targeted fault (written only with classification on).
    pub dropped_fault: AtomicU64,
    /// Reads that carried a GSO super-packet.
    pub gso_superpackets_in: AtomicU64,
    /// Segments produced by splitting super-packets (segmented path only).
    pub segments_out: AtomicU64,
    /// Writes that carried a super-packet re-assembled by the coalescer
    /// (segmented path only).
    pub gso_superpackets_out: AtomicU64,
    /// Packets held inside the models right now.
    pub held_packets: AtomicU64,
    /// Timer accuracy of the model paths: how late packets were written
    /// relative to their scheduled departure (sum and max, ns).
    pub late_ns_sum: AtomicU64,
    pub late_ns_max: AtomicU64,
    /// ... and their distribution (for percentiles).
    pub late_hist: Histogram,
    /// The schedule's steps, as applied.
    pub events: Mutex<Vec<Applied>>,
    /// Each packet's time in the bottleneck (rate or trace): queue + serialization.
    pub sojourn: Arc<Durations>,
    /// The bottleneck queue's occupancy over time.
    pub occupancy: Arc<Occupancy>,
    /// Classified messages and fired faults (`None`: classification off,
    /// and the document lacks their keys).
    pub faults: Mutex<Option<FaultLog>>,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    pub dropped_outage: u64,
    pub rewritten: u64,
    pub dropped_stale: u64,
    pub dropped_emulator: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub dropped_fault: u64,
    pub gso_superpackets_in: u64,
    pub segments_out: u64,
    pub gso_superpackets_out: u64,
    pub held_packets: u64,
    pub late_ns_sum: u64,
    pub late_ns_max: u64,
    /// Percentiles of the lateness, as bucket upper edges (µs).
    pub late_us_p50: u64,
    pub late_us_p99: u64,
    pub late_us_p999: u64,
    /// Time in the bottleneck's queue (and serializer), µs upper bounds.
    pub sojourn_us_p50: u64,
    pub sojourn_us_p90: u64,
    pub sojourn_us_p99: u64,
    pub sojourn_us_max: u64,
}

impl DirStats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Record how late one packet left relative to its schedule.
    pub fn record_lateness(&self, late_ns: u64) {
        self.late_ns_sum.fetch_add(late_ns, Relaxed);
        self.late_ns_max.fetch_max(late_ns, Relaxed);
        self.late_hist.record(late_ns);
    }

    /// Publish the model counters (absolute values owned by the pipeline).
    pub fn publish_models(&self, c: &StageCounters, held: usize) {
        self.dropped_loss.store(c.dropped_loss, Relaxed);
        self.dropped_queue.store(c.dropped_queue, Relaxed);
        self.dropped_outage.store(c.dropped_outage, Relaxed);
        self.rewritten.store(c.rewritten, Relaxed);
        self.dropped_stale.store(c.dropped_stale, Relaxed);
        self.duplicated.store(c.duplicated, Relaxed);
        self.reordered.store(c.reordered, Relaxed);
        self.dropped_fault.store(c.dropped_fault, Relaxed);
        self.held_packets.store(held as u64, Relaxed);
    }

    pub fn record_events(&self, applied: Vec<Applied>) {
        if !applied.is_empty() {
            let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
            ev.extend(applied);
        }
    }

    /// The steps applied so far, as the stats document lists them.
    pub fn events(&self) -> Vec<AppliedEvent> {
        let ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.iter()
            .map(|a| AppliedEvent {
                event: a.event,
                kind: a.kind.as_str(),
                at_ns: a.at.as_nanos(),
                late_ns: a.late.as_nanos(),
            })
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        let late_max = self.late_ns_max.load(Relaxed);
        Snapshot {
            packets_in: self.packets_in.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            delivered_packets: self.delivered_packets.load(Relaxed),
            delivered_bytes: self.delivered_bytes.load(Relaxed),
            dropped_loss: self.dropped_loss.load(Relaxed),
            dropped_queue: self.dropped_queue.load(Relaxed),
            dropped_outage: self.dropped_outage.load(Relaxed),
            rewritten: self.rewritten.load(Relaxed),
            dropped_stale: self.dropped_stale.load(Relaxed),
            dropped_emulator: self.dropped_emulator.load(Relaxed),
            duplicated: self.duplicated.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            dropped_fault: self.dropped_fault.load(Relaxed),
            gso_superpackets_in: self.gso_superpackets_in.load(Relaxed),
            segments_out: self.segments_out.load(Relaxed),
            gso_superpackets_out: self.gso_superpackets_out.load(Relaxed),
            held_packets: self.held_packets.load(Relaxed),
            late_ns_sum: self.late_ns_sum.load(Relaxed),
            late_ns_max: self.late_ns_max.load(Relaxed),
            late_us_p50: self.late_hist.quantile_us(0.5, late_max),
            late_us_p99: self.late_hist.quantile_us(0.99, late_max),
            late_us_p999: self.late_hist.quantile_us(0.999, late_max),
            sojourn_us_p50: self.sojourn.quantile_us(0.5),
            sojourn_us_p90: self.sojourn.quantile_us(0.9),
            sojourn_us_p99: self.sojourn.quantile_us(0.99),
            sojourn_us_max: self.sojourn.max_ns.load(Relaxed).div_ceil(1000),
        }
    }
}

impl Snapshot {
    /// Mean lateness of model departures (µs, 0 when none), 0.1 µs precision.
    pub fn late_us_mean(&self) -> f64 {
        let n = self.delivered_packets.max(1) as f64;
        (self.late_ns_sum as f64 / n / 100.0).round() / 10.0
    }

    pub fn to_json(&self) -> String {
        json::to_string(self)
    }
}

/// The per-direction object of the stats document (key order as written).
impl Serialize for Snapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Snapshot", 25)?;
        self.fields(&mut o)?;
        o.end()
    }
}

impl Snapshot {
    fn fields<O: SerializeStruct>(&self, o: &mut O) -> Result<(), O::Error> {
        o.serialize_field("packets_in", &self.packets_in)?;
        o.serialize_field("bytes_in", &self.bytes_in)?;
        o.serialize_field("delivered_packets", &self.delivered_packets)?;
        o.serialize_field("delivered_bytes", &self.delivered_bytes)?;
        o.serialize_field("dropped_loss", &self.dropped_loss)?;
        o.serialize_field("dropped_queue", &self.dropped_queue)?;
        o.serialize_field("dropped_outage", &self.dropped_outage)?;
        o.serialize_field("rewritten", &self.rewritten)?;
        o.serialize_field("dropped_stale", &self.dropped_stale)?;
        o.serialize_field("dropped_emulator", &self.dropped_emulator)?;
        o.serialize_field("duplicated", &self.duplicated)?;
        o.serialize_field("reordered", &self.reordered)?;
        o.serialize_field("gso_superpackets_in", &self.gso_superpackets_in)?;
        o.serialize_field("segments_out", &self.segments_out)?;
        o.serialize_field("gso_superpackets_out", &self.gso_superpackets_out)?;
        o.serialize_field("held_packets", &self.held_packets)?;
        o.serialize_field("late_us_mean", &Float(self.late_us_mean()))?;
        o.serialize_field("late_us_max", &Float(self.late_ns_max as f64 / 1e3))?;
        o.serialize_field("late_us_p50", &self.late_us_p50)?;
        o.serialize_field("late_us_p99", &self.late_us_p99)?;
        o.serialize_field("late_us_p999", &self.late_us_p999)?;
        o.serialize_field("sojourn_us_p50", &self.sojourn_us_p50)?;
        o.serialize_field("sojourn_us_p90", &self.sojourn_us_p90)?;
        o.serialize_field("sojourn_us_p99", &self.sojourn_us_p99)?;
        o.serialize_field("sojourn_us_max", &self.sojourn_us_max)
    }
}

/// One direction in the stats document: its counters, and the bottleneck
/// queue's occupancy series where it has a bottleneck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirReport {
    pub counters: Snapshot,
    /// With classification on: `dropped_fault` and the fault records.
    pub faults: Option<FaultReport>,
    pub occupancy: Option<OccupancyView>,
}

impl DirStats {
    /// The counters now, the fault records (their times relative to the
    /// emulator's start `started` and the schedule's `schedule`), and the
    /// occupancy series up to `now`.
    pub fn report(
        &self,
        now: crate::time::Instant,
        started: crate::time::Instant,
        schedule: Option<crate::time::Instant>,
    ) -> DirReport {
        let faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        DirReport {
            counters: self.snapshot(),
            faults: faults.as_ref().map(|f| f.view(started, schedule)),
            occupancy: self.occupancy.view(now),
        }
    }

    /// Run `f` on the fault log, if classification is on.
    pub fn with_faults(&self, f: impl FnOnce(&mut FaultLog)) {
        let mut log = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = log.as_mut() {
            f(log);
        }
    }
}

impl Serialize for DirReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("DirReport", 34)?;
        self.counters.fields(&mut o)?;
        if let Some(f) = &self.faults {
            o.serialize_field("dropped_fault", &self.counters.dropped_fault)?;
            o.serialize_field("faults", &f.faults)?;
            o.serialize_field("faults_truncated", &f.faults_truncated)?;
            o.serialize_field("messages", &f.messages)?;
            o.serialize_field("messages_truncated", &f.messages_truncated)?;
            o.serialize_field("data_marks", &f.data_marks)?;
            o.serialize_field("data_marks_truncated", &f.data_marks_truncated)?;
            o.serialize_field("classes", &f.classes)?;
        }
        if let Some(occ) = &self.occupancy {
            o.serialize_field("occupancy", occ)?;
        }
        o.end()
    }
}

/// Stats JSON format version (bump on incompatible change):
/// 1 = first release (this file).
pub const STATS_VERSION: u64 = 1;

/// The whole stats document (also the `{"event":"stats",...}` line, with
/// `event` first).
#[derive(Serialize)]
struct Report<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a str>,
    version: u64,
    seed: u64,
    elapsed_s: Float,
    specs: Specs<'a>,
    a2b: &'a DirReport,
    b2a: &'a DirReport,
    schedule: &'a ScheduleReport,
}

/// When the schedule started (`CLOCK_MONOTONIC` ns; null: not yet, or no
/// schedule) and each direction's steps as applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScheduleReport {
    pub start_ns: Option<u64>,
    pub a2b: Vec<AppliedEvent>,
    pub b2a: Vec<AppliedEvent>,
}

/// One applied step: its event (0-based), `set`/`down`/`up`, its time
/// since the schedule's start, and how late the event loop applied it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AppliedEvent {
    pub event: usize,
    pub kind: &'static str,
    pub at_ns: u64,
    pub late_ns: u64,
}

#[derive(Serialize)]
struct Specs<'a> {
    a2b: &'a Normalized,
    b2a: &'a Normalized,
}

/// The stats document as one line of JSON (its shape: the `Report` struct above).
pub fn report_json(
    event: Option<&str>,
    seed: u64,
    elapsed_s: f64,
    specs: (&Normalized, &Normalized),
    a2b: &DirReport,
    b2a: &DirReport,
    schedule: &ScheduleReport,
) -> String {
    json::to_string(&Report {
        event,
        version: STATS_VERSION,
        seed,
        elapsed_s: Float((elapsed_s * 1000.0).round() / 1000.0),
        specs: Specs {
            a2b: specs.0,
            b2a: specs.1,
        },
        a2b,
        b2a,
        schedule,
    })
}

/// Write `contents` to `path` atomically (tmp file in the same directory,
/// then rename). The tmp file is `PATH.tmp`, as documented; `tempfile`'s
/// random names would leave strays after a SIGKILL.
pub fn write_atomic(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the whole stats document byte for byte (the Python side parses
    /// it; key order, integers vs floats and rounding all matter).
    #[test]
    fn report_shape() {
        let s = Snapshot {
            packets_in: 3,
            bytes_in: 4500,
            delivered_packets: 2,
            delivered_bytes: 3000,
            dropped_loss: 1,
            late_ns_sum: 3_000,
            late_ns_max: 2_500,
            late_us_p50: 2,
            late_us_p99: 3,
            late_us_p999: 3,
            ..Default::default()
        };
        let empty = Snapshot::default();
        let a2b = crate::spec::parse("delay=50ms,rate=10mbit,loss=1%").unwrap();
        let b2a = crate::spec::parse("ge_p=1%,ge_r=25%").unwrap();
        let specs = (&a2b.normalized(), &b2a.normalized());
        let sched = ScheduleReport {
            start_ns: Some(12),
            a2b: vec![AppliedEvent {
                event: 0,
                kind: "down",
                at_ns: 5,
                late_ns: 1,
            }],
            b2a: vec![],
        };
        let s = DirReport {
            counters: s,
            faults: None,
            occupancy: Some(OccupancyView {
                start_ns: 100,
                every_ns: 100_000_000,
                bytes: vec![0, 3000],
                truncated: false,
            }),
        };
        let empty = DirReport {
            counters: empty,
            faults: None,
            occupancy: None,
        };
        let j = report_json(Some("stats"), 7, 1.23456, specs, &s, &empty, &sched);
        let want = concat!(
            r#"{"event":"stats","version":1,"seed":7,"elapsed_s":1.235,"specs":{"#,
            r#""a2b":{"delay_ns":50000000,"jitter_ns":0,"jitter_dist":"uniform","rate_bps":10000000,"#,
            r#""trace":null,"trace_mean_bps":null,"queue_packets":1000,"queue_bytes":null,"loss":0.01,"ge":null,"reorder":0,"#,
            r#""reorder_gap":3,"dup":0,"nat":[],"path":"segmented"},"#,
            r#""b2a":{"delay_ns":0,"jitter_ns":0,"jitter_dist":"uniform","rate_bps":null,"#,
            r#""trace":null,"trace_mean_bps":null,"queue_packets":null,"queue_bytes":null,"loss":null,"#,
            r#""ge":{"p":0.01,"r":0.25,"h":1,"k":0,"stationary_loss":0.038461538461538464},"#,
            r#""reorder":0,"reorder_gap":3,"dup":0,"nat":[],"path":"segmented"}},"#,
            r#""a2b":{"packets_in":3,"bytes_in":4500,"delivered_packets":2,"delivered_bytes":3000,"#,
            r#""dropped_loss":1,"dropped_queue":0,"dropped_outage":0,"rewritten":0,"dropped_stale":0,"dropped_emulator":0,"duplicated":0,"reordered":0,"#,
            r#""gso_superpackets_in":0,"segments_out":0,"gso_superpackets_out":0,"held_packets":0,"#,
            r#""late_us_mean":1.5,"late_us_max":2.5,"late_us_p50":2,"late_us_p99":3,"late_us_p999":3,"#,
            r#""sojourn_us_p50":0,"sojourn_us_p90":0,"sojourn_us_p99":0,"sojourn_us_max":0,"#,
            r#""occupancy":{"start_ns":100,"every_ns":100000000,"bytes":[0,3000],"truncated":false}},"#,
            r#""b2a":{"packets_in":0,"bytes_in":0,"delivered_packets":0,"delivered_bytes":0,"#,
            r#""dropped_loss":0,"dropped_queue":0,"dropped_outage":0,"rewritten":0,"dropped_stale":0,"dropped_emulator":0,"duplicated":0,"reordered":0,"#,
            r#""gso_superpackets_in":0,"segments_out":0,"gso_superpackets_out":0,"held_packets":0,"#,
            r#""late_us_mean":0,"late_us_max":0,"late_us_p50":0,"late_us_p99":0,"late_us_p999":0,"#,
            r#""sojourn_us_p50":0,"sojourn_us_p90":0,"sojourn_us_p99":0,"sojourn_us_max":0},"#,
            r#""schedule":{"start_ns":12,"a2b":[{"event":0,"kind":"down","at_ns":5,"late_ns":1}],"b2a":[]}}"#,
        );
        assert_eq!(j, want);
        let file = report_json(None, 7, 1.23456, specs, &s, &empty, &sched);
        assert_eq!(file, want.replacen(r#""event":"stats","#, "", 1));
    }

    /// With classification on, the fault records follow the counters (and
    /// precede the occupancy series); without, the keys are absent (above).
    #[test]
    fn fault_records_in_a_direction() {
        let r = DirReport {
            counters: Snapshot {
                dropped_fault: 2,
                ..Default::default()
            },
            faults: Some(
                crate::records::FaultLog::default().view(crate::time::Instant::ZERO, None),
            ),
            occupancy: Some(OccupancyView {
                start_ns: 0,
                every_ns: 100_000_000,
                bytes: vec![],
                truncated: false,
            }),
        };
        let j = json::to_string(&r);
        let tail = concat!(
            r#""sojourn_us_max":0,"dropped_fault":2,"faults":[],"faults_truncated":false,"#,
            r#""messages":[],"messages_truncated":false,"data_marks":[],"data_marks_truncated":false,"#,
            r#""classes":{},"occupancy":{"start_ns":0,"every_ns":100000000,"bytes":[],"truncated":false}}"#
        );
        assert!(j.ends_with(tail), "{j}");
        assert_eq!(j.matches("dropped_fault").count(), 1);
    }

    #[test]
    fn atomic_write_replaces() {
        let dir = std::env::temp_dir().join(format!("tblk-stats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.json");
        write_atomic(&p, "1").unwrap();
        write_atomic(&p, "2").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "2");
        assert!(!dir.join("s.json.tmp").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
