//! GSO byte functions: what the forwarding path does to the bytes of
//! `[virtio_net_hdr][IP packet]` buffers, pure functions with no OS call
//! (`io` reads and writes the devices and calls these).
//!
//! * `offload`: the virtio-net header, splitting TCP super-packets into
//!   MTU-sized segments, checksum completion.
//! * `coalesce`: userspace GRO, merging adjacent segments back into one
//!   super-packet before the write.

pub mod coalesce;
pub mod offload;
