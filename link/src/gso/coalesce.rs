//! Userspace GRO for the segmented path: consecutive TCP segments of one
//! flow that leave the models at the same poll are merged back into one
//! GSO super-packet before the write, so the receiving kernel processes
//! one skb instead of dozens (TUN writes get no GRO of their own).
//!
//! Only *adjacent* packets in departure order are merged, and only when the
//! result is exactly what a TSO sender would have produced (same headers,
//! contiguous sequence numbers, equal-size segments but the last, plain ACK
//! or a final PSH), so neither order nor timing of the models changes.
//! The merged packet carries a virtio-net header (GSO TCPV4/TCPV6,
//! NEEDS_CSUM with the pseudo-header sum in the TCP checksum field), as
//! wireguard-go and tun-rs produce.
//!
//! Not tun-rs's GRO (`handle_gro`): it merges segments of a flow from
//! anywhere in a batch, which would reorder packets across flows relative
//! to the models' departure order.

use super::offload::{
    csum_add, csum_fold, VnetHdr, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4,
    VIRTIO_NET_HDR_GSO_TCPV6,
};
use crate::packet::VNET_HDR_LEN;

const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;
const MAX_IP_LEN: usize = 65_535;

/// Header geometry of a single TCP segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Seg {
    v4: bool,
    iph: usize,
    hdr: usize,
    seq: u32,
    flags: u8,
    payload: usize,
}

fn parse(buf: &[u8]) -> Option<Seg> {
    if buf.len() < VNET_HDR_LEN + 40 {
        return None;
    }
    // Either no offload at all, or a partial TCP checksum (what `split`
    // produces); never an existing GSO packet.
    let h = VnetHdr::parse(buf);
    let plain = h == VnetHdr::default();
    let partial = h.flags == VIRTIO_NET_HDR_F_NEEDS_CSUM && !h.is_gso() && h.csum_offset == 16;
    if !plain && !partial {
        return None;
    }
    let ip = &buf[VNET_HDR_LEN..];
    let (v4, iph) = match ip[0] >> 4 {
        4 => {
            let frag = u16::from_be_bytes([ip[6], ip[7]]);
            let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ip[0] != 0x45 || ip[9] != 6 || frag & 0x3fff != 0 || tot != ip.len() {
                return None;
            }
            (true, 20)
        }
        6 => {
            let pl = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if ip[6] != 6 || pl + 40 != ip.len() || ip.len() < 60 {
                return None;
            }
            (false, 40)
        }
        _ => return None,
    };
    if partial && h.csum_start as usize != iph {
        return None;
    }
    let t = &ip[iph..];
    let thl = ((t[12] >> 4) as usize) * 4;
    if thl < 20 || iph + thl > ip.len() {
        return None;
    }
    Some(Seg {
        v4,
        iph,
        hdr: iph + thl,
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        flags: t[13],
        payload: ip.len() - iph - thl,
    })
}

/// Whether everything but lengths, ids, checksums, seq and flags matches.
fn same_flow(a: &[u8], b: &[u8], s: &Seg) -> bool {
    let (a, b) = (&a[VNET_HDR_LEN..], &b[VNET_HDR_LEN..]);
    let ip_same = if s.v4 {
        // version/ihl/tos, flags (DF), ttl/proto, addresses
        a[..2] == b[..2]
            && a[6] & 0x40 == b[6] & 0x40
            && a[8..10] == b[8..10]
            && a[12..20] == b[12..20]
    } else {
        a[..4] == b[..4] && a[6..40] == b[6..40]
    };
    let (ta, tb) = (&a[s.iph..s.hdr], &b[s.iph..s.hdr]);
    // ports, ack, data offset, window, urgent pointer, options
    ip_same
        && ta[..4] == tb[..4]
        && ta[8..13] == tb[8..13]
        && ta[14..16] == tb[14..16]
        && ta[18..] == tb[18..]
}

struct Merge {
    buf: Vec<u8>,
    first: Seg,
    next_seq: u32,
    segs: u32,
    /// Sum of the merged segments' IP lengths (what the models counted).
    seg_bytes: usize,
    /// No further segment may join (short segment or PSH seen).
    closed: bool,
}

/// A packet ready to write: buffer, segments it carries, and their IP
/// bytes as separate packets.
pub type Out = (Vec<u8>, u32, usize);

/// Merges runs of adjacent segments; see the module doc.
#[derive(Default)]
pub struct Coalescer {
    cur: Option<Merge>,
}

impl Coalescer {
    /// Offer the next departing packet; finished packets go to `out`
    /// (see [`Out`]).
    pub fn push(&mut self, buf: Vec<u8>, out: &mut impl FnMut(Out)) {
        let Some(seg) = parse(&buf) else {
            self.flush(out);
            let n = buf.len() - VNET_HDR_LEN;
            out((buf, 1, n));
            return;
        };
        if let Some(m) = self.cur.as_mut() {
            let fits = !m.closed
                && seg.v4 == m.first.v4
                && seg.hdr == m.first.hdr
                && seg.seq == m.next_seq
                && seg.payload > 0
                && seg.payload <= m.first.payload
                && (seg.flags == TCP_ACK || seg.flags == TCP_ACK | TCP_PSH)
                && m.buf.len() - VNET_HDR_LEN + seg.payload <= MAX_IP_LEN
                && same_flow(&m.buf, &buf, &seg);
            if fits {
                m.buf.extend_from_slice(&buf[VNET_HDR_LEN + seg.hdr..]);
                m.next_seq = seg.seq.wrapping_add(seg.payload as u32);
                m.segs += 1;
                m.seg_bytes += buf.len() - VNET_HDR_LEN;
                if seg.flags & TCP_PSH != 0 {
                    m.buf[VNET_HDR_LEN + m.first.iph + 13] |= TCP_PSH;
                    m.closed = true;
                }
                if seg.payload < m.first.payload {
                    m.closed = true;
                }
                return;
            }
        }
        self.flush(out);
        let startable = seg.flags == TCP_ACK && seg.payload > 0;
        if !startable {
            let n = buf.len() - VNET_HDR_LEN;
            out((buf, 1, n));
            return;
        }
        let mut b = Vec::with_capacity(VNET_HDR_LEN + MAX_IP_LEN);
        b.extend_from_slice(&buf);
        self.cur = Some(Merge {
            buf: b,
            first: seg,
            next_seq: seg.seq.wrapping_add(seg.payload as u32),
            segs: 1,
            seg_bytes: buf.len() - VNET_HDR_LEN,
            closed: false,
        });
    }

    /// Emit the pending merge, if any.
    pub fn flush(&mut self, out: &mut impl FnMut(Out)) {
        let Some(mut m) = self.cur.take() else {
            return;
        };
        if m.segs > 1 {
            finish(&mut m);
        }
        out((m.buf, m.segs, m.seg_bytes));
    }
}

/// Fix lengths, IPv4 checksum and the virtio-net header of a merged packet.
fn finish(m: &mut Merge) {
    let s = m.first;
    let total = m.buf.len() - VNET_HDR_LEN;
    let ip = &mut m.buf[VNET_HDR_LEN..];
    if s.v4 {
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[10] = 0;
        ip[11] = 0;
        let c = csum_fold(csum_add(0, &ip[..20]));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    } else {
        ip[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
    }
    // CHECKSUM_PARTIAL: the field holds the folded (not complemented)
    // pseudo-header sum over the whole TCP length.
    let l4_len = (total - s.iph) as u64;
    let addrs = if s.v4 { &ip[12..20] } else { &ip[8..40] };
    let pseudo = !csum_fold(csum_add(0, addrs) + 6 + l4_len);
    ip[s.iph + 16..s.iph + 18].copy_from_slice(&pseudo.to_be_bytes());
    VnetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: if s.v4 {
            VIRTIO_NET_HDR_GSO_TCPV4
        } else {
            VIRTIO_NET_HDR_GSO_TCPV6
        },
        hdr_len: s.hdr as u16,
        gso_size: s.payload as u16,
        csum_start: s.iph as u16,
        csum_offset: 16,
    }
    .write(&mut m.buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::offload::split;

    /// Plain TCP/IPv4 segment with complete checksums, via `split`.
    fn segments(payload_len: usize, mss: u16, flags: u8) -> Vec<Vec<u8>> {
        let mut ip = vec![0u8; 52 + payload_len];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((52 + payload_len) as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        ip[20..22].copy_from_slice(&40000u16.to_be_bytes());
        ip[22..24].copy_from_slice(&5201u16.to_be_bytes());
        ip[24..28].copy_from_slice(&1000u32.to_be_bytes());
        ip[28..32].copy_from_slice(&77u32.to_be_bytes());
        ip[32] = 8 << 4; // 32-byte TCP header (timestamps)
        ip[33] = flags;
        ip[34] = 0x20;
        ip[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in ip[52..].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let mut buf = vec![0u8; VNET_HDR_LEN];
        VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
            hdr_len: 52,
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
        }
        .write(&mut buf);
        buf.extend_from_slice(&ip);
        let mut segs = Vec::new();
        split(&buf, |s| segs.push(s)).unwrap();
        segs
    }

    fn run(pkts: Vec<Vec<u8>>) -> Vec<(Vec<u8>, u32)> {
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        let mut emit = |(b, n, _): Out| out.push((b, n));
        for p in pkts {
            c.push(p, &mut emit);
        }
        c.flush(&mut emit);
        out
    }

    #[test]
    fn split_then_coalesce_round_trips() {
        let segs = segments(10_000, 1448, TCP_ACK | TCP_PSH);
        assert_eq!(segs.len(), 7);
        let mut bytes = 0;
        let mut c = Coalescer::default();
        for p in segs.clone() {
            c.push(p, &mut |o: Out| bytes += o.2);
        }
        c.flush(&mut |o: Out| bytes += o.2);
        assert_eq!(bytes, 7 * 52 + 10_000);
        let out = run(segs.clone());
        assert_eq!(out.len(), 1);
        let (b, n) = &out[0];
        assert_eq!(*n, 7);
        let h = VnetHdr::parse(b);
        assert_eq!(h.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!((h.gso_size, h.hdr_len, h.csum_start), (1448, 52, 20));
        let ip = &b[VNET_HDR_LEN..];
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, 52 + 10_000);
        assert_eq!(csum_fold(csum_add(0, &ip[..20])), 0);
        assert_eq!(ip[33], TCP_ACK | TCP_PSH);
        // re-splitting gives back the same segments
        let mut again = Vec::new();
        split(b, |s| again.push(s)).unwrap();
        assert_eq!(again.len(), 7);
        for (x, y) in again.iter().zip(&segs) {
            // ids restart from the first id in both: byte-identical
            assert_eq!(x, y);
        }
    }

    #[test]
    fn gap_in_sequence_or_duplicate_is_not_merged() {
        let mut segs = segments(5 * 1448, 1448, TCP_ACK);
        segs.remove(2); // loss: 0 1 | 3 4
        let out = run(segs.clone());
        assert_eq!(out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![2, 2]);
        let mut d = segments(3 * 1448, 1448, TCP_ACK);
        d.insert(1, d[1].clone()); // duplicate: 0 1 | 1 2
        let out = run(d);
        assert_eq!(out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![2, 2]);
    }

    #[test]
    fn single_and_non_tcp_packets_pass_unchanged() {
        let segs = segments(100, 1448, TCP_ACK);
        let out = run(segs.clone());
        assert_eq!(out, vec![(segs[0].clone(), 1)]);
        let junk = vec![0u8; VNET_HDR_LEN + 30];
        let out = run(vec![junk.clone(), segs[0].clone()]);
        assert_eq!(out, vec![(junk, 1), (segs[0].clone(), 1)]);
    }

    #[test]
    fn short_segment_closes_the_run() {
        // 1448 + 100 then a new full run: the 100-byte segment ends the
        // first merge, and the next (contiguous) segment starts another.
        let segs = segments(1448 + 100, 1448, TCP_ACK);
        let more = segments(2 * 1448, 1448, TCP_ACK);
        let out = run(vec![segs[0].clone(), segs[1].clone(), more[0].clone()]);
        assert_eq!(out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![2, 1]);
    }
}
