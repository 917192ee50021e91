//! End-to-end check in real network namespaces. Needs root, `ip` and
//! `ping`, so it is ignored by default:
//!
//!     sudo cargo test --test netns -- --ignored
//!
//! Creates `tblk-t<pid>-a/b`, runs the binary between them with a 5 ms
//! one-way delay, pings across, stops it with SIGTERM and checks the CLI
//! contract: the ready line, exit code 0, the final stats line and file.
//! Everything it creates is removed on the way out (also on failure).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

struct Netns(String);

impl Netns {
    fn new(name: String) -> Netns {
        run("ip", &["netns", "add", &name]);
        Netns(name)
    }
    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root and network namespaces"]
fn forwards_between_namespaces_with_delay() {
    let id = std::process::id();
    let a = Netns::new(format!("tblk-t{id}-a"));
    let b = Netns::new(format!("tblk-t{id}-b"));
    let stats = std::env::temp_dir().join(format!("tblk-t{id}.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tunbench-link"))
        .args([
            "run",
            "--netns-a",
            &a.path(),
            "--dev-a",
            "tba",
            "--netns-b",
            &b.path(),
        ])
        .args([
            "--dev-b",
            "tbb",
            "--seed",
            "3",
            "--a2b",
            "delay=5ms",
            "--b2a",
            "delay=5ms",
        ])
        .arg("--stats-file")
        .arg(&stats)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tunbench-link");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("a line").expect("utf-8");
    assert!(
        ready.starts_with(r#"{"event":"ready","pid":"#)
            && ready.ends_with(r#""dev_a":"tba","dev_b":"tbb"}"#),
        "{ready}"
    );
    run(
        "ip",
        &["-n", &a.0, "addr", "add", "198.18.0.1/24", "dev", "tba"],
    );
    run(
        "ip",
        &["-n", &b.0, "addr", "add", "198.18.0.2/24", "dev", "tbb"],
    );
    let ping = run(
        "ip",
        &[
            "netns",
            "exec",
            &a.0,
            "ping",
            "-c",
            "5",
            "-i",
            "0.05",
            "-W",
            "1",
            "198.18.0.2",
        ],
    );
    let avg: f64 = ping
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('/').nth(4))
        .and_then(|v| v.parse().ok())
        .expect("rtt line");
    assert!((10.0..15.0).contains(&avg), "RTT {avg} ms for 2 x 5 ms");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = child.wait().unwrap();
    let last = lines.map(|l| l.unwrap()).last().expect("stats line");
    let file = std::fs::read_to_string(&stats).expect("stats file");
    let _ = std::fs::remove_file(&stats);
    assert_eq!(status.code(), Some(0));
    assert!(
        last.starts_with(r#"{"event":"stats","version":1,"seed":3,"#),
        "{last}"
    );
    assert!(last.contains(r#""dropped_emulator":0"#), "{last}");
    assert!(file.starts_with(r#"{"version":1,"seed":3,"#), "{file}");
    // the devices went away with the process
    let links = run("ip", &["-n", &a.0, "link"]);
    assert!(!links.contains("tba"), "{links}");
}
