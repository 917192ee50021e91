//! Targeted faults: `--a2b-faults` / `--b2a-faults` SPEC -> [`Fault`]s,
//! and the [`FaultStage`] that classifies every packet of a direction
//! (`classify`) and applies them, first in the direction's pipeline.
//!
//! A SPEC is `;`-separated faults, each comma-separated `key=value`:
//! `match=CLASS` (a class name, a family `wg.*` / `ovpn.*` / `ike.*`, or
//! `any`), optionally narrowed by `port=N` (either UDP/TCP port) and
//! `size=A-B` (IP bytes); exactly one selection (`nth=N`, `first=N`,
//! `every=N`, `during=A..B`); exactly one `action` (`drop`, `delay` with
//! `delay=D`, `dup`, `corrupt`). `nth`/`first`/`every` count the messages
//! this fault matches from the emulator's start; `during` takes the
//! messages arriving from A to B after the schedule's start (the clock of
//! the events).

use crate::classify::{payload_start, ports, transport, Class, Classifier, Message};
use crate::gso::offload::{csum_add, csum_fold, VnetHdr, VIRTIO_NET_HDR_F_NEEDS_CSUM};
use crate::model::{Fifo, Rng, Stage, StageCounters};
use crate::packet::{Packet, VNET_HDR_LEN};
use crate::spec::{self, parse_duration, SpecError};
use crate::time::{Duration, Instant};
use rand_core::RngCore;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Which messages a fault looks at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    Any,
    Class(Class),
    /// Every class whose name starts with this (`wg.`, `ovpn.`, `ike.`).
    Family(&'static str),
}

impl Matcher {
    pub fn matches(self, c: Class) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Class(x) => x == c,
            Matcher::Family(prefix) => c.name().starts_with(prefix),
        }
    }
}

/// Which of the matching messages the action applies to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Select {
    /// The Nth (1-based).
    Nth(u64),
    /// The first N.
    First(u64),
    /// Every Nth: N, 2N, 3N...
    Every(u64),
    /// Those arriving in [from, to) after the schedule's start.
    During(Duration, Duration),
}

impl Select {
    /// Whether the `count`-th matching message (1-based), arriving `since`
    /// after the schedule's start (`None`: not started), is selected.
    pub fn selects(self, count: u64, since: Option<Duration>) -> bool {
        match self {
            Select::Nth(n) => count == n,
            Select::First(n) => count <= n,
            Select::Every(n) => count.is_multiple_of(n),
            Select::During(a, b) => since.is_some_and(|s| a <= s && s < b),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Drop,
    /// Hold the message back this long (later packets may overtake it).
    Delay(Duration),
    /// Send it twice.
    Dup,
    /// Flip one byte of its UDP/TCP payload (of an ESP packet: after its
    /// SPI and sequence number), checksums made valid again.
    Corrupt,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Drop => "drop",
            Action::Delay(_) => "delay",
            Action::Dup => "dup",
            Action::Corrupt => "corrupt",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub matcher: Matcher,
    pub port: Option<u16>,
    /// IP length range, inclusive.
    pub size: Option<(usize, usize)>,
    pub select: Select,
    pub action: Action,
}

impl Matcher {
    /// As written in a SPEC.
    pub fn text(self) -> String {
        match self {
            Matcher::Any => "any".into(),
            Matcher::Class(c) => c.name().into(),
            Matcher::Family(p) => format!("{p}*"),
        }
    }
}

/// A fault as `check` prints it: durations in ns, only the selection and
/// the delay it has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Normalized {
    #[serde(rename = "match")]
    pub matcher: String,
    pub port: Option<u16>,
    pub size: Option<[usize; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during_ns: Option<[u64; 2]>,
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ns: Option<u64>,
}

impl Fault {
    pub fn normalized(&self) -> Normalized {
        let pick = |want: fn(Select) -> Option<u64>| want(self.select);
        Normalized {
            matcher: self.matcher.text(),
            port: self.port,
            size: self.size.map(|(a, b)| [a, b]),
            nth: pick(|s| {
                if let Select::Nth(n) = s {
                    Some(n)
                } else {
                    None
                }
            }),
            first: pick(|s| {
                if let Select::First(n) = s {
                    Some(n)
                } else {
                    None
                }
            }),
            every: pick(|s| {
                if let Select::Every(n) = s {
                    Some(n)
                } else {
                    None
                }
            }),
            during_ns: match self.select {
                Select::During(a, b) => Some([a.as_nanos(), b.as_nanos()]),
                _ => None,
            },
            action: self.action.name(),
            delay_ns: match self.action {
                Action::Delay(d) => Some(d.as_nanos()),
                _ => None,
            },
        }
    }
}

/// A bad fault: which one (0-based) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultError {
    pub fault: usize,
    pub error: SpecError,
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault {}: {}", self.fault + 1, self.error)
    }
}

const FAMILIES: [&str; 3] = ["wg.", "ovpn.", "ike."];

fn parse_match(v: &str) -> Result<Matcher, SpecError> {
    if v == "any" {
        return Ok(Matcher::Any);
    }
    if let Some(fam) = v.strip_suffix('*') {
        if let Some(p) = FAMILIES.iter().find(|p| **p == fam) {
            return Ok(Matcher::Family(p));
        }
    }
    Class::from_name(v).map(Matcher::Class).ok_or_else(|| {
        spec::bad(
            "match",
            v,
            "unknown class (a class name such as wg.initiation, a family wg.* / ovpn.* / ike.*, or any)",
        )
    })
}

fn parse_count(k: &str, v: &str) -> Result<u64, SpecError> {
    match v.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(spec::bad(k, v, "expected an integer of at least 1")),
    }
}

fn parse_size(v: &str) -> Result<(usize, usize), SpecError> {
    let bad = || {
        spec::bad(
            "size",
            v,
            "expected A-B in bytes with A <= B (e.g. 100-200)",
        )
    };
    let (a, b) = v.split_once('-').ok_or_else(bad)?;
    match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
        (Ok(a), Ok(b)) if a <= b => Ok((a, b)),
        _ => Err(bad()),
    }
}

fn parse_during(v: &str) -> Result<Select, SpecError> {
    let (a, b) = v
        .split_once("..")
        .ok_or_else(|| spec::bad("during", v, "expected A..B (e.g. 2s..22s)"))?;
    let from = parse_duration("during", a.trim())
        .map_err(|_| spec::bad("during", v, "expected A..B with durations (e.g. 2s..22s)"))?;
    let to = parse_duration("during", b.trim())
        .map_err(|_| spec::bad("during", v, "expected A..B with durations (e.g. 2s..22s)"))?;
    if from >= to {
        return Err(spec::bad("during", v, "A must be earlier than B"));
    }
    Ok(Select::During(from, to))
}

const SELECTIONS: [&str; 4] = ["nth", "first", "every", "during"];

/// One fault's `key=value` items.
fn parse_fault(text: &str) -> Result<Fault, SpecError> {
    let mut seen: Vec<String> = Vec::new();
    let mut matcher = None;
    let mut port = None;
    let mut size = None;
    let mut select: Option<Select> = None;
    let mut action_name: Option<String> = None;
    let mut delay: Option<(Duration, String)> = None;
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| SpecError {
                key: Some(item.to_string()),
                value: None,
                message: "expected key=value".into(),
            })
            .map(|(k, v)| (k.trim(), v.trim()))?;
        if seen.iter().any(|s| s == k) {
            return Err(spec::bad(k, v, "key given twice"));
        }
        seen.push(k.to_string());
        if SELECTIONS.contains(&k) && select.is_some() {
            return Err(spec::bad(
                k,
                v,
                "a fault takes exactly one of nth=, first=, every=, during=",
            ));
        }
        match k {
            "match" => matcher = Some(parse_match(v)?),
            "port" => match v.parse::<u16>() {
                Ok(p) if p > 0 => port = Some(p),
                _ => return Err(spec::bad(k, v, "expected a port 1..65535")),
            },
            "size" => size = Some(parse_size(v)?),
            "nth" => select = Some(Select::Nth(parse_count(k, v)?)),
            "first" => select = Some(Select::First(parse_count(k, v)?)),
            "every" => select = Some(Select::Every(parse_count(k, v)?)),
            "during" => select = Some(parse_during(v)?),
            "action" => match v {
                "drop" | "delay" | "dup" | "corrupt" => action_name = Some(v.to_string()),
                _ => return Err(spec::bad(k, v, "expected drop, delay, dup or corrupt")),
            },
            "delay" => {
                let d = parse_duration(k, v)?;
                if d == Duration::ZERO {
                    return Err(spec::bad(k, v, "must be longer than 0"));
                }
                if d > Duration::from_secs(3600) {
                    return Err(spec::bad(k, v, "must be at most 3600s"));
                }
                delay = Some((d, v.to_string()));
            }
            _ => {
                return Err(spec::bad(
                    k,
                    v,
                    "unknown key (match, port, size, nth, first, every, during, action, delay)",
                ))
            }
        }
    }
    let matcher = matcher.ok_or_else(|| {
        SpecError::about("every fault needs match= (a class, a family such as wg.*, or any)")
    })?;
    let select = select.ok_or_else(|| {
        SpecError::about("every fault needs one of nth=, first=, every=, during=")
    })?;
    let action = match (action_name.as_deref(), delay) {
        (None, _) => {
            return Err(SpecError::about(
                "every fault needs action= (drop, delay, dup or corrupt)",
            ))
        }
        (Some("delay"), Some((d, _))) => Action::Delay(d),
        (Some("delay"), None) => {
            return Err(spec::bad("action", "delay", "needs delay= (e.g. delay=2s)"))
        }
        (Some(a), Some((_, v))) => {
            return Err(spec::bad(
                "delay",
                &v,
                format!("only action=delay takes delay= (this fault's action is {a})"),
            ))
        }
        (Some("drop"), None) => Action::Drop,
        (Some("dup"), None) => Action::Dup,
        (Some(_), None) => Action::Corrupt,
    };
    Ok(Fault {
        matcher,
        port,
        size,
        select,
        action,
    })
}

/// Parse a direction's faults (empty: none).
pub fn parse(text: &str) -> Result<Vec<Fault>, FaultError> {
    text.split(';')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .enumerate()
        .map(|(i, f)| parse_fault(f).map_err(|error| FaultError { fault: i, error }))
        .collect()
}

/// What a fault stage reports about a packet it saw: a fault firing, or a
/// non-data message (whether or not a fault touched it).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Fired {
        fault: usize,
        at: Instant,
        msg: Message,
        /// The message's number within its class in this direction.
        ordinal: u64,
        action: Action,
        size: usize,
    },
    Message {
        /// The packet's id (to follow its fate through the link).
        id: u64,
        at: Instant,
        msg: Message,
        size: usize,
        dropped: bool,
    },
}

/// Classifies every packet of a direction and applies its faults (see
/// the module doc). As a [`Stage`]: packets leave at their arrival time,
/// or `delay` later, in departure order.
#[derive(Debug)]
pub struct FaultStage {
    classifier: Classifier,
    faults: Vec<Fault>,
    /// Messages each fault matched so far.
    matched: Vec<u64>,
    /// Per class: seen, dropped by a fault.
    pub seen: [u64; Class::COUNT],
    pub dropped: [u64; Class::COUNT],
    duplicated: u64,
    dropped_total: u64,
    origin: Option<Instant>,
    rng: Rng,
    ready: Fifo,
    /// Delayed packets by (departure, arrival order).
    held: BTreeMap<(Instant, u64), Packet>,
    seq: u64,
    records: Vec<Record>,
    any_port: bool,
}

impl FaultStage {
    pub fn new(classifier: Classifier, faults: Vec<Fault>, rng: Rng) -> Self {
        let any_port = faults.iter().any(|f| f.port.is_some());
        FaultStage {
            classifier,
            matched: vec![0; faults.len()],
            faults,
            seen: [0; Class::COUNT],
            dropped: [0; Class::COUNT],
            duplicated: 0,
            dropped_total: 0,
            origin: None,
            rng,
            ready: Fifo::default(),
            held: BTreeMap::new(),
            seq: 0,
            records: Vec::new(),
            any_port,
        }
    }

    /// Whether any fault selects by time (then the schedule must start).
    pub fn timed(&self) -> bool {
        self.faults
            .iter()
            .any(|f| matches!(f.select, Select::During(..)))
    }

    /// What happened since the last call.
    pub fn take_records(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.records)
    }

    pub fn has_records(&self) -> bool {
        !self.records.is_empty()
    }
}

impl Stage for FaultStage {
    fn push(&mut self, mut pkt: Packet, _now: Instant) {
        let msg = self.classifier.classify(pkt.ip());
        pkt.class = msg.class;
        let c = msg.class.index();
        self.seen[c] += 1;
        let size = pkt.len();
        let pkt_ports = if self.any_port {
            transport(pkt.ip())
                .and_then(|t| t.l4.filter(|_| payload_start(pkt.ip(), &t).is_some()))
                .and_then(|l4| ports(pkt.ip(), l4))
        } else {
            None
        };
        let since = self.origin.and_then(|o| pkt.t.checked_duration_since(o));
        let (mut drop, mut dup, mut delay) = (false, false, Duration::ZERO);
        for (i, f) in self.faults.iter().enumerate() {
            let port_ok = f
                .port
                .is_none_or(|p| pkt_ports.is_some_and(|(s, d)| s == p || d == p));
            let size_ok = f.size.is_none_or(|(a, b)| (a..=b).contains(&size));
            if !(f.matcher.matches(msg.class) && port_ok && size_ok) {
                continue;
            }
            self.matched[i] += 1;
            if drop || !f.select.selects(self.matched[i], since) {
                continue;
            }
            self.records.push(Record::Fired {
                fault: i,
                at: pkt.t,
                msg,
                ordinal: self.seen[c],
                action: f.action,
                size,
            });
            match f.action {
                Action::Drop => drop = true,
                Action::Delay(d) => delay = delay + d,
                Action::Dup => dup = true,
                Action::Corrupt => {
                    let pick = self.rng.next_u64();
                    corrupt(&mut pkt.buf, pick);
                }
            }
        }
        if !msg.class.is_data() {
            self.records.push(Record::Message {
                id: pkt.id,
                at: pkt.t,
                msg,
                size,
                dropped: drop,
            });
        }
        if drop {
            self.dropped[c] += 1;
            self.dropped_total += 1;
            return;
        }
        let copies = if dup {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for n in 0..copies {
            let p = if n + 1 < copies {
                pkt.clone()
            } else {
                std::mem::replace(&mut pkt, Packet::synthetic(0, 0, Instant::ZERO))
            };
            if delay == Duration::ZERO {
                self.ready.push(p);
            } else {
                let mut p = p;
                p.t += delay;
                self.seq += 1;
                self.held.insert((p.t, self.seq), p);
            }
        }
    }

    fn pop_ready(&mut self, now: Instant) -> Option<Packet> {
        let ready = self.ready.next_event();
        let held = self.held.first_key_value().map(|(k, _)| k.0);
        match (ready, held) {
            (Some(r), h) if r <= now && h.is_none_or(|h| r <= h) => self.ready.pop_ready(now),
            (_, Some(h)) if h <= now => self.held.pop_first().map(|(_, p)| p),
            _ => None,
        }
    }

    fn next_event(&self) -> Option<Instant> {
        let held = self.held.first_key_value().map(|(k, _)| k.0);
        self.ready.next_event().into_iter().chain(held).min()
    }

    fn held(&self) -> usize {
        self.ready.len() + self.held.len()
    }

    fn counters(&self) -> StageCounters {
        StageCounters {
            duplicated: self.duplicated,
            dropped_fault: self.dropped_total,
            ..Default::default()
        }
    }

    fn name(&self) -> &'static str {
        "faults"
    }

    fn start(&mut self, origin: Instant) {
        self.origin = Some(origin);
    }
}

/// Flip one byte (chosen by `pick`) of the UDP/TCP payload of `buf`
/// (virtio-net header + IP) and make its UDP/TCP checksum valid again; of
/// an ESP packet (no checksum), a byte after its SPI and sequence number.
/// A partial checksum (virtio-net `NEEDS_CSUM`) covers only the
/// pseudo-header and stays as it is (the kernel fills in the rest over the
/// corrupted bytes, as a NIC would). Returns the flipped byte's offset in
/// the IP datagram, or `None` when there is no payload to corrupt.
pub fn corrupt(buf: &mut [u8], pick: u64) -> Option<usize> {
    let partial = VnetHdr::parse(buf).flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0;
    let ip = buf.get_mut(VNET_HDR_LEN..)?;
    let t = transport(ip)?;
    let (start, csum_at) = match t.proto {
        17 | 6 => {
            let l4 = t.l4?;
            let field = l4 + if t.proto == 17 { 6 } else { 16 };
            (payload_start(ip, &t)?, Some((l4, field)))
        }
        50 => (t.l4? + 8, None),
        _ => return None,
    };
    if start >= t.end {
        return None;
    }
    let at = start + (pick % (t.end - start) as u64) as usize;
    ip[at] ^= 0xff;
    if let (Some((l4, field)), false) = (csum_at, partial) {
        let no_udp_csum = t.proto == 17 && ip[0] >> 4 == 4 && ip[field..field + 2] == [0, 0];
        if !no_udp_csum {
            ip[field..field + 2].copy_from_slice(&[0, 0]);
            let mut acc = if ip[0] >> 4 == 6 {
                csum_add(0, &ip[8..40])
            } else {
                csum_add(0, &ip[12..20])
            };
            acc += u64::from(t.proto) + (t.end - l4) as u64;
            let mut c = csum_fold(csum_add(acc, &ip[l4..t.end]));
            if t.proto == 17 && c == 0 {
                c = 0xffff; // RFC 768: a computed zero is sent as all ones
            }
            ip[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::testpkt;
    use crate::model::rng_for;

    fn err(s: &str) -> String {
        parse(s).unwrap_err().to_string()
    }

    #[test]
    fn specs_parse() {
        let f = parse("match=wg.initiation,nth=1,action=drop; match=ovpn.*,port=1194,size=100-200,during=2s..22s,action=delay,delay=2s;match=any,every=3,action=dup;match=esp,first=5,action=corrupt").unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].matcher, Matcher::Class(Class::WgInitiation));
        assert_eq!((f[0].select, f[0].action), (Select::Nth(1), Action::Drop));
        assert_eq!(f[1].matcher, Matcher::Family("ovpn."));
        assert_eq!((f[1].port, f[1].size), (Some(1194), Some((100, 200))));
        assert_eq!(
            f[1].select,
            Select::During(Duration::from_secs(2), Duration::from_secs(22))
        );
        assert_eq!(f[1].action, Action::Delay(Duration::from_secs(2)));
        assert_eq!((f[2].matcher, f[2].action), (Matcher::Any, Action::Dup));
        assert_eq!(f[3].action, Action::Corrupt);
        assert_eq!(
            crate::json::to_string(&f[1].normalized()),
            r#"{"match":"ovpn.*","port":1194,"size":[100,200],"during_ns":[2000000000,22000000000],"action":"delay","delay_ns":2000000000}"#
        );
        assert_eq!(
            crate::json::to_string(&f[0].normalized()),
            r#"{"match":"wg.initiation","port":null,"size":null,"nth":1,"action":"drop"}"#
        );
        assert!(parse("").unwrap().is_empty());
        assert!(parse(" ; ").unwrap().is_empty());
    }

    #[test]
    fn spec_errors_name_the_fault_and_key() {
        let cases = [
            ("nth=1,action=drop", "fault 1: every fault needs match="),
            (
                "match=wg.*,action=drop",
                "fault 1: every fault needs one of nth=",
            ),
            ("match=wg.*,nth=1", "fault 1: every fault needs action="),
            (
                "match=any,nth=1,action=drop;match=wg.bogus,nth=1,action=drop",
                "fault 2: match=wg.bogus: unknown class",
            ),
            (
                "match=foo.*,nth=1,action=drop",
                "fault 1: match=foo.*: unknown class",
            ),
            (
                "match=any,nth=0,action=drop",
                "fault 1: nth=0: expected an integer",
            ),
            (
                "match=any,first=x,action=drop",
                "fault 1: first=x: expected an integer",
            ),
            (
                "match=any,nth=1,every=2,action=drop",
                "fault 1: every=2: a fault takes exactly one of",
            ),
            (
                "match=any,nth=1,nth=2,action=drop",
                "fault 1: nth=2: key given twice",
            ),
            (
                "match=any,during=5s..2s,action=drop",
                "fault 1: during=5s..2s: A must be earlier",
            ),
            (
                "match=any,during=5s,action=drop",
                "fault 1: during=5s: expected A..B",
            ),
            (
                "match=any,during=xs..2s,action=drop",
                "fault 1: during=xs..2s: expected A..B",
            ),
            (
                "match=any,nth=1,action=explode",
                "fault 1: action=explode: expected drop",
            ),
            (
                "match=any,nth=1,action=delay",
                "fault 1: action=delay: needs delay=",
            ),
            (
                "match=any,nth=1,action=drop,delay=1s",
                "fault 1: delay=1s: only action=delay takes delay=",
            ),
            (
                "match=any,nth=1,action=delay,delay=0",
                "fault 1: delay=0: must be longer than 0",
            ),
            (
                "match=any,nth=1,action=drop,port=0",
                "fault 1: port=0: expected a port",
            ),
            (
                "match=any,nth=1,action=drop,port=70000",
                "fault 1: port=70000",
            ),
            (
                "match=any,nth=1,action=drop,size=9-3",
                "fault 1: size=9-3: expected A-B",
            ),
            (
                "match=any,nth=1,action=drop,bogus=1",
                "fault 1: bogus=1: unknown key",
            ),
            (
                "match=any,nth=1,action",
                "fault 1: action: expected key=value",
            ),
        ];
        for (s, want) in cases {
            let got = err(s);
            assert!(got.starts_with(want), "{s:?}: got {got:?}, want {want:?}");
        }
        let e = parse("match=any,nth=1,action=drop;match=any,every=2,action=nope").unwrap_err();
        assert_eq!(e.fault, 1);
        assert_eq!(
            (e.error.key.as_deref(), e.error.value.as_deref()),
            (Some("action"), Some("nope"))
        );
    }

    #[test]
    fn matchers_and_selections() {
        assert!(Matcher::Family("wg.").matches(Class::WgData));
        assert!(!Matcher::Family("ike.").matches(Class::Esp));
        assert!(Matcher::Family("ike.").matches(Class::IkeKeepalive));
        assert!(Matcher::Any.matches(Class::Other));
        let sel = |s: Select| -> Vec<u64> { (1..=10).filter(|&n| s.selects(n, None)).collect() };
        assert_eq!(sel(Select::Nth(3)), [3]);
        assert_eq!(sel(Select::First(3)), [1, 2, 3]);
        assert_eq!(sel(Select::Every(3)), [3, 6, 9]);
        let d = Select::During(Duration::from_secs(2), Duration::from_secs(4));
        assert!(!d.selects(1, None), "before the schedule's start");
        assert!(!d.selects(1, Some(Duration::from_millis(1999))));
        assert!(d.selects(1, Some(Duration::from_secs(2))));
        assert!(!d.selects(1, Some(Duration::from_secs(4))));
    }

    fn pkt(id: u64, ip: Vec<u8>, t_ms: u64) -> Packet {
        let mut buf = vec![0u8; VNET_HDR_LEN];
        buf.extend(ip);
        Packet::new(buf, id, Instant::from_nanos(t_ms * 1_000_000))
    }

    fn stage(spec: &str) -> FaultStage {
        FaultStage::new(Classifier::default(), parse(spec).unwrap(), rng_for(1, 22))
    }

    /// Push `pkts` and collect (id, departure ms) until nothing is held.
    fn run(s: &mut FaultStage, pkts: Vec<Packet>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for p in pkts {
            let t = p.t;
            s.push(p, t);
            while let Some(p) = s.pop_ready(t) {
                out.push((p.id, p.t.as_nanos() / 1_000_000));
            }
        }
        while let Some(t) = s.next_event() {
            while let Some(p) = s.pop_ready(t) {
                out.push((p.id, p.t.as_nanos() / 1_000_000));
            }
        }
        out
    }

    fn init(id: u64, t: u64) -> Packet {
        pkt(
            id,
            testpkt::udp(false, 40000, 51820, &testpkt::wg(1, 148)),
            t,
        )
    }
    fn data(id: u64, t: u64) -> Packet {
        pkt(
            id,
            testpkt::udp(false, 40000, 51820, &testpkt::wg(4, 128)),
            t,
        )
    }

    #[test]
    fn nth_first_every_count_the_fault_s_own_matches() {
        let mixed = || -> Vec<Packet> {
            (0..12)
                .map(|i| if i % 2 == 0 { init(i, i) } else { data(i, i) })
                .collect()
        };
        let ids = |s: &str| -> Vec<u64> {
            let mut st = stage(s);
            run(&mut st, mixed()).into_iter().map(|x| x.0).collect()
        };
        // initiations are ids 0, 2, 4, 6, 8, 10
        assert_eq!(
            ids("match=wg.initiation,nth=2,action=drop"),
            [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        );
        assert_eq!(
            ids("match=wg.initiation,first=2,action=drop"),
            [1, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        );
        assert_eq!(
            ids("match=wg.initiation,every=3,action=drop"),
            [0, 1, 2, 3, 5, 6, 7, 8, 9, 11]
        );
        assert_eq!(
            ids("match=wg.*,every=4,action=drop"),
            [0, 1, 2, 4, 5, 6, 8, 9, 10]
        );
        assert_eq!(
            ids("match=any,nth=1,action=drop,size=100-160"),
            [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        );
        assert_eq!(
            ids("match=wg.data,first=1,action=drop,port=51821"),
            (0..12).collect::<Vec<_>>()
        );
        assert_eq!(
            ids("match=wg.data,first=1,action=drop,port=51820"),
            [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        );
    }

    #[test]
    fn during_counts_from_the_schedule_start() {
        let mut s = stage("match=wg.data,during=5ms..8ms,action=drop");
        let pkts: Vec<_> = (0..12).map(|i| data(i, i)).collect();
        // not started: nothing is in the window
        let got: Vec<u64> = run(&mut s, pkts).into_iter().map(|x| x.0).collect();
        assert_eq!(got.len(), 12);
        let mut s = stage("match=wg.data,during=5ms..8ms,action=drop");
        s.start(Instant::from_nanos(2_000_000));
        let pkts: Vec<_> = (0..12).map(|i| data(i, i)).collect();
        let got: Vec<u64> = run(&mut s, pkts).into_iter().map(|x| x.0).collect();
        assert_eq!(
            got,
            [0, 1, 2, 3, 4, 5, 6, 10, 11],
            "7, 8, 9 ms are 5..8 ms after 2 ms"
        );
        assert_eq!(s.counters().dropped_fault, 3);
        assert_eq!(s.dropped[Class::WgData.index()], 3);
    }

    #[test]
    fn delay_holds_one_message_back_and_lets_others_overtake() {
        let mut s = stage("match=wg.initiation,nth=1,action=delay,delay=3ms");
        let out = run(&mut s, vec![init(0, 0), data(1, 1), data(2, 2), data(3, 5)]);
        assert_eq!(out, [(1, 1), (2, 2), (0, 3), (3, 5)]);
        let fired: Vec<_> = s
            .take_records()
            .into_iter()
            .filter_map(|r| match r {
                Record::Fired {
                    fault,
                    ordinal,
                    action,
                    size,
                    ..
                } => Some((fault, ordinal, action.name(), size)),
                _ => None,
            })
            .collect();
        assert_eq!(fired, [(0, 1, "delay", 176)]);
    }

    #[test]
    fn dup_sends_twice_and_counts_as_duplicated() {
        let mut s = stage("match=wg.initiation,first=1,action=dup");
        let out = run(&mut s, vec![init(0, 0), init(1, 1)]);
        assert_eq!(out, [(0, 0), (0, 0), (1, 1)]);
        assert_eq!(s.counters().duplicated, 1);
    }

    #[test]
    fn records_list_non_data_messages_and_fired_faults() {
        let mut s = stage("match=wg.initiation,nth=2,action=drop");
        run(&mut s, vec![init(0, 0), data(1, 1), init(2, 2)]);
        let recs = s.take_records();
        let kinds: Vec<String> = recs
            .iter()
            .map(|r| match r {
                Record::Fired { fault, ordinal, .. } => format!("fired {fault} #{ordinal}"),
                Record::Message {
                    id, msg, dropped, ..
                } => {
                    format!("msg {id} {} {dropped}", msg.class.name())
                }
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "msg 0 wg.initiation false",
                "fired 0 #2",
                "msg 2 wg.initiation true"
            ]
        );
        assert_eq!(s.seen[Class::WgInitiation.index()], 2);
        assert_eq!(s.seen[Class::WgData.index()], 1);
    }

    #[test]
    fn corrupt_flips_one_payload_byte_and_keeps_checksums_valid() {
        for v6 in [false, true] {
            for (ip, hdr) in [
                (testpkt::udp(v6, 1194, 5000, &[0x38; 100]), 8),
                (testpkt::tcp(v6, 1194, 5000, &[0x20; 100]), 20),
            ] {
                let mut buf = vec![0u8; VNET_HDR_LEN];
                buf.extend(&ip);
                assert!(testpkt::l4_csum_ok(&buf[VNET_HDR_LEN..]));
                for pick in [0u64, 7, 99, 12345] {
                    let mut b = buf.clone();
                    let at = corrupt(&mut b, pick).unwrap();
                    let l4 = if v6 { 40 } else { 20 };
                    assert_eq!(at, l4 + hdr + (pick % 100) as usize);
                    let diff: Vec<usize> = (0..ip.len())
                        .filter(|&i| b[VNET_HDR_LEN + i] != ip[i])
                        .collect();
                    // the byte and the checksum field (unless it did not change)
                    assert!(diff.contains(&at));
                    assert!(diff.len() <= 3, "{diff:?}");
                    assert!(
                        testpkt::l4_csum_ok(&b[VNET_HDR_LEN..]),
                        "v6 {v6} pick {pick}"
                    );
                }
            }
        }
        // nothing to corrupt: a bare TCP ACK; a UDP datagram without checksum stays without
        let mut ack = vec![0u8; VNET_HDR_LEN];
        ack.extend(testpkt::tcp(false, 1, 2, &[]));
        assert_eq!(corrupt(&mut ack, 3), None);
        let mut nock = vec![0u8; VNET_HDR_LEN];
        nock.extend(testpkt::udp(false, 1, 2, &[1, 2, 3, 4]));
        nock[VNET_HDR_LEN + 26..VNET_HDR_LEN + 28].copy_from_slice(&[0, 0]);
        corrupt(&mut nock, 1).unwrap();
        assert_eq!(nock[VNET_HDR_LEN + 26..VNET_HDR_LEN + 28], [0, 0]);
        // ESP: after SPI and sequence number
        let mut esp = vec![0u8; VNET_HDR_LEN];
        esp.extend(testpkt::raw(false, 50, &[0; 24]));
        assert_eq!(corrupt(&mut esp, 0), Some(28));
    }

    #[test]
    fn corruption_is_deterministic_from_the_seed() {
        let once = |seed: u64| {
            let mut s = FaultStage::new(
                Classifier::default(),
                parse("match=wg.data,every=1,action=corrupt").unwrap(),
                rng_for(seed, 22),
            );
            let out: Vec<Vec<u8>> = (0..5)
                .map(|i| {
                    let p = data(i, i);
                    s.push(p, Instant::ZERO);
                    s.pop_ready(Instant::from_nanos(u64::MAX)).unwrap().buf
                })
                .collect();
            out
        };
        assert_eq!(once(1), once(1));
        assert_ne!(once(1), once(2));
    }
}
