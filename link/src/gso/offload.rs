//! virtio-net header handling: split TCP GSO super-packets (what the kernel
//! hands a TUN device with TSO4/TSO6 enabled) into MTU-sized segments, and
//! complete partial checksums. Pure functions over byte buffers.
//!
//! Every buffer is `[virtio_net_hdr (10 bytes)][IP packet]`. Segments come
//! out with a complete IPv4 header checksum and a *partial* TCP checksum
//! (virtio-net header `NEEDS_CSUM`, the pseudo-header sum in the TCP field),
//! exactly as the kernel would hand them to a device with checksum offload:
//! the receiving kernel trusts CHECKSUM_PARTIAL on local delivery and
//! completes it in software when forwarding. This avoids summing every
//! payload byte in userspace.
//!
//! Hand-written on purpose: packet-parsing crates (etherparse) do not
//! segment GSO packets, and tun-rs's `gso_split` (a port of wireguard-go's)
//! computes full checksums over every payload byte and works on its own
//! device's buffers.

use crate::packet::VNET_HDR_LEN;

pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// The fields of `struct virtio_net_hdr` (little-endian on the wire, as
/// TUN uses on little-endian hosts).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> VnetHdr {
        let u16le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16le(2),
            gso_size: u16le(4),
            csum_start: u16le(6),
            csum_offset: u16le(8),
        }
    }

    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type & !VIRTIO_NET_HDR_GSO_ECN != VIRTIO_NET_HDR_GSO_NONE
    }
}

/// Why a packet could not be segmented (counted as an emulator drop).
#[derive(Debug, PartialEq, Eq)]
pub enum SplitError {
    Truncated,
    UnsupportedGso(u8),
    BadHeader,
}

/// Ones-complement sum of `data` (big-endian 16-bit words) added to `acc`,
/// unfolded.
pub fn csum_add(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        acc += u16::from_be_bytes([rest[i], rest[i + 1]]) as u64;
        i += 2;
    }
    if i < rest.len() {
        acc += (rest[i] as u64) << 8;
    }
    acc
}

/// Fold to 16 bits and complement: the value to store in a checksum field.
pub fn csum_fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn ipv4_header_csum(ip: &mut [u8], ihl: usize) {
    ip[10] = 0;
    ip[11] = 0;
    let c = csum_fold(csum_add(0, &ip[..ihl]));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

/// For a non-GSO packet with NEEDS_CSUM (CHECKSUM_PARTIAL: the field at
/// csum_start + csum_offset holds the pseudo-header sum), compute the
/// checksum in software and clear the header. Other packets: header
/// cleared only.
pub fn complete_csum(buf: &mut [u8]) -> Result<(), SplitError> {
    let h = VnetHdr::parse(buf);
    if h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        let start = VNET_HDR_LEN + h.csum_start as usize;
        let field = start + h.csum_offset as usize;
        if field + 2 > buf.len() {
            return Err(SplitError::BadHeader);
        }
        let c = csum_fold(csum_add(0, &buf[start..]));
        buf[field..field + 2].copy_from_slice(&c.to_be_bytes());
    }
    VnetHdr::default().write(buf);
    Ok(())
}

/// Split the GSO super-packet in `buf` into segments of at most `gso_size`
/// payload bytes, handing each (virtio-net header + IP) to `out`. Returns
/// the number of segments. Non-GSO packets come out as one, unchanged.
pub fn split(buf: &[u8], mut out: impl FnMut(Vec<u8>)) -> Result<usize, SplitError> {
    if buf.len() < VNET_HDR_LEN + 20 {
        return Err(SplitError::Truncated);
    }
    let h = VnetHdr::parse(buf);
    if !h.is_gso() {
        out(buf.to_vec());
        return Ok(1);
    }
    let gso = h.gso_type & !VIRTIO_NET_HDR_GSO_ECN;
    let ip = &buf[VNET_HDR_LEN..];
    let v4 = ip[0] >> 4 == 4;
    match (gso, v4) {
        (VIRTIO_NET_HDR_GSO_TCPV4, true) | (VIRTIO_NET_HDR_GSO_TCPV6, false) => {}
        _ => return Err(SplitError::UnsupportedGso(h.gso_type)),
    }
    let ihl = if v4 {
        ((ip[0] & 0x0f) as usize) * 4
    } else {
        40
    };
    // csum_start is where the kernel says the TCP header begins (covers
    // IPv6 extension headers); fall back to the fixed IP header length.
    let l4 = if h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        h.csum_start as usize
    } else {
        ihl
    };
    if l4 < ihl || l4 + 20 > ip.len() {
        return Err(SplitError::BadHeader);
    }
    let thl = ((ip[l4 + 12] >> 4) as usize) * 4;
    let hdr = l4 + thl;
    if thl < 20 || hdr > ip.len() || h.gso_size == 0 {
        return Err(SplitError::BadHeader);
    }
    let payload = &ip[hdr..];
    let mss = h.gso_size as usize;
    let seq0 = u32::from_be_bytes([ip[l4 + 4], ip[l4 + 5], ip[l4 + 6], ip[l4 + 7]]);
    let id0 = u16::from_be_bytes([ip[4], ip[5]]);
    let flags0 = ip[l4 + 13];
    // Pseudo-header sum without the length, added per segment below.
    let addr_sum = if v4 {
        csum_add(0, &ip[12..20])
    } else {
        csum_add(0, &ip[8..40])
    } + 6;
    let seg_hdr = VnetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: l4 as u16,
        csum_offset: 16,
    };
    let n = payload.len().div_ceil(mss).max(1);
    for i in 0..n {
        let off = i * mss;
        let chunk = &payload[off..(off + mss).min(payload.len())];
        let tot = hdr + chunk.len();
        let mut seg = Vec::with_capacity(VNET_HDR_LEN + tot);
        seg.extend_from_slice(&[0u8; VNET_HDR_LEN]);
        seg.extend_from_slice(&ip[..hdr]);
        seg.extend_from_slice(chunk);
        seg_hdr.write(&mut seg);
        let s = &mut seg[VNET_HDR_LEN..];
        if v4 {
            s[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
            s[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            ipv4_header_csum(s, ihl);
        } else {
            s[4..6].copy_from_slice(&((tot - 40) as u16).to_be_bytes());
        }
        let t = &mut s[l4..];
        t[4..8].copy_from_slice(&seq0.wrapping_add(off as u32).to_be_bytes());
        let mut f = flags0;
        if i + 1 < n {
            f &= !(0x01 | 0x08); // FIN, PSH only on the last segment
        }
        if i > 0 {
            f &= !0x80; // CWR only on the first
        }
        t[13] = f;
        // CHECKSUM_PARTIAL: folded, not complemented, pseudo-header sum.
        let pseudo = !csum_fold(addr_sum + (tot - l4) as u64);
        t[16..18].copy_from_slice(&pseudo.to_be_bytes());
        out(seg);
    }
    Ok(n)
}

#[cfg(test)]
/// A TCP/IPv4 super-packet as the kernel hands it over: NEEDS_CSUM,
/// GSO TCPV4, pseudo-header sum (without length) in the TCP field.
pub(crate) fn super_v4(payload_len: usize, mss: u16, flags: u8) -> Vec<u8> {
    let mut ip = vec![0u8; 40 + payload_len];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((40 + payload_len) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0xfff0u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    ip[20..22].copy_from_slice(&5201u16.to_be_bytes());
    ip[22..24].copy_from_slice(&40000u16.to_be_bytes());
    ip[24..28].copy_from_slice(&0xffff_fff0u32.to_be_bytes()); // seq wraps
    ip[32] = 5 << 4;
    ip[33] = flags;
    for (i, b) in ip[40..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let mut buf = vec![0u8; VNET_HDR_LEN];
    VnetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
        hdr_len: 40,
        gso_size: mss,
        csum_start: 20,
        csum_offset: 16,
    }
    .write(&mut buf);
    buf.extend_from_slice(&ip);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_pseudo_sum(ip: &[u8], l4_len: usize) -> u64 {
        if ip[0] >> 4 == 4 {
            csum_add(0, &ip[12..20]) + 6 + l4_len as u64
        } else {
            csum_add(0, &ip[8..40]) + 6 + l4_len as u64
        }
    }

    /// Complete the partial checksum as a device would, then verify both.
    fn verify_v4(seg: &[u8]) {
        let h = VnetHdr::parse(seg);
        assert_eq!(h.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
        assert_eq!((h.gso_type, h.csum_start, h.csum_offset), (0, 20, 16));
        let mut seg = seg.to_vec();
        complete_csum(&mut seg).unwrap();
        let ip = &seg[VNET_HDR_LEN..];
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
        assert_eq!(csum_fold(csum_add(0, &ip[..20])), 0, "ip checksum");
        let sum = tcp_pseudo_sum(ip, ip.len() - 20);
        assert_eq!(csum_fold(csum_add(sum, &ip[20..])), 0, "tcp checksum");
    }

    #[test]
    fn splits_tcpv4_super_packet() {
        let buf = super_v4(4000, 1448, 0x18 | 0x01); // PSH|ACK|FIN
        let mut segs = Vec::new();
        let n = split(&buf, |s| segs.push(s)).unwrap();
        assert_eq!(n, 3);
        let lens: Vec<usize> = segs.iter().map(|s| s.len() - VNET_HDR_LEN).collect();
        assert_eq!(lens, vec![1488, 1488, 40 + 4000 - 2 * 1448]);
        let mut payload = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            verify_v4(s);
            let ip = &s[VNET_HDR_LEN..];
            let seq = u32::from_be_bytes([ip[24], ip[25], ip[26], ip[27]]);
            assert_eq!(seq, 0xffff_fff0u32.wrapping_add(i as u32 * 1448));
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]),
                0xfff0u16.wrapping_add(i as u16)
            );
            let last = i == 2;
            assert_eq!(ip[33] & 0x09 != 0, last, "FIN/PSH only on the last");
            payload.extend_from_slice(&ip[40..]);
        }
        assert_eq!(payload, buf[VNET_HDR_LEN + 40..]);
    }

    #[test]
    fn splits_tcpv6_super_packet() {
        let payload_len = 3000;
        let mut ip = vec![0u8; 40 + 20 + payload_len];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&((20 + payload_len) as u16).to_be_bytes());
        ip[6] = 6;
        ip[7] = 64;
        ip[8] = 0x20;
        ip[9] = 0x01;
        ip[10] = 0x00;
        ip[11] = 0x02;
        ip[23] = 1;
        ip[24] = 0x20;
        ip[25] = 0x01;
        ip[27] = 0x02;
        ip[39] = 2;
        ip[52] = 5 << 4;
        ip[53] = 0x10;
        let mut buf = vec![0u8; VNET_HDR_LEN];
        VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV6,
            hdr_len: 60,
            gso_size: 1428,
            csum_start: 40,
            csum_offset: 16,
        }
        .write(&mut buf);
        buf.extend_from_slice(&ip);
        let mut segs = Vec::new();
        assert_eq!(split(&buf, |s| segs.push(s)).unwrap(), 3);
        for s in &mut segs {
            complete_csum(s).unwrap();
            let ip = &s[VNET_HDR_LEN..];
            assert_eq!(u16::from_be_bytes([ip[4], ip[5]]) as usize, ip.len() - 40);
            let sum = tcp_pseudo_sum(ip, ip.len() - 40);
            assert_eq!(csum_fold(csum_add(sum, &ip[40..])), 0);
            assert!(ip.len() <= 1500);
        }
    }

    #[test]
    fn single_packet_passes_with_partial_checksum() {
        // Non-GSO with NEEDS_CSUM: field holds the pseudo-header sum
        // (with length, folded, not complemented), as the kernel leaves it.
        let mut buf = super_v4(100, 1448, 0x10);
        let mut h = VnetHdr::parse(&buf);
        h.gso_type = VIRTIO_NET_HDR_GSO_NONE;
        h.gso_size = 0;
        h.write(&mut buf);
        // the kernel always completes the IPv4 header checksum itself
        ipv4_header_csum(&mut buf[VNET_HDR_LEN..], 20);
        let ip = buf[VNET_HDR_LEN..].to_vec();
        let pseudo = !csum_fold(tcp_pseudo_sum(&ip, ip.len() - 20));
        buf[VNET_HDR_LEN + 36..VNET_HDR_LEN + 38].copy_from_slice(&pseudo.to_be_bytes());
        let mut segs = Vec::new();
        assert_eq!(split(&buf, |s| segs.push(s)).unwrap(), 1);
        assert_eq!(segs[0], buf, "non-GSO packets pass unchanged");
        verify_v4(&segs[0]);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(split(&[0u8; 12], |_| {}), Err(SplitError::Truncated));
        let mut buf = super_v4(100, 1448, 0x10);
        buf[1] = 3; // GSO UDP (UFO): not offered, not supported
        assert_eq!(split(&buf, |_| {}), Err(SplitError::UnsupportedGso(3)));
        let mut buf = super_v4(100, 1448, 0x10);
        buf[6] = 0xff; // csum_start beyond the packet
        assert_eq!(split(&buf, |_| {}), Err(SplitError::BadHeader));
    }
}
