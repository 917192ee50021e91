//! What one timed wake-up costs on this host, with nothing else to do: the
//! floor under the emulator's CPU when a rate limit makes it release one
//! packet at a time (at 100 Mbit/s, a 1500-byte packet every 120 µs).
//!
//! It sleeps the way the event loop does (`ppoll` on an eventfd with a
//! nanosecond timeout, timer slack 1 ns) until each instant of a fixed
//! grid, for a number of seconds, and prints one JSON line: the wake-ups,
//! the CPU the process used (user + system, `CLOCK_PROCESS_CPUTIME_ID`) per wake-up and as
//! a share of one core, and how late the wake-ups were.
//!
//! `cargo run --release --example wake_cost -- [INTERVAL_US] [SECONDS]`
//! (defaults 120 and 3).

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use std::num::NonZeroU64;
use tunbench_link::time::{Clock, Duration, Monotonic};

fn cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let interval_us: u64 = args.next().map_or(120, |a| a.parse().expect("INTERVAL_US"));
    let seconds: u64 = args.next().map_or(3, |a| a.parse().expect("SECONDS"));
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let efd =
        rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).expect("eventfd");
    let step = Duration::from_micros(interval_us);
    let (t0, c0) = (Monotonic.now(), cpu_ns());
    let end = t0 + Duration::from_secs(seconds);
    let mut next = t0 + step;
    let mut late: Vec<u64> = Vec::new();
    while next < end {
        let left = next - Monotonic.now();
        let ts = Timespec {
            tv_sec: (left.as_nanos() / 1_000_000_000) as i64,
            tv_nsec: (left.as_nanos() % 1_000_000_000) as i64,
        };
        if std::env::var_os("NANOSLEEP").is_some() {
            let _ = rustix::thread::nanosleep(&ts);
        } else {
            let mut fds = [PollFd::new(&efd, PollFlags::IN)];
            let _ = rustix::event::poll(&mut fds, Some(&ts));
        }
        late.push((Monotonic.now() - next).as_nanos());
        next += step;
    }
    let (t1, c1) = (Monotonic.now(), cpu_ns());
    if late.is_empty() {
        eprintln!("wake_cost: no wake-up in {seconds} s at {interval_us} µs");
        std::process::exit(2);
    }
    late.sort_unstable();
    let q = |p: f64| late[((late.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    let cpu = (c1 - c0) as f64;
    println!(
        "{{\"interval_us\":{interval_us},\"wakeups\":{},\"cpu_share\":{:.4},\"cpu_us_per_wakeup\":{:.2},\"late_us_p50\":{:.1},\"late_us_p99\":{:.1}}}",
        late.len(),
        cpu / (t1 - t0).as_nanos() as f64,
        cpu / late.len() as f64 / 1e3,
        q(0.5),
        q(0.99)
    );
}
