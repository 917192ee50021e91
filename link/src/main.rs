//! tunbench-link: argv -> validated config -> devices -> one forwarding
//! thread per direction -> stats. Exit codes: 0 ok (also after
//! SIGTERM/SIGINT), 1 runtime failure, 2 bad arguments.

use serde::Serialize;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread::JoinHandle;
use tunbench_link::cli::{self, CheckResult, Command, RunConfig};
use tunbench_link::faults;
use tunbench_link::io::event_loop::{Forwarder, ScheduleStart, StopSignal, TunIo};
use tunbench_link::io::tun::{check_netns, TunDevice};
use tunbench_link::io::{os_error, Error, Result};
use tunbench_link::json;
use tunbench_link::pipeline::{Direction, Pipeline};
use tunbench_link::schedule;
use tunbench_link::spec::Normalized;
use tunbench_link::spec::Path;
use tunbench_link::stats::{report_json, write_atomic, DirStats, ScheduleReport};
use tunbench_link::time::{Clock, Instant, Monotonic};

/// Print one line to stdout and flush; a closed stdout is not an error.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `check`'s output: both directions normalized.
#[derive(Serialize)]
struct Checked {
    a2b: Normalized,
    b2a: Normalized,
    /// Only when faults are given (the output is otherwise as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    faults: Option<CheckedFaults>,
}

#[derive(Serialize)]
struct CheckedFaults {
    a2b: Vec<faults::Normalized>,
    b2a: Vec<faults::Normalized>,
}

/// A direction as `check` prints it: classification puts it on the
/// segmented path.
fn checked(spec: &tunbench_link::spec::DirSpec, classify: bool) -> Normalized {
    let mut n = spec.normalized();
    if classify {
        n.path = Path::Segmented.as_str();
    }
    n
}

/// `run`'s first line, once both devices are up.
#[derive(Serialize)]
struct Ready<'a> {
    event: &'static str,
    pid: u32,
    dev_a: &'a str,
    dev_b: &'a str,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let json_check = cli::wants_json(&args);
    let cmd = match cli::parse_args(args) {
        Ok(c) => c,
        Err(e) if json_check => {
            emit(&json::to_string(&CheckResult::failed(&e)));
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("tunbench-link: error: {e} (see tunbench-link --help)");
            return ExitCode::from(2);
        }
    };
    match cmd {
        Command::Version => emit(&format!("tunbench-link {}", env!("CARGO_PKG_VERSION"))),
        Command::Help => emit(cli::USAGE),
        Command::Check { json: true, .. } => emit(&json::to_string(&CheckResult::ok())),
        Command::Check {
            a2b,
            b2a,
            faults: (fa, fb),
            classify,
            ..
        } => emit(&json::to_string(&Checked {
            a2b: checked(&a2b, classify),
            b2a: checked(&b2a, classify),
            faults: (!(fa.is_empty() && fb.is_empty())).then(|| CheckedFaults {
                a2b: fa.iter().map(|f| f.normalized()).collect(),
                b2a: fb.iter().map(|f| f.normalized()).collect(),
            }),
        })),
        Command::Run(cfg) => {
            if let Err(e) = run(&cfg) {
                eprintln!("tunbench-link: error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

/// SIGTERM/SIGINT, handled by the main thread: signal-hook's handler writes
/// a byte to a socket pair (the self-pipe pattern) that [`wait_signal`]
/// reads. (SIGPIPE is already ignored by the Rust runtime.)
struct Signals {
    rx: UnixStream,
}

impl Signals {
    fn register() -> Result<Self> {
        let (rx, tx) = UnixStream::pair().map_err(|e| os_error("socketpair", e))?;
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            let tx = tx.try_clone().map_err(|e| os_error("socketpair", e))?;
            signal_hook::low_level::pipe::register(sig, tx)
                .map_err(|e| os_error(format_args!("register signal {sig}"), e))?;
        }
        rx.set_read_timeout(Some(std::time::Duration::from_secs(1)))
            .map_err(|e| os_error("socket timeout", e))?;
        Ok(Signals { rx })
    }

    /// Wait up to 1 s for SIGTERM/SIGINT; true if one arrived.
    fn wait(&mut self) -> Result<bool> {
        let mut b = [0u8; 16];
        match self.rx.read(&mut b) {
            Ok(n) => Ok(n > 0),
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::TimedOut
                | std::io::ErrorKind::Interrupted => Ok(false),
                _ => Err(os_error("wait for signals", e)),
            },
        }
    }
}

/// The first SIGUSR1 starts the schedule (`--events-start signal`; with
/// `ready` it has started already and the signal changes nothing, and it
/// never ends the emulator). A thread of its own waits for it
/// (signal-hook writes a byte to a socket), so the start is taken within
/// microseconds of the signal.
fn start_on_sigusr1(start: &Arc<ScheduleStart>) -> Result<()> {
    let (mut rx, tx) = UnixStream::pair().map_err(|e| os_error("socketpair", e))?;
    signal_hook::low_level::pipe::register(signal_hook::consts::SIGUSR1, tx)
        .map_err(|e| os_error("register SIGUSR1", e))?;
    let start = Arc::clone(start);
    std::thread::Builder::new()
        .name("schedule".into())
        .spawn(move || {
            let mut b = [0u8; 1];
            loop {
                match rx.read(&mut b) {
                    Ok(n) if n > 0 => break start.set(Monotonic.now()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    _ => break, // the socket is gone: the process is ending
                }
            }
        })
        .map_err(|e| Error(format!("spawn thread: {e}")))?;
    Ok(())
}

/// The stats file's directory must exist before any device is created.
fn check_stats_dir(p: &std::path::Path) -> Result<()> {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Error(format!(
            "--stats-file {}: directory {} does not exist",
            p.display(),
            dir.display()
        )))
    }
}

struct DirRun {
    stats: Arc<DirStats>,
    scheduled: bool,
    spec: Normalized,
    handle: Option<JoinHandle<Result<()>>>,
}

/// Start the forwarding thread of one direction (reads `rx`, writes `tx`).
fn spawn_dir(
    cfg: &RunConfig,
    dir: Direction,
    rx: &Arc<TunDevice>,
    tx: &Arc<TunDevice>,
    stop: &Arc<StopSignal>,
    start: &Arc<ScheduleStart>,
) -> Result<DirRun> {
    let (spec, steps, dir_faults) = match dir {
        Direction::AtoB => (&cfg.a2b, &cfg.a2b_steps, &cfg.a2b_faults),
        Direction::BtoA => (&cfg.b2a, &cfg.b2a_steps, &cfg.b2a_faults),
    };
    let stats = Arc::new(DirStats::default());
    let mut path = schedule::path(spec, steps);
    let mut pipeline = Pipeline::build(spec, steps, cfg.seed, dir);
    if cfg.classify {
        // classification (and faults) look at every packet: segmented path
        path = Path::Segmented;
        pipeline = pipeline.with_faults(cfg.classifier.clone(), dir_faults.clone(), cfg.seed, dir);
    }
    let timed = pipeline.timed() || cfg.classify;
    let fwd = Forwarder {
        pipeline,
        path,
        mtu: cfg.mtu,
        stats: Arc::clone(&stats),
        coalesce: true,
        start: Arc::clone(start),
    };
    let io = TunIo {
        rx: Arc::clone(rx),
        tx: Arc::clone(tx),
        stop: Arc::clone(stop),
    };
    let handle = std::thread::Builder::new()
        .name(format!("fwd-{}", dir.as_str()))
        .spawn(move || fwd.run(io))
        .map_err(|e| Error(format!("spawn thread: {e}")))?;
    let mut spec = spec.normalized();
    spec.path = path.as_str();
    Ok(DirRun {
        stats,
        scheduled: timed,
        spec,
        handle: Some(handle),
    })
}

/// Writes the stats file and renders the stats document.
struct Reporter<'a> {
    cfg: &'a RunConfig,
    started: Instant,
    warned: bool,
    schedule_start: Arc<ScheduleStart>,
}

impl Reporter<'_> {
    fn render(&self, event: Option<&str>, dirs: &[DirRun]) -> String {
        let scheduled = dirs.iter().any(|d| d.scheduled);
        let schedule = ScheduleReport {
            start_ns: self
                .schedule_start
                .get()
                .filter(|_| scheduled)
                .map(|t| t.as_nanos()),
            a2b: dirs[0].stats.events(),
            b2a: dirs[1].stats.events(),
        };
        let now = Monotonic.now();
        let report = |d: &DirRun| {
            let mut r = d.stats.report(now, self.started, self.schedule_start.get());
            if event.is_some() {
                // The stdout event stays one short line: nobody may be
                // reading the pipe any more (a full one would block the
                // exit), and the series is in the stats file.
                r.occupancy = None;
            }
            r
        };
        report_json(
            event,
            self.cfg.seed,
            (now - self.started).as_secs_f64(),
            (&dirs[0].spec, &dirs[1].spec),
            &report(&dirs[0]),
            &report(&dirs[1]),
            &schedule,
        )
    }

    fn write(&self, dirs: &[DirRun]) -> Result<()> {
        match &self.cfg.stats_file {
            Some(p) => write_atomic(p, &self.render(None, dirs))
                .map_err(|e| Error(format!("write stats file {}: {e}", p.display()))),
            None => Ok(()),
        }
    }

    /// Periodic writes are best effort (a full disk must not end a
    /// benchmark): warn once, carry on.
    fn write_periodic(&mut self, dirs: &[DirRun]) {
        if let Err(e) = self.write(dirs) {
            if !std::mem::replace(&mut self.warned, true) {
                eprintln!("tunbench-link: warning: {e}");
            }
        }
    }
}

fn run(cfg: &RunConfig) -> Result<()> {
    check_netns(&cfg.netns_a)?;
    check_netns(&cfg.netns_b)?;
    if let Some(p) = &cfg.stats_file {
        check_stats_dir(p)?;
    }
    let mut signals = Signals::register()?;
    let dev_a = Arc::new(TunDevice::create_in(&cfg.netns_a, &cfg.dev_a, cfg.mtu)?);
    let dev_b = Arc::new(TunDevice::create_in(&cfg.netns_b, &cfg.dev_b, cfg.mtu)?);
    let start = Arc::new(ScheduleStart::default());
    if !cfg.start_on_signal {
        start.set(Monotonic.now());
    }
    start_on_sigusr1(&start)?;
    let mut rep = Reporter {
        cfg,
        started: Monotonic.now(),
        warned: false,
        schedule_start: Arc::clone(&start),
    };
    let stop = StopSignal::new()?;
    let mut dirs = vec![
        spawn_dir(cfg, Direction::AtoB, &dev_a, &dev_b, &stop, &start)?,
        spawn_dir(cfg, Direction::BtoA, &dev_b, &dev_a, &stop, &start)?,
    ];
    rep.write_periodic(&dirs);
    emit(&json::to_string(&Ready {
        event: "ready",
        pid: std::process::id(),
        dev_a: dev_a.name(),
        dev_b: dev_b.name(),
    }));
    // Every second: stats file; stop on a signal or when a thread died.
    while !signals.wait()? {
        rep.write_periodic(&dirs);
        let died = dirs
            .iter()
            .any(|d| d.handle.as_ref().is_some_and(|h| h.is_finished()));
        if died {
            break;
        }
    }
    stop.stop();
    let mut failure = None;
    for d in &mut dirs {
        let res = d.handle.take().expect("joined once").join();
        let res = res.unwrap_or_else(|_| Err(Error("forwarding thread panicked".into())));
        if let Err(e) = res {
            failure.get_or_insert(e);
        }
    }
    let final_write = rep.write(&dirs);
    emit(&rep.render(Some("stats"), &dirs));
    match failure {
        Some(e) => Err(e),
        None => final_write,
    }
}
