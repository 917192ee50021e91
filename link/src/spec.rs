//! Per-direction impairment specs: `key=value,key=value` -> [`DirSpec`].
//!
//! All validation happens here, before any device is opened. Probabilities
//! are written as percentages (`loss=0.1%`) and stored as fractions.

use crate::json::{self, Float};
use crate::model::delay::{DelayParams, JitterDist};
use crate::model::loss::{GilbertElliott, LossModel};
use crate::model::nat::NatRule;
use crate::model::queue::QueueLimit;
use crate::model::rate::RateParams;
use crate::model::reorder::ReorderParams;
use crate::model::trace::Trace;
use crate::time::Duration;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// Default bottleneck queue when `rate` is set without `queue`.
pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);
/// Default `reorder_gap` (packets): 3 successors overtake a reordered packet.
pub const DEFAULT_REORDER_GAP: u32 = 3;
const MAX_DELAY: Duration = Duration::from_secs(3600);
const MAX_RATE_BPS: f64 = 1e12;

#[derive(Clone, Debug, PartialEq)]
pub struct DirSpec {
    pub delay: Duration,
    pub jitter: Duration,
    pub jitter_dist: JitterDist,
    pub rate_bps: Option<u64>,
    /// A packet-delivery trace in place of `rate_bps` (`model::trace`).
    pub trace: Option<Arc<Trace>>,
    /// Meaningful only with `rate_bps` or `trace`.
    pub queue: QueueLimit,
    pub loss: Option<LossModel>,
    pub reorder: f64,
    pub reorder_gap: u32,
    pub dup: f64,
    /// Address rewriting (a `rebind`): at most one rule per IP version.
    pub nat: Vec<NatRule>,
}

impl Default for DirSpec {
    fn default() -> Self {
        DirSpec {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_dist: JitterDist::Uniform,
            rate_bps: None,
            trace: None,
            queue: DEFAULT_QUEUE,
            loss: None,
            reorder: 0.0,
            reorder_gap: DEFAULT_REORDER_GAP,
            dup: 0.0,
            nat: Vec::new(),
        }
    }
}

/// Which forwarding path a direction uses (see `io::forward`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Path {
    /// No impairment: super-packets are written out as soon as read.
    Passthrough,
    /// Fixed delay only: super-packets go whole through the delay line.
    WholeDelay,
    /// Anything per-packet: super-packets are split into MTU-sized segments
    /// first, and every model sees individual packets.
    Segmented,
}

impl Path {
    pub fn as_str(self) -> &'static str {
        match self {
            Path::Passthrough => "passthrough",
            Path::WholeDelay => "whole_delay",
            Path::Segmented => "segmented",
        }
    }
}

impl DirSpec {
    pub fn path(&self) -> Path {
        let per_packet = self.jitter > Duration::ZERO
            || self.rate_bps.is_some()
            || self.trace.is_some()
            || self.loss.is_some()
            || self.reorder > 0.0
            || self.dup > 0.0
            || !self.nat.is_empty();
        if per_packet {
            Path::Segmented
        } else if self.delay > Duration::ZERO {
            Path::WholeDelay
        } else {
            Path::Passthrough
        }
    }

    /// The delay stage's parameters. (The other stages take a field as it
    /// is: `nat`, `loss`, `queue` for a trace, `dup`.)
    pub fn delay_params(&self) -> DelayParams {
        DelayParams {
            delay: self.delay,
            jitter: self.jitter,
            dist: self.jitter_dist,
        }
    }

    /// The bottleneck's parameters (`rate_bps` `None`: no rate limit).
    pub fn rate_params(&self) -> RateParams {
        RateParams {
            rate_bps: self.rate_bps,
            queue: self.queue,
        }
    }

    /// The reorder stage's parameters.
    pub fn reorder_params(&self) -> ReorderParams {
        ReorderParams {
            p: self.reorder,
            gap: self.reorder_gap,
        }
    }

    /// Normalized form: durations in ns, rate in bit/s, probabilities as
    /// fractions, every key present (null when unused).
    pub fn normalized(&self) -> Normalized {
        let bottleneck = self.rate_bps.is_some() || self.trace.is_some();
        let (queue_packets, queue_bytes) = match (bottleneck, self.queue) {
            (false, _) => (None, None),
            (true, QueueLimit::Packets(n)) => (Some(n), None),
            (true, QueueLimit::Bytes(b)) => (None, Some(b)),
        };
        let (loss, ge) = match self.loss {
            None => (None, None),
            Some(LossModel::Bernoulli(p)) => (Some(Float(p)), None),
            Some(LossModel::GilbertElliott(g)) => (
                None,
                Some(NormalizedGe {
                    p: Float(g.p),
                    r: Float(g.r),
                    h: Float(g.h),
                    k: Float(g.k),
                    stationary_loss: Float(g.stationary_loss()),
                }),
            ),
        };
        Normalized {
            delay_ns: self.delay.as_nanos(),
            jitter_ns: self.jitter.as_nanos(),
            jitter_dist: self.jitter_dist.as_str(),
            rate_bps: self.rate_bps,
            trace: self.trace.as_ref().map(|t| t.path.clone()),
            trace_mean_bps: self.trace.as_ref().map(|t| Float(t.mean_bps())),
            queue_packets,
            queue_bytes,
            loss,
            ge,
            reorder: Float(self.reorder),
            reorder_gap: self.reorder_gap,
            dup: Float(self.dup),
            nat: self
                .nat
                .iter()
                .map(|r| format!("{}>{}+{}", r.from, r.to, r.port))
                .collect(),
            path: self.path().as_str(),
        }
    }

    /// [`DirSpec::normalized`] as JSON.
    pub fn to_json(&self) -> String {
        json::to_string(&self.normalized())
    }
}

/// The normalized spec as `check` prints it and the stats file's `specs`
/// hold it (field order is the output's key order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Normalized {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub jitter_dist: &'static str,
    pub rate_bps: Option<u64>,
    pub trace: Option<String>,
    pub trace_mean_bps: Option<Float>,
    pub queue_packets: Option<u64>,
    pub queue_bytes: Option<u64>,
    pub loss: Option<Float>,
    pub ge: Option<NormalizedGe>,
    pub reorder: Float,
    pub reorder_gap: u32,
    pub dup: Float,
    pub nat: Vec<String>,
    pub path: &'static str,
}

/// Gilbert-Elliott parameters as fractions, with the long-run loss rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NormalizedGe {
    pub p: Float,
    pub r: Float,
    pub h: Float,
    pub k: Float,
    pub stationary_loss: Float,
}

/// A bad spec. Most errors name the key and its value (`loss=200%: must be
/// between 0% and 100%`); an item without `=` names only the item
/// (`delay: expected key=value`), and errors about a combination of keys
/// name neither (`ge_p needs ge_r`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub key: Option<String>,
    pub value: Option<String>,
    /// What is wrong, without the `key=value: ` prefix.
    pub message: String,
}

impl SpecError {
    pub(crate) fn about(message: impl Into<String>) -> Self {
        SpecError {
            key: None,
            value: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.key, &self.value) {
            (Some(k), Some(v)) => write!(f, "{k}={v}: {}", self.message),
            (Some(k), None) => write!(f, "{k}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SpecError {}

pub(crate) fn bad(key: &str, value: &str, why: impl fmt::Display) -> SpecError {
    SpecError {
        key: Some(key.to_string()),
        value: Some(value.to_string()),
        message: why.to_string(),
    }
}

/// Splits "12.5ms" into (12.5, "ms"); the number must be a plain decimal.
/// (Hand-written units: humantime takes no decimals (`1.5ms`), byte-size
/// crates spell and round units differently, and the exact error messages
/// are part of the `check` contract.)
fn split_number(v: &str) -> Option<(f64, &str)> {
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(end);
    if num.is_empty() || num.starts_with('+') {
        return None;
    }
    let x: f64 = num.parse().ok()?;
    x.is_finite().then_some((x, unit))
}

pub fn parse_duration(key: &str, v: &str) -> Result<Duration, SpecError> {
    let (x, unit) = split_number(v).ok_or_else(|| bad(key, v, "expected a duration like 50ms"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" if x == 0.0 => 1.0,
        "" => return Err(bad(key, v, "missing unit (ns, us, ms, s)")),
        u => return Err(bad(key, v, format!("unknown unit '{u}' (ns, us, ms, s)"))),
    };
    if x < 0.0 {
        return Err(bad(key, v, "must not be negative"));
    }
    let ns = (x * scale).round();
    if ns > MAX_DELAY.as_nanos() as f64 {
        return Err(bad(key, v, "must be at most 3600s"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

pub fn parse_rate(key: &str, v: &str) -> Result<u64, SpecError> {
    let (x, unit) = split_number(v).ok_or_else(|| bad(key, v, "expected a rate like 100mbit"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "" => return Err(bad(key, v, "missing unit (bit, kbit, mbit, gbit)")),
        _ => {
            return Err(bad(
                key,
                v,
                format!("unknown unit '{unit}' (bit, kbit, mbit, gbit)"),
            ))
        }
    };
    let bps = (x * scale).round();
    if bps < 1.0 {
        return Err(bad(key, v, "must be at least 1bit"));
    }
    if bps > MAX_RATE_BPS {
        return Err(bad(key, v, "must be at most 1000gbit"));
    }
    Ok(bps as u64)
}

pub fn parse_queue(key: &str, v: &str) -> Result<QueueLimit, SpecError> {
    let (x, unit) = split_number(v)
        .ok_or_else(|| bad(key, v, "expected packets like 1000p or bytes like 256KB"))?;
    if x <= 0.0 {
        return Err(bad(key, v, "must be positive"));
    }
    let bytes_scale = match unit {
        "p" => {
            if x.fract() != 0.0 {
                return Err(bad(key, v, "packet count must be an integer"));
            }
            return Ok(QueueLimit::Packets(x as u64));
        }
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "" => return Err(bad(key, v, "missing unit (p, B, KB, MB, KiB, MiB)")),
        u => {
            return Err(bad(
                key,
                v,
                format!("unknown unit '{u}' (p, B, KB, MB, KiB, MiB)"),
            ))
        }
    };
    let b = (x * bytes_scale).round();
    if b < 1.0 {
        return Err(bad(key, v, "must be at least 1B"));
    }
    Ok(QueueLimit::Bytes(b as u64))
}

/// "0.1%" -> 0.001.
pub fn parse_percent(key: &str, v: &str) -> Result<f64, SpecError> {
    let num = v
        .strip_suffix('%')
        .ok_or_else(|| bad(key, v, "expected a percentage like 0.1%"))?;
    let x = match split_number(num) {
        Some((x, "")) => x,
        _ => return Err(bad(key, v, "expected a percentage like 0.1%")),
    };
    if !(0.0..=100.0).contains(&x) {
        return Err(bad(key, v, "must be between 0% and 100%"));
    }
    Ok(x / 100.0)
}

fn parse_gap(key: &str, v: &str) -> Result<u32, SpecError> {
    match v.parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(bad(key, v, "expected a packet count between 1 and 1000000")),
    }
}

const KEYS: &[&str] = &[
    "delay",
    "jitter",
    "jitter_dist",
    "rate",
    "trace",
    "queue",
    "loss",
    "ge_p",
    "ge_r",
    "ge_h",
    "ge_k",
    "reorder",
    "reorder_gap",
    "dup",
    "nat_v4",
    "nat_v6",
    "nat_port",
];

/// Where a SPEC's `trace=FILE` comes from: parsing reads no file. The
/// caller hands over the parsed trace of the file the SPEC names (the
/// command line reads it), or why it cannot (`FILE: ...`, reported as that
/// key's error).
pub type TraceSource<'a> = &'a dyn Fn(&str) -> Result<Arc<Trace>, String>;

/// Parse one direction's spec, one that names no file (a `trace=` is
/// refused: see [`parse_with`]). Empty (or all whitespace) = no impairment.
pub fn parse(spec: &str) -> Result<DirSpec, SpecError> {
    parse_with(spec, &|path| {
        Err(format!("{path}: no trace was read for this spec"))
    })
}

/// [`parse`], taking the trace that `trace=` names from `traces`.
pub fn parse_with(spec: &str, traces: TraceSource) -> Result<DirSpec, SpecError> {
    let mut s = DirSpec::default();
    let mut seen: Vec<&str> = Vec::new();
    let (mut loss, mut queue, mut gap) = (None, None, None);
    let mut nat_port = None;
    let (mut ge_p, mut ge_r, mut ge_h, mut ge_k) = (None, None, None, None);
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, v) = item.split_once('=').ok_or_else(|| SpecError {
            key: Some(item.to_string()),
            value: None,
            message: "expected key=value".into(),
        })?;
        let (key, v) = (key.trim(), v.trim());
        let known = KEYS
            .iter()
            .find(|k| **k == key)
            .ok_or_else(|| bad(key, v, format!("unknown key (known: {})", KEYS.join(", "))))?;
        if seen.contains(known) {
            return Err(bad(key, v, "key given twice"));
        }
        seen.push(known);
        match key {
            "delay" => s.delay = parse_duration(key, v)?,
            "jitter" => s.jitter = parse_duration(key, v)?,
            "jitter_dist" => {
                s.jitter_dist = match v {
                    "uniform" => JitterDist::Uniform,
                    "normal" => JitterDist::Normal,
                    _ => return Err(bad(key, v, "expected uniform or normal")),
                }
            }
            "rate" => s.rate_bps = Some(parse_rate(key, v)?),
            "trace" => s.trace = Some(traces(v).map_err(|e| bad(key, v, e))?),
            "queue" => queue = Some((parse_queue(key, v)?, v)),
            "loss" => loss = Some(parse_percent(key, v)?),
            "ge_p" => ge_p = Some(parse_percent(key, v)?),
            "ge_r" => ge_r = Some((parse_percent(key, v)?, v)),
            "ge_h" => ge_h = Some((parse_percent(key, v)?, v)),
            "ge_k" => ge_k = Some((parse_percent(key, v)?, v)),
            "reorder" => s.reorder = parse_percent(key, v)?,
            "reorder_gap" => gap = Some((parse_gap(key, v)?, v)),
            "dup" => s.dup = parse_percent(key, v)?,
            "nat_v4" | "nat_v6" => {
                let (from, to) = v
                    .split_once('>')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    .ok_or_else(|| bad(key, v, "expected FROM>TO addresses"))?;
                let family_ok = |a: &std::net::IpAddr| a.is_ipv4() == (key == "nat_v4");
                if !family_ok(&from) || !family_ok(&to) {
                    return Err(bad(key, v, "both addresses of the key's IP version"));
                }
                s.nat.push(NatRule { from, to, port: 0 });
            }
            "nat_port" => {
                nat_port = Some((
                    v.parse::<u16>()
                        .map_err(|_| bad(key, v, "expected a port shift 0..65535"))?,
                    v,
                ))
            }
            _ => unreachable!("key list and match agree"),
        }
    }
    if let Some((port, v)) = nat_port {
        if s.nat.is_empty() {
            return Err(bad("nat_port", v, "needs nat_v4 or nat_v6"));
        }
        for r in &mut s.nat {
            r.port = port;
        }
    }
    if s.rate_bps.is_some() && s.trace.is_some() {
        return Err(SpecError::about(
            "rate and trace: choose one (a trace is the link's rate over time)",
        ));
    }
    if let Some((q, v)) = queue {
        if s.rate_bps.is_none() && s.trace.is_none() {
            return Err(bad(
                "queue",
                v,
                "needs rate or trace (the queue is the bottleneck's buffer)",
            ));
        }
        s.queue = q;
    }
    if let Some((g, v)) = gap {
        if s.reorder == 0.0 {
            return Err(bad("reorder_gap", v, "needs reorder"));
        }
        s.reorder_gap = g;
    }
    s.loss =
        match (loss, ge_p, ge_r) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => return Err(SpecError::about(
                "loss and ge_*: choose Bernoulli (loss) or Gilbert-Elliott (ge_p, ge_r), not both",
            )),
            (Some(p), None, None) => (p > 0.0).then_some(LossModel::Bernoulli(p)),
            (None, Some(p), Some((r, rv))) => {
                if r == 0.0 {
                    return Err(bad(
                        "ge_r",
                        rv,
                        "must be above 0% (the bad state would never end)",
                    ));
                }
                let ge = GilbertElliott {
                    p,
                    r,
                    h: ge_h.map_or(1.0, |x| x.0),
                    k: ge_k.map_or(0.0, |x| x.0),
                };
                (ge.stationary_loss() > 0.0).then_some(LossModel::GilbertElliott(ge))
            }
            (None, Some(_), None) => return Err(SpecError::about("ge_p needs ge_r")),
            (None, None, Some((_, rv))) => return Err(bad("ge_r", rv, "needs ge_p")),
            (None, None, None) => {
                if let Some((_, v)) = ge_h {
                    return Err(bad("ge_h", v, "needs ge_p and ge_r"));
                }
                if let Some((_, v)) = ge_k {
                    return Err(bad("ge_k", v, "needs ge_p and ge_r"));
                }
                None
            }
        };
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        parse(spec).unwrap_err().to_string()
    }

    #[test]
    fn empty_is_passthrough() {
        for s in ["", " ", ",", " , "] {
            let d = parse(s).unwrap();
            assert_eq!(d, DirSpec::default());
            assert_eq!(d.path(), Path::Passthrough);
        }
    }

    #[test]
    fn full_spec() {
        let d = parse("delay=50ms, jitter=2ms,jitter_dist=normal,rate=100mbit,queue=64KiB,loss=0.1%,reorder=1%,reorder_gap=5,dup=0.5%").unwrap();
        assert_eq!(d.delay, Duration::from_millis(50));
        assert_eq!(d.jitter, Duration::from_millis(2));
        assert_eq!(d.jitter_dist, JitterDist::Normal);
        assert_eq!(d.rate_bps, Some(100_000_000));
        assert_eq!(d.queue, QueueLimit::Bytes(65536));
        assert_eq!(d.loss, Some(LossModel::Bernoulli(0.001)));
        assert_eq!(d.reorder, 0.01);
        assert_eq!(d.reorder_gap, 5);
        assert_eq!(d.dup, 0.005);
        assert_eq!(d.path(), Path::Segmented);
    }

    #[test]
    fn units() {
        assert_eq!(parse_duration("d", "1500ns").unwrap().as_nanos(), 1500);
        assert_eq!(parse_duration("d", "2.5us").unwrap().as_nanos(), 2500);
        assert_eq!(parse_duration("d", "1s").unwrap().as_nanos(), 1_000_000_000);
        assert_eq!(parse_duration("d", "0").unwrap().as_nanos(), 0);
        assert_eq!(parse_rate("r", "1.5Mbit").unwrap(), 1_500_000);
        assert_eq!(parse_rate("r", "10gbit").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("r", "64kbit").unwrap(), 64_000);
        assert_eq!(parse_rate("r", "9600bit").unwrap(), 9600);
        assert_eq!(
            parse_queue("q", "1000p").unwrap(),
            QueueLimit::Packets(1000)
        );
        assert_eq!(
            parse_queue("q", "256KB").unwrap(),
            QueueLimit::Bytes(256_000)
        );
        assert_eq!(
            parse_queue("q", "1MiB").unwrap(),
            QueueLimit::Bytes(1 << 20)
        );
        assert_eq!(parse_queue("q", "1500B").unwrap(), QueueLimit::Bytes(1500));
        assert_eq!(parse_percent("l", "100%").unwrap(), 1.0);
        assert_eq!(parse_percent("l", "0%").unwrap(), 0.0);
    }

    #[test]
    fn fixed_delay_uses_whole_path() {
        assert_eq!(parse("delay=10ms").unwrap().path(), Path::WholeDelay);
        assert_eq!(
            parse("delay=10ms,jitter=1ms").unwrap().path(),
            Path::Segmented
        );
        assert_eq!(parse("loss=0%").unwrap().path(), Path::Passthrough);
    }

    #[test]
    fn gilbert_elliott_defaults() {
        let d = parse("ge_p=1%,ge_r=30%").unwrap();
        let Some(LossModel::GilbertElliott(g)) = d.loss else {
            panic!("{d:?}")
        };
        assert_eq!((g.p, g.r, g.h, g.k), (0.01, 0.3, 1.0, 0.0));
        let d = parse("ge_p=1%,ge_r=30%,ge_h=50%,ge_k=1%").unwrap();
        let Some(LossModel::GilbertElliott(g)) = d.loss else {
            panic!()
        };
        assert_eq!((g.h, g.k), (0.5, 0.01));
    }

    #[test]
    fn every_error_names_key_and_value() {
        let cases = [
            ("delay=-5ms", "delay=-5ms: must not be negative"),
            ("delay=5", "delay=5: missing unit"),
            ("delay=5min", "delay=5min: unknown unit 'min'"),
            ("delay=abc", "delay=abc: expected a duration"),
            ("delay=2h", "delay=2h: unknown unit"),
            ("delay=4000s", "delay=4000s: must be at most"),
            ("jitter=-1ms", "jitter=-1ms: must not be negative"),
            (
                "jitter_dist=pareto",
                "jitter_dist=pareto: expected uniform or normal",
            ),
            ("rate=0mbit", "rate=0mbit: must be at least 1bit"),
            ("rate=0", "rate=0: missing unit"),
            ("rate=10mbps", "rate=10mbps: unknown unit 'mbps'"),
            ("rate=-1mbit", "rate=-1mbit: must be at least 1bit"),
            ("rate=2000gbit", "rate=2000gbit: must be at most"),
            ("rate=10mbit,queue=0p", "queue=0p: must be positive"),
            ("rate=10mbit,queue=0", "queue=0: must be positive"),
            ("rate=10mbit,queue=100", "queue=100: missing unit"),
            (
                "rate=10mbit,queue=1.5p",
                "queue=1.5p: packet count must be an integer",
            ),
            ("rate=10mbit,queue=10GB", "queue=10GB: unknown unit 'GB'"),
            ("queue=100p", "queue=100p: needs rate"),
            ("loss=101%", "loss=101%: must be between 0% and 100%"),
            ("loss=-1%", "loss=-1%: must be between"),
            ("loss=0.1", "loss=0.1: expected a percentage"),
            ("loss=x%", "loss=x%: expected a percentage"),
            ("loss=1%,ge_p=1%,ge_r=10%", "loss and ge_*"),
            ("ge_p=1%", "ge_p needs ge_r"),
            ("ge_r=1%", "ge_r=1%: needs ge_p"),
            ("ge_h=50%", "ge_h=50%: needs ge_p and ge_r"),
            ("ge_k=5%", "ge_k=5%: needs ge_p and ge_r"),
            ("ge_p=1%,ge_r=0%", "ge_r=0%: must be above 0%"),
            ("ge_p=1%,ge_r=200%", "ge_r=200%: must be between"),
            ("reorder=150%", "reorder=150%: must be between"),
            ("reorder_gap=3", "reorder_gap=3: needs reorder"),
            (
                "reorder=1%,reorder_gap=0",
                "reorder_gap=0: expected a packet count",
            ),
            (
                "reorder=1%,reorder_gap=-2",
                "reorder_gap=-2: expected a packet count",
            ),
            ("dup=1", "dup=1: expected a percentage"),
            ("dup=100.5%", "dup=100.5%: must be between"),
            ("bogus=1", "bogus=1: unknown key"),
            ("delay", "delay: expected key=value"),
            ("delay=1ms,delay=2ms", "delay=2ms: key given twice"),
            ("delay=+1ms", "delay=+1ms: expected a duration"),
            ("delay=nanms", "delay=nanms: expected a duration"),
            (
                "nat_v4=1.2.3.4",
                "nat_v4=1.2.3.4: expected FROM>TO addresses",
            ),
            (
                "nat_v4=::1>::2",
                "nat_v4=::1>::2: both addresses of the key's IP version",
            ),
            ("nat_port=5", "nat_port=5: needs nat_v4 or nat_v6"),
            (
                "nat_v4=198.18.0.1>198.18.0.101,nat_port=x",
                "nat_port=x: expected a port shift",
            ),
        ];
        for (spec, want) in cases {
            let got = err(spec);
            assert!(
                got.starts_with(want),
                "{spec:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn trace_replaces_rate_and_takes_a_queue() {
        let text = |path: &str| Trace::parse(path, "1\n2\n").map(Arc::new);
        let d = parse_with("trace=t.mm,queue=50p,delay=5ms", &text).unwrap();
        assert_eq!(d.trace.as_ref().map(|t| t.path.as_str()), Some("t.mm"));
        assert_eq!(d.queue, QueueLimit::Packets(50));
        assert_eq!(d.path(), Path::Segmented);
        let j = d.to_json();
        assert!(
            j.contains(r#""trace_mean_bps":12000000,"queue_packets":50"#),
            "{j}"
        );
        let e = parse_with("trace=t.mm,rate=1mbit", &text).unwrap_err();
        assert!(e.to_string().starts_with("rate and trace: choose one"));
        // the source's error is the key's, before any key after it is read
        let unread = |path: &str| Err(format!("{path}: No such file"));
        let e = parse_with("trace=x.mm,bogus=1", &unread).unwrap_err();
        assert_eq!(e.to_string(), "trace=x.mm: x.mm: No such file");
        assert!(err("trace=t.mm").starts_with("trace=t.mm: t.mm: no trace was read"));
    }

    #[test]
    fn normalized_json() {
        let j = parse("delay=50ms,rate=10mbit,loss=1%").unwrap().to_json();
        assert_eq!(
            j,
            r#"{"delay_ns":50000000,"jitter_ns":0,"jitter_dist":"uniform","rate_bps":10000000,"trace":null,"trace_mean_bps":null,"queue_packets":1000,"queue_bytes":null,"loss":0.01,"ge":null,"reorder":0,"reorder_gap":3,"dup":0,"nat":[],"path":"segmented"}"#
        );
        let j = parse("").unwrap().to_json();
        assert!(
            j.contains(
                r#""rate_bps":null,"trace":null,"trace_mean_bps":null,"queue_packets":null"#
            ),
            "{j}"
        );
        assert!(j.contains(r#""path":"passthrough""#));
    }
}
