//! argv -> validated [`Command`]. Every error here is a usage error (exit 2)
//! and is reported before any device is opened.

use crate::spec::{self, DirSpec};
use std::fmt;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage:
  tunbench-link run --netns-a /run/netns/NS_A --dev-a IFNAME_A --netns-b /run/netns/NS_B --dev-b IFNAME_B
                    [--mtu 1500] [--seed 1] [--stats-file PATH] [--a2b SPEC] [--b2a SPEC]
  tunbench-link check [--a2b SPEC] [--b2a SPEC]
  tunbench-link --version

SPEC: comma-separated key=value (empty = no impairment):
  delay=50ms jitter=2ms jitter_dist=uniform|normal rate=100mbit queue=1000p|256KB|64KiB
  loss=0.1% ge_p=1% ge_r=30% ge_h=100% ge_k=0% reorder=1% reorder_gap=3 dup=0.5%
a = client side, b = server side; a2b = upload.";

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
}

#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per process
pub enum Command {
    Run(RunConfig),
    Check { a2b: DirSpec, b2a: DirSpec },
    Version,
    Help,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// `--key value` / `--key=value` pairs after the subcommand.
fn options(args: &[String], allowed: &[&str]) -> Result<Vec<(String, String)>, UsageError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), v.to_string()),
            _ => {
                if !a.starts_with("--") {
                    return Err(usage(format!("unexpected argument '{a}'")));
                }
                let v = it
                    .next()
                    .ok_or_else(|| usage(format!("{a} needs a value")))?;
                (a.clone(), v.clone())
            }
        };
        if !allowed.contains(&k.as_str()) {
            return Err(usage(format!("unknown option '{k}'")));
        }
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

fn specs(opts: &[(String, String)]) -> Result<(DirSpec, DirSpec), UsageError> {
    let one = |k: &str| -> Result<DirSpec, UsageError> {
        spec::parse(get(opts, k).unwrap_or("")).map_err(|e| usage(format!("{k}: {e}")))
    };
    Ok((one("--a2b")?, one("--b2a")?))
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

pub fn parse_args(args: &[String]) -> Result<Command, UsageError> {
    let Some(cmd) = args.first() else {
        return Err(usage("missing command (run, check, --version)"));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "--version" | "-V" | "version" => Ok(Command::Version),
        "--help" | "-h" | "help" => Ok(Command::Help),
        "check" => {
            let opts = options(rest, &["--a2b", "--b2a"])?;
            let (a2b, b2a) = specs(&opts)?;
            Ok(Command::Check { a2b, b2a })
        }
        "run" => {
            let opts = options(
                rest,
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
                ],
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
            let (a2b, b2a) = specs(&opts)?;
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
        let Command::Run(c) = parse_args(&args(BASE)).unwrap() else {
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
            let got = parse_args(&args(a)).unwrap_err().0;
            assert!(got.starts_with(want), "{a:?}: {got:?}");
        }
        for (extra, want) in [
            ("--mtu 100", "--mtu 100: expected"),
            ("--mtu x", "--mtu x"),
            ("--seed -1", "--seed -1"),
        ] {
            let got = parse_args(&args(&format!("{BASE} {extra}"))).unwrap_err().0;
            assert!(got.starts_with(want), "{extra}: {got}");
        }
        let long = "run --netns-a /a --dev-a waytoolonginterfacename --netns-b /b --dev-b x";
        assert!(parse_args(&args(long))
            .unwrap_err()
            .0
            .contains("not a valid interface name"));
        let same = "run --netns-a /a --dev-a x --netns-b /a --dev-b x";
        assert!(parse_args(&args(same))
            .unwrap_err()
            .0
            .contains("same device"));
    }

    #[test]
    fn check_and_version() {
        assert_eq!(parse_args(&args("--version")).unwrap(), Command::Version);
        let Command::Check { a2b, b2a } = parse_args(&args("check --a2b rate=1mbit")).unwrap()
        else {
            panic!()
        };
        assert_eq!(a2b.rate_bps, Some(1_000_000));
        assert_eq!(b2a, DirSpec::default());
    }
}
