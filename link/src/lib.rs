//! tunbench-link: a userspace WAN emulator between two TUN devices.
//!
//! Layout (data flow): `spec` (argv strings -> validated per-direction
//! specs) -> `pipeline` (the `model` stages chained per direction, pure,
//! driven by `time`) -> `io` (TUN devices and the event loop, the only
//! code that touches the OS, reads the clock or sleeps; it splits and
//! merges GSO super-packets with `gso`'s pure byte functions).

pub mod classify;
pub mod cli;
pub mod faults;
pub mod gso;
pub mod histogram;
pub mod io;
pub mod json;
pub mod model;
pub mod occupancy;
pub mod packet;
pub mod pipeline;
pub mod records;
pub mod schedule;
pub mod spec;
pub mod stats;
pub mod time;
