//! Address (and port) rewriting from a `rebind` event on: what a NAT
//! rebinding, or a client's move to another network, looks like to the
//! server. Upload (a2b): packets from `from` leave with source `to` (and
//! their TCP/UDP source port shifted by `port`); download (b2a): packets to
//! `to` (and the shifted port) arrive for `from` again; with a port shift
//! only TCP and UDP are translated back (an ICMP error is not). Downstream,
//! a packet still sent to `from` itself is lost (`dropped_stale`): after a
//! move the old address is gone, after a NAT rebinding the old mapping, so
//! a server that keeps answering the client's previous address reaches
//! nobody, as on a real path. Checksums are
//! updated incrementally (RFC 1624): the IPv4 header's, and TCP's, UDP's
//! and ICMPv6's, whose pseudo-header holds the addresses; a partial
//! checksum (virtio-net `NEEDS_CSUM`: the pseudo-header sum only) is
//! updated as a sum, not as a complement.

use super::{Fifo, Stage, StageCounters};
use crate::gso::offload::{VnetHdr, VIRTIO_NET_HDR_F_NEEDS_CSUM};
use crate::packet::{Packet, VNET_HDR_LEN};
use crate::time::Instant;
use std::net::IpAddr;

/// One rewriting rule (the `nat_v4`/`nat_v6` and `nat_port` keys).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NatRule {
    pub from: IpAddr,
    pub to: IpAddr,
    /// Added to the source port upstream, taken off the destination port
    /// downstream (mod 2^16).
    pub port: u16,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// Upload: rewrite the source.
    Source,
    /// Download: rewrite the destination back.
    Destination,
}

#[derive(Debug)]
pub struct Nat {
    side: Side,
    rules: Vec<NatRule>,
    out: Fifo,
    rewritten: u64,
    stale: u64,
}

impl Nat {
    pub fn new(side: Side) -> Self {
        Nat {
            side,
            rules: Vec::new(),
            out: Fifo::default(),
            rewritten: 0,
            stale: 0,
        }
    }

    /// Rewrite by `rules` from now on (a scheduled rebind); none: packets
    /// pass unchanged.
    pub fn retune(&mut self, rules: &[NatRule]) {
        self.rules = rules.to_vec();
    }
}

/// A 16-bit big-endian word (an odd last byte padded with 0).
fn word(c: &[u8]) -> u16 {
    u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])
}

/// One's-complement sum of 16-bit big-endian words.
fn sum16(bytes: &[u8]) -> u32 {
    bytes.chunks(2).map(|c| u32::from(word(c))).sum()
}

fn fold(mut x: u32) -> u16 {
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    x as u16
}

/// The checksum field at `at` after `old` bytes of what it covers became
/// `new` (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')): a full checksum
/// (`partial` false) is a complemented sum, a partial one the sum itself.
fn adjust(buf: &mut [u8], at: usize, old: &[u8], new: &[u8], partial: bool) {
    let field = u16::from_be_bytes([buf[at], buf[at + 1]]);
    let mut acc = u32::from(if partial { field } else { !field });
    for c in old.chunks(2) {
        acc += u32::from(!word(c));
    }
    acc += sum16(new);
    let v = fold(acc);
    let v = if partial { v } else { !v };
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Whether `buf` (virtio-net header + IP) is sent to `addr`.
fn sent_to(buf: &[u8], addr: IpAddr) -> bool {
    let ip = &buf[VNET_HDR_LEN.min(buf.len())..];
    match addr {
        IpAddr::V4(a) => ip.len() >= 20 && ip[0] >> 4 == 4 && ip[16..20] == a.octets(),
        IpAddr::V6(a) => ip.len() >= 40 && ip[0] >> 4 == 6 && ip[24..40] == a.octets(),
    }
}

/// Rewrite `pkt` (virtio-net header + IP) by `rule` on `side`; true if it
/// matched.
pub fn rewrite(buf: &mut [u8], rule: &NatRule, side: Side) -> bool {
    if buf.len() < VNET_HDR_LEN + 20 {
        return false;
    }
    let hdr = VnetHdr::parse(buf);
    let partial_at = (hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0)
        .then(|| hdr.csum_start as usize + hdr.csum_offset as usize);
    let ip = &mut buf[VNET_HDR_LEN..];
    let (addr_at, len, l4, proto) = match (ip[0] >> 4, rule.from, rule.to) {
        (4, IpAddr::V4(_), IpAddr::V4(_)) => {
            let at = if side == Side::Source { 12 } else { 16 };
            // a later fragment carries no transport header: only its address moves
            let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            (
                at,
                4,
                ((ip[0] & 0x0f) as usize) * 4,
                if later_fragment { 0 } else { ip[9] },
            )
        }
        // IPv6 with extension headers is left alone: its transport checksum would need them walked
        (6, IpAddr::V6(_), IpAddr::V6(_)) if ip.len() >= 40 && matches!(ip[6], 6 | 17 | 58) => {
            let at = if side == Side::Source { 8 } else { 24 };
            (at, 16, 40, ip[6])
        }
        _ => return false,
    };
    let (want, put) = match side {
        Side::Source => (rule.from, rule.to),
        Side::Destination => (rule.to, rule.from),
    };
    // on every packet: no allocation (the families match, so both are `len` bytes)
    let octets = |a: IpAddr| match a {
        IpAddr::V4(a) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&a.octets());
            b
        }
        IpAddr::V6(a) => a.octets(),
    };
    let (want, put) = (octets(want), octets(put));
    let (old_addr, put) = (&want[..len], &put[..len]);
    if ip[addr_at..addr_at + len] != *old_addr {
        return false;
    }
    if side == Side::Destination && rule.port != 0 && !matches!(proto, 6 | 17) {
        return false; // a shifted port can only be matched on TCP and UDP
    }
    ip[addr_at..addr_at + len].copy_from_slice(put);
    if len == 4 {
        adjust(ip, 10, old_addr, put, false); // the IPv4 header checksum
    }
    // where the transport checksum is, and whether the ports move
    let csum_at = match proto {
        6 => Some(l4 + 16),
        17 => Some(l4 + 6),
        58 if len == 16 => Some(l4 + 2),
        _ => None,
    };
    let port_at = match (proto, side) {
        (6 | 17, Side::Source) => Some(l4),
        (6 | 17, Side::Destination) => Some(l4 + 2),
        _ => None,
    };
    let Some(csum_at) = csum_at.filter(|at| at + 2 <= ip.len()) else {
        return true;
    };
    let partial = partial_at == Some(csum_at);
    let udp4_none = proto == 17 && len == 4 && ip[csum_at] == 0 && ip[csum_at + 1] == 0;
    if !udp4_none {
        adjust(ip, csum_at, old_addr, put, partial);
    }
    if let Some(p) = port_at.filter(|p| rule.port != 0 && p + 2 <= ip.len()) {
        let old = [ip[p], ip[p + 1]];
        let v = u16::from_be_bytes(old);
        let shifted = match side {
            Side::Source => v.wrapping_add(rule.port),
            Side::Destination => v.wrapping_sub(rule.port),
        };
        ip[p..p + 2].copy_from_slice(&shifted.to_be_bytes());
        // the port is not in the pseudo-header: a partial sum does not cover it
        if !udp4_none && !partial {
            adjust(ip, csum_at, &old, &shifted.to_be_bytes(), false);
        }
    }
    if proto == 17 && len == 4 && !udp4_none && ip[csum_at] == 0 && ip[csum_at + 1] == 0 && !partial
    {
        ip[csum_at..csum_at + 2].copy_from_slice(&[0xff, 0xff]); // 0 means "no checksum" in UDP/IPv4
    }
    true
}

impl Stage for Nat {
    fn push(&mut self, mut pkt: Packet, _now: Instant) {
        // an address rebind (not a port-only one): the client's previous address no longer answers
        if self.side == Side::Destination
            && self
                .rules
                .iter()
                .any(|r| r.from != r.to && sent_to(&pkt.buf, r.from))
        {
            self.stale += 1;
            return;
        }
        for rule in &self.rules {
            if rewrite(&mut pkt.buf, rule, self.side) {
                self.rewritten += 1;
                break;
            }
        }
        self.out.push(pkt);
    }
    super::fifo_output!();
    fn counters(&self) -> StageCounters {
        StageCounters {
            rewritten: self.rewritten,
            dropped_stale: self.stale,
            ..Default::default()
        }
    }
    fn name(&self) -> &'static str {
        "nat"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full Internet checksum of `data` (0 when the sum checks out).
    fn csum(data: &[u8]) -> u16 {
        !fold(sum16(data))
    }

    fn pseudo_v4(ip: &[u8], proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = ip[12..20].to_vec();
        p.extend([0, proto]);
        p.extend((l4.len() as u16).to_be_bytes());
        p.extend(l4);
        p
    }

    /// virtio-net header + IPv4 + UDP (or TCP), with valid full checksums.
    fn v4(proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let l4len = if proto == 6 { 20 + 11 } else { 8 + 11 };
        let mut b = vec![0u8; VNET_HDR_LEN + 20 + l4len];
        let ip = &mut b[VNET_HDR_LEN..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4len) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let c = csum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip[20..22].copy_from_slice(&sport.to_be_bytes());
        ip[22..24].copy_from_slice(&dport.to_be_bytes());
        for (i, x) in ip[20 + l4len - 11..].iter_mut().enumerate() {
            *x = 0x41 + i as u8;
        }
        let at = if proto == 6 {
            ip[32] = 5 << 4;
            20 + 16
        } else {
            ip[24..26].copy_from_slice(&(l4len as u16).to_be_bytes());
            20 + 6
        };
        let c = csum(&pseudo_v4(ip, proto, &ip[20..]));
        ip[at..at + 2].copy_from_slice(&c.to_be_bytes());
        b
    }

    fn valid_v4(b: &[u8], proto: u8) -> bool {
        let ip = &b[VNET_HDR_LEN..];
        csum(&ip[..20]) == 0 && csum(&pseudo_v4(ip, proto, &ip[20..])) == 0
    }

    fn rule(port: u16) -> NatRule {
        NatRule {
            from: "198.18.0.1".parse().unwrap(),
            to: "198.18.0.101".parse().unwrap(),
            port,
        }
    }

    #[test]
    fn upload_source_and_download_destination_round_trip_with_valid_checksums() {
        for proto in [6u8, 17] {
            let mut up = v4(proto, [198, 18, 0, 1], [198, 18, 0, 2], 40000, 51820);
            assert!(rewrite(&mut up, &rule(1000), Side::Source));
            let ip = &up[VNET_HDR_LEN..];
            assert_eq!(&ip[12..16], &[198, 18, 0, 101]);
            assert_eq!(u16::from_be_bytes([ip[20], ip[21]]), 41000);
            assert!(
                valid_v4(&up, proto),
                "proto {proto}: checksums after the rewrite"
            );
            // the reply, to the rewritten address and port, goes back to the original
            let mut down = v4(proto, [198, 18, 0, 2], [198, 18, 0, 101], 51820, 41000);
            assert!(rewrite(&mut down, &rule(1000), Side::Destination));
            let ip = &down[VNET_HDR_LEN..];
            assert_eq!(
                (&ip[16..20], u16::from_be_bytes([ip[22], ip[23]])),
                (&[198u8, 18, 0, 1][..], 40000)
            );
            assert!(valid_v4(&down, proto));
        }
    }

    #[test]
    fn after_an_address_rebind_the_old_address_is_gone_downstream() {
        let t0 = Instant::from_nanos(0);
        let mut down = Nat::new(Side::Destination);
        down.retune(&[rule(1000)]);
        let mut pkt = |dst: [u8; 4], port: u16| {
            let buf = v4(17, [198, 18, 0, 2], dst, 51820, port);
            down.push(Packet::new(buf, 0, t0), t0);
        };
        pkt([198, 18, 0, 1], 40000); // to the old binding: lost
        pkt([198, 18, 0, 101], 41000); // to the new one: back to the client
        pkt([198, 18, 0, 7], 9); // anyone else: untouched
        let mut out = Vec::new();
        while let Some(p) = down.pop_ready(t0) {
            out.push(p.buf[VNET_HDR_LEN + 16..VNET_HDR_LEN + 20].to_vec());
        }
        assert_eq!(out, vec![vec![198, 18, 0, 1], vec![198, 18, 0, 7]]);
        let c = down.counters();
        assert_eq!((c.dropped_stale, c.rewritten), (1, 1));
        // a port-only rebind keeps the address: nothing is stale
        let mut port_only = Nat::new(Side::Destination);
        let same = NatRule {
            to: rule(0).from,
            ..rule(1000)
        };
        port_only.retune(&[same]);
        port_only.push(
            Packet::new(v4(17, [198, 18, 0, 2], [198, 18, 0, 1], 5, 41000), 0, t0),
            t0,
        );
        assert_eq!(port_only.counters().dropped_stale, 0);
    }

    #[test]
    fn other_addresses_pass_untouched() {
        let mut p = v4(17, [198, 18, 0, 7], [198, 18, 0, 2], 1, 2);
        let before = p.clone();
        assert!(!rewrite(&mut p, &rule(0), Side::Source));
        assert_eq!(p, before);
    }

    #[test]
    fn a_partial_checksum_stays_a_partial_sum() {
        // NEEDS_CSUM: the TCP field holds the pseudo-header sum (not complemented)
        let mut b = v4(6, [198, 18, 0, 1], [198, 18, 0, 2], 40000, 80);
        let pseudo = |ip: &[u8]| {
            let mut p = ip[12..20].to_vec();
            p.extend([0, 6]);
            p.extend(31u16.to_be_bytes());
            fold(sum16(&p))
        };
        let s = pseudo(&b[VNET_HDR_LEN..]);
        b[VNET_HDR_LEN + 36..VNET_HDR_LEN + 38].copy_from_slice(&s.to_be_bytes());
        let h = VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..Default::default()
        };
        h.write(&mut b);
        assert!(rewrite(&mut b, &rule(7), Side::Source));
        let ip = &b[VNET_HDR_LEN..];
        assert_eq!(u16::from_be_bytes([ip[36], ip[37]]), pseudo(ip));
        assert_eq!(csum(&ip[..20]), 0);
    }

    #[test]
    fn a_later_fragment_moves_its_address_only() {
        let mut p = v4(17, [198, 18, 0, 1], [198, 18, 0, 2], 5, 6);
        p[VNET_HDR_LEN + 6..VNET_HDR_LEN + 8].copy_from_slice(&185u16.to_be_bytes()); // offset 1480
        let c = csum(&{
            let mut h = p[VNET_HDR_LEN..VNET_HDR_LEN + 20].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        p[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&c.to_be_bytes());
        let payload = p[VNET_HDR_LEN + 20..].to_vec();
        assert!(rewrite(&mut p, &rule(1000), Side::Source));
        assert_eq!(&p[VNET_HDR_LEN + 12..VNET_HDR_LEN + 16], &[198, 18, 0, 101]);
        assert_eq!(csum(&p[VNET_HDR_LEN..VNET_HDR_LEN + 20]), 0);
        assert_eq!(
            p[VNET_HDR_LEN + 20..],
            payload[..],
            "no transport header to touch"
        );
    }

    #[test]
    fn udp_without_a_checksum_keeps_none() {
        let mut p = v4(17, [198, 18, 0, 1], [198, 18, 0, 2], 5, 6);
        p[VNET_HDR_LEN + 26] = 0;
        p[VNET_HDR_LEN + 27] = 0;
        assert!(rewrite(&mut p, &rule(3), Side::Source));
        assert_eq!(&p[VNET_HDR_LEN + 26..VNET_HDR_LEN + 28], &[0, 0]);
    }
}
