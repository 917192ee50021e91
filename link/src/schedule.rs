//! A direction's timeline of events -> the sequence of complete link states
//! it passes through, validated before any device is opened.
//!
//! Events are `;`-separated, each a SPEC with an `at` key:
//! `at=5s,rate=10mbit,delay=40ms` changes those keys from 5 s on (the other
//! keys keep their values); `at=8s,outage=3s` takes the link down for 3 s
//! (packets entering it are lost; packets already inside it are delivered,
//! as if on the wire). Keys cannot be removed, only changed (`loss=0%`).
//! `at` counts from the schedule's start (the emulator's
//! `ready`, or the first SIGUSR1 with `--events-start signal`).

use crate::spec::{self, parse_duration, DirSpec, Path, SpecError};
use crate::time::Duration;

/// What happens at one step.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Impairment keys changed.
    Set,
    /// An outage began.
    Down,
    /// An outage ended.
    Up,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Set => "set",
            StepKind::Down => "down",
            StepKind::Up => "up",
        }
    }
}

/// The link's state from `at` on.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub at: Duration,
    /// Which event (0-based, in the order given) caused it.
    pub event: usize,
    pub kind: StepKind,
    /// The complete spec in force from `at` on.
    pub spec: DirSpec,
    /// Whether the link is down from `at` on.
    pub down: bool,
}

/// One step as the pipeline applied it (the stats file lists them).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub event: usize,
    pub kind: StepKind,
    /// The step's time since the schedule's start.
    pub at: Duration,
    /// How much later than that the event loop got to it.
    pub late: Duration,
}

/// A bad event: which one (0-based) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventError {
    pub event: usize,
    pub error: SpecError,
}

impl std::fmt::Display for EventError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {}: {}", self.event + 1, self.error)
    }
}

/// The forwarding path of a direction: a schedule needs every packet seen
/// by the models (the segmented path), whatever its states are.
pub fn path(spec: &DirSpec, steps: &[Step]) -> Path {
    if steps.is_empty() {
        spec.path()
    } else {
        Path::Segmented
    }
}

/// `key=value` items of a SPEC, in order (the SPEC itself is validated by
/// [`spec::parse`]).
fn items(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| {
            let (k, v) = i.split_once('=').unwrap_or((i, ""));
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

fn joined(items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

enum Action {
    Set(Vec<(String, String)>),
    /// An outage of this long (it becomes a Down and an Up point).
    Outage(Duration),
    Down,
    Up,
}

/// One event: its time and what it does.
fn parse_event(text: &str) -> Result<(Duration, Action), SpecError> {
    let mut at = None;
    let mut outage = None;
    let mut keys = Vec::new();
    for (k, v) in items(text) {
        match k.as_str() {
            "at" if at.is_some() => return Err(spec::bad("at", &v, "key given twice")),
            "at" => at = Some(parse_duration("at", &v)?),
            "outage" if outage.is_some() => return Err(spec::bad("outage", &v, "key given twice")),
            "outage" => {
                let d = parse_duration("outage", &v)?;
                if d == Duration::ZERO {
                    return Err(spec::bad("outage", &v, "must be longer than 0"));
                }
                outage = Some((d, v));
            }
            "trace" => {
                return Err(spec::bad(
                    "trace",
                    &v,
                    "a trace cannot change in an event (it is the link's whole timeline)",
                ))
            }
            _ => keys.push((k, v)),
        }
    }
    let at = at.ok_or_else(|| SpecError::about("every event needs at= (e.g. at=5s)"))?;
    match outage {
        Some((_, v)) if !keys.is_empty() => Err(spec::bad(
            "outage",
            &v,
            "an outage event takes no other keys (give them an event of their own)",
        )),
        Some((d, _)) => Ok((at, Action::Outage(d))),
        None if keys.is_empty() => Err(SpecError::about(
            "an event needs outage= or impairment keys (e.g. at=5s,rate=10mbit)",
        )),
        None => {
            // Each key on its own against the SPEC grammar: errors name it.
            spec::parse(&joined(&keys))?;
            Ok((at, Action::Set(keys)))
        }
    }
}

/// The steps of one direction whose base SPEC is `base` (valid, and naming
/// no file: it is parsed here first), in time order; events at the same
/// time apply in the order given.
pub fn parse(base: &str, events: &str) -> Result<Vec<Step>, EventError> {
    let spec = spec::parse(base).map_err(|error| EventError { event: 0, error })?;
    parse_on(base, &spec, events)
}

/// [`parse`] on a base already parsed into `base_spec` (its trace, read by
/// the caller, shared by every state).
pub fn parse_on(base: &str, base_spec: &DirSpec, events: &str) -> Result<Vec<Step>, EventError> {
    let mut points: Vec<(Duration, usize, Action)> = Vec::new();
    let texts = events.split(';').map(str::trim).filter(|e| !e.is_empty());
    for (i, text) in texts.enumerate() {
        match parse_event(text).map_err(|error| EventError { event: i, error })? {
            (at, Action::Outage(d)) => {
                points.push((at, i, Action::Down));
                points.push((at + d, i, Action::Up));
            }
            (at, action) => points.push((at, i, action)),
        }
    }
    points.sort_by_key(|(at, i, a)| (*at, matches!(a, Action::Up) as u8, *i));
    let mut state = items(base);
    let mut spec = base_spec.clone();
    // every state keeps the base's trace, read once (an event cannot name one)
    let same_trace = |path: &str| {
        let trace = base_spec.trace.clone();
        trace.ok_or_else(|| format!("{path}: only the base SPEC names a trace"))
    };
    let mut downs = 0u32;
    let mut steps = Vec::with_capacity(points.len());
    for (at, event, action) in points {
        let kind = match action {
            Action::Set(keys) => {
                for (k, v) in keys {
                    match state.iter_mut().find(|(x, _)| *x == k) {
                        Some(slot) => slot.1 = v,
                        None => state.push((k, v)),
                    }
                }
                spec = spec::parse_with(&joined(&state), &same_trace)
                    .map_err(|error| EventError { event, error })?;
                StepKind::Set
            }
            Action::Down => {
                downs += 1;
                StepKind::Down
            }
            Action::Up => {
                downs -= 1;
                StepKind::Up
            }
            Action::Outage(_) => unreachable!("split into Down and Up above"),
        };
        steps.push(Step {
            at,
            event,
            kind,
            spec: spec.clone(),
            down: downs > 0,
        });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(base: &str, events: &str) -> String {
        parse(base, events).unwrap_err().to_string()
    }

    #[test]
    fn sets_merge_into_the_base_and_keep_other_keys() {
        let s = parse(
            "delay=10ms,rate=50mbit",
            "at=5s,rate=10mbit; at=7s,delay=40ms",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].at, Duration::from_secs(5));
        assert_eq!(s[0].spec.rate_bps, Some(10_000_000));
        assert_eq!(s[0].spec.delay, Duration::from_millis(10));
        assert_eq!(s[1].spec.rate_bps, Some(10_000_000));
        assert_eq!(s[1].spec.delay, Duration::from_millis(40));
        assert!(s.iter().all(|x| x.kind == StepKind::Set && !x.down));
    }

    #[test]
    fn outage_gives_a_down_and_an_up_step_in_time_order() {
        let s = parse(
            "delay=10ms",
            "at=8s,outage=3s;at=9s,loss=1%;at=2s,delay=20ms",
        )
        .unwrap();
        let kinds: Vec<_> = s
            .iter()
            .map(|x| (x.at.as_nanos() / 1_000_000_000, x.kind, x.down, x.event))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (2, StepKind::Set, false, 2),
                (8, StepKind::Down, true, 0),
                (9, StepKind::Set, true, 1),
                (11, StepKind::Up, false, 0),
            ]
        );
        assert_eq!(s[3].spec.delay, Duration::from_millis(20));
        assert!(s[3].spec.loss.is_some());
    }

    #[test]
    fn overlapping_outages_keep_the_link_down_until_the_last_ends() {
        let s = parse("", "at=1s,outage=2s;at=2s,outage=2s").unwrap();
        let down: Vec<_> = s
            .iter()
            .map(|x| (x.at.as_nanos() / 1_000_000_000, x.down))
            .collect();
        assert_eq!(down, vec![(1, true), (2, true), (3, true), (4, false)]);
    }

    #[test]
    fn an_outage_ending_as_another_begins_leaves_the_link_down() {
        let s = parse("", "at=3s,outage=1s;at=1s,outage=2s").unwrap();
        let down: Vec<_> = s
            .iter()
            .map(|x| (x.at.as_nanos() / 1_000_000_000, x.kind, x.down))
            .collect();
        assert_eq!(
            down,
            vec![
                (1, StepKind::Down, true),
                (3, StepKind::Down, true),
                (3, StepKind::Up, true),
                (4, StepKind::Up, false)
            ]
        );
    }

    #[test]
    fn empty_events_give_no_steps() {
        assert!(parse("delay=1ms", "").unwrap().is_empty());
        assert!(parse("delay=1ms", " ; ").unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_event_and_key() {
        let cases = [
            ("", "rate=1mbit", "event 1: every event needs at="),
            (
                "",
                "at=1s",
                "event 1: an event needs outage= or impairment keys",
            ),
            (
                "",
                "at=1s,rate=1mbit;at=x",
                "event 2: at=x: expected a duration",
            ),
            (
                "",
                "at=1s,at=2s,rate=1mbit",
                "event 1: at=2s: key given twice",
            ),
            (
                "",
                "at=1s,outage=0s",
                "event 1: outage=0s: must be longer than 0",
            ),
            (
                "",
                "at=1s,outage=2s,rate=1mbit",
                "event 1: outage=2s: an outage event takes no other keys",
            ),
            (
                "",
                "at=1s,rate=0mbit",
                "event 1: rate=0mbit: must be at least 1bit",
            ),
            ("", "at=1s,bogus=1", "event 1: bogus=1: unknown key"),
            ("", "at=1s,queue=10p", "event 1: queue=10p: needs rate"),
            (
                "",
                "at=4000s,delay=1ms",
                "event 1: at=4000s: must be at most 3600s",
            ),
            (
                "rate=1mbit",
                "at=1s,loss=1%,ge_p=1%",
                "event 1: loss and ge_*",
            ),
        ];
        for (base, ev, want) in cases {
            let got = err(base, ev);
            assert!(got.starts_with(want), "{ev:?}: got {got:?}, want {want:?}");
        }
        // a combination only the merged state breaks names the event
        let e = parse("loss=1%", "at=1s,delay=1ms;at=2s,ge_p=1%,ge_r=10%").unwrap_err();
        assert_eq!(e.event, 1);
        assert!(e.to_string().contains("loss and ge_*"), "{e}");
    }
}
