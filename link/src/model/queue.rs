//! Drop-tail bottleneck queue (the packets waiting for the serializer).

use crate::packet::Packet;
use std::collections::VecDeque;

/// Queue capacity, in packets or in IP bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Packets(u64),
    Bytes(u64),
}

/// FIFO that refuses a packet which would exceed its limit (drop-tail).
/// The limit counts waiting packets only, not the one being serialized.
#[derive(Debug)]
pub struct DropTailQueue {
    limit: QueueLimit,
    q: VecDeque<Packet>,
    bytes: u64,
}

impl DropTailQueue {
    pub fn new(limit: QueueLimit) -> Self {
        DropTailQueue {
            limit,
            q: VecDeque::new(),
            bytes: 0,
        }
    }

    pub fn set_limit(&mut self, limit: QueueLimit) {
        self.limit = limit;
    }

    /// Whether a packet of `len` bytes fits now.
    pub fn fits(&self, len: usize) -> bool {
        match self.limit {
            QueueLimit::Packets(n) => (self.q.len() as u64) < n,
            QueueLimit::Bytes(b) => self.bytes + len as u64 <= b,
        }
    }

    /// Enqueue, or give the packet back when it does not fit.
    pub fn enqueue(&mut self, p: Packet) -> Result<(), Packet> {
        if !self.fits(p.len()) {
            return Err(p);
        }
        self.bytes += p.len() as u64;
        self.q.push_back(p);
        Ok(())
    }

    /// Length of the packet at the head.
    pub fn front_len(&self) -> Option<usize> {
        self.q.front().map(|p| p.len())
    }

    pub fn dequeue(&mut self) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len() as u64;
        Some(p)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    fn pkt(id: u64, len: usize) -> Packet {
        Packet::synthetic(id, len, Instant::ZERO)
    }

    #[test]
    fn packet_limit_drops_exactly_at_limit() {
        let mut q = DropTailQueue::new(QueueLimit::Packets(3));
        for i in 0..3 {
            assert!(q.enqueue(pkt(i, 1500)).is_ok());
        }
        assert_eq!(q.enqueue(pkt(3, 40)).unwrap_err().id, 3);
        assert_eq!(q.len(), 3);
        assert_eq!(q.dequeue().unwrap().id, 0);
        assert!(q.enqueue(pkt(4, 1500)).is_ok());
        assert!(q.enqueue(pkt(5, 1500)).is_err());
    }

    #[test]
    fn byte_limit_drops_exactly_at_limit() {
        let mut q = DropTailQueue::new(QueueLimit::Bytes(3000));
        assert!(q.enqueue(pkt(0, 1500)).is_ok());
        assert!(q.enqueue(pkt(1, 1499)).is_ok());
        // 2999 queued: one more byte fits, two do not
        assert!(q.enqueue(pkt(2, 2)).is_err());
        assert!(q.enqueue(pkt(3, 1)).is_ok());
        assert_eq!(q.bytes(), 3000);
        assert!(q.enqueue(pkt(4, 1)).is_err());
        q.dequeue();
        assert_eq!(q.bytes(), 1500);
        assert!(q.enqueue(pkt(5, 1500)).is_ok());
        assert!(q.enqueue(pkt(6, 1)).is_err());
    }
}
