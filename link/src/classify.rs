//! What a tunnel's outer packet is: a pure function of an IP datagram
//! (IPv4 or IPv6) -> a [`Message`] (its [`Class`] and, for OpenVPN, the key
//! id). The class names ([`Class::name`]) are an interface: faults match
//! them (`match=wg.initiation`) and the stats file records them.
//!
//! Formats, from their primary sources:
//!
//! * WireGuard (whitepaper §5.4; wireguard-go `device/noise-protocol.go`):
//!   a UDP payload whose first byte is the message type and whose next
//!   three bytes are zero; initiation (type 1) is exactly
//!   `MessageInitiationSize` = 148 bytes, response (2) `MessageResponseSize`
//!   = 92, cookie reply (3) `MessageCookieReplySize` = 64, transport data
//!   (4) at least `MessageTransportSize` = 32 (16-byte header + 16-byte
//!   Poly1305 tag; 32 is a keepalive) and, as the content is padded to 16
//!   bytes (`PaddingMultiple`), a multiple of 16. Recognised on any UDP
//!   port by that strict test, or only on `--wg-ports`.
//! * OpenVPN (`src/openvpn/ssl_pkt.h`): the first byte is
//!   `opcode << 3 | key_id` (`P_OPCODE_SHIFT` 3, `P_KEY_ID_MASK` 7);
//!   opcodes 1/7/10 P_CONTROL_HARD_RESET_CLIENT_V1/V2/V3, 2/8
//!   P_CONTROL_HARD_RESET_SERVER_V1/V2, 3 P_CONTROL_SOFT_RESET_V1,
//!   4 P_CONTROL_V1, 5 P_ACK_V1, 6/9 P_DATA_V1/V2, 11 P_CONTROL_WKC_V1
//!   (`tls-crypt-v2`). Over TCP each packet is preceded by its length (two
//!   bytes, network order). Recognised only on `--ovpn-ports` (either
//!   port), as one byte says too little to tell OpenVPN from other UDP.
//! * IKEv2 (RFC 7296 §3.1): the header's exchange type is at offset 18
//!   (34 IKE_SA_INIT, 35 IKE_AUTH, 36 CREATE_CHILD_SA, 37 INFORMATIONAL),
//!   its flags at 19 (0x20 Response, 0x08 Initiator), the version at 17
//!   (major version 2 in the high nibble); on UDP 500 the header starts
//!   the payload. On UDP 4500 (RFC 3948 §2.2): four zero bytes (the
//!   non-ESP marker) precede IKE; a payload whose first four bytes are not
//!   zero is ESP in UDP (they are its SPI, never 0); a payload of the
//!   single byte 0xFF is a NAT-keepalive (§2.3). ESP itself is IP
//!   protocol 50 (RFC 4303).
//!
//! Only the first packet a TCP segment's payload starts with is classified,
//! and only if the segment starts at a packet boundary: a segment carrying
//! the tail of one OpenVPN packet and the start of the next is read as if
//! it started a packet (its first two bytes as a length), so it may be
//! mistaken for any class, or for `other`. Over UDP a datagram is one
//! packet and the classes are exact.

/// IP protocol numbers used here.
const TCP: u8 = 6;
const UDP: u8 = 17;
const ESP: u8 = 50;

/// IKE's ports (RFC 7296 §2; RFC 3948 §2 for NAT traversal).
const IKE_PORT: u16 = 500;
const IKE_NATT_PORT: u16 = 4500;

/// What a packet is. The discriminant indexes per-class counters
/// ([`Class::ALL`] is in that order).
#[repr(u8)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    Other,
    WgInitiation,
    WgResponse,
    WgCookie,
    WgData,
    OvpnHardResetClient,
    OvpnHardResetServer,
    OvpnSoftReset,
    OvpnControl,
    OvpnAck,
    OvpnData,
    OvpnControlWkc,
    IkeSaInitRequest,
    IkeSaInitResponse,
    IkeAuthRequest,
    IkeAuthResponse,
    IkeCreateChildSaRequest,
    IkeCreateChildSaResponse,
    IkeInformationalRequest,
    IkeInformationalResponse,
    /// IKEv2 with another exchange type (e.g. 43 IKE_INTERMEDIATE, RFC 9242).
    IkeOther,
    IkeKeepalive,
    Esp,
}

impl Class {
    /// Every class, in discriminant order.
    pub const ALL: [Class; 23] = [
        Class::Other,
        Class::WgInitiation,
        Class::WgResponse,
        Class::WgCookie,
        Class::WgData,
        Class::OvpnHardResetClient,
        Class::OvpnHardResetServer,
        Class::OvpnSoftReset,
        Class::OvpnControl,
        Class::OvpnAck,
        Class::OvpnData,
        Class::OvpnControlWkc,
        Class::IkeSaInitRequest,
        Class::IkeSaInitResponse,
        Class::IkeAuthRequest,
        Class::IkeAuthResponse,
        Class::IkeCreateChildSaRequest,
        Class::IkeCreateChildSaResponse,
        Class::IkeInformationalRequest,
        Class::IkeInformationalResponse,
        Class::IkeOther,
        Class::IkeKeepalive,
        Class::Esp,
    ];
    pub const COUNT: usize = Class::ALL.len();

    pub fn name(self) -> &'static str {
        match self {
            Class::Other => "other",
            Class::WgInitiation => "wg.initiation",
            Class::WgResponse => "wg.response",
            Class::WgCookie => "wg.cookie",
            Class::WgData => "wg.data",
            Class::OvpnHardResetClient => "ovpn.hard_reset_client",
            Class::OvpnHardResetServer => "ovpn.hard_reset_server",
            Class::OvpnSoftReset => "ovpn.soft_reset",
            Class::OvpnControl => "ovpn.control",
            Class::OvpnAck => "ovpn.ack",
            Class::OvpnData => "ovpn.data",
            Class::OvpnControlWkc => "ovpn.control_wkc",
            Class::IkeSaInitRequest => "ike.sa_init.request",
            Class::IkeSaInitResponse => "ike.sa_init.response",
            Class::IkeAuthRequest => "ike.auth.request",
            Class::IkeAuthResponse => "ike.auth.response",
            Class::IkeCreateChildSaRequest => "ike.create_child_sa.request",
            Class::IkeCreateChildSaResponse => "ike.create_child_sa.response",
            Class::IkeInformationalRequest => "ike.informational.request",
            Class::IkeInformationalResponse => "ike.informational.response",
            Class::IkeOther => "ike.other",
            Class::IkeKeepalive => "ike.keepalive",
            Class::Esp => "esp",
        }
    }

    pub fn from_name(name: &str) -> Option<Class> {
        Class::ALL.iter().copied().find(|c| c.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Bulk traffic (tunnelled data, and what is not a tunnel's at all):
    /// counted per class, but not listed message by message.
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Class::Other | Class::WgData | Class::OvpnData | Class::Esp
        )
    }

    /// A tunnel's data message (what a `data_marks` entry records).
    pub fn is_tunnel_data(self) -> bool {
        matches!(self, Class::WgData | Class::OvpnData | Class::Esp)
    }
}

/// One classified packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub class: Class,
    /// OpenVPN's key id (0-7); `None` for other protocols.
    pub key_id: Option<u8>,
}

impl Message {
    const OTHER: Message = Message {
        class: Class::Other,
        key_id: None,
    };
    fn of(class: Class) -> Message {
        Message {
            class,
            key_id: None,
        }
    }
}

/// Which ports the port-bound protocols are recognised on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classifier {
    /// OpenVPN (UDP and TCP), either port.
    pub ovpn_ports: Vec<u16>,
    /// WireGuard: `None` = any UDP port (by the strict type/length test).
    pub wg_ports: Option<Vec<u16>>,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            ovpn_ports: vec![1194],
            wg_ports: None,
        }
    }
}

/// The transport layer of a datagram: protocol, and where its header
/// starts and the datagram ends (offsets into the IP bytes). `l4` is
/// `None` for a non-first fragment (no transport header).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    pub proto: u8,
    pub l4: Option<usize>,
    pub end: usize,
}

/// IPv6 extension headers walked to find the transport (RFC 8200 §4).
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AH: u8 = 51;
const DEST_OPTS: u8 = 60;

/// Find the transport header of an IP datagram; `None` if it is not IPv4
/// or IPv6 or too short to say.
pub fn transport(ip: &[u8]) -> Option<Transport> {
    match ip.first()? >> 4 {
        4 if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let end = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
            let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            let l4 = (ihl >= 20 && ihl <= end && !later_fragment).then_some(ihl);
            Some(Transport {
                proto: ip[9],
                l4,
                end,
            })
        }
        6 if ip.len() >= 40 => {
            let end = (40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]))).min(ip.len());
            let mut next = ip[6];
            let mut at = 40;
            for _ in 0..8 {
                let len = match next {
                    HOP_BY_HOP | ROUTING | DEST_OPTS => (usize::from(*ip.get(at + 1)?) + 1) * 8,
                    AH => (usize::from(*ip.get(at + 1)?) + 2) * 4,
                    FRAGMENT => {
                        let off = u16::from_be_bytes([*ip.get(at + 2)?, *ip.get(at + 3)?]) >> 3;
                        if off != 0 {
                            let proto = ip[at];
                            return Some(Transport {
                                proto,
                                l4: None,
                                end,
                            });
                        }
                        8
                    }
                    _ => break,
                };
                next = *ip.get(at)?;
                at += len;
            }
            Some(Transport {
                proto: next,
                l4: (at <= end).then_some(at),
                end,
            })
        }
        _ => None,
    }
}

/// Source and destination port of a UDP or TCP header at `l4`.
pub fn ports(ip: &[u8], l4: usize) -> Option<(u16, u16)> {
    let h = ip.get(l4..l4 + 4)?;
    Some((
        u16::from_be_bytes([h[0], h[1]]),
        u16::from_be_bytes([h[2], h[3]]),
    ))
}

/// Where the UDP/TCP payload starts (`None`: not UDP/TCP, or truncated).
pub fn payload_start(ip: &[u8], t: &Transport) -> Option<usize> {
    let l4 = t.l4?;
    match t.proto {
        UDP if l4 + 8 <= t.end => Some(l4 + 8),
        TCP if l4 + 20 <= t.end => {
            let off = l4 + usize::from(ip[l4 + 12] >> 4) * 4;
            (off >= l4 + 20 && off <= t.end).then_some(off)
        }
        _ => None,
    }
}

impl Classifier {
    /// The class of an IP datagram (without a virtio-net header).
    pub fn classify(&self, ip: &[u8]) -> Message {
        let Some(t) = transport(ip) else {
            return Message::OTHER;
        };
        if t.proto == ESP {
            return Message::of(Class::Esp);
        }
        let (Some(l4), Some(start)) = (t.l4, payload_start(ip, &t)) else {
            return Message::OTHER;
        };
        let Some((sp, dp)) = ports(ip, l4) else {
            return Message::OTHER;
        };
        let payload = &ip[start..t.end];
        let on = |set: &[u16]| set.contains(&sp) || set.contains(&dp);
        match t.proto {
            UDP if on(&[IKE_NATT_PORT]) => ike_natt(payload),
            UDP if on(&[IKE_PORT]) => ike(payload),
            UDP if on(&self.ovpn_ports) => openvpn(payload),
            TCP if on(&self.ovpn_ports) => openvpn_tcp(payload),
            UDP if self.wg_ports.as_deref().is_none_or(on) => wireguard(payload),
            _ => Message::OTHER,
        }
    }
}

/// A WireGuard message by its type byte, reserved bytes and exact length.
pub fn wireguard(p: &[u8]) -> Message {
    if p.len() < 4 || p[1..4] != [0, 0, 0] {
        return Message::OTHER;
    }
    let class = match (p[0], p.len()) {
        (1, 148) => Class::WgInitiation,
        (2, 92) => Class::WgResponse,
        (3, 64) => Class::WgCookie,
        (4, n) if n >= 32 && n.is_multiple_of(16) => Class::WgData,
        _ => Class::Other,
    };
    Message::of(class)
}

/// An OpenVPN packet by its first byte (opcode and key id).
pub fn openvpn(p: &[u8]) -> Message {
    let Some(&b) = p.first() else {
        return Message::OTHER;
    };
    let class = match b >> 3 {
        1 | 7 | 10 => Class::OvpnHardResetClient,
        2 | 8 => Class::OvpnHardResetServer,
        3 => Class::OvpnSoftReset,
        4 => Class::OvpnControl,
        5 => Class::OvpnAck,
        6 | 9 => Class::OvpnData,
        11 => Class::OvpnControlWkc,
        _ => return Message::OTHER,
    };
    Message {
        class,
        key_id: Some(b & 7),
    }
}

/// The first OpenVPN packet of a TCP segment's payload (after its 2-byte
/// length), if the segment starts at a packet boundary (see the module
/// doc); a segment without payload (a bare ACK) is `other`.
pub fn openvpn_tcp(p: &[u8]) -> Message {
    if p.len() < 3 || u16::from_be_bytes([p[0], p[1]]) == 0 {
        return Message::OTHER;
    }
    openvpn(&p[2..])
}

/// IKE on port 4500: a NAT-keepalive, ESP in UDP, or IKE after the
/// non-ESP marker.
pub fn ike_natt(p: &[u8]) -> Message {
    match p {
        [0xff] => Message::of(Class::IkeKeepalive),
        [0, 0, 0, 0, ike_msg @ ..] => ike(ike_msg),
        [_, _, _, _, ..] => Message::of(Class::Esp),
        _ => Message::OTHER,
    }
}

/// An IKEv2 message by its exchange type and Response flag.
pub fn ike(p: &[u8]) -> Message {
    if p.len() < 28 || p[17] >> 4 != 2 {
        return Message::OTHER;
    }
    let response = p[19] & 0x20 != 0;
    let (req, resp) = match p[18] {
        34 => (Class::IkeSaInitRequest, Class::IkeSaInitResponse),
        35 => (Class::IkeAuthRequest, Class::IkeAuthResponse),
        36 => (
            Class::IkeCreateChildSaRequest,
            Class::IkeCreateChildSaResponse,
        ),
        37 => (
            Class::IkeInformationalRequest,
            Class::IkeInformationalResponse,
        ),
        _ => (Class::IkeOther, Class::IkeOther),
    };
    Message::of(if response { resp } else { req })
}

#[cfg(test)]
pub(crate) mod testpkt {
    //! Constructed packets (IPv4/IPv6, UDP/TCP) with valid checksums.
    use crate::gso::offload::{csum_add, csum_fold};

    fn l4_csum(ip: &mut [u8], l4: usize, proto: u8, field: usize) {
        let v6 = ip[0] >> 4 == 6;
        let len = ip.len() - l4;
        let mut acc = if v6 {
            csum_add(0, &ip[8..40])
        } else {
            csum_add(0, &ip[12..20])
        };
        acc += u64::from(proto) + len as u64;
        ip[l4 + field] = 0;
        ip[l4 + field + 1] = 0;
        acc = csum_add(acc, &ip[l4..]);
        let mut c = csum_fold(acc);
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        ip[l4 + field..l4 + field + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// An IP header (v4 or v6) for `proto` around an L4 of `l4_len` bytes;
    /// returns the buffer and where the L4 header starts.
    fn ip_header(v6: bool, proto: u8, l4_len: usize) -> (Vec<u8>, usize) {
        if v6 {
            let mut ip = vec![0u8; 40 + l4_len];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            ip[6] = proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            ip[24..40].copy_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            (ip, 40)
        } else {
            let mut ip = vec![0u8; 20 + l4_len];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
            ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
            let c = csum_fold(csum_add(0, &ip[..20]));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            (ip, 20)
        }
    }

    /// A UDP datagram from `sport` to `dport` carrying `payload`.
    pub fn udp(v6: bool, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let (mut ip, l4) = ip_header(v6, 17, 8 + payload.len());
        ip[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
        ip[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
        ip[l4 + 4..l4 + 6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        ip[l4 + 8..].copy_from_slice(payload);
        l4_csum(&mut ip, l4, 17, 6);
        ip
    }

    /// A TCP segment (ACK|PSH, no options) carrying `payload`.
    pub fn tcp(v6: bool, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let (mut ip, l4) = ip_header(v6, 6, 20 + payload.len());
        ip[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
        ip[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
        ip[l4 + 4..l4 + 8].copy_from_slice(&1000u32.to_be_bytes());
        ip[l4 + 12] = 5 << 4;
        ip[l4 + 13] = 0x18;
        ip[l4 + 14..l4 + 16].copy_from_slice(&65535u16.to_be_bytes());
        ip[l4 + 20..].copy_from_slice(payload);
        l4_csum(&mut ip, l4, 6, 16);
        ip
    }

    /// A bare IP datagram of another protocol (e.g. ESP, 50).
    pub fn raw(v6: bool, proto: u8, payload: &[u8]) -> Vec<u8> {
        let (mut ip, l4) = ip_header(v6, proto, payload.len());
        ip[l4..].copy_from_slice(payload);
        ip
    }

    /// Whether the UDP/TCP checksum of `ip` verifies (a zero UDP checksum
    /// over IPv4 means none).
    pub fn l4_csum_ok(ip: &[u8]) -> bool {
        let t = super::transport(ip).unwrap();
        let l4 = t.l4.unwrap();
        let field = if t.proto == 17 { 6 } else { 16 };
        if t.proto == 17 && ip[0] >> 4 == 4 && ip[l4 + 6..l4 + 8] == [0, 0] {
            return true;
        }
        let mut acc = if ip[0] >> 4 == 6 {
            csum_add(0, &ip[8..40])
        } else {
            csum_add(0, &ip[12..20])
        };
        acc += u64::from(t.proto) + (t.end - l4) as u64;
        acc = csum_add(acc, &ip[l4..t.end]);
        let _ = field;
        csum_fold(acc) == 0
    }

    /// A WireGuard message of `len` bytes with type `ty`.
    pub fn wg(ty: u8, len: usize) -> Vec<u8> {
        let mut p = vec![0xA5u8; len];
        p[0] = ty;
        p[1..4].copy_from_slice(&[0, 0, 0]);
        p
    }

    /// An IKEv2 header (and a little body) with `exchange` and `flags`.
    pub fn ike_msg(exchange: u8, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[..8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // SPIi
        p[16] = 33; // next payload: SA
        p[17] = 0x20; // version 2.0
        p[18] = exchange;
        p[19] = flags;
        p[24..28].copy_from_slice(&60u32.to_be_bytes());
        p
    }
}

#[cfg(test)]
mod tests {
    use super::testpkt::*;
    use super::*;

    fn class(ip: &[u8]) -> Class {
        Classifier::default().classify(ip).class
    }

    #[test]
    fn names_round_trip_and_are_unique() {
        for (i, c) in Class::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Class::from_name(c.name()), Some(*c));
        }
        assert_eq!(Class::from_name("wg"), None);
    }

    #[test]
    fn wireguard_by_type_reserved_bytes_and_exact_length() {
        for v6 in [false, true] {
            let c = |p: &[u8]| class(&udp(v6, 40000, 51820, p));
            assert_eq!(c(&wg(1, 148)), Class::WgInitiation);
            assert_eq!(c(&wg(2, 92)), Class::WgResponse);
            assert_eq!(c(&wg(3, 64)), Class::WgCookie);
            assert_eq!(c(&wg(4, 32)), Class::WgData, "a keepalive");
            assert_eq!(c(&wg(4, 1440)), Class::WgData);
            // wrong lengths
            assert_eq!(c(&wg(1, 149)), Class::Other);
            assert_eq!(c(&wg(2, 148)), Class::Other);
            assert_eq!(c(&wg(4, 40)), Class::Other, "not a multiple of 16");
            assert_eq!(c(&wg(4, 16)), Class::Other, "shorter than header + tag");
            assert_eq!(c(&wg(5, 64)), Class::Other);
            // non-zero reserved bytes
            let mut p = wg(1, 148);
            p[2] = 1;
            assert_eq!(c(&p), Class::Other);
        }
        // on any port, unless ports are given
        assert_eq!(class(&udp(false, 53, 1234, &wg(2, 92))), Class::WgResponse);
        let only = Classifier {
            wg_ports: Some(vec![51820]),
            ..Default::default()
        };
        assert_eq!(
            only.classify(&udp(false, 53, 1234, &wg(2, 92))).class,
            Class::Other
        );
        assert_eq!(
            only.classify(&udp(false, 51820, 1234, &wg(2, 92))).class,
            Class::WgResponse
        );
        // WireGuard over TCP does not exist
        assert_eq!(class(&tcp(false, 1, 51820, &wg(1, 148))), Class::Other);
    }

    #[test]
    fn openvpn_opcodes_and_key_id_on_its_ports_only() {
        let cases = [
            (1, Class::OvpnHardResetClient),
            (7, Class::OvpnHardResetClient),
            (10, Class::OvpnHardResetClient),
            (2, Class::OvpnHardResetServer),
            (8, Class::OvpnHardResetServer),
            (3, Class::OvpnSoftReset),
            (4, Class::OvpnControl),
            (5, Class::OvpnAck),
            (6, Class::OvpnData),
            (9, Class::OvpnData),
            (11, Class::OvpnControlWkc),
            (0, Class::Other),
            (12, Class::Other),
        ];
        let c = Classifier::default();
        for v6 in [false, true] {
            for (op, want) in cases {
                let mut p = vec![0u8; 40];
                p[0] = op << 3 | 5;
                let m = c.classify(&udp(v6, 1194, 50000, &p));
                assert_eq!(m.class, want, "opcode {op}");
                let key = (want != Class::Other).then_some(5);
                assert_eq!(m.key_id, key);
                // the same bytes on another port are not OpenVPN
                assert_eq!(c.classify(&udp(v6, 1195, 50000, &p)).class, Class::Other);
                // over TCP, after the 2-byte length
                let mut framed = (p.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&p);
                assert_eq!(c.classify(&tcp(v6, 50000, 1194, &framed)).class, want);
            }
        }
        // a bare ACK, and a port given on the command line
        assert_eq!(
            c.classify(&tcp(false, 50000, 1194, &[])).class,
            Class::Other
        );
        let other_port = Classifier {
            ovpn_ports: vec![443],
            ..Default::default()
        };
        let p = [7 << 3, 1, 2, 3];
        assert_eq!(
            other_port.classify(&udp(false, 443, 9, &p)).class,
            Class::OvpnHardResetClient
        );
        assert_eq!(
            other_port.classify(&udp(false, 1194, 9, &p)).class,
            Class::Other
        );
    }

    #[test]
    fn ike_requests_and_responses_by_exchange_and_flags() {
        let cases = [
            (34, Class::IkeSaInitRequest, Class::IkeSaInitResponse),
            (35, Class::IkeAuthRequest, Class::IkeAuthResponse),
            (
                36,
                Class::IkeCreateChildSaRequest,
                Class::IkeCreateChildSaResponse,
            ),
            (
                37,
                Class::IkeInformationalRequest,
                Class::IkeInformationalResponse,
            ),
            (43, Class::IkeOther, Class::IkeOther),
        ];
        for v6 in [false, true] {
            for (ex, req, resp) in cases {
                // initiator's request, responder's response (flags 0x08, 0x20)
                assert_eq!(class(&udp(v6, 500, 500, &ike_msg(ex, 0x08))), req);
                assert_eq!(class(&udp(v6, 500, 500, &ike_msg(ex, 0x20))), resp);
                // a request from the original responder (Initiator flag clear)
                assert_eq!(class(&udp(v6, 500, 500, &ike_msg(ex, 0x00))), req);
                assert_eq!(class(&udp(v6, 500, 500, &ike_msg(ex, 0x28))), resp);
                // on 4500 after the non-ESP marker
                let mut natt = vec![0, 0, 0, 0];
                natt.extend(ike_msg(ex, 0x20));
                assert_eq!(class(&udp(v6, 4500, 4500, &natt)), resp);
            }
        }
        // IKEv1 (version 1.0) and a short header are not IKEv2
        let mut v1 = ike_msg(34, 0x08);
        v1[17] = 0x10;
        assert_eq!(class(&udp(false, 500, 500, &v1)), Class::Other);
        assert_eq!(class(&udp(false, 500, 500, &[0; 20])), Class::Other);
    }

    #[test]
    fn esp_in_udp_keepalive_and_the_non_esp_marker() {
        for v6 in [false, true] {
            let esp_udp = [0, 0, 0x12, 0x34, 0, 0, 0, 1, 9, 9, 9, 9];
            assert_eq!(class(&udp(v6, 4500, 4500, &esp_udp)), Class::Esp);
            assert_eq!(class(&udp(v6, 4500, 4500, &[0xff])), Class::IkeKeepalive);
            assert_eq!(class(&udp(v6, 4500, 4500, &[0, 0, 0])), Class::Other);
            assert_eq!(class(&raw(v6, 50, &[0, 0, 1, 2, 0, 0, 0, 1])), Class::Esp);
            // the marker followed by garbage is not IKE
            assert_eq!(
                class(&udp(v6, 4500, 4500, &[0, 0, 0, 0, 1, 2])),
                Class::Other
            );
        }
    }

    #[test]
    fn malformed_and_fragmented_datagrams_are_other() {
        assert_eq!(class(&[]), Class::Other);
        assert_eq!(class(&[0x45; 10]), Class::Other);
        let mut frag = udp(false, 40000, 51820, &wg(1, 148));
        frag[6..8].copy_from_slice(&100u16.to_be_bytes()); // fragment offset 800
        assert_eq!(class(&frag), Class::Other);
        // an IPv6 destination-options header before UDP is walked
        let inner = udp(true, 40000, 51820, &wg(2, 92));
        let mut v6 = inner[..40].to_vec();
        v6[6] = DEST_OPTS;
        v6.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        v6.extend_from_slice(&inner[40..]);
        let pl = (v6.len() - 40) as u16;
        v6[4..6].copy_from_slice(&pl.to_be_bytes());
        assert_eq!(class(&v6), Class::WgResponse);
    }
}
