//! A packet as the models see it.

use crate::classify::Class;
use crate::time::Instant;

/// Bytes of `struct virtio_net_hdr` that precede every packet read from or
/// written to a TUN device opened with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;

/// `buf` holds a virtio-net header (`VNET_HDR_LEN` bytes) followed by the IP
/// packet, so a packet is written back with a single `write(2)`.
///
/// `t` is the time the packet entered the stage that currently holds it; a
/// stage sets it to the exact departure time when it releases the packet, so
/// the models stay exact however late the event loop polls them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub buf: Vec<u8>,
    /// Arrival order at the emulator (per direction); used by tests and to
    /// detect reordering.
    pub id: u64,
    pub t: Instant,
    /// What the fault stage classified it as (`Other` when classification
    /// is off): the event loop counts deliveries per class by it.
    pub class: Class,
}

impl Packet {
    pub fn new(buf: Vec<u8>, id: u64, t: Instant) -> Self {
        debug_assert!(buf.len() >= VNET_HDR_LEN);
        Packet {
            buf,
            id,
            t,
            class: Class::Other,
        }
    }

    /// A packet of `ip_len` zero bytes (plus an all-zero virtio-net header),
    /// for simulations.
    pub fn synthetic(id: u64, ip_len: usize, t: Instant) -> Self {
        Packet {
            buf: vec![0; VNET_HDR_LEN + ip_len],
            id,
            t,
            class: Class::Other,
        }
    }

    /// IP bytes (what the rate and byte-limited queue count).
    pub fn len(&self) -> usize {
        self.buf.len() - VNET_HDR_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ip(&self) -> &[u8] {
        &self.buf[VNET_HDR_LEN..]
    }
}
