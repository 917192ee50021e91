//! argv -> validated [`Command`]. Every error here is a usage error (exit 2)
//! and is reported before any device is opened. Tokenizing is lexopt's;
//! the messages are ours.

use crate::classify::Classifier;
use crate::faults::{self, Fault};
use crate::model::trace::Trace;
use crate::pipeline::Direction;
use crate::schedule::{self, Step};
use crate::spec::{self, DirSpec, SpecError};
use lexopt::{Arg, Parser};
use serde::Serialize;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub const USAGE: &str = "\
usage:
  tunbench-link run --netns-a /run/netns/NS_A --dev-a IFNAME_A --netns-b /run/netns/NS_B --dev-b IFNAME_B
                    [--mtu 1500] [--seed 1] [--stats-file PATH] [--a2b SPEC] [--b2a SPEC]
                    [--a2b-events EVENTS] [--b2a-events EVENTS] [--events-start ready|signal]
                    [--a2b-faults FAULTS] [--b2a-faults FAULTS] [--classify on|off]
                    [--ovpn-ports 1194] [--wg-ports PORTS]
  tunbench-link check [--json] [--a2b SPEC] [--b2a SPEC] [--a2b-events EVENTS] [--b2a-events EVENTS]
                      [--a2b-faults FAULTS] [--b2a-faults FAULTS] [--classify on|off]
                      [--ovpn-ports PORTS] [--wg-ports PORTS]
  tunbench-link --version

SPEC: comma-separated key=value (empty = no impairment):
  delay=50ms jitter=2ms jitter_dist=uniform|normal rate=100mbit queue=1000p|256KB|64KiB
  loss=0.1% ge_p=1% ge_r=30% ge_h=100% ge_k=0% reorder=1% reorder_gap=3 dup=0.5%
  trace=FILE (instead of rate: mahimahi's packet-delivery format, one ms time per 1500-byte
  opportunity per line, repeating; time 0 is the schedule's start)
  nat_v4=FROM>TO nat_v6=FROM>TO nat_port=N (a rebind: a2b rewrites source FROM to TO and
  shifts TCP/UDP source ports by N; b2a rewrites destination TO back to FROM, and with
  a port shift only TCP and UDP)
EVENTS: ';'-separated, each at=TIME and either SPEC keys (changed from then on; the
  others keep their values) or outage=DURATION (packets entering the link are lost):
  'at=5s,rate=10mbit,delay=40ms;at=8s,outage=3s'
  TIME counts from the schedule's start: when the emulator is ready (--events-start
  ready, the default) or when it first gets SIGUSR1 (--events-start signal).
FAULTS: ';'-separated, each match=CLASS|wg.*|ovpn.*|ike.*|any [port=N] [size=A-B], one of
  nth=N first=N every=N during=A..B, and action=drop|dup|corrupt or action=delay,delay=D:
  'match=wg.initiation,nth=1,action=drop;match=ovpn.*,during=2s..22s,action=delay,delay=1s'
  Faults act before the link's own impairments. Classes: wg.initiation wg.response wg.cookie
  wg.data ovpn.hard_reset_client ovpn.hard_reset_server ovpn.soft_reset ovpn.control
  ovpn.ack ovpn.data ovpn.control_wkc ike.sa_init.request|response ike.auth.request|response
  ike.create_child_sa.request|response ike.informational.request|response ike.other
  ike.keepalive esp other. OpenVPN is recognised on --ovpn-ports (default 1194), WireGuard
  on any UDP port (by type and exact length) or only on --wg-ports, IKE on UDP 500/4500.
  --classify on records classified messages in the stats without faults (default: on
  when faults are given); both put the directions on the segmented path.
a = client side, b = server side; a2b = upload.
check --json: {\"ok\":true}, or {\"ok\":false,\"errors\":[{direction, event, key, value, message}]}
  and exit 2 (event: the 0-based index of a bad event, null for the SPEC; a bad fault's
  entry has \"fault\": its 0-based index instead).";

#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub netns_a: PathBuf,
    pub dev_a: String,
    pub netns_b: PathBuf,
    pub dev_b: String,
    pub mtu: u32,
    pub seed: u64,
    pub stats_file: Option<PathBuf>,
    pub a2b: DirSpec,
    pub b2a: DirSpec,
    pub a2b_steps: Vec<Step>,
    pub b2a_steps: Vec<Step>,
    /// Start the schedule on SIGUSR1 instead of at `ready`.
    pub start_on_signal: bool,
    pub a2b_faults: Vec<Fault>,
    pub b2a_faults: Vec<Fault>,
    /// Classify packets (and record messages) in both directions.
    pub classify: bool,
    pub classifier: Classifier,
}

#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per process
pub enum Command {
    Run(RunConfig),
    Check {
        a2b: DirSpec,
        b2a: DirSpec,
        /// Each direction's faults.
        faults: (Vec<Fault>, Vec<Fault>),
        /// Whether `run` would classify (and so take the segmented path).
        classify: bool,
        /// Answer with `{"ok":...}` JSON on stdout (errors included).
        json: bool,
    },
    Version,
    Help,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageError {
    /// The command line itself is wrong (unknown option, missing value...).
    Args(String),
    /// A SPEC, an event or a fault is invalid: one entry per direction
    /// that failed, a2b first, with where the error is.
    Spec(Vec<(Direction, Origin, SpecError)>),
}

/// Which part of a direction's arguments an error is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `--a2b` / `--b2a`.
    Spec,
    /// The 0-based event of `--a2b-events` / `--b2a-events`.
    Event(usize),
    /// The 0-based fault of `--a2b-faults` / `--b2a-faults`.
    Fault(usize),
}

impl fmt::Display for UsageError {
    /// One line; for bad specs the first one, as `--a2b: loss=200%: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::Args(m) => f.write_str(m),
            UsageError::Spec(errs) => match errs.first() {
                Some((dir, Origin::Spec, e)) => write!(f, "--{}: {e}", dir.as_str()),
                Some((dir, Origin::Event(i), e)) => {
                    write!(f, "--{}-events: event {}: {e}", dir.as_str(), i + 1)
                }
                Some((dir, Origin::Fault(i), e)) => {
                    write!(f, "--{}-faults: fault {}: {e}", dir.as_str(), i + 1)
                }
                None => f.write_str("invalid spec"),
            },
        }
    }
}

impl std::error::Error for UsageError {}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError::Args(msg.into())
}

/// One problem as `check --json` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// "a2b" or "b2a"; null for command-line errors.
    pub direction: Option<&'static str>,
    /// The bad event (0-based) of the direction's EVENTS; null: its SPEC.
    pub event: Option<usize>,
    /// The bad fault (0-based) of the direction's FAULTS (only then present).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<usize>,
    /// The SPEC key (`loss`), when the problem is about one key.
    pub key: Option<String>,
    pub value: Option<String>,
    pub message: String,
}

/// `check --json`'s answer: `{"ok":true}` or `{"ok":false,"errors":[...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Problem>,
}

impl CheckResult {
    pub fn ok() -> Self {
        CheckResult {
            ok: true,
            errors: Vec::new(),
        }
    }

    pub fn failed(e: &UsageError) -> Self {
        let errors = match e {
            UsageError::Args(m) => vec![Problem {
                direction: None,
                event: None,
                fault: None,
                key: None,
                value: None,
                message: m.clone(),
            }],
            UsageError::Spec(errs) => errs
                .iter()
                .map(|(dir, origin, e)| Problem {
                    direction: Some(dir.as_str()),
                    event: match origin {
                        Origin::Event(i) => Some(*i),
                        _ => None,
                    },
                    fault: match origin {
                        Origin::Fault(i) => Some(*i),
                        _ => None,
                    },
                    key: e.key.clone(),
                    value: e.value.clone(),
                    message: e.message.clone(),
                })
                .collect(),
        };
        CheckResult { ok: false, errors }
    }
}

/// Whether the command line asks for `check --json` (looked at before
/// parsing, so that even a usage error is answered in JSON). Reads the
/// arguments as [`parse_args`] does: the word after `--a2b`/`--b2a` is
/// their value even when it is `--json`, and nothing after `--` is an
/// option.
pub fn wants_json(args: &[OsString]) -> bool {
    if args.first().is_none_or(|a| a != "check") {
        return false;
    }
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        if a == "--json" {
            return true;
        }
        if a == "--" {
            return false;
        }
        if VALUED_CHECK.contains(&a.to_str().unwrap_or("")) {
            rest.next();
        }
    }
    false
}

fn utf8(what: &str, v: OsString) -> Result<String, UsageError> {
    v.into_string()
        .map_err(|v| usage(format!("{what} {v:?}: not valid UTF-8")))
}

fn lexopt_error(e: lexopt::Error) -> UsageError {
    match e {
        lexopt::Error::UnexpectedValue { option, .. } => usage(format!("{option} takes no value")),
        e => usage(e.to_string()),
    }
}

/// Options after the subcommand: `--key value` / `--key=value` for the
/// names in `valued`, bare `--flag` for the names in `flags` (the flag's
/// value is then empty).
fn options(
    p: &mut Parser,
    valued: &[&str],
    flags: &[&str],
) -> Result<Vec<(String, String)>, UsageError> {
    let mut out: Vec<(String, String)> = Vec::new();
    while let Some(arg) = p.next().map_err(lexopt_error)? {
        let k = match arg {
            Arg::Long(k) => format!("--{k}"),
            Arg::Short(c) => return Err(usage(format!("unknown option '-{c}'"))),
            Arg::Value(v) => {
                return Err(usage(format!(
                    "unexpected argument '{}'",
                    v.to_string_lossy()
                )))
            }
        };
        let v = if flags.contains(&k.as_str()) {
            String::new()
        } else if valued.contains(&k.as_str()) {
            let v = p.value().map_err(|_| usage(format!("{k} needs a value")))?;
            utf8(&k, v)?
        } else {
            return Err(usage(format!("unknown option '{k}'")));
        };
        if out.iter().any(|(x, _)| *x == k) {
            return Err(usage(format!("{k} given twice")));
        }
        out.push((k, v));
    }
    Ok(out)
}

fn get<'a>(opts: &'a [(String, String)], k: &str) -> Option<&'a str> {
    opts.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str())
}

/// `check`'s options that take a value.
const VALUED_CHECK: &[&str] = &[
    "--a2b",
    "--b2a",
    "--a2b-events",
    "--b2a-events",
    "--a2b-faults",
    "--b2a-faults",
    "--classify",
    "--ovpn-ports",
    "--wg-ports",
];

/// One direction's SPEC, the steps of its events and its faults.
type DirConfig = (DirSpec, Vec<Step>, Vec<Fault>);

/// The trace a SPEC's `trace=FILE` names, read and parsed here: the
/// command line reads the files, the models get what they hold.
fn read_trace(path: &str) -> Result<Arc<Trace>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    Trace::parse(path, &text).map(Arc::new)
}

fn direction(
    opts: &[(String, String)],
    dir: Direction,
) -> Result<DirConfig, (Direction, Origin, SpecError)> {
    let base = get(opts, &format!("--{}", dir.as_str())).unwrap_or("");
    let spec = spec::parse_with(base, &read_trace).map_err(|e| (dir, Origin::Spec, e))?;
    let events = get(opts, &format!("--{}-events", dir.as_str())).unwrap_or("");
    let steps = schedule::parse_on(base, &spec, events)
        .map_err(|e| (dir, Origin::Event(e.event), e.error))?;
    let text = get(opts, &format!("--{}-faults", dir.as_str())).unwrap_or("");
    let faults = faults::parse(text).map_err(|e| (dir, Origin::Fault(e.fault), e.error))?;
    Ok((spec, steps, faults))
}

/// `--ovpn-ports` / `--wg-ports`: comma-separated ports.
fn port_list(k: &str, v: &str) -> Result<Vec<u16>, UsageError> {
    let ports: Option<Vec<u16>> = v
        .split(',')
        .map(|p| p.trim().parse::<u16>().ok().filter(|p| *p > 0))
        .collect();
    ports.ok_or_else(|| usage(format!("{k} {v}: expected comma-separated ports 1..65535")))
}

/// The classifier's ports, and whether to classify: `--classify` (default:
/// on when any direction has faults; off with faults is an error).
fn classification(
    opts: &[(String, String)],
    any_faults: bool,
) -> Result<(bool, Classifier), UsageError> {
    let mut c = Classifier::default();
    if let Some(v) = get(opts, "--ovpn-ports") {
        c.ovpn_ports = port_list("--ovpn-ports", v)?;
    }
    if let Some(v) = get(opts, "--wg-ports") {
        c.wg_ports = Some(port_list("--wg-ports", v)?);
    }
    let on = match get(opts, "--classify") {
        None => any_faults,
        Some("on") => true,
        Some("off") if any_faults => {
            return Err(usage(
                "--classify off: faults need classification (drop --classify, or the faults)",
            ))
        }
        Some("off") => false,
        Some(v) => return Err(usage(format!("--classify {v}: expected on or off"))),
    };
    Ok((on, c))
}

/// Both directions' specs and steps; every direction that fails is
/// reported.
fn specs(opts: &[(String, String)]) -> Result<(DirConfig, DirConfig), UsageError> {
    match (
        direction(opts, Direction::AtoB),
        direction(opts, Direction::BtoA),
    ) {
        (Ok(a2b), Ok(b2a)) => Ok((a2b, b2a)),
        (a2b, b2a) => Err(UsageError::Spec(
            [a2b.err(), b2a.err()].into_iter().flatten().collect(),
        )),
    }
}

/// Linux interface names: 1..=15 bytes, no '/', ':' or whitespace.
fn ifname(k: &str, v: &str) -> Result<String, UsageError> {
    let ok = !v.is_empty()
        && v.len() < 16
        && v != "."
        && v != ".."
        && !v
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if ok {
        Ok(v.to_string())
    } else {
        Err(usage(format!(
            "{k} {v:?}: not a valid interface name (1-15 bytes, no '/', ':' or spaces)"
        )))
    }
}

/// Parse the arguments after the program name.
pub fn parse_args<I>(args: I) -> Result<Command, UsageError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let mut p = Parser::from_args(args);
    let cmd = match p.next().map_err(lexopt_error)? {
        None => return Err(usage("missing command (run, check, --version)")),
        Some(Arg::Long("version") | Arg::Short('V')) => return Ok(Command::Version),
        Some(Arg::Long("help") | Arg::Short('h')) => return Ok(Command::Help),
        Some(Arg::Long(k)) => format!("--{k}"),
        Some(Arg::Short(c)) => format!("-{c}"),
        Some(Arg::Value(v)) => v.to_string_lossy().into_owned(),
    };
    match cmd.as_str() {
        "version" => Ok(Command::Version),
        "help" => Ok(Command::Help),
        "check" => {
            let opts = options(&mut p, VALUED_CHECK, &["--json"])?;
            let ((a2b, _, a2b_faults), (b2a, _, b2a_faults)) = specs(&opts)?;
            let (classify, _) =
                classification(&opts, !(a2b_faults.is_empty() && b2a_faults.is_empty()))?;
            let json = get(&opts, "--json").is_some();
            Ok(Command::Check {
                a2b,
                b2a,
                faults: (a2b_faults, b2a_faults),
                classify,
                json,
            })
        }
        "run" => {
            let opts = options(
                &mut p,
                &[
                    "--netns-a",
                    "--dev-a",
                    "--netns-b",
                    "--dev-b",
                    "--mtu",
                    "--seed",
                    "--stats-file",
                    "--a2b",
                    "--b2a",
                    "--a2b-events",
                    "--b2a-events",
                    "--events-start",
                    "--a2b-faults",
                    "--b2a-faults",
                    "--classify",
                    "--ovpn-ports",
                    "--wg-ports",
                ],
                &[],
            )?;
            let need = |k: &str| get(&opts, k).ok_or_else(|| usage(format!("run needs {k}")));
            let netns_a = PathBuf::from(need("--netns-a")?);
            let netns_b = PathBuf::from(need("--netns-b")?);
            let dev_a = ifname("--dev-a", need("--dev-a")?)?;
            let dev_b = ifname("--dev-b", need("--dev-b")?)?;
            if netns_a == netns_b && dev_a == dev_b {
                return Err(usage(
                    "--dev-a and --dev-b name the same device in the same namespace",
                ));
            }
            let mtu = match get(&opts, "--mtu") {
                None => 1500,
                Some(v) => match v.parse::<u32>() {
                    Ok(m) if (576..=65_000).contains(&m) => m,
                    _ => return Err(usage(format!("--mtu {v}: expected an integer 576..65000"))),
                },
            };
            let seed = match get(&opts, "--seed") {
                None => 1,
                Some(v) => v
                    .parse::<u64>()
                    .map_err(|_| usage(format!("--seed {v}: expected an unsigned integer")))?,
            };
            let stats_file = get(&opts, "--stats-file").map(PathBuf::from);
            if stats_file
                .as_ref()
                .is_some_and(|p| p.as_os_str().is_empty())
            {
                return Err(usage("--stats-file: empty path"));
            }
            let start_on_signal = match get(&opts, "--events-start") {
                None | Some("ready") => false,
                Some("signal") => true,
                Some(v) => {
                    return Err(usage(format!(
                        "--events-start {v}: expected ready or signal"
                    )))
                }
            };
            let ((a2b, a2b_steps, a2b_faults), (b2a, b2a_steps, b2a_faults)) = specs(&opts)?;
            let (classify, classifier) =
                classification(&opts, !(a2b_faults.is_empty() && b2a_faults.is_empty()))?;
            Ok(Command::Run(RunConfig {
                netns_a,
                dev_a,
                netns_b,
                dev_b,
                mtu,
                seed,
                stats_file,
                a2b,
                b2a,
                a2b_steps,
                b2a_steps,
                start_on_signal,
                a2b_faults,
                b2a_faults,
                classify,
                classifier,
            }))
        }
        other => Err(usage(format!(
            "unknown command '{other}' (run, check, --version)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const BASE: &str = "run --netns-a /run/netns/a --dev-a tba --netns-b /run/netns/b --dev-b tbb";

    #[test]
    fn run_minimal_defaults() {
        let Command::Run(c) = parse_args(args(BASE)).unwrap() else {
            panic!()
        };
        assert_eq!((c.mtu, c.seed, c.stats_file.clone()), (1500, 1, None));
        assert_eq!(c.a2b, DirSpec::default());
        assert_eq!(c.dev_a, "tba");
    }

    #[test]
    fn run_full_and_equals_form() {
        let a = args(&format!(
            "{BASE} --mtu=9000 --seed 42 --stats-file /tmp/s.json --a2b delay=5ms --b2a=loss=1%"
        ));
        let Command::Run(c) = parse_args(&a).unwrap() else {
            panic!()
        };
        assert_eq!((c.mtu, c.seed), (9000, 42));
        assert_eq!(c.a2b.delay.as_nanos(), 5_000_000);
        assert!(c.b2a.loss.is_some());
    }

    #[test]
    fn usage_errors() {
        let cases = [
            ("", "missing command"),
            ("frob", "unknown command 'frob'"),
            ("run --dev-a x", "run needs --netns-a"),
            ("check --bogus 1", "unknown option '--bogus'"),
            ("check --a2b", "--a2b needs a value"),
            ("check stray", "unexpected argument 'stray'"),
            ("check --a2b delay=1ms --a2b delay=2ms", "--a2b given twice"),
            (
                "check --a2b delay=-1ms",
                "--a2b: delay=-1ms: must not be negative",
            ),
            ("check --b2a loss=200%", "--b2a: loss=200%"),
        ];
        for (a, want) in cases {
            let got = parse_args(args(a)).unwrap_err().to_string();
            assert!(got.starts_with(want), "{a:?}: {got:?}");
            assert!(!wants_json(&os(a)), "{a:?}");
        }
        for (extra, want) in [
            ("--mtu 100", "--mtu 100: expected"),
            ("--mtu x", "--mtu x"),
            ("--seed -1", "--seed -1"),
        ] {
            let got = parse_args(args(&format!("{BASE} {extra}")))
                .unwrap_err()
                .to_string();
            assert!(got.starts_with(want), "{extra}: {got}");
        }
        let long = "run --netns-a /a --dev-a waytoolonginterfacename --netns-b /b --dev-b x";
        assert!(parse_args(args(long))
            .unwrap_err()
            .to_string()
            .contains("not a valid interface name"));
        let same = "run --netns-a /a --dev-a x --netns-b /a --dev-b x";
        assert!(parse_args(args(same))
            .unwrap_err()
            .to_string()
            .contains("same device"));
    }

    #[test]
    fn events_parse_and_errors_name_the_event() {
        let a = format!(
            "{BASE} --a2b rate=10mbit --a2b-events at=1s,rate=5mbit;at=2s,outage=1s --events-start signal"
        );
        let Command::Run(c) = parse_args(args(&a)).unwrap() else {
            panic!()
        };
        assert_eq!(c.a2b_steps.len(), 3);
        assert!(c.b2a_steps.is_empty() && c.start_on_signal);
        let Command::Run(c) = parse_args(args(BASE)).unwrap() else {
            panic!()
        };
        assert!(!c.start_on_signal);
        let got = parse_args(args(&format!("{BASE} --events-start later")))
            .unwrap_err()
            .to_string();
        assert_eq!(got, "--events-start later: expected ready or signal");
        let e = parse_args(args(
            "check --json --b2a-events at=1s,delay=1ms;at=2s,loss=300%",
        ))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--b2a-events: event 2: loss=300%: must be between 0% and 100%"
        );
        assert_eq!(
            crate::json::to_string(&CheckResult::failed(&e)),
            r#"{"ok":false,"errors":[{"direction":"b2a","event":1,"key":"loss","value":"300%","message":"must be between 0% and 100%"}]}"#
        );
        assert!(wants_json(&os("check --a2b-events --json --json")));
        assert!(!wants_json(&os("check --a2b-events --json")));
    }

    #[test]
    fn faults_and_classification_options() {
        let Command::Run(c) = parse_args(args(BASE)).unwrap() else {
            panic!()
        };
        assert!(!c.classify && c.a2b_faults.is_empty());
        assert_eq!(c.classifier, Classifier::default());
        let a = format!(
            "{BASE} --b2a-faults match=wg.response,nth=1,action=drop --ovpn-ports 443,1194 --wg-ports 51820"
        );
        let Command::Run(c) = parse_args(args(&a)).unwrap() else {
            panic!()
        };
        assert!(c.classify, "faults turn classification on");
        assert_eq!((c.a2b_faults.len(), c.b2a_faults.len()), (0, 1));
        assert_eq!(c.classifier.ovpn_ports, [443, 1194]);
        assert_eq!(c.classifier.wg_ports, Some(vec![51820]));
        let Command::Run(c) = parse_args(args(&format!("{BASE} --classify on"))).unwrap() else {
            panic!()
        };
        assert!(c.classify);
        for (extra, want) in [
            (
                "--classify off --a2b-faults match=any,nth=1,action=drop",
                "--classify off: faults need classification",
            ),
            ("--classify maybe", "--classify maybe: expected on or off"),
            (
                "--ovpn-ports 0",
                "--ovpn-ports 0: expected comma-separated ports",
            ),
            ("--wg-ports 1,,2", "--wg-ports 1,,2: expected"),
            (
                "--a2b-faults match=any,nth=1,action=drop;match=any",
                "--a2b-faults: fault 2: every fault needs one of nth=",
            ),
        ] {
            let got = parse_args(args(&format!("{BASE} {extra}")))
                .unwrap_err()
                .to_string();
            assert!(got.starts_with(want), "{extra}: {got}");
        }
        // check --json names the fault; the other entries keep their shape
        let e = parse_args(args(
            "check --json --a2b loss=1% --b2a-faults match=any,every=0,action=dup",
        ))
        .unwrap_err();
        assert_eq!(
            crate::json::to_string(&CheckResult::failed(&e)),
            r#"{"ok":false,"errors":[{"direction":"b2a","event":null,"fault":0,"key":"every","value":"0","message":"expected an integer of at least 1"}]}"#
        );
        assert!(wants_json(&os("check --a2b-faults --json --json")));
        assert!(!wants_json(&os("check --wg-ports --json")));
        let Command::Check {
            faults, classify, ..
        } = parse_args(args("check --a2b-faults match=esp,first=3,action=corrupt")).unwrap()
        else {
            panic!()
        };
        assert_eq!((faults.0.len(), faults.1.len(), classify), (1, 0, true));
    }

    #[test]
    fn a_trace_file_is_read_here_and_shared_by_every_state() {
        let dir = std::env::temp_dir().join(format!("tblk-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("t.mm");
        std::fs::write(&f, "1\n2\n").unwrap();
        let p = f.display().to_string();
        let a = format!("{BASE} --a2b trace={p},queue=50p --a2b-events at=1s,delay=5ms");
        let Command::Run(c) = parse_args(args(&a)).unwrap() else {
            panic!()
        };
        let trace = c.a2b.trace.as_ref().expect("the trace was read");
        assert_eq!(trace.path, p);
        assert!((trace.mean_bps() - 12e6).abs() < 1.0);
        assert!(Arc::ptr_eq(
            trace,
            c.a2b_steps[0].spec.trace.as_ref().unwrap()
        ));
        let missing = parse_args(args("check --a2b trace=/nonexistent/x.mm"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.starts_with("--a2b: trace=/nonexistent/x.mm: /nonexistent/x.mm: "),
            "{missing}"
        );
        std::fs::write(&f, "3\n2\n").unwrap();
        let bad = parse_args(args(&format!("check --b2a trace={p}")))
            .unwrap_err()
            .to_string();
        assert!(
            bad.ends_with(":2: 2 is earlier than the line before"),
            "{bad}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn check_and_version() {
        assert_eq!(parse_args(args("--version")).unwrap(), Command::Version);
        assert_eq!(parse_args(args("-V")).unwrap(), Command::Version);
        assert_eq!(parse_args(args("help")).unwrap(), Command::Help);
        let Command::Check { a2b, b2a, json, .. } =
            parse_args(args("check --a2b rate=1mbit")).unwrap()
        else {
            panic!()
        };
        assert_eq!(a2b.rate_bps, Some(1_000_000));
        assert_eq!(b2a, DirSpec::default());
        assert!(!json);
    }

    fn os(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn more_usage_errors() {
        let cases = [
            ("check --json=1", "--json takes no value"),
            ("check --json --json", "--json given twice"),
            ("check -x", "unknown option '-x'"),
            ("run --json", "unknown option '--json'"),
            (
                "--bogus",
                "unknown command '--bogus' (run, check, --version)",
            ),
        ];
        for (a, want) in cases {
            let got = parse_args(args(a)).unwrap_err().to_string();
            assert_eq!(got, want, "{a:?}");
        }
        // a value may look like an option (as before lexopt)
        let e = parse_args(args("check --a2b=delay=1ms --b2a --json")).unwrap_err();
        assert_eq!(e.to_string(), "--b2a: --json: expected key=value");
        let Command::Check { a2b, .. } = parse_args(args("check --a2b=delay=1ms")).unwrap() else {
            panic!()
        };
        assert_eq!(a2b.delay.as_nanos(), 1_000_000);
    }

    #[test]
    fn check_json_reports_every_bad_direction() {
        assert!(wants_json(&os("check --a2b delay=1ms --json")));
        assert!(wants_json(&os("check --a2b=--json --json")));
        assert!(wants_json(&os("check --bogus --json")));
        assert!(!wants_json(&os("run --json")));
        // `--json` as a value, or after `--`, does not ask for JSON
        assert!(!wants_json(&os("check --a2b=delay=1ms --b2a --json")));
        assert!(!wants_json(&os("check -- --json")));
        let Command::Check { json, .. } = parse_args(args("check --json --a2b delay=1ms")).unwrap()
        else {
            panic!()
        };
        assert!(json);
        assert_eq!(crate::json::to_string(&CheckResult::ok()), r#"{"ok":true}"#);

        let e = parse_args(args("check --json --a2b loss=200% --b2a ge_p=1%")).unwrap_err();
        // the plain message is the first direction's, as before
        assert_eq!(
            e.to_string(),
            "--a2b: loss=200%: must be between 0% and 100%"
        );
        assert_eq!(
            crate::json::to_string(&CheckResult::failed(&e)),
            concat!(
                r#"{"ok":false,"errors":["#,
                r#"{"direction":"a2b","event":null,"key":"loss","value":"200%","message":"must be between 0% and 100%"},"#,
                r#"{"direction":"b2a","event":null,"key":null,"value":null,"message":"ge_p needs ge_r"}]}"#
            )
        );
        let e = parse_args(args("check --json --b2a delay")).unwrap_err();
        let r = CheckResult::failed(&e);
        assert_eq!(
            (r.errors[0].direction, r.errors[0].key.as_deref()),
            (Some("b2a"), Some("delay"))
        );
        let e = parse_args(args("check --json --bogus 1")).unwrap_err();
        assert_eq!(
            crate::json::to_string(&CheckResult::failed(&e)),
            r#"{"ok":false,"errors":[{"direction":null,"event":null,"key":null,"value":null,"message":"unknown option '--bogus'"}]}"#
        );
    }
}
