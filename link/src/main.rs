//! tunbench-link: argv -> validated config -> devices -> one forwarding
//! thread per direction -> stats. Exit codes: 0 ok (also after
//! SIGTERM/SIGINT), 1 runtime failure, 2 bad arguments.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread::JoinHandle;
use tunbench_link::cli::{self, Command, RunConfig};
use tunbench_link::io::event_loop::{Forwarder, StopSignal};
use tunbench_link::io::tun::{check_netns, TunDevice};
use tunbench_link::io::{check, Error, Result};
use tunbench_link::json::Obj;
use tunbench_link::pipeline::{Direction, Pipeline};
use tunbench_link::stats::{report_json, write_atomic, DirStats};
use tunbench_link::time::{Clock, Instant, Monotonic};

/// Print one line to stdout and flush; a closed stdout is not an error.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match cli::parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tunbench-link: error: {e} (see tunbench-link --help)");
            return ExitCode::from(2);
        }
    };
    match cmd {
        Command::Version => emit(&format!("tunbench-link {}", env!("CARGO_PKG_VERSION"))),
        Command::Help => emit(cli::USAGE),
        Command::Check { a2b, b2a } => emit(
            &Obj::new()
                .raw("a2b", &a2b.to_json())
                .raw("b2a", &b2a.to_json())
                .finish(),
        ),
        Command::Run(cfg) => {
            if let Err(e) = run(&cfg) {
                eprintln!("tunbench-link: error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Signals handled synchronously by the main thread (blocked everywhere,
/// inherited by the forwarding threads).
fn block_signals() -> Result<libc::sigset_t> {
    // SAFETY: sigset manipulation on a local, zero-initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if r != 0 {
            return Err(Error(format!("pthread_sigmask: error {r}")));
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        Ok(set)
    }
}

/// Wait up to 1 s for SIGTERM/SIGINT; true if one arrived.
fn wait_signal(set: &libc::sigset_t) -> Result<bool> {
    let ts = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    // SAFETY: valid set and timespec; siginfo not needed.
    let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    if r >= 0 {
        return Ok(true);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
        _ => check(r, "sigtimedwait").map(|_| false),
    }
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
    spec_json: String,
    handle: Option<JoinHandle<Result<()>>>,
}

/// Start the forwarding thread of one direction (reads `rx`, writes `tx`).
fn spawn_dir(
    cfg: &RunConfig,
    dir: Direction,
    rx: &Arc<TunDevice>,
    tx: &Arc<TunDevice>,
    stop: &Arc<StopSignal>,
) -> Result<DirRun> {
    let spec = match dir {
        Direction::AtoB => &cfg.a2b,
        Direction::BtoA => &cfg.b2a,
    };
    let stats = Arc::new(DirStats::default());
    let fwd = Forwarder {
        rx: Arc::clone(rx),
        tx: Arc::clone(tx),
        pipeline: Pipeline::build(spec, cfg.seed, dir),
        path: spec.path(),
        mtu: cfg.mtu,
        stats: Arc::clone(&stats),
        stop: Arc::clone(stop),
        coalesce: true,
    };
    let handle = std::thread::Builder::new()
        .name(format!("fwd-{}", dir.as_str()))
        .spawn(move || fwd.run())
        .map_err(|e| Error(format!("spawn thread: {e}")))?;
    Ok(DirRun {
        stats,
        spec_json: spec.to_json(),
        handle: Some(handle),
    })
}

/// Writes the stats file and renders the stats document.
struct Reporter<'a> {
    cfg: &'a RunConfig,
    started: Instant,
    warned: bool,
}

impl Reporter<'_> {
    fn render(&self, event: Option<&str>, dirs: &[DirRun]) -> String {
        report_json(
            event,
            self.cfg.seed,
            (Monotonic.now() - self.started).as_secs_f64(),
            (&dirs[0].spec_json, &dirs[1].spec_json),
            &dirs[0].stats.snapshot(),
            &dirs[1].stats.snapshot(),
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
    let sigset = block_signals()?;
    let dev_a = Arc::new(TunDevice::create_in(&cfg.netns_a, &cfg.dev_a, cfg.mtu)?);
    let dev_b = Arc::new(TunDevice::create_in(&cfg.netns_b, &cfg.dev_b, cfg.mtu)?);
    let mut rep = Reporter {
        cfg,
        started: Monotonic.now(),
        warned: false,
    };
    let stop = StopSignal::new()?;
    let mut dirs = vec![
        spawn_dir(cfg, Direction::AtoB, &dev_a, &dev_b, &stop)?,
        spawn_dir(cfg, Direction::BtoA, &dev_b, &dev_a, &stop)?,
    ];
    rep.write_periodic(&dirs);
    emit(
        &Obj::new()
            .str("event", "ready")
            .u64("pid", u64::from(std::process::id()))
            .str("dev_a", dev_a.name())
            .str("dev_b", dev_b.name())
            .finish(),
    );
    // Every second: stats file; stop on a signal or when a thread died.
    while !wait_signal(&sigset)? {
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
