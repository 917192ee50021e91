//! Time as plain numbers: `Instant` and `Duration` are **nanoseconds** (u64).
//!
//! Models never read a clock: they receive `now: Instant` as an argument and
//! report `next_event() -> Option<Instant>`. Only `io::event_loop` converts
//! from the OS clock (`CLOCK_MONOTONIC`) through [`Monotonic`]; tests drive a
//! [`Manual`] clock.

use std::cell::Cell;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A span of time in nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0 + rhs.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// A point in time: nanoseconds since an arbitrary origin (boot for
/// [`Monotonic`], zero for [`Manual`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self - earlier`, or `None` when `earlier` is later.
    pub fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0 + rhs.0)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        self.0 += rhs.0;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: never panics when `rhs` is later.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// Where "now" comes from, and how to wait for an instant that is too
/// close to sleep for.
pub trait Clock {
    fn now(&self) -> Instant;

    /// Return at `t` (or at once if `t` has passed) without sleeping: the
    /// event loop's last few microseconds before a departure. A real clock
    /// busy-waits; a [`Manual`] clock jumps.
    fn spin_until(&self, t: Instant) {
        while self.now() < t {
            std::hint::spin_loop();
        }
    }
}

/// A shared clock is a clock (an event loop and a simulated device can
/// read the same [`Manual`] clock).
impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn spin_until(&self, t: Instant) {
        (**self).spin_until(t)
    }
}

/// `CLOCK_MONOTONIC` (not the wall clock; read through the vDSO).
#[derive(Copy, Clone, Debug, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    fn now(&self) -> Instant {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        Instant(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// A clock that only moves when told to (tests, simulations).
#[derive(Debug, Default)]
pub struct Manual {
    now: Cell<Instant>,
}

impl Manual {
    pub fn new(start: Instant) -> Self {
        Manual {
            now: Cell::new(start),
        }
    }
    /// Jump to `t` (never backwards).
    pub fn set(&self, t: Instant) {
        if t > self.now.get() {
            self.now.set(t);
        }
    }
    pub fn advance(&self, d: Duration) {
        self.now.set(self.now.get() + d);
    }
}

impl Clock for Manual {
    fn now(&self) -> Instant {
        self.now.get()
    }
    fn spin_until(&self, t: Instant) {
        self.set(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward() {
        let c = Manual::new(Instant::from_nanos(10));
        c.advance(Duration::from_micros(1));
        assert_eq!(c.now(), Instant::from_nanos(1010));
        c.set(Instant::from_nanos(5));
        assert_eq!(c.now(), Instant::from_nanos(1010));
        c.spin_until(Instant::from_nanos(2000));
        assert_eq!(c.now(), Instant::from_nanos(2000));
    }

    #[test]
    fn a_shared_clock_is_the_same_clock() {
        // What `Loop::new(&clock, ...)` relies on: `&Manual` is a Clock
        // that reads and moves the one it borrows.
        fn jump<C: Clock>(c: C, t: Instant) -> Instant {
            c.spin_until(t);
            c.now()
        }
        let c = Manual::new(Instant::ZERO);
        assert_eq!(jump(&c, Instant::from_nanos(7)), Instant::from_nanos(7));
        assert_eq!(c.now(), Instant::from_nanos(7));
    }

    #[test]
    fn monotonic_does_not_go_back_and_spins_to_the_deadline() {
        let a = Monotonic.now();
        let b = Monotonic.now();
        assert!(b >= a);
        let t = b + Duration::from_micros(20);
        Monotonic.spin_until(t);
        assert!(Monotonic.now() >= t);
    }

    #[test]
    fn instant_sub_saturates() {
        let a = Instant::from_nanos(5);
        let b = Instant::from_nanos(9);
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(b - a, Duration::from_nanos(4));
    }
}
