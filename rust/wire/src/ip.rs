// SPDX-License-Identifier: GPL-2.0

//! The IP and UDP headers of RoCE v2 packets (RoCE v2 annex A17.4), built and read without
//! the kernel's IP stack, because the ICRC covers IP header fields (IPv4 identification and
//! total length, addresses, UDP ports and length): the sender must know them before it
//! computes the ICRC, so it writes them itself.
//!
//! * IPv4: version 4, IHL 5, DSCP/ECN from the traffic class, DF set, a caller-chosen
//!   identification, protocol UDP, header checksum computed here.
//! * IPv6: version 6, traffic class, flow label, next header UDP, hop limit.
//! * UDP: destination port 4791, a caller-chosen source port (ECMP entropy), UDP checksum 0
//!   for IPv4 (allowed); for IPv6 the real checksum ([`fill_udp6_checksum`]), since a zero
//!   UDP checksum is invalid there (RFC 8200) and stacks drop it unless told otherwise.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

/// Length of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Length of an IPv6 header.
pub const IPV6_LEN: usize = 40;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// An IP address of a RoCE v2 path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// The address a RoCE v2 GID stands for: an IPv4-mapped GID (`::ffff:a.b.c.d`) is IPv4.
    pub const fn from_gid(gid: [u8; 16]) -> Self {
        let mut mapped = true;
        let mut i = 0;
        while i < 10 {
            if gid[i] != 0 {
                mapped = false;
            }
            i += 1;
        }
        if mapped && gid[10] == 0xff && gid[11] == 0xff {
            IpAddr::V4([gid[12], gid[13], gid[14], gid[15]])
        } else {
            IpAddr::V6(gid)
        }
    }

    /// The GID of an address (IPv4-mapped for IPv4).
    pub const fn to_gid(self) -> [u8; 16] {
        match self {
            IpAddr::V4(a) => [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
            ],
            IpAddr::V6(a) => a,
        }
    }

    /// Whether this is a multicast address (224.0.0.0/4, ff00::/8): the GID of a multicast
    /// group.
    pub const fn is_multicast(self) -> bool {
        match self {
            IpAddr::V4(a) => a[0] & 0xf0 == 0xe0,
            IpAddr::V6(a) => a[0] == 0xff,
        }
    }

    /// Length of the IP and UDP headers in front of a RoCE v2 BTH.
    pub const fn headers_len(self) -> usize {
        match self {
            IpAddr::V4(_) => IPV4_LEN + UDP_LEN,
            IpAddr::V6(_) => IPV6_LEN + UDP_LEN,
        }
    }
}

/// The fields of the IP and UDP headers of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpUdp {
    /// Source address; same family as `dst`.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IPv4 DSCP/ECN byte or IPv6 traffic class.
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits); ignored for IPv4.
    pub flow_label: u32,
    /// TTL / hop limit.
    pub hop_limit: u8,
    /// IPv4 identification; ignored for IPv6.
    pub id: u16,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
}

/// Why headers could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpError {
    /// The buffer is shorter than the headers.
    Short,
    /// Source and destination are of different families.
    Family,
    /// The packet is too long for the length fields.
    TooLong,
}

fn sum16(mut acc: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    fold(sum16(0, bytes))
}

/// Writes the IP and UDP headers at the start of `pkt`, whose length is the whole IP packet
/// (headers, IBA packet, ICRC). Returns the header length (the BTH offset). The UDP checksum
/// is 0; for IPv6 call [`fill_udp6_checksum`] once the packet is complete.
pub fn write_headers(h: &IpUdp, pkt: &mut [u8]) -> Result<usize, IpError> {
    write_headers_of_len(h, pkt.len(), pkt)
}

/// [`write_headers`] for an IP packet of `total` bytes of which `pkt` need hold only the
/// headers (the headers of one segment of a segmentation offload, say).
pub fn write_headers_of_len(h: &IpUdp, total: usize, pkt: &mut [u8]) -> Result<usize, IpError> {
    match (h.src, h.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            if total < IPV4_LEN + UDP_LEN || pkt.len() < IPV4_LEN + UDP_LEN {
                return Err(IpError::Short);
            }
            let tot = u16::try_from(total).map_err(|_| IpError::TooLong)?;
            let ip = &mut pkt[..IPV4_LEN];
            ip[0] = 0x45;
            ip[1] = h.traffic_class;
            ip[2..4].copy_from_slice(&tot.to_be_bytes());
            ip[4..6].copy_from_slice(&h.id.to_be_bytes());
            ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
            ip[8] = h.hop_limit;
            ip[9] = IPPROTO_UDP;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&s);
            ip[16..20].copy_from_slice(&d);
            let csum = internet_checksum(ip);
            ip[10..12].copy_from_slice(&csum.to_be_bytes());
            write_udp(h, total - IPV4_LEN, &mut pkt[IPV4_LEN..])?;
            Ok(IPV4_LEN + UDP_LEN)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            if total < IPV6_LEN + UDP_LEN || pkt.len() < IPV6_LEN + UDP_LEN {
                return Err(IpError::Short);
            }
            let plen = u16::try_from(total - IPV6_LEN).map_err(|_| IpError::TooLong)?;
            let ip = &mut pkt[..IPV6_LEN];
            let vtf = (6u32 << 28) | (u32::from(h.traffic_class) << 20) | (h.flow_label & 0xf_ffff);
            ip[0..4].copy_from_slice(&vtf.to_be_bytes());
            ip[4..6].copy_from_slice(&plen.to_be_bytes());
            ip[6] = IPPROTO_UDP;
            ip[7] = h.hop_limit;
            ip[8..24].copy_from_slice(&s);
            ip[24..40].copy_from_slice(&d);
            write_udp(h, total - IPV6_LEN, &mut pkt[IPV6_LEN..])?;
            Ok(IPV6_LEN + UDP_LEN)
        }
        _ => Err(IpError::Family),
    }
}

/// Writes the UDP header of a datagram of `len` bytes at the start of `udp`.
fn write_udp(h: &IpUdp, len: usize, udp: &mut [u8]) -> Result<(), IpError> {
    let len = u16::try_from(len).map_err(|_| IpError::TooLong)?;
    let u = &mut udp[..UDP_LEN];
    u[0..2].copy_from_slice(&h.sport.to_be_bytes());
    u[2..4].copy_from_slice(&h.dport.to_be_bytes());
    u[4..6].copy_from_slice(&len.to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    Ok(())
}

/// Computes and stores the UDP checksum of a complete IPv6 packet written by
/// [`write_headers`] (the pseudo-header of RFC 8200 8.1).
pub fn fill_udp6_checksum(pkt: &mut [u8]) -> Result<(), IpError> {
    if pkt.len() < IPV6_LEN + UDP_LEN || pkt[0] >> 4 != 6 {
        return Err(IpError::Short);
    }
    let udp_len = (pkt.len() - IPV6_LEN) as u32;
    pkt[IPV6_LEN + 6] = 0;
    pkt[IPV6_LEN + 7] = 0;
    let mut acc = sum16(0, &pkt[8..40]);
    acc += udp_len >> 16;
    acc += udp_len & 0xffff;
    acc += u32::from(IPPROTO_UDP);
    acc = sum16(acc, &pkt[IPV6_LEN..]);
    let mut c = fold(acc);
    if c == 0 {
        c = 0xffff;
    }
    pkt[IPV6_LEN + 6..IPV6_LEN + 8].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// What a received RoCE v2 packet's IP and UDP headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Offset of the BTH (end of the UDP header).
    pub bth_offset: usize,
    /// UDP source port.
    pub sport: u16,
    /// Traffic class / DSCP+ECN byte.
    pub traffic_class: u8,
}

/// Reads the IP and UDP headers of a received IP packet (`pkt` starts at the IP header).
/// The IP stack already checked them; this only locates the fields, checking bounds.
pub fn parse(pkt: &[u8]) -> Option<Received> {
    let v = pkt.first()? >> 4;
    match v {
        4 => {
            let ihl = usize::from(pkt[0] & 0xf) * 4;
            if ihl < IPV4_LEN || pkt.len() < ihl + UDP_LEN || pkt[9] != IPPROTO_UDP {
                return None;
            }
            Some(Received {
                src: IpAddr::V4([pkt[12], pkt[13], pkt[14], pkt[15]]),
                dst: IpAddr::V4([pkt[16], pkt[17], pkt[18], pkt[19]]),
                bth_offset: ihl + UDP_LEN,
                sport: u16::from_be_bytes([pkt[ihl], pkt[ihl + 1]]),
                traffic_class: pkt[1],
            })
        }
        6 => {
            if pkt.len() < IPV6_LEN + UDP_LEN || pkt[6] != IPPROTO_UDP {
                return None;
            }
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&pkt[8..24]);
            d.copy_from_slice(&pkt[24..40]);
            Some(Received {
                src: IpAddr::V6(s),
                dst: IpAddr::V6(d),
                bth_offset: IPV6_LEN + UDP_LEN,
                sport: u16::from_be_bytes([pkt[40], pkt[41]]),
                traffic_class: ((u16::from_be_bytes([pkt[0], pkt[1]]) >> 4) & 0xff) as u8,
            })
        }
        _ => None,
    }
}

/// How the IPv4 packets cut from one received run are numbered: from the run's first
/// identification up by one each (`inet_gso_segment`, and what receive offload merges by
/// default), or all with the first's (receive offload merges such a flow too, when its
/// packets have DF set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentIds {
    /// Packet `i` has the run's identification plus `i`.
    Counting,
    /// Every packet has the run's identification.
    Fixed,
}

/// The most bytes [`segment_headers`] writes: an IPv6 and a UDP header.
pub const MAX_SEGMENT_HEADERS: usize = IPV6_LEN + UDP_LEN;

/// Rebuilds the IP and UDP headers that packet `index` of a received run had on the wire: a
/// run is one buffer of several datagrams' UDP payloads, each `segment` bytes but the last,
/// behind the headers of the whole (`run`: an IPv4 header without options or an IPv6 header
/// without extensions, then the UDP header). Packet `index` carries `udp_payload` bytes; its
/// headers are the run's with its own lengths, its IPv4 identification as `ids` says (header
/// checksum recomputed) and the run's UDP checksum (not that packet's: callers ignore it, as
/// the ICRC does). Writes them to the start of `out`; returns their length, or `None` for
/// other headers or lengths beyond 16 bits.
pub fn segment_headers(
    run: &[u8],
    index: u16,
    udp_payload: usize,
    ids: SegmentIds,
    out: &mut [u8; MAX_SEGMENT_HEADERS],
) -> Option<usize> {
    let ip_len = match run.first()? {
        0x45 => IPV4_LEN,
        v if v >> 4 == 6 => IPV6_LEN,
        _ => return None,
    };
    let len = ip_len + UDP_LEN;
    if run.len() != len || run[if ip_len == IPV4_LEN { 9 } else { 6 }] != IPPROTO_UDP {
        return None;
    }
    let udp_len = u16::try_from(UDP_LEN + udp_payload).ok()?;
    let out = &mut out[..len];
    out.copy_from_slice(run);
    if ip_len == IPV4_LEN {
        let total = u16::try_from(len + udp_payload).ok()?;
        out[2..4].copy_from_slice(&total.to_be_bytes());
        if ids == SegmentIds::Counting {
            let id = u16::from_be_bytes([out[4], out[5]]).wrapping_add(index);
            out[4..6].copy_from_slice(&id.to_be_bytes());
        }
        out[10..12].copy_from_slice(&[0, 0]);
        let csum = internet_checksum(&out[..IPV4_LEN]);
        out[10..12].copy_from_slice(&csum.to_be_bytes());
    } else {
        out[4..6].copy_from_slice(&udp_len.to_be_bytes());
    }
    out[ip_len + 4..ip_len + 6].copy_from_slice(&udp_len.to_be_bytes());
    Some(len)
}

/// The UDP source port of a RoCE v2 flow between two QPs: a hash folded into the range
/// 0xC000..=0xFFFF that RoCE v2 recommends, stable for the connection (as rxe does).
pub const fn flow_sport(qpn: u32, dest_qpn: u32) -> u16 {
    let mut h = (qpn as u64) * 31 + dest_qpn as u64;
    h ^= h >> 13;
    h = h.wrapping_mul(0x5bd1_e995);
    h ^= h >> 15;
    0xC000 | (h as u16 & 0x3fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_addresses() {
        let mc = [
            IpAddr::V4([224, 0, 0, 1]),
            IpAddr::V4([239, 255, 255, 255]),
            IpAddr::from_gid(IpAddr::V4([239, 1, 2, 3]).to_gid()),
            IpAddr::V6([0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77, 0, 1]),
        ];
        let not = [
            IpAddr::V4([223, 255, 255, 255]),
            IpAddr::V4([240, 0, 0, 1]),
            IpAddr::V4([10, 0, 0, 1]),
            IpAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            // ::ffff:239.1.2.3 read as IPv4 is multicast; a v4-mapped GID is not IPv6
            // multicast when taken as IPv6.
            IpAddr::V6(IpAddr::V4([239, 1, 2, 3]).to_gid()),
        ];
        assert!(mc.iter().all(|a| a.is_multicast()));
        assert!(not.iter().all(|a| !a.is_multicast()));
    }

    fn v4hdr() -> IpUdp {
        IpUdp {
            src: IpAddr::V4([10, 0, 0, 1]),
            dst: IpAddr::V4([10, 0, 0, 2]),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
            id: 0x1234,
            sport: 0xc001,
            dport: 4791,
        }
    }

    fn v6hdr() -> IpUdp {
        IpUdp {
            src: IpAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            dst: IpAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
            flow_label: 0x12345,
            ..v4hdr()
        }
    }

    #[test]
    fn headers_of_len_match_whole_packet() {
        for h in [v4hdr(), v6hdr()] {
            let mut whole = [0u8; 1100];
            let hl = write_headers(&h, &mut whole).unwrap();
            let mut hdr = [0u8; 48];
            assert_eq!(write_headers_of_len(&h, 1100, &mut hdr[..hl]), Ok(hl));
            assert_eq!(hdr[..hl], whole[..hl]);
            assert_eq!(
                write_headers_of_len(&h, 70000, &mut hdr),
                Err(IpError::TooLong)
            );
            assert_eq!(
                write_headers_of_len(&h, 1100, &mut hdr[..hl - 1]),
                Err(IpError::Short)
            );
            assert_eq!(
                write_headers_of_len(&h, hl - 1, &mut hdr),
                Err(IpError::Short)
            );
        }
    }

    #[test]
    fn segment_headers_are_those_of_each_cut_packet() {
        let near_wrap = IpUdp {
            id: 0xfffe,
            ..v4hdr()
        };
        for h in [v4hdr(), near_wrap, v6hdr()] {
            let hl = if matches!(h.src, IpAddr::V4(_)) {
                28
            } else {
                48
            };
            // A run of three 1040-byte datagrams and one of 100: the run's own headers.
            let mut run = [0u8; 48];
            write_headers_of_len(&h, hl + 3 * 1040 + 100, &mut run[..hl]).unwrap();
            for (i, payload) in [(0u16, 1040usize), (1, 1040), (2, 1040), (3, 100)] {
                for ids in [SegmentIds::Counting, SegmentIds::Fixed] {
                    let mut got = [0u8; MAX_SEGMENT_HEADERS];
                    assert_eq!(
                        segment_headers(&run[..hl], i, payload, ids, &mut got),
                        Some(hl)
                    );
                    let id = match ids {
                        SegmentIds::Counting => h.id.wrapping_add(i),
                        SegmentIds::Fixed => h.id,
                    };
                    let mut want = [0u8; 48];
                    write_headers_of_len(&IpUdp { id, ..h }, hl + payload, &mut want[..hl])
                        .unwrap();
                    assert_eq!(got[..hl], want[..hl], "packet {i}, {ids:?}");
                }
            }
        }
        let mut out = [0u8; MAX_SEGMENT_HEADERS];
        let mut run = [0u8; 28];
        write_headers_of_len(&v4hdr(), 2000, &mut run).unwrap();
        let c = SegmentIds::Counting;
        assert_eq!(segment_headers(&run[..27], 0, 10, c, &mut out), None);
        assert_eq!(segment_headers(&run, 0, 70000, c, &mut out), None);
        let mut opts = run;
        opts[0] = 0x46;
        assert_eq!(segment_headers(&opts, 0, 10, c, &mut out), None);
        let mut tcp = run;
        tcp[9] = 6;
        assert_eq!(segment_headers(&tcp, 0, 10, c, &mut out), None);
        assert_eq!(segment_headers(&[], 0, 10, c, &mut out), None);
    }

    #[test]
    fn ipv4_header_checksum_verifies() {
        let mut pkt = [0u8; 60];
        assert_eq!(write_headers(&v4hdr(), &mut pkt), Ok(28));
        assert_eq!(internet_checksum(&pkt[..20]), 0);
        assert_eq!(u16::from_be_bytes([pkt[2], pkt[3]]), 60);
        assert_eq!(u16::from_be_bytes([pkt[24], pkt[25]]), 40);
        let r = parse(&pkt).unwrap();
        assert_eq!(r.src, IpAddr::V4([10, 0, 0, 1]));
        assert_eq!(r.bth_offset, 28);
        assert_eq!(r.sport, 0xc001);
    }

    #[test]
    fn ipv6_udp_checksum_verifies() {
        let mut h = v4hdr();
        h.src = IpAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        h.dst = IpAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1]);
        h.traffic_class = 0xa5;
        h.flow_label = 0x12345;
        let mut pkt = [0x5au8; 77];
        assert_eq!(write_headers(&h, &mut pkt), Ok(48));
        fill_udp6_checksum(&mut pkt).unwrap();
        // Verifying: the sum over pseudo-header and UDP packet, checksum included, is 0.
        let udp_len = (pkt.len() - 40) as u32;
        let mut acc = sum16(0, &pkt[8..40]) + udp_len + u32::from(IPPROTO_UDP);
        acc = sum16(acc, &pkt[40..]);
        assert_eq!(fold(acc), 0);
        let r = parse(&pkt).unwrap();
        assert_eq!(r.traffic_class, 0xa5);
        assert_eq!(r.dst, h.dst);
    }

    #[test]
    fn gid_mapping_round_trips() {
        let v4 = IpAddr::V4([192, 168, 1, 9]);
        assert_eq!(IpAddr::from_gid(v4.to_gid()), v4);
        let g = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4];
        assert_eq!(IpAddr::from_gid(g), IpAddr::V6(g));
    }

    #[test]
    fn family_mismatch_and_short_buffers_fail() {
        let mut h = v4hdr();
        h.dst = IpAddr::V6([0; 16]);
        assert_eq!(write_headers(&h, &mut [0u8; 100]), Err(IpError::Family));
        assert_eq!(write_headers(&v4hdr(), &mut [0u8; 27]), Err(IpError::Short));
        assert!(parse(&[0x45, 0, 0]).is_none());
        assert!(parse(&[]).is_none());
    }

    #[test]
    fn sport_is_in_the_roce_range() {
        for q in 0..1000u32 {
            let p = flow_sport(q, q.wrapping_mul(7));
            assert!(p >= 0xc000);
        }
    }
}
