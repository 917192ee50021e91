//! The forwarding loop of one direction: read packets, run them through the
//! direction's [`Pipeline`], write what is due, and sleep until the next
//! event or the next packet.
//!
//! [`Loop`] is generic over its [`Clock`] and its [`PacketIo`] (the seam
//! smoltcp calls `Device`): in production [`Monotonic`] and [`TunIo`] (read
//! one TUN device, write the other); in tests a [`Manual`] clock and an
//! in-memory device, so admission, accounting, timing and coalescing are
//! tested without root, devices or sleeping.
//!
//! Only this loop reads the clock or sleeps. Waiting is `ppoll(2)` with a
//! nanosecond timeout (timer slack set to 1 ns with
//! `prctl(PR_SET_TIMERSLACK)`), woken early by input or by the stop eventfd.
//! Before sleeps at least [`SPIN_SHARE`] times longer than the learned
//! wake-up latency (an EWMA of the oversleep; 25–50 µs on an idle VM) the
//! loop asks to be woken early by that latency, then busy-waits the rest
//! ([`Clock::spin_until`]); otherwise it busy-waits only the final [`SPIN`].
//! Packets leave within a few µs of schedule without spinning through whole
//! delays, and the spin stays under about a tenth of the time, so dense
//! traffic (a packet every 120 µs at 100 Mbit/s) does not hog a core.
//!
//! Paths (see [`Path`]):
//! * passthrough: each read (a GSO super-packet up to 64 KiB, or a single
//!   packet) is written to the other device at once, header included, no
//!   copy; the receiving kernel handles the GSO/partial checksum itself.
//! * whole_delay: the same, but the super-packet sits in the delay line.
//! * segmented: super-packets are split into MTU-sized segments with full
//!   checksums before the models see them; impairments apply per segment.
//!
//! [`Manual`]: crate::time::Manual

use super::tun::TunDevice;
use super::{os_error, Result};
use crate::classify::Class;
use crate::gso::coalesce::{Coalescer, Out};
use crate::gso::offload::{self, VnetHdr};
use crate::packet::{Packet, VNET_HDR_LEN};
use crate::pipeline::Pipeline;
use crate::records::FaultLog;
use crate::spec::Path;
use crate::stats::DirStats;
use crate::time::{Clock, Duration, Instant, Monotonic};
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Busy-wait this close to a departure instead of sleeping (on top of the
/// learned wake-up latency).
pub const SPIN: Duration = Duration::from_micros(5);
/// Upper bound on the learned wake-up latency (bounds the spin).
const MAX_WAKE_MARGIN: Duration = Duration::from_micros(300);
/// The learned early wake-up is used only before sleeps at least this many
/// times longer than it, so spinning stays a small fraction of the time:
/// under dense traffic long spins would steal the CPU the endpoints need
/// (and delay reading the TUN queue).
pub const SPIN_SHARE: u64 = 10;
/// While a schedule waits for its start, the loop looks for it at least
/// this often (the start time itself is exact: it is set by the thread that
/// saw the signal).
pub const ARM_POLL: Duration = Duration::from_millis(1);
/// Scheduling priority of the forwarding threads (best effort).
const FORWARDER_NICE: i32 = -10;
/// Reads per loop iteration before the pipeline is serviced.
pub const READ_BATCH: usize = 64;
/// Memory the models may hold per direction before the emulator starts
/// dropping (counted as `dropped_emulator`).
const MAX_HELD_BYTES: usize = 2 << 30;
/// Read buffer: virtio-net header + twice the largest packet the kernel
/// hands a TUN device (64 KiB GSO limit), so a full buffer means something
/// unexpected (counted as `dropped_emulator`, never forwarded truncated).
pub const READ_BUF: usize = VNET_HDR_LEN + 2 * 65_536;
/// Memory accounting unit for a super-packet held on the whole-delay path.
const SUPER_PACKET: usize = VNET_HDR_LEN + 65_536;
/// How often model counters are published to the shared stats.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Where one direction's packets come from and go to.
pub trait PacketIo {
    /// Read one packet (virtio-net header + IP) into `buf`; `Ok(None)`:
    /// nothing is waiting now. A packet that fills `buf` was too large.
    fn recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>>;
    /// Write one packet (virtio-net header + IP).
    fn send(&mut self, pkt: &[u8]) -> std::io::Result<()>;
    /// Block until input may be waiting, a stop was requested, or `timeout`
    /// has passed (`None`: no timeout). True when it returned because the
    /// timeout passed (the loop learns its wake-up latency from those).
    fn wait(&mut self, timeout: Option<Duration>) -> Result<bool>;
    /// Whether the loop should end.
    fn stopped(&self) -> bool;
}

/// Wakes forwarding threads blocked in ppoll when it is time to stop.
#[derive(Debug)]
pub struct StopSignal {
    flag: AtomicBool,
    efd: OwnedFd,
}

impl StopSignal {
    pub fn new() -> Result<Arc<Self>> {
        let efd = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| os_error("eventfd", e))?;
        Ok(Arc::new(StopSignal {
            flag: AtomicBool::new(false),
            efd,
        }))
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        // Best effort: a full counter is already readable.
        let _ = rustix::io::write(&self.efd, &1u64.to_ne_bytes());
    }

    pub fn stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// When the schedule starts: set once (by the main thread, at `ready` or on
/// SIGUSR1), read by the forwarding threads.
#[derive(Debug, Default)]
pub struct ScheduleStart(AtomicU64);

impl ScheduleStart {
    /// Start at `t` unless already started.
    pub fn set(&self, t: Instant) {
        let stored = t.as_nanos() + 1; // 0 means "not yet"
        let _ = self
            .0
            .compare_exchange(0, stored, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn get(&self) -> Option<Instant> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            stored => Some(Instant::from_nanos(stored - 1)),
        }
    }
}

/// The production [`PacketIo`]: read `rx`, write `tx`, wake on `stop`.
#[derive(Debug)]
pub struct TunIo {
    pub rx: Arc<TunDevice>,
    pub tx: Arc<TunDevice>,
    pub stop: Arc<StopSignal>,
}

impl PacketIo for TunIo {
    fn recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        self.rx.recv(buf)
    }

    fn send(&mut self, pkt: &[u8]) -> std::io::Result<()> {
        self.tx.send(pkt)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
        let mut fds = [
            PollFd::new(&*self.rx, PollFlags::IN),
            PollFd::new(&self.stop.efd, PollFlags::IN),
        ];
        let ts = timeout.map(|t| Timespec {
            tv_sec: (t.as_nanos() / 1_000_000_000) as i64,
            tv_nsec: (t.as_nanos() % 1_000_000_000) as i64,
        });
        match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(n) => Ok(n == 0 && timeout.is_some()),
            Err(Errno::INTR) => Ok(false),
            Err(e) => Err(os_error("ppoll", e)),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.stopped()
    }
}

/// What one direction does to its packets, whatever the clock and devices.
pub struct Forwarder {
    pub pipeline: Pipeline,
    pub path: Path,
    pub mtu: u32,
    pub stats: Arc<DirStats>,
    /// Re-merge departing TCP segments into super-packets (segmented path).
    pub coalesce: bool,
    /// When the pipeline's schedule starts (shared with the main thread).
    pub start: Arc<ScheduleStart>,
}

impl Forwarder {
    /// Forward on the calling thread until stopped, on the OS clock.
    pub fn run(self, io: TunIo) -> Result<()> {
        // Failures only cost accuracy. The emulator is the network: under
        // CPU contention its threads should run before the endpoints (nice
        // FORWARDER_NICE), or departures arrive late.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        let _ =
            rustix::process::setpriority_process(Some(rustix::thread::gettid()), FORWARDER_NICE);
        Loop::new(Monotonic, io, self).run()
    }
}

/// The event loop of one direction (see the module doc).
pub struct Loop<C: Clock, D: PacketIo> {
    clock: C,
    io: D,
    pipeline: Pipeline,
    path: Path,
    stats: Arc<DirStats>,
    buf: Vec<u8>,
    next_id: u64,
    max_held: usize,
    last_publish: Instant,
    /// EWMA of how late the I/O wait returns after a timeout (ns).
    oversleep_ns: u64,
    /// The deadline the last wait woke up early for, and the margin it
    /// kept, if it did.
    woke_early_for: Option<(Instant, Duration)>,
    /// Segmented path only: re-merges departing segments (userspace GRO).
    coalescer: Option<Coalescer>,
    start: Arc<ScheduleStart>,
    /// With classification on: what the writes did to classified packets.
    rec: Option<Recorder>,
}

/// What the loop notes about classified packets as it writes them, until
/// it hands the notes to the stats' fault log.
#[derive(Debug)]
struct Recorder {
    /// Packets written, per class.
    delivered: [u64; Class::COUNT],
    /// Ids of non-data messages written.
    sent: Vec<u64>,
    /// Tunnel data messages written while a mark was wanted.
    marks: Vec<(Instant, Class)>,
    /// A non-data message or a fault was seen since the last data mark.
    want_mark: bool,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            delivered: [0; Class::COUNT],
            sent: Vec::new(),
            marks: Vec::new(),
            want_mark: false,
        }
    }

    fn written(&mut self, p: &Packet, now: Instant) {
        self.delivered[p.class.index()] += 1;
        if !p.class.is_data() {
            self.sent.push(p.id);
        } else if self.want_mark && p.class.is_tunnel_data() {
            self.want_mark = false;
            self.marks.push((now, p.class));
        }
    }
}

impl<C: Clock, D: PacketIo> Loop<C, D> {
    pub fn new(clock: C, io: D, mut f: Forwarder) -> Self {
        let watch = crate::occupancy::QueueWatch {
            sojourn: Arc::clone(&f.stats.sojourn),
            occupancy: Arc::clone(&f.stats.occupancy),
        };
        f.pipeline.watch_queue(&watch, clock.now());
        let per_packet = match f.path {
            Path::Segmented => f.mtu as usize + VNET_HDR_LEN,
            _ => SUPER_PACKET,
        };
        let coalescer = (f.path == Path::Segmented && f.coalesce).then(Coalescer::default);
        let rec = f.pipeline.faults().map(|_| {
            let mut log = f.stats.faults.lock().unwrap_or_else(|e| e.into_inner());
            *log = Some(FaultLog::default());
            Recorder::new()
        });
        Loop {
            clock,
            io,
            pipeline: f.pipeline,
            path: f.path,
            stats: f.stats,
            buf: vec![0u8; READ_BUF],
            next_id: 0,
            max_held: MAX_HELD_BYTES / per_packet,
            last_publish: Instant::ZERO,
            oversleep_ns: 0,
            woke_early_for: None,
            coalescer,
            start: f.start,
            rec,
        }
    }

    /// Forward until the I/O says stop, then publish the final counters.
    pub fn run(&mut self) -> Result<()> {
        while !self.io.stopped() {
            if self.poll()? {
                continue; // a full batch: more input is probably waiting
            }
            let mut deadline = self.pipeline.next_event();
            if self.pipeline.waiting_to_arm() {
                let look = self.clock.now() + ARM_POLL;
                deadline = Some(deadline.map_or(look, |d| d.min(look)));
            }
            self.wait(deadline)?;
        }
        let now = self.clock.now();
        self.publish(now);
        Ok(())
    }

    /// One round, without sleeping: read up to [`READ_BATCH`] packets into
    /// the models (writing what falls due meanwhile), write everything due
    /// now, publish the counters every [`PUBLISH_EVERY`]. True when the
    /// batch was full.
    pub fn poll(&mut self) -> Result<bool> {
        if self.pipeline.waiting_to_arm() {
            if let Some(t0) = self.start.get() {
                self.pipeline.arm(t0);
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        let res = self.read_batch(&mut buf);
        self.buf = buf;
        let full = res?;
        let now = self.clock.now();
        self.drain(now);
        self.stats.record_events(self.pipeline.take_applied());
        if now - self.last_publish >= PUBLISH_EVERY {
            self.publish(now);
        }
        Ok(full)
    }

    /// When the models next have something to write (`None`: nothing held).
    pub fn poll_at(&self) -> Option<Instant> {
        self.pipeline.next_event()
    }

    pub fn io(&self) -> &D {
        &self.io
    }

    pub fn io_mut(&mut self) -> &mut D {
        &mut self.io
    }

    /// The learned wake-up latency (ns).
    pub fn oversleep_ns(&self) -> u64 {
        self.oversleep_ns
    }

    fn read_batch(&mut self, buf: &mut [u8]) -> Result<bool> {
        let mut reads = 0;
        while reads < READ_BATCH {
            let Some(n) = self.io.recv(buf)? else {
                break;
            };
            reads += 1;
            let now = self.clock.now();
            if n == buf.len() {
                DirStats::add(&self.stats.packets_in, 1);
                DirStats::add(&self.stats.dropped_emulator, 1);
                continue;
            }
            self.ingest(&buf[..n], now);
            if self.pipeline.next_event().is_some_and(|t| t <= now) {
                // Something is due: send it now, then keep reading, so
                // the models (not the kernel's TUN queue) see the
                // whole offered load.
                self.drain(now);
            }
        }
        Ok(reads == READ_BATCH)
    }

    fn publish(&mut self, now: Instant) {
        self.stats
            .publish_models(&self.pipeline.counters(), self.pipeline.held());
        self.collect();
        if let (Some(rec), Some(f)) = (&self.rec, self.pipeline.faults()) {
            self.stats
                .with_faults(|log| log.set_classes(&f.seen, &f.dropped, &rec.delivered));
        }
        self.last_publish = now;
    }

    /// Hand the fault stage's records, the link's drops of classified
    /// messages and the loop's own notes to the stats' fault log (locked
    /// only when there is something to add).
    fn collect(&mut self) {
        let Some(rec) = self.rec.as_mut() else {
            return;
        };
        let records = self.pipeline.take_fault_records();
        let drops = self.pipeline.take_link_drops();
        if records.is_empty() && drops.is_empty() && rec.sent.is_empty() && rec.marks.is_empty() {
            return;
        }
        rec.want_mark |= !records.is_empty();
        self.stats.with_faults(|log| {
            for r in records {
                log.record(r);
            }
            for id in drops {
                log.link_dropped(id);
            }
            for id in rec.sent.drain(..) {
                log.delivered(id);
            }
            for (t, c) in rec.marks.drain(..) {
                log.data_mark(t, c);
            }
        });
    }

    fn ingest(&mut self, data: &[u8], now: Instant) {
        let st = Arc::clone(&self.stats);
        if data.len() <= VNET_HDR_LEN {
            DirStats::add(&st.packets_in, 1);
            DirStats::add(&st.dropped_emulator, 1);
            return;
        }
        let hdr = VnetHdr::parse(data);
        if hdr.is_gso() {
            DirStats::add(&st.gso_superpackets_in, 1);
        }
        match self.path {
            Path::Passthrough => {
                DirStats::add(&st.packets_in, 1);
                DirStats::add(&st.bytes_in, (data.len() - VNET_HDR_LEN) as u64);
                let n = (data.len() - VNET_HDR_LEN) as u64;
                write_one(&mut self.io, &st, data, 1, n);
            }
            Path::WholeDelay => {
                DirStats::add(&st.packets_in, 1);
                DirStats::add(&st.bytes_in, (data.len() - VNET_HDR_LEN) as u64);
                self.admit(data.to_vec(), now);
            }
            Path::Segmented => {
                let mut segs = Vec::new();
                match offload::split(data, |s| segs.push(s)) {
                    Ok(n) => {
                        if hdr.is_gso() {
                            DirStats::add(&st.segments_out, n as u64);
                        }
                        for s in segs {
                            DirStats::add(&st.packets_in, 1);
                            DirStats::add(&st.bytes_in, (s.len() - VNET_HDR_LEN) as u64);
                            self.admit(s, now);
                        }
                    }
                    Err(_) => {
                        // counted in, so in = out + drops still holds
                        DirStats::add(&st.packets_in, 1);
                        DirStats::add(&st.bytes_in, (data.len() - VNET_HDR_LEN) as u64);
                        DirStats::add(&st.dropped_emulator, 1);
                    }
                }
            }
        }
    }

    /// Hand a packet to the models unless they already hold too much.
    fn admit(&mut self, buf: Vec<u8>, now: Instant) {
        if self.pipeline.held() >= self.max_held {
            DirStats::add(&self.stats.dropped_emulator, 1);
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.pipeline.push(Packet::new(buf, id, now), now);
        self.collect();
    }

    fn drain(&mut self, now: Instant) {
        let io = &mut self.io;
        let st = &*self.stats;
        let rec = &mut self.rec;
        match self.coalescer.as_mut() {
            Some(c) => {
                let mut emit = |(buf, segs, bytes): Out| {
                    if segs > 1 {
                        DirStats::add(&st.gso_superpackets_out, 1);
                    }
                    write_one(io, st, &buf, u64::from(segs), bytes as u64);
                };
                self.pipeline.poll(now, |p| {
                    st.record_lateness((now - p.t).as_nanos());
                    if let Some(r) = rec.as_mut() {
                        r.written(&p, now);
                    }
                    c.push(p.buf, &mut emit);
                });
                c.flush(&mut emit);
            }
            None => self.pipeline.poll(now, |p| {
                st.record_lateness((now - p.t).as_nanos());
                if let Some(r) = rec.as_mut() {
                    r.written(&p, now);
                }
                let n = p.len() as u64;
                write_one(io, st, &p.buf, 1, n);
            }),
        }
        self.collect();
    }

    /// Sleep until `deadline` (or until woken), waking early on input or
    /// stop.
    fn wait(&mut self, deadline: Option<Instant>) -> Result<()> {
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = self.clock.now();
                let left = d - now;
                let learned = Duration::from_nanos(self.oversleep_ns).min(MAX_WAKE_MARGIN) + SPIN;
                let margin = if left.as_nanos() >= learned.as_nanos() * SPIN_SHARE {
                    learned
                } else {
                    SPIN
                };
                // Woken early for this very deadline: spin the rest (a
                // second sleep would wake up late again).
                // (Against the margin that sleep kept: the learned one has
                // moved since, with this very wake-up.)
                let early = matches!(std::mem::take(&mut self.woke_early_for),
                    Some((at, kept)) if at == d && left <= kept);
                if left <= margin || early {
                    // Too close to sleep: busy-wait to the deadline (a
                    // simulated clock jumps). Returning without it would
                    // make `run` poll the device in a loop until then, and
                    // a Manual clock would never get there.
                    self.clock.spin_until(d);
                    return Ok(());
                }
                if margin > SPIN {
                    self.woke_early_for = Some((d, margin));
                }
                Some(left.saturating_sub(margin))
            }
        };
        let asleep = self.clock.now();
        let timed_out = self.io.wait(timeout)?;
        if let (true, Some(t)) = (timed_out, timeout) {
            // Timed out: learn the oversleep (EWMA, weight 1/8).
            let over = (self.clock.now() - (asleep + t)).as_nanos();
            self.oversleep_ns = (self.oversleep_ns * 7 + over) / 8;
        }
        Ok(())
    }
}

/// Write one buffer carrying `packets` model packets of `bytes` IP bytes.
fn write_one<D: PacketIo>(io: &mut D, st: &DirStats, data: &[u8], packets: u64, bytes: u64) {
    match io.send(data) {
        Ok(()) => {
            DirStats::add(&st.delivered_packets, packets);
            DirStats::add(&st.delivered_bytes, bytes);
        }
        Err(_) => DirStats::add(&st.dropped_emulator, packets),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::offload::{split, VIRTIO_NET_HDR_GSO_TCPV4};
    use crate::pipeline::Direction;
    use crate::stats::Snapshot;
    use crate::time::Manual;
    use std::collections::VecDeque;

    const MS: u64 = 1_000_000;

    /// An in-memory device pair on a [`Manual`] clock: `input` is read once
    /// the clock reaches each packet's time; writes are recorded with the
    /// time they happened. A wait jumps the clock to the next input or to
    /// the timeout (`oversleep` later: a slow wake-up); with neither, the
    /// simulation is over and the loop is told to stop.
    struct MemIo<'c> {
        clock: &'c Manual,
        input: VecDeque<(Instant, Vec<u8>)>,
        sent: Vec<(Instant, Vec<u8>)>,
        oversleep: Duration,
        fail_sends: bool,
        stopped: bool,
        /// `recv` calls so far (a loop that polls instead of waiting
        /// would make this explode, or never end on a Manual clock).
        recvs: usize,
    }

    impl<'c> MemIo<'c> {
        fn new(clock: &'c Manual, input: Vec<(u64, Vec<u8>)>) -> Self {
            MemIo {
                clock,
                input: input
                    .into_iter()
                    .map(|(t, p)| (Instant::from_nanos(t), p))
                    .collect(),
                sent: Vec::new(),
                oversleep: Duration::ZERO,
                fail_sends: false,
                stopped: false,
                recvs: 0,
            }
        }

        fn sent_times(&self) -> Vec<u64> {
            self.sent.iter().map(|(t, _)| t.as_nanos()).collect()
        }
    }

    impl PacketIo for MemIo<'_> {
        fn recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
            self.recvs += 1;
            assert!(self.recvs < 10_000, "the loop polls instead of waiting");
            match self.input.front() {
                Some((t, _)) if *t <= self.clock.now() => {
                    let (_, p) = self.input.pop_front().expect("front exists");
                    let n = p.len().min(buf.len());
                    buf[..n].copy_from_slice(&p[..n]);
                    Ok(Some(n))
                }
                _ => Ok(None),
            }
        }

        fn send(&mut self, pkt: &[u8]) -> std::io::Result<()> {
            if self.fail_sends {
                return Err(std::io::Error::other("injected write failure"));
            }
            self.sent.push((self.clock.now(), pkt.to_vec()));
            Ok(())
        }

        fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
            let input = self.input.front().map(|(t, _)| *t);
            let wake = timeout.map(|t| self.clock.now() + t + self.oversleep);
            match (input, wake) {
                (None, None) => {
                    self.stopped = true;
                    Ok(false)
                }
                (Some(i), Some(w)) if i < w => {
                    self.clock.set(i);
                    Ok(false)
                }
                (Some(i), None) => {
                    self.clock.set(i);
                    Ok(false)
                }
                (_, Some(w)) => {
                    self.clock.set(w);
                    Ok(true)
                }
            }
        }

        fn stopped(&self) -> bool {
            self.stopped
        }
    }

    fn forwarder(spec: &str, coalesce: bool) -> (Forwarder, Arc<DirStats>) {
        scheduled(spec, "", coalesce)
    }

    /// A forwarder whose schedule starts at time 0.
    fn scheduled(spec: &str, events: &str, coalesce: bool) -> (Forwarder, Arc<DirStats>) {
        let steps = crate::schedule::parse(spec, events).unwrap();
        let spec = crate::spec::parse(spec).unwrap();
        let stats = Arc::new(DirStats::default());
        let start = Arc::new(ScheduleStart::default());
        start.set(Instant::ZERO);
        let f = Forwarder {
            pipeline: Pipeline::build(&spec, &steps, 1, Direction::AtoB),
            path: crate::schedule::path(&spec, &steps),
            mtu: 1500,
            stats: Arc::clone(&stats),
            coalesce,
            start,
        };
        (f, stats)
    }

    /// Run the loop over `input` (arrival ns, packet) until everything has
    /// left: the writes (ns, packet) and the final counters.
    fn simulate(spec: &str, input: Vec<(u64, Vec<u8>)>) -> (Vec<(u64, Vec<u8>)>, Snapshot) {
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder(spec, true);
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        l.run().unwrap();
        let sent = l.io().sent.iter().map(|(t, p)| (t.as_nanos(), p.clone()));
        (sent.collect(), stats.snapshot())
    }

    /// A plain (no offload) IPv4/UDP packet of `ip_len` bytes.
    fn udp(ip_len: usize, tag: u8) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN + ip_len];
        let ip = &mut b[VNET_HDR_LEN..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        ip[ip_len - 1] = tag;
        b
    }

    /// A TCP/IPv4 GSO super-packet as the kernel hands it to a TUN reader:
    /// `payload` bytes in segments of `mss`, ACK|PSH.
    fn tcp_super(payload: usize, mss: u16) -> Vec<u8> {
        crate::gso::offload::super_v4(payload, mss, 0x18)
    }

    #[test]
    fn passthrough_writes_each_read_at_once_and_counts_it() {
        let input = vec![
            (MS, udp(100, 1)),
            (2 * MS, tcp_super(4000, 1448)),
            (2 * MS, udp(1500, 2)),
        ];
        let (sent, s) = simulate("", input.clone());
        assert_eq!(sent, input, "same bytes (super-packet whole), same time");
        assert_eq!((s.packets_in, s.delivered_packets), (3, 3));
        assert_eq!((s.bytes_in, s.delivered_bytes), (5640, 5640));
        assert_eq!((s.gso_superpackets_in, s.segments_out), (1, 0));
        assert_eq!((s.dropped_emulator, s.late_ns_max), (0, 0));
    }

    #[test]
    fn rate_limit_spaces_departures_by_serialization_time() {
        // 1000 B at 1 Mbit/s = 8 ms each: a burst of 5 at t=0 leaves at
        // 8, 16, 24, 32, 40 ms; a packet at 100 ms finds the link idle.
        let mut input: Vec<_> = (0..5).map(|i| (0, udp(1000, i))).collect();
        input.push((100 * MS, udp(1000, 5)));
        let (sent, s) = simulate("rate=1mbit", input);
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [8, 16, 24, 32, 40, 108].map(|m| m * MS));
        let tags: Vec<u8> = sent.iter().map(|(_, p)| p[p.len() - 1]).collect();
        assert_eq!(tags, [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.dropped_queue),
            (6, 6, 0)
        );
        assert_eq!(s.late_ns_max, 0, "a simulated clock is never late");
    }

    /// What a simulated run gives: the writes (ns, packet), the final counters and the applied steps.
    type Simulated = (
        Vec<(u64, Vec<u8>)>,
        Snapshot,
        Vec<crate::stats::AppliedEvent>,
    );

    /// Run a scheduled forwarder (its schedule starting at 0) over `input`.
    fn simulate_scheduled(spec: &str, events: &str, input: Vec<(u64, Vec<u8>)>) -> Simulated {
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = scheduled(spec, events, true);
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        l.run().unwrap();
        let sent = l.io().sent.iter().map(|(t, p)| (t.as_nanos(), p.clone()));
        (sent.collect(), stats.snapshot(), stats.events())
    }

    #[test]
    fn faults_act_first_and_every_classified_message_has_a_fate() {
        use crate::classify::{testpkt, Classifier};
        // a 10 ms link, down from 4 to 6 ms; the first initiation is dropped by a fault
        let steps = crate::schedule::parse("delay=10ms", "at=4ms,outage=2ms").unwrap();
        let spec = crate::spec::parse("delay=10ms").unwrap();
        let faults = crate::faults::parse("match=wg.initiation,nth=1,action=drop").unwrap();
        let stats = Arc::new(DirStats::default());
        let start = Arc::new(ScheduleStart::default());
        start.set(Instant::ZERO);
        let f = Forwarder {
            pipeline: Pipeline::build(&spec, &steps, 1, Direction::AtoB).with_faults(
                Classifier::default(),
                faults,
                1,
                Direction::AtoB,
            ),
            path: Path::Segmented,
            mtu: 1500,
            stats: Arc::clone(&stats),
            coalesce: true,
            start,
        };
        let wg = |ty: u8, len: usize| {
            let mut b = vec![0u8; VNET_HDR_LEN];
            b.extend(testpkt::udp(false, 40000, 51820, &testpkt::wg(ty, len)));
            b
        };
        let input = vec![
            (0, wg(1, 148)),  // dropped by the fault
            (MS, wg(1, 148)), // sent at 11 ms
            (2 * MS, wg(4, 64)),
            (3 * MS, wg(4, 64)),
            (5 * MS, wg(1, 148)), // lost to the outage
            (7 * MS, wg(4, 64)),
            (20 * MS, wg(2, 92)),
            (25 * MS, wg(4, 64)),
        ];
        let clock = Manual::new(Instant::ZERO);
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        l.run().unwrap();
        assert_eq!(
            l.io().sent_times(),
            [11, 12, 13, 17, 30, 35].map(|m| m * MS),
            "the fault's drop and the outage's"
        );
        let r = stats.report(clock.now(), Instant::ZERO, Some(Instant::from_nanos(MS)));
        let c = r.counters;
        assert_eq!(
            (
                c.packets_in,
                c.delivered_packets,
                c.dropped_fault,
                c.dropped_outage
            ),
            (8, 6, 1, 1)
        );
        let f = r.faults.expect("classification is on");
        let fired: Vec<_> = f
            .faults
            .iter()
            .map(|x| {
                (
                    x.fault,
                    x.class,
                    x.ordinal,
                    x.action,
                    x.times.since_start_ns,
                    x.times.at_ns,
                )
            })
            .collect();
        assert_eq!(fired, [(0, "wg.initiation", 1, "drop", 0, None)]);
        let msgs: Vec<_> = f
            .messages
            .iter()
            .map(|m| (m.times.since_start_ns / MS, m.class, m.size, m.fate))
            .collect();
        assert_eq!(
            msgs,
            [
                (0, "wg.initiation", 176, "dropped_fault"),
                (1, "wg.initiation", 176, "sent"),
                (5, "wg.initiation", 176, "dropped_link"),
                (20, "wg.response", 120, "sent"),
            ]
        );
        let marks: Vec<_> = f
            .data_marks
            .iter()
            .map(|m| (m.times.since_start_ns / MS, m.class))
            .collect();
        // the first data written after each message (12 ms follows both 1 and 5 ms)
        assert_eq!(marks, [(12, "wg.data"), (35, "wg.data")]);
        let classes: Vec<_> = f
            .classes
            .0
            .iter()
            .map(|(k, v)| (*k, v.seen, v.dropped_fault, v.delivered))
            .collect();
        assert_eq!(
            classes,
            [
                ("wg.initiation", 3, 1, 1),
                ("wg.response", 1, 0, 1),
                ("wg.data", 4, 0, 4)
            ]
        );
    }

    #[test]
    fn a_rate_change_applies_to_packets_served_from_its_time_on() {
        // 1000 B: 8 ms at 1 Mbit/s, 4 ms at 2 Mbit/s. The third packet is
        // in service when the rate changes at 20 ms and finishes at the old
        // rate (24 ms); the next two take 4 ms each.
        let input: Vec<_> = (0..5).map(|i| (0, udp(1000, i))).collect();
        let (sent, _, ev) = simulate_scheduled("rate=1mbit", "at=20ms,rate=2mbit", input);
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [8, 16, 24, 28, 32].map(|m| m * MS));
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].kind, ev[0].at_ns, ev[0].late_ns),
            ("set", 20 * MS, 0)
        );
    }

    #[test]
    fn an_outage_loses_what_enters_while_down_and_delivers_what_was_inside() {
        // A packet every 2 ms for 20 ms through a 10 ms delay; down from
        // 5 ms to 15 ms: the packets entering at 6..14 ms are lost, the one
        // that entered at 4 ms still arrives at 14 ms.
        let input: Vec<_> = (0..=10).map(|i| (2 * i * MS, udp(100, i as u8))).collect();
        let (sent, s, ev) = simulate_scheduled("delay=10ms", "at=5ms,outage=10ms", input);
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t / MS).collect();
        assert_eq!(times, [10, 12, 14, 26, 28, 30]);
        assert_eq!(
            (s.dropped_outage, s.delivered_packets, s.packets_in),
            (5, 6, 11)
        );
        let kinds: Vec<_> = ev
            .iter()
            .map(|e| (e.kind, e.at_ns / MS, e.late_ns))
            .collect();
        assert_eq!(kinds, [("down", 5, 0), ("up", 15, 0)]);
    }

    #[test]
    fn a_delay_change_never_reorders_and_adds_stages_the_base_lacks() {
        // No impairment at first, then 30 ms of delay, then 0 again: the
        // packet after the drop back waits behind the delayed ones.
        let input: Vec<_> = (0..6).map(|i| (10 * i * MS, udp(100, i as u8))).collect();
        let (sent, s, _) = simulate_scheduled("", "at=15ms,delay=30ms;at=35ms,delay=0ms", input);
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t / MS).collect();
        assert_eq!(times, [0, 10, 50, 60, 60, 60]);
        let tags: Vec<u8> = sent.iter().map(|(_, p)| p[p.len() - 1]).collect();
        assert_eq!(tags, [0, 1, 2, 3, 4, 5]);
        assert_eq!(s.delivered_packets, 6);
    }

    #[test]
    fn a_schedule_waits_for_its_start() {
        let clock = Manual::new(Instant::ZERO);
        let steps = crate::schedule::parse("", "at=1ms,outage=1s").unwrap();
        let spec = crate::spec::parse("").unwrap();
        let stats = Arc::new(DirStats::default());
        let f = Forwarder {
            pipeline: Pipeline::build(&spec, &steps, 1, Direction::AtoB),
            path: crate::schedule::path(&spec, &steps),
            mtu: 1500,
            stats: Arc::clone(&stats),
            coalesce: true,
            start: Arc::new(ScheduleStart::default()),
        };
        let input: Vec<_> = (0..5).map(|i| (10 * i * MS, udp(100, i as u8))).collect();
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        for _ in 0..200 {
            if l.io().stopped {
                break;
            }
            l.poll().unwrap();
            let d = l.poll_at();
            assert!(d.is_none(), "no step is due before the start");
            l.io_mut().wait(Some(ARM_POLL)).unwrap();
        }
        assert_eq!(
            stats.snapshot().delivered_packets,
            5,
            "never armed, never down"
        );
        assert!(stats.events().is_empty());
    }

    #[test]
    fn each_packets_time_in_the_bottleneck_is_recorded() {
        // 1000 B at 1 Mbit/s: a burst of 5 leaves after 8, 16, 24, 32, 40 ms
        let input: Vec<_> = (0..5).map(|i| (0, udp(1000, i))).collect();
        let (_, s) = simulate("rate=1mbit,delay=5ms", input);
        assert_eq!(s.sojourn_us_max, 40_000, "the delay is not the queue's");
        assert!(
            (24_000..=24_000 * 107 / 100).contains(&s.sojourn_us_p50),
            "{s:?}"
        );
        let (_, s) = simulate("delay=5ms", vec![(0, udp(1000, 0))]);
        assert_eq!(
            (s.sojourn_us_p50, s.sojourn_us_max),
            (0, 0),
            "no bottleneck"
        );
    }

    #[test]
    fn queue_overflow_is_counted_and_packets_are_conserved() {
        // 1 in service + 2 queued; the other 3 of the burst are dropped.
        let input = (0..6).map(|i| (0, udp(1000, i))).collect();
        let (sent, s) = simulate("rate=1mbit,queue=2p", input);
        assert_eq!(sent.len(), 3);
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.dropped_queue),
            (6, 3, 3)
        );
        assert_eq!(s.delivered_bytes, 3000);
        assert_eq!((s.held_packets, s.dropped_emulator), (0, 0));
    }

    #[test]
    fn fixed_delay_departs_at_the_scheduled_simulated_time() {
        let big = tcp_super(20_000, 1448);
        let input = vec![
            (0, udp(100, 0)),
            (MS, udp(100, 1)),
            (5 * MS, udp(100, 2)),
            (5 * MS, big.clone()),
        ];
        let (sent, s) = simulate("delay=10ms", input);
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [10, 11, 15, 15].map(|m| m * MS));
        assert_eq!(sent[3].1, big, "whole_delay keeps the super-packet whole");
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.segments_out),
            (4, 4, 0)
        );
        assert_eq!(s.late_ns_max, 0);
    }

    #[test]
    fn late_wakeups_are_measured_and_learned() {
        // Every timed-out wait returns 50 µs late. First departure: the
        // loop asks for 10 ms - SPIN and wakes 45 µs after the departure,
        // then learns 50/8 µs. Second: asks for 10 ms - (6.25 + 5) µs and
        // is 38.75 µs late.
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder("delay=10ms", true);
        let mut io = MemIo::new(&clock, vec![(0, udp(100, 0)), (20 * MS, udp(100, 1))]);
        io.oversleep = Duration::from_micros(50);
        let mut l = Loop::new(&clock, io, f);
        l.run().unwrap();
        assert_eq!(l.io().sent_times(), [10_045_000, 30_038_750]);
        assert_eq!(l.oversleep_ns(), (50_000 / 8 * 7 + 50_000) / 8);
        let s = stats.snapshot();
        assert_eq!((s.late_ns_max, s.late_ns_sum), (45_000, 45_000 + 38_750));
        assert_eq!((s.late_us_p50, s.late_us_p99), (39, 46));
    }

    #[test]
    fn dense_departures_sleep_without_the_learned_margin() {
        // Wake-ups 50 µs late, learned at once (an EWMA starting from it
        // would take a while). Three 1472-byte packets through 100 Mbit/s
        // and 10 ms leave 117.76 µs apart: the first, 10 ms away, is a
        // sparse departure (woken early by the 55 µs margin, on time); the
        // next two are under ten times the margin away, so the loop asks for
        // each minus SPIN only and is 45 µs late.
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder("rate=100mbit,delay=10ms", true);
        let input = (0..3).map(|i| (0, udp(1472, i))).collect();
        let mut io = MemIo::new(&clock, input);
        io.oversleep = Duration::from_micros(50);
        let mut l = Loop::new(&clock, io, f);
        l.oversleep_ns = 50_000;
        l.run().unwrap();
        assert_eq!(stats.snapshot().delivered_packets, 3);
        assert_eq!(
            l.io().sent_times(),
            [10_117_760, 10_235_520 + 45_000, 10_353_280 + 45_000]
        );
    }

    /// When one packet delayed 10 ms leaves, with `learned_ns` of learned
    /// wake-up latency and wake-ups `late` after their timeout.
    fn departure_after_waking(learned_ns: u64, late: Duration) -> Vec<u64> {
        let clock = Manual::new(Instant::ZERO);
        let (f, _) = forwarder("delay=10ms", true);
        let mut io = MemIo::new(&clock, vec![(0, udp(100, 0))]);
        io.oversleep = late;
        let mut l = Loop::new(&clock, io, f);
        l.oversleep_ns = learned_ns;
        l.run().unwrap();
        l.io().sent_times()
    }

    #[test]
    fn after_an_early_wakeup_the_rest_is_spun_not_slept() {
        // Learned 50 µs, but this wake-up is only 20 µs late: woken 35 µs
        // before the departure, the loop spins the rest (a second sleep
        // would be 20 µs late again).
        assert_eq!(
            departure_after_waking(50_000, Duration::from_micros(20)),
            [10 * MS]
        );
        // Learned the cap (a loaded period), then a 10 µs wake-up: the
        // EWMA moves with it, and the rest (more than the new learned
        // value) is still spun, against the margin that sleep kept.
        assert_eq!(
            departure_after_waking(MAX_WAKE_MARGIN.as_nanos(), Duration::from_micros(10)),
            [10 * MS]
        );
    }

    #[test]
    fn a_departure_closer_than_the_spin_margin_is_spun_to_not_polled_for() {
        // 100 B at 1 Gbit/s: due 800 ns after arrival, well inside SPIN.
        // The loop must wait for it with `Clock::spin_until` (a Manual
        // clock jumps there); re-polling the device instead would never
        // see the simulated clock move (and spins on syscalls for real).
        let clock = Manual::new(Instant::ZERO);
        let (f, _) = forwarder("rate=1gbit", true);
        let mut l = Loop::new(&clock, MemIo::new(&clock, vec![(0, udp(100, 0))]), f);
        l.run().unwrap();
        assert_eq!(l.io().sent_times(), [800]);
        assert!(l.io().recvs <= 3, "{} reads", l.io().recvs);
    }

    #[test]
    fn gso_superpacket_is_split_for_the_models_and_merged_again() {
        let sp = tcp_super(10_000, 1448);
        let mut want_segs = Vec::new();
        split(&sp, |s| want_segs.push(s)).unwrap();
        assert_eq!(want_segs.len(), 7);
        for coalesce in [true, false] {
            let clock = Manual::new(Instant::ZERO);
            let (f, stats) = forwarder("rate=10gbit", coalesce);
            let mut l = Loop::new(&clock, MemIo::new(&clock, vec![(0, sp.clone())]), f);
            // Read at t=0 (the first segment needs 1.19 µs on the link);
            // the next poll, 1 ms later, finds all 7 due at once.
            assert!(!l.poll().unwrap());
            assert!(l.io().sent.is_empty());
            assert!(l.poll_at().is_some_and(|t| t.as_nanos() == 1190));
            clock.set(Instant::from_nanos(MS));
            l.poll().unwrap();
            let sent = &l.io().sent;
            let s = stats.snapshot();
            assert_eq!((s.gso_superpackets_in, s.segments_out), (1, 7));
            assert_eq!((s.packets_in, s.delivered_packets), (7, 7));
            assert_eq!(s.delivered_bytes, 7 * 40 + 10_000);
            if coalesce {
                assert_eq!(sent.len(), 1);
                assert_eq!(s.gso_superpackets_out, 1);
                let (t, merged) = &sent[0];
                assert_eq!(t.as_nanos(), MS);
                let h = VnetHdr::parse(merged);
                assert_eq!((h.gso_type, h.gso_size), (VIRTIO_NET_HDR_GSO_TCPV4, 1448));
                assert_eq!(merged.len(), VNET_HDR_LEN + 40 + 10_000);
                let mut again = Vec::new();
                split(merged, |s| again.push(s)).unwrap();
                assert_eq!(again, want_segs, "merging loses nothing");
            } else {
                assert_eq!(s.gso_superpackets_out, 0);
                let got: Vec<Vec<u8>> = sent.iter().map(|(_, p)| p.clone()).collect();
                assert_eq!(got, want_segs);
            }
        }
    }

    #[test]
    fn oversized_short_unsplittable_and_unwritable_packets_are_emulator_drops() {
        let mut bad_gso = tcp_super(3000, 1448);
        bad_gso[1] = 3; // GSO UDP: not offered, cannot be split
        let input = vec![
            (0, vec![0u8; READ_BUF + 100]),
            (0, vec![0u8; VNET_HDR_LEN]),
            (0, udp(100, 0)),
        ];
        let (sent, s) = simulate("", input);
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.dropped_emulator),
            (3, 1, 2)
        );

        let (sent, s) = simulate("rate=1gbit", vec![(0, bad_gso), (0, udp(100, 1))]);
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.dropped_emulator),
            (2, 1, 1)
        );

        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder("", true);
        let mut io = MemIo::new(&clock, vec![(0, udp(100, 0)), (0, udp(100, 1))]);
        io.fail_sends = true;
        Loop::new(&clock, io, f).run().unwrap();
        let s = stats.snapshot();
        assert_eq!(
            (s.packets_in, s.delivered_packets, s.dropped_emulator),
            (2, 0, 2)
        );
    }

    #[test]
    fn a_full_read_batch_asks_to_be_polled_again() {
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder("", true);
        let input = (0..READ_BATCH as u8 + 10)
            .map(|i| (0, udp(100, i)))
            .collect();
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        assert!(l.poll().unwrap(), "64 read, more waiting");
        assert_eq!(stats.snapshot().packets_in, READ_BATCH as u64);
        assert!(!l.poll().unwrap());
        assert_eq!(stats.snapshot().delivered_packets, READ_BATCH as u64 + 10);
    }

    #[test]
    fn model_counters_are_published_every_100ms() {
        let clock = Manual::new(Instant::ZERO);
        let (f, stats) = forwarder("loss=50%", true);
        let input = (0..100).map(|i| (0, udp(100, i))).collect();
        let mut l = Loop::new(&clock, MemIo::new(&clock, input), f);
        l.poll().unwrap();
        l.poll().unwrap();
        let s = stats.snapshot();
        assert!(s.delivered_packets > 0 && s.delivered_packets < 100);
        assert_eq!(s.dropped_loss, 0, "not published yet");
        clock.set(Instant::ZERO + PUBLISH_EVERY);
        l.poll().unwrap();
        let s = stats.snapshot();
        assert_eq!(s.dropped_loss + s.delivered_packets, 100);
    }
}
