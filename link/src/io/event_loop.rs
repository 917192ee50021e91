//! The forwarding loop of one direction: read from one TUN device, run the
//! packets through the direction's [`Pipeline`], write what is due to the
//! other device, and sleep until the next event or the next packet.
//!
//! This is the only code that reads the clock or sleeps. Waiting is
//! `ppoll(2)` with a nanosecond timeout (timer slack set to 1 ns with
//! `prctl(PR_SET_TIMERSLACK)`), woken early by input or by the stop eventfd.
//! Before sleeps of at least [`SPARSE`] the loop asks to be woken early by
//! the learned ppoll wake-up latency (an EWMA of the oversleep; about 50 µs
//! on an idle VM), then busy-waits the rest; otherwise it busy-waits only
//! the final [`SPIN`]. Packets leave within a few µs of schedule without
//! spinning through whole delays or hogging a core under load.
//!
//! Paths (see [`Path`]):
//! * passthrough: each read (a GSO super-packet up to 64 KiB, or a single
//!   packet) is written to the other device at once, header included, no
//!   copy; the receiving kernel handles the GSO/partial checksum itself.
//! * whole_delay: the same, but the super-packet sits in the delay line.
//! * segmented: super-packets are split into MTU-sized segments with full
//!   checksums before the models see them; impairments apply per segment.

use super::coalesce::{Coalescer, Out};
use super::offload::{self, VnetHdr};
use super::tun::TunDevice;
use super::{check, Result};
use crate::packet::{Packet, VNET_HDR_LEN};
use crate::pipeline::Pipeline;
use crate::spec::Path;
use crate::stats::DirStats;
use crate::time::{Clock, Duration, Instant, Monotonic};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Busy-wait this close to a departure instead of sleeping (on top of the
/// learned wake-up latency).
pub const SPIN: Duration = Duration::from_micros(5);
/// Upper bound on the learned wake-up latency (bounds the spin).
const MAX_WAKE_MARGIN: Duration = Duration::from_micros(300);
/// The learned early wake-up is used only before sleeps at least this long,
/// so spinning stays a small fraction of the time: under dense traffic the
/// thread is awake anyway and wakes fast, and long spins there would steal
/// the CPU the endpoints need (and delay reading the TUN queue).
const SPARSE: Duration = Duration::from_millis(1);
/// Scheduling priority of the forwarding threads (best effort).
const FORWARDER_NICE: libc::c_int = -10;
/// Reads per loop iteration before the pipeline is serviced.
const READ_BATCH: usize = 64;
/// Memory the models may hold per direction before the emulator starts
/// dropping (counted as `dropped_emulator`).
const MAX_HELD_BYTES: usize = 2 << 30;
/// Read buffer: virtio-net header + twice the largest packet the kernel
/// hands a TUN device (64 KiB GSO limit), so a full buffer means something
/// unexpected (counted as `dropped_emulator`, never forwarded truncated).
const READ_BUF: usize = VNET_HDR_LEN + 2 * 65_536;
/// Memory accounting unit for a super-packet held on the whole-delay path.
const SUPER_PACKET: usize = VNET_HDR_LEN + 65_536;
/// How often model counters are published to the shared stats.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Wakes forwarding threads blocked in ppoll when it is time to stop.
#[derive(Debug)]
pub struct StopSignal {
    flag: AtomicBool,
    efd: OwnedFd,
}

impl StopSignal {
    pub fn new() -> Result<Arc<Self>> {
        // SAFETY: plain syscall; fd owned below.
        let fd = check(
            unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) },
            "eventfd",
        )?;
        Ok(Arc::new(StopSignal {
            flag: AtomicBool::new(false),
            // SAFETY: fresh fd owned by nobody else.
            efd: unsafe { OwnedFd::from_raw_fd(fd) },
        }))
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64.
        unsafe { libc::write(self.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }
}

pub struct Forwarder {
    pub rx: Arc<TunDevice>,
    pub tx: Arc<TunDevice>,
    pub pipeline: Pipeline,
    pub path: Path,
    pub mtu: u32,
    pub stats: Arc<DirStats>,
    pub stop: Arc<StopSignal>,
    /// Re-merge departing TCP segments into super-packets (segmented path).
    pub coalesce: bool,
}

struct Loop {
    f: Forwarder,
    clock: Monotonic,
    next_id: u64,
    max_held: usize,
    last_publish: Instant,
    /// EWMA of how late ppoll returns after a timeout (ns).
    oversleep_ns: u64,
    /// Segmented path only: re-merges departing segments (userspace GRO).
    coalescer: Option<Coalescer>,
}

impl Forwarder {
    pub fn run(self) -> Result<()> {
        // SAFETY: prctl/setpriority with integer arguments on this thread;
        // failure only costs accuracy. The emulator is the network: under
        // CPU contention its threads should run before the endpoints
        // (nice FORWARDER_NICE), or departures arrive late.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
            let tid = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, FORWARDER_NICE);
        }
        let per_packet = match self.path {
            Path::Segmented => self.mtu as usize + VNET_HDR_LEN,
            _ => SUPER_PACKET,
        };
        let mut l = Loop {
            max_held: MAX_HELD_BYTES / per_packet,
            f: self,
            clock: Monotonic,
            next_id: 0,
            last_publish: Instant::ZERO,
            oversleep_ns: 0,
            coalescer: None,
        };
        if l.f.path == Path::Segmented && l.f.coalesce {
            l.coalescer = Some(Coalescer::default());
        }
        l.run()
    }
}

impl Loop {
    fn run(&mut self) -> Result<()> {
        let mut buf = vec![0u8; READ_BUF];
        while !self.f.stop.stopped() {
            let mut reads = 0;
            while reads < READ_BATCH {
                let Some(n) = self.f.rx.recv(&mut buf)? else {
                    break;
                };
                reads += 1;
                let now = self.clock.now();
                if n == buf.len() {
                    DirStats::add(&self.f.stats.packets_in, 1);
                    DirStats::add(&self.f.stats.dropped_emulator, 1);
                    continue;
                }
                self.ingest(&buf[..n], now);
                if self.f.pipeline.next_event().is_some_and(|t| t <= now) {
                    // Something is due: send it now, then keep reading, so
                    // the models (not the kernel's TUN queue) see the
                    // whole offered load.
                    self.drain(now);
                }
            }
            let now = self.clock.now();
            self.drain(now);
            if now - self.last_publish >= PUBLISH_EVERY {
                self.publish(now);
            }
            if reads == READ_BATCH {
                continue; // more input is probably waiting
            }
            self.wait(self.f.pipeline.next_event())?;
        }
        let now = self.clock.now();
        self.publish(now);
        Ok(())
    }

    fn publish(&mut self, now: Instant) {
        self.f
            .stats
            .publish_models(&self.f.pipeline.counters(), self.f.pipeline.held());
        self.last_publish = now;
    }

    fn ingest(&mut self, data: &[u8], now: Instant) {
        let st = Arc::clone(&self.f.stats);
        if data.len() <= VNET_HDR_LEN {
            DirStats::add(&st.packets_in, 1);
            DirStats::add(&st.dropped_emulator, 1);
            return;
        }
        let hdr = VnetHdr::parse(data);
        if hdr.is_gso() {
            DirStats::add(&st.gso_superpackets_in, 1);
        }
        match self.f.path {
            Path::Passthrough => {
                DirStats::add(&st.packets_in, 1);
                DirStats::add(&st.bytes_in, (data.len() - VNET_HDR_LEN) as u64);
                self.write(data);
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
        if self.f.pipeline.held() >= self.max_held {
            DirStats::add(&self.f.stats.dropped_emulator, 1);
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.f.pipeline.push(Packet::new(buf, id, now), now);
    }

    fn drain(&mut self, now: Instant) {
        let tx = &self.f.tx;
        let st = &self.f.stats;
        let mut emit = |(buf, segs, bytes): Out| {
            if segs > 1 {
                DirStats::add(&st.gso_superpackets_out, 1);
            }
            write_one(tx, st, &buf, u64::from(segs), bytes as u64);
        };
        match self.coalescer.as_mut() {
            Some(c) => {
                self.f.pipeline.poll(now, |p| {
                    st.record_lateness((now - p.t).as_nanos());
                    c.push(p.buf, &mut emit);
                });
                c.flush(&mut emit);
            }
            None => self.f.pipeline.poll(now, |p| {
                st.record_lateness((now - p.t).as_nanos());
                let n = p.len() as u64;
                write_one(tx, st, &p.buf, 1, n);
            }),
        }
    }

    fn write(&self, data: &[u8]) {
        let n = (data.len() - VNET_HDR_LEN) as u64;
        write_one(&self.f.tx, &self.f.stats, data, 1, n);
    }

    /// Sleep until `deadline` (or forever), waking early on input or stop.
    fn wait(&mut self, deadline: Option<Instant>) -> Result<()> {
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = self.clock.now();
                let left = d - now;
                let margin = if left >= SPARSE {
                    Duration::from_nanos(self.oversleep_ns).min(MAX_WAKE_MARGIN) + SPIN
                } else {
                    SPIN
                };
                if left <= margin {
                    while self.clock.now() < d {
                        std::hint::spin_loop();
                    }
                    return Ok(());
                }
                Some(left.saturating_sub(margin))
            }
        };
        let mut fds = [
            libc::pollfd {
                fd: self.f.rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.f.stop.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: (t.as_nanos() / 1_000_000_000) as libc::time_t,
            tv_nsec: (t.as_nanos() % 1_000_000_000) as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: fds is a valid array of 2 pollfd; tsp null or valid.
        let asleep = self.clock.now();
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
        if let (0, Some(t)) = (r, timeout) {
            // Timed out: learn the oversleep (EWMA, weight 1/8).
            let over = (self.clock.now() - (asleep + t)).as_nanos();
            self.oversleep_ns = (self.oversleep_ns * 7 + over) / 8;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(super::last_os_error("ppoll"));
        }
        Ok(())
    }
}

/// Write one buffer carrying `packets` model packets of `bytes` IP bytes.
fn write_one(tx: &TunDevice, st: &DirStats, data: &[u8], packets: u64, bytes: u64) {
    match tx.send(data) {
        Ok(()) => {
            DirStats::add(&st.delivered_packets, packets);
            DirStats::add(&st.delivered_bytes, bytes);
        }
        Err(_) => DirStats::add(&st.dropped_emulator, packets),
    }
}
