//! tunbench-link: a userspace WAN emulator between two TUN devices.
//!
//! Layout (data flow): `spec` (argv strings -> validated per-direction
//! specs) -> `pipeline` (the `model` stages chained per direction, pure,
//! driven by `time`) -> `io` (TUN devices, offload split, the event loop,
//! the only code that reads the clock or sleeps).

pub mod cli;
pub mod histogram;
pub mod io;
pub mod json;
pub mod model;
pub mod occupancy;
pub mod packet;
pub mod pipeline;
pub mod schedule;
pub mod spec;
pub mod stats;
pub mod time;
