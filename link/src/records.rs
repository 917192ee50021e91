//! What a direction's fault stage and event loop record about classified
//! messages, and its part of the stats document (see link/README.md,
//! "Fault records"):
//!
//! * `faults`: each fault that fired;
//! * `messages`: every classified non-data message (handshakes, control,
//!   acks, IKE, keepalives) and its fate: `sent` (written to the other
//!   device), `dropped_fault`, `dropped_link` (lost to the link's own loss,
//!   queue, outage or a stale address) or `in_flight` (still inside the
//!   link when the document was written);
//! * `data_marks`: the first tunnel data message (`wg.data`, `ovpn.data`,
//!   `esp`) delivered after each non-data message or fired fault;
//! * `classes`: per class seen, dropped by a fault, delivered.
//!
//! Times are kept as `Instant`s and written relative to the schedule's
//! start (`at_ns`, the clock of the events; null before it) and to the
//! emulator's start (`since_start_ns`). Each list keeps at most
//! [`MAX_RECORDS`] entries, then sets its `*_truncated` flag.

use crate::classify::{Class, Message};
use crate::faults::Record;
use crate::time::Instant;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::collections::HashMap;

/// Entries kept per list and direction.
pub const MAX_RECORDS: usize = 10_000;

/// What became of a non-data message.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    InFlight,
    Sent,
    DroppedFault,
    DroppedLink,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::InFlight => "in_flight",
            Fate::Sent => "sent",
            Fate::DroppedFault => "dropped_fault",
            Fate::DroppedLink => "dropped_link",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Fired {
    fault: usize,
    at: Instant,
    msg: Message,
    ordinal: u64,
    action: &'static str,
    size: usize,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Seen {
    at: Instant,
    msg: Message,
    size: usize,
    fate: Fate,
}

/// Per class: seen, dropped by a fault, delivered.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    pub seen: u64,
    pub dropped_fault: u64,
    pub delivered: u64,
}

/// A bounded list and whether entries were left out.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Capped<T> {
    items: Vec<T>,
    truncated: bool,
}

impl<T> Default for Capped<T> {
    fn default() -> Self {
        Capped {
            items: Vec::new(),
            truncated: false,
        }
    }
}

impl<T> Capped<T> {
    /// Add `x`; its index, or `None` when the list is full.
    fn push(&mut self, x: T) -> Option<usize> {
        if self.items.len() >= MAX_RECORDS {
            self.truncated = true;
            return None;
        }
        self.items.push(x);
        Some(self.items.len() - 1)
    }
}

/// One direction's records (written by its forwarding thread, read by the
/// stats writer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultLog {
    fired: Capped<Fired>,
    messages: Capped<Seen>,
    /// Messages not delivered yet, by packet id -> index in `messages`.
    pending: HashMap<u64, usize>,
    marks: Capped<(Instant, Class)>,
    classes: Vec<ClassCount>,
}

impl FaultLog {
    /// Add what the fault stage reported.
    pub fn record(&mut self, r: Record) {
        match r {
            Record::Fired {
                fault,
                at,
                msg,
                ordinal,
                action,
                size,
            } => {
                self.fired.push(Fired {
                    fault,
                    at,
                    msg,
                    ordinal,
                    action: action.name(),
                    size,
                });
            }
            Record::Message {
                id,
                at,
                msg,
                size,
                dropped,
            } => {
                let fate = if dropped {
                    Fate::DroppedFault
                } else {
                    Fate::InFlight
                };
                let i = self.messages.push(Seen {
                    at,
                    msg,
                    size,
                    fate,
                });
                if let (Some(i), false) = (i, dropped) {
                    self.pending.insert(id, i);
                }
            }
        }
    }

    /// The packet `id` was written to the other device.
    pub fn delivered(&mut self, id: u64) {
        if let Some(i) = self.pending.remove(&id) {
            self.messages.items[i].fate = Fate::Sent;
        }
    }

    /// The link lost the packet `id` (a duplicate of it may still arrive).
    pub fn link_dropped(&mut self, id: u64) {
        if let Some(&i) = self.pending.get(&id) {
            self.messages.items[i].fate = Fate::DroppedLink;
        }
    }

    /// A tunnel data message delivered at `at`.
    pub fn data_mark(&mut self, at: Instant, class: Class) {
        self.marks.push((at, class));
    }

    /// The per-class counters as of now.
    pub fn set_classes(
        &mut self,
        seen: &[u64; Class::COUNT],
        dropped: &[u64; Class::COUNT],
        delivered: &[u64; Class::COUNT],
    ) {
        self.classes = (0..Class::COUNT)
            .map(|i| ClassCount {
                seen: seen[i],
                dropped_fault: dropped[i],
                delivered: delivered[i],
            })
            .collect();
    }

    /// The document's view, times relative to the emulator's start and to
    /// the schedule's (if it has started).
    pub fn view(&self, started: Instant, schedule: Option<Instant>) -> FaultReport {
        let t = |at: Instant| Times {
            at_ns: schedule
                .and_then(|s| at.checked_duration_since(s))
                .map(|d| d.as_nanos()),
            since_start_ns: at.saturating_duration_since(started).as_nanos(),
        };
        FaultReport {
            faults: self
                .fired
                .items
                .iter()
                .map(|f| FiredView {
                    fault: f.fault,
                    times: t(f.at),
                    class: f.msg.class.name(),
                    ordinal: f.ordinal,
                    action: f.action,
                    size: f.size,
                    key_id: f.msg.key_id,
                })
                .collect(),
            faults_truncated: self.fired.truncated,
            messages: self
                .messages
                .items
                .iter()
                .map(|m| MessageView {
                    times: t(m.at),
                    class: m.msg.class.name(),
                    size: m.size,
                    key_id: m.msg.key_id,
                    fate: m.fate.as_str(),
                })
                .collect(),
            messages_truncated: self.messages.truncated,
            data_marks: self
                .marks
                .items
                .iter()
                .map(|(at, c)| MarkView {
                    times: t(*at),
                    class: c.name(),
                })
                .collect(),
            data_marks_truncated: self.marks.truncated,
            classes: Classes(
                self.classes
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.seen > 0)
                    .map(|(i, c)| (Class::ALL[i].name(), *c))
                    .collect(),
            ),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Times {
    /// Since the schedule's start (null: before it, or not started).
    pub at_ns: Option<u64>,
    /// Since the emulator's start.
    pub since_start_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FiredView {
    pub fault: usize,
    #[serde(flatten)]
    pub times: Times,
    pub class: &'static str,
    pub ordinal: u64,
    pub action: &'static str,
    pub size: usize,
    pub key_id: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MessageView {
    #[serde(flatten)]
    pub times: Times,
    pub class: &'static str,
    pub size: usize,
    pub key_id: Option<u8>,
    pub fate: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MarkView {
    #[serde(flatten)]
    pub times: Times,
    pub class: &'static str,
}

/// `{"wg.initiation": {...}, ...}` in class order (only classes seen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classes(pub Vec<(&'static str, ClassCount)>);

impl Serialize for Classes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A direction's fault records as the stats document writes them (the
/// keys go into the direction's object).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultReport {
    pub faults: Vec<FiredView>,
    pub faults_truncated: bool,
    pub messages: Vec<MessageView>,
    pub messages_truncated: bool,
    pub data_marks: Vec<MarkView>,
    pub data_marks_truncated: bool,
    pub classes: Classes,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Action;

    fn msg(class: Class) -> Message {
        Message {
            class,
            key_id: None,
        }
    }

    fn ms(m: u64) -> Instant {
        Instant::from_nanos(m * 1_000_000)
    }

    #[test]
    fn fates_follow_the_packet() {
        let mut log = FaultLog::default();
        for id in 0..4 {
            log.record(Record::Message {
                id,
                at: ms(10 + id),
                msg: msg(Class::WgInitiation),
                size: 176,
                dropped: id == 3,
            });
        }
        log.delivered(0);
        log.link_dropped(1);
        log.delivered(3); // dropped by a fault: stays so
        let v = log.view(ms(0), Some(ms(5)));
        let fates: Vec<_> = v.messages.iter().map(|m| m.fate).collect();
        assert_eq!(
            fates,
            ["sent", "dropped_link", "in_flight", "dropped_fault"]
        );
        assert_eq!(v.messages[0].times.at_ns, Some(5_000_000));
        assert_eq!(v.messages[0].times.since_start_ns, 10_000_000);
        // before the schedule's start
        assert_eq!(log.view(ms(0), Some(ms(11))).messages[0].times.at_ns, None);
        assert_eq!(log.view(ms(0), None).messages[0].times.at_ns, None);
    }

    #[test]
    fn lists_are_capped_and_flagged() {
        let mut log = FaultLog::default();
        for i in 0..MAX_RECORDS as u64 + 5 {
            log.record(Record::Fired {
                fault: 0,
                at: ms(i),
                msg: msg(Class::WgData),
                ordinal: i + 1,
                action: Action::Drop,
                size: 100,
            });
            log.data_mark(ms(i), Class::WgData);
        }
        let v = log.view(ms(0), Some(ms(0)));
        assert_eq!(v.faults.len(), MAX_RECORDS);
        assert!(v.faults_truncated && v.data_marks_truncated);
        assert!(!v.messages_truncated);
    }

    #[test]
    fn shape() {
        let mut log = FaultLog::default();
        log.record(Record::Fired {
            fault: 0,
            at: ms(2),
            msg: Message {
                class: Class::OvpnHardResetClient,
                key_id: Some(0),
            },
            ordinal: 1,
            action: Action::Drop,
            size: 96,
        });
        log.record(Record::Message {
            id: 7,
            at: ms(2),
            msg: Message {
                class: Class::OvpnHardResetClient,
                key_id: Some(0),
            },
            size: 96,
            dropped: true,
        });
        log.data_mark(ms(3), Class::OvpnData);
        let mut seen = [0; Class::COUNT];
        let mut dropped = [0; Class::COUNT];
        let mut delivered = [0; Class::COUNT];
        seen[Class::OvpnHardResetClient.index()] = 2;
        dropped[Class::OvpnHardResetClient.index()] = 1;
        delivered[Class::OvpnHardResetClient.index()] = 1;
        seen[Class::OvpnData.index()] = 5;
        delivered[Class::OvpnData.index()] = 5;
        log.set_classes(&seen, &dropped, &delivered);
        let j = crate::json::to_string(&log.view(ms(1), None));
        assert_eq!(
            j,
            concat!(
                r#"{"faults":[{"fault":0,"at_ns":null,"since_start_ns":1000000,"class":"ovpn.hard_reset_client","ordinal":1,"action":"drop","size":96,"key_id":0}],"#,
                r#""faults_truncated":false,"#,
                r#""messages":[{"at_ns":null,"since_start_ns":1000000,"class":"ovpn.hard_reset_client","size":96,"key_id":0,"fate":"dropped_fault"}],"#,
                r#""messages_truncated":false,"#,
                r#""data_marks":[{"at_ns":null,"since_start_ns":2000000,"class":"ovpn.data"}],"data_marks_truncated":false,"#,
                r#""classes":{"ovpn.hard_reset_client":{"seen":2,"dropped_fault":1,"delivered":1},"ovpn.data":{"seen":5,"dropped_fault":0,"delivered":5}}}"#
            )
        );
    }
}
