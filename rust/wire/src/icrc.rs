// SPDX-License-Identifier: GPL-2.0

//! The RoCE invariant CRC (ICRC): IBA vol 1 7.8.1, RoCE annex A16 (v1) and RoCE v2 annex A17.
//!
//! The ICRC is the IEEE CRC-32 of the `crc32` module, computed over
//!
//! 1. 8 bytes of `0xFF`, standing for the LRH, which RoCE does not carry ("the LRH is replaced
//!    by 64 bits of 1s");
//! 2. the network header: the IPv4 or IPv6 header for RoCE v2, the GRH for RoCE v1;
//! 3. for RoCE v2, the UDP header;
//! 4. the BTH and everything after it (extension headers, payload, **pad bytes**) up to but
//!    not including the ICRC,
//!
//! with the fields that routers and switches may change ("variant" fields) replaced by all
//! ones for the computation:
//!
//! | header | masked fields |
//! |---|---|
//! | IPv4 | Type of Service (DSCP and ECN, byte 1), TTL (byte 8), header checksum (bytes 10-11) |
//! | IPv6 / GRH | traffic class and flow label (the 28 bits after the version), hop limit (byte 7) |
//! | UDP | checksum (bytes 6-7) |
//! | BTH | byte 4: FECN, BECN and the 6 reserved bits ("resv8a") |
//!
//! Everything else is covered as is: IPv4 version/IHL, total length, identification,
//! flags/fragment offset, protocol, addresses, options; IPv6 version, payload length, next
//! header, addresses; UDP ports and length.
//!
//! **Byte order on the wire**: the CRC-32 value is sent least significant byte first
//! ([`to_wire`]): `u32::to_le_bytes`, the same convention as an Ethernet FCS. This was checked
//! against every packet of a capture of Linux rxe traffic (`rust/wire/fixtures/`; a big-endian
//! reading matches none of them).
//!
//! The computation can be streamed ([`Icrc`]) so that a payload scattered over several buffers
//! does not need to be copied: the masked fields all lie in the headers up to the end of the
//! BTH.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

use core::fmt;

use super::crc32::{Crc32Engine, SoftCrc32};

/// Length of the ICRC.
pub const ICRC_LEN: usize = 4;

/// The UDP destination port of RoCE v2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

const BTH_LEN: usize = 12;
const UDP_LEN: usize = 8;
const IPV6_LEN: usize = 40;
const IPV4_MIN_LEN: usize = 20;
const IPV4_MAX_LEN: usize = 60;
/// The longest prefix that needs masking: IPv4 with options, UDP, BTH.
const MAX_MASKED: usize = IPV4_MAX_LEN + UDP_LEN + BTH_LEN;

/// The encapsulation of an IBA packet, which decides the headers in front of the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// RoCE v1 (ethertype 0x8915): a 40-byte GRH, then the BTH.
    RoceV1,
    /// RoCE v2 over IPv4: the IPv4 header (with options, if any), UDP, BTH.
    RoceV2Ipv4,
    /// RoCE v2 over IPv6: the 40-byte IPv6 header (no extension headers), UDP, BTH.
    RoceV2Ipv6,
}

/// Why an ICRC cannot be computed, or does not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcrcError {
    /// The bytes end before the end of the BTH (plus the ICRC, where one is expected).
    TooShort {
        /// The length needed.
        needed: usize,
        /// The length given.
        len: usize,
    },
    /// The IP version (or GRH IPVer) nibble does not match the encapsulation.
    BadVersion(u8),
    /// The IPv4 header length field is below 5 words.
    BadIhl(u8),
    /// The ICRC in the packet is not the one computed.
    Mismatch {
        /// The ICRC found in the packet.
        wire: u32,
        /// The ICRC computed.
        computed: u32,
    },
}

impl fmt::Display for IcrcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IcrcError::TooShort { needed, len } => {
                write!(f, "{len} bytes, the headers need {needed}")
            }
            IcrcError::BadVersion(v) => write!(f, "IP version {v} does not match"),
            IcrcError::BadIhl(v) => write!(f, "IPv4 header length {v} words"),
            IcrcError::Mismatch { wire, computed } => {
                write!(
                    f,
                    "ICRC {wire:#010x} in the packet, {computed:#010x} computed"
                )
            }
        }
    }
}

/// Length of the network header (IPv4 with options, IPv6, GRH) at the start of `pkt`.
pub fn network_header_len(encap: Encap, pkt: &[u8]) -> Result<usize, IcrcError> {
    let first = match pkt.first() {
        Some(&b) => b,
        None => {
            return Err(IcrcError::TooShort {
                needed: match encap {
                    Encap::RoceV2Ipv4 => IPV4_MIN_LEN,
                    _ => IPV6_LEN,
                },
                len: 0,
            })
        }
    };
    let version = first >> 4;
    match encap {
        Encap::RoceV2Ipv4 => {
            if version != 4 {
                return Err(IcrcError::BadVersion(version));
            }
            let ihl = first & 0x0F;
            if ihl < 5 {
                return Err(IcrcError::BadIhl(ihl));
            }
            Ok(ihl as usize * 4)
        }
        Encap::RoceV2Ipv6 | Encap::RoceV1 => {
            if version != 6 {
                return Err(IcrcError::BadVersion(version));
            }
            Ok(IPV6_LEN)
        }
    }
}

/// Offset of the BTH in `pkt`: the network header plus, for RoCE v2, the UDP header.
pub fn bth_offset(encap: Encap, pkt: &[u8]) -> Result<usize, IcrcError> {
    let net = network_header_len(encap, pkt)?;
    Ok(match encap {
        Encap::RoceV1 => net,
        Encap::RoceV2Ipv4 | Encap::RoceV2Ipv6 => net + UDP_LEN,
    })
}

/// A streaming ICRC computation.
///
/// ```
/// # use oxrdma_wire::icrc::{Encap, Icrc, icrc_v2_ipv4};
/// # let mut pkt = [0u8; 20 + 8 + 12 + 8];
/// # pkt[0] = 0x45;
/// // Headers in one buffer, the payload in two others.
/// let mut icrc = Icrc::new(Encap::RoceV2Ipv4, &pkt[..40]).unwrap();
/// icrc.update(&pkt[40..44]);
/// icrc.update(&pkt[44..]);
/// assert_eq!(Ok(icrc.finish()), icrc_v2_ipv4(&pkt));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icrc<'a, E: Crc32Engine = SoftCrc32> {
    state: u32,
    engine: &'a E,
}

impl Icrc<'static, SoftCrc32> {
    /// Starts an ICRC over `headers`: the packet from the first byte of its network header
    /// (IPv4, IPv6 or GRH) through at least the end of the BTH. Bytes of `headers` after the
    /// BTH are covered as they are.
    pub fn new(encap: Encap, headers: &[u8]) -> Result<Self, IcrcError> {
        Icrc::with(&SoftCrc32, encap, headers)
    }
}

impl<'a, E: Crc32Engine> Icrc<'a, E> {
    /// [`Icrc::new`] computed with `engine`.
    pub fn with(engine: &'a E, encap: Encap, headers: &[u8]) -> Result<Self, IcrcError> {
        let masked_len = bth_offset(encap, headers)? + BTH_LEN;
        let too_short = IcrcError::TooShort {
            needed: masked_len,
            len: headers.len(),
        };
        // `masked_len` is at most MAX_MASKED (the IPv4 IHL field is 4 bits).
        let mut buf = [0u8; MAX_MASKED];
        let (Some(prefix), Some(rest), Some(masked)) = (
            headers.get(..masked_len),
            headers.get(masked_len..),
            buf.get_mut(..masked_len),
        ) else {
            return Err(too_short);
        };
        masked.copy_from_slice(prefix);
        mask(encap, masked);
        let mut state = engine.update_raw(!0, &[0xFF; 8]);
        state = engine.update_raw(state, masked);
        state = engine.update_raw(state, rest);
        Ok(Icrc { state, engine })
    }

    /// Appends more of the packet (after what `new` and earlier calls covered).
    pub fn update(&mut self, data: &[u8]) {
        self.state = self.engine.update_raw(self.state, data);
    }

    /// The ICRC of everything covered so far.
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

/// Sets the variant fields of `prefix` (network header, UDP header for RoCE v2, BTH; exactly
/// those) to all ones.
fn mask(encap: Encap, prefix: &mut [u8]) {
    let ones = |b: &mut [u8], range: core::ops::Range<usize>| {
        if let Some(s) = b.get_mut(range) {
            s.fill(0xFF);
        }
    };
    let net = match encap {
        Encap::RoceV2Ipv4 => {
            // Type of service, TTL, header checksum.
            ones(prefix, 1..2);
            ones(prefix, 8..9);
            ones(prefix, 10..12);
            prefix.len() - UDP_LEN - BTH_LEN
        }
        Encap::RoceV2Ipv6 | Encap::RoceV1 => {
            // Traffic class and flow label: all but the version nibble of bytes 0-3; hop limit.
            if let Some(b) = prefix.first_mut() {
                *b |= 0x0F;
            }
            ones(prefix, 1..4);
            ones(prefix, 7..8);
            IPV6_LEN
        }
    };
    if encap != Encap::RoceV1 {
        // UDP checksum.
        ones(prefix, net + 6..net + 8);
    }
    // BTH resv8a: FECN, BECN, reserved.
    let bth = prefix.len() - BTH_LEN;
    ones(prefix, bth + 4..bth + 5);
}

/// The ICRC of `pkt`: from the first byte of the network header (IPv4, IPv6, GRH) through
/// the last pad byte, ICRC excluded.
pub fn compute(encap: Encap, pkt: &[u8]) -> Result<u32, IcrcError> {
    compute_with(&SoftCrc32, encap, pkt)
}

/// [`compute`] with `engine`.
pub fn compute_with<E: Crc32Engine>(
    engine: &E,
    encap: Encap,
    pkt: &[u8],
) -> Result<u32, IcrcError> {
    Icrc::with(engine, encap, pkt).map(|icrc| icrc.finish())
}

/// The ICRC of a RoCE v2 IPv4 packet (IPv4 header through the pad, ICRC excluded).
pub fn icrc_v2_ipv4(pkt: &[u8]) -> Result<u32, IcrcError> {
    compute(Encap::RoceV2Ipv4, pkt)
}

/// The ICRC of a RoCE v2 IPv6 packet (IPv6 header through the pad, ICRC excluded).
pub fn icrc_v2_ipv6(pkt: &[u8]) -> Result<u32, IcrcError> {
    compute(Encap::RoceV2Ipv6, pkt)
}

/// The ICRC of a RoCE v1 packet (GRH through the pad, ICRC excluded).
pub fn icrc_v1(pkt: &[u8]) -> Result<u32, IcrcError> {
    compute(Encap::RoceV1, pkt)
}

/// The four ICRC bytes as sent on the wire (least significant byte first).
pub const fn to_wire(icrc: u32) -> [u8; ICRC_LEN] {
    icrc.to_le_bytes()
}

/// The ICRC value of four bytes as found on the wire.
pub const fn from_wire(bytes: [u8; ICRC_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// Splits a packet that ends with its ICRC into the covered bytes and the ICRC.
fn split_icrc(pkt: &[u8]) -> Result<(&[u8], [u8; ICRC_LEN]), IcrcError> {
    let body_len = pkt.len().checked_sub(ICRC_LEN).ok_or(IcrcError::TooShort {
        needed: ICRC_LEN,
        len: pkt.len(),
    })?;
    let (body, tail) = pkt.split_at(body_len);
    let mut icrc = [0u8; ICRC_LEN];
    icrc.copy_from_slice(tail);
    Ok((body, icrc))
}

/// Checks the ICRC of `pkt`, which runs from the first byte of the network header through
/// the ICRC.
pub fn verify(encap: Encap, pkt: &[u8]) -> Result<(), IcrcError> {
    verify_with(&SoftCrc32, encap, pkt)
}

/// [`verify`] with `engine`.
pub fn verify_with<E: Crc32Engine>(engine: &E, encap: Encap, pkt: &[u8]) -> Result<(), IcrcError> {
    let (body, icrc) = split_icrc(pkt)?;
    let computed = compute_with(engine, encap, body)?;
    let wire = from_wire(icrc);
    if wire == computed {
        Ok(())
    } else {
        Err(IcrcError::Mismatch { wire, computed })
    }
}

/// Computes the ICRC of `pkt` (network header through the ICRC, whose four bytes are
/// overwritten) and writes it into the last four bytes; returns it.
pub fn fill(encap: Encap, pkt: &mut [u8]) -> Result<u32, IcrcError> {
    fill_with(&SoftCrc32, encap, pkt)
}

/// [`fill`] with `engine`.
pub fn fill_with<E: Crc32Engine>(
    engine: &E,
    encap: Encap,
    pkt: &mut [u8],
) -> Result<u32, IcrcError> {
    let (body, _) = split_icrc(pkt)?;
    let icrc = compute_with(engine, encap, body)?;
    let at = pkt.len() - ICRC_LEN;
    if let Some(tail) = pkt.get_mut(at..) {
        tail.copy_from_slice(&to_wire(icrc));
    }
    Ok(icrc)
}

/// [`fill_with`] for a packet held in two pieces: `net`, its network headers (IP and UDP, or
/// the GRH) exactly as they will be on the wire, and `iba`, the rest (BTH through the ICRC,
/// whose four bytes are overwritten). For packets whose network headers are written apart
/// from them, such as the segments of a segmentation offload. Returns the ICRC.
pub fn fill_split_with<E: Crc32Engine>(
    engine: &E,
    encap: Encap,
    net: &[u8],
    iba: &mut [u8],
) -> Result<u32, IcrcError> {
    let value = compute_split(engine, encap, net, iba)?;
    let at = iba.len() - ICRC_LEN;
    iba[at..].copy_from_slice(&to_wire(value));
    Ok(value)
}

/// [`verify_with`] for a packet held in two pieces, `net` and `iba`, as [`fill_split_with`]
/// takes them: for received packets whose network headers were rebuilt apart from them,
/// such as those of a run that arrived whole.
pub fn verify_split_with<E: Crc32Engine>(
    engine: &E,
    encap: Encap,
    net: &[u8],
    iba: &[u8],
) -> Result<(), IcrcError> {
    let computed = compute_split(engine, encap, net, iba)?;
    let (_, icrc) = split_icrc(iba)?;
    let wire = from_wire(icrc);
    if wire == computed {
        Ok(())
    } else {
        Err(IcrcError::Mismatch { wire, computed })
    }
}

/// The ICRC of the packet of [`fill_split_with`] (`iba`'s last four bytes, its ICRC, are
/// not covered).
fn compute_split<E: Crc32Engine>(
    engine: &E,
    encap: Encap,
    net: &[u8],
    iba: &[u8],
) -> Result<u32, IcrcError> {
    let headers_len = net.len() + BTH_LEN;
    let body_end = iba.len().checked_sub(ICRC_LEN).ok_or(IcrcError::TooShort {
        needed: BTH_LEN + ICRC_LEN,
        len: iba.len(),
    })?;
    // The network headers and the BTH, contiguous, for `Icrc::with` to mask.
    let mut buf = [0u8; MAX_MASKED];
    let (Some(headers), Some(bth), Some(body)) = (
        buf.get_mut(..headers_len),
        iba.get(..BTH_LEN),
        iba.get(BTH_LEN..body_end),
    ) else {
        return Err(IcrcError::TooShort {
            needed: headers_len + ICRC_LEN,
            len: net.len() + iba.len(),
        });
    };
    headers[..net.len()].copy_from_slice(net);
    headers[net.len()..].copy_from_slice(bth);
    let mut icrc = Icrc::with(engine, encap, headers)?;
    icrc.update(body);
    Ok(icrc.finish())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// A RoCE v2 IPv4 RC SEND Only (5 bytes + 3 pad), ICRC included, with non-zero values in
    /// the masked fields.
    fn sample_v4() -> Vec<u8> {
        let mut p = Vec::new();
        // IPv4: ver/ihl, tos, total length, id, flags/frag, ttl, proto, checksum, addresses.
        p.extend_from_slice(&[0x45, 0x62, 0, 52, 0x12, 0x34, 0x40, 0, 17, 17, 0xAB, 0xCD]);
        p.extend_from_slice(&[10, 78, 0, 1, 10, 78, 0, 2]);
        // UDP: ports, length, checksum.
        p.extend_from_slice(&[0xC1, 0x21, 0x12, 0xB7, 0, 32, 0x55, 0x66]);
        // BTH: SEND Only, pad 3, P_Key, resv8a, QP 0x11, PSN 5.
        p.extend_from_slice(&[0x04, 0x30, 0xFF, 0xFF, 0, 0, 0, 0x11, 0x80, 0, 0, 5]);
        p.extend_from_slice(b"hello\0\0\0");
        p.extend_from_slice(&[0; 4]);
        fill(Encap::RoceV2Ipv4, &mut p).unwrap();
        p
    }

    /// The same with an IPv6 header in front.
    fn sample_v6() -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&[0x60, 0x01, 0x23, 0x45, 0, 32, 17, 64]);
        p.extend_from_slice(&[0xFD; 32]);
        p.extend_from_slice(&[0xC1, 0x21, 0x12, 0xB7, 0, 32, 0x55, 0x66]);
        p.extend_from_slice(&[0x04, 0x30, 0xFF, 0xFF, 0, 0, 0, 0x11, 0x80, 0, 0, 5]);
        p.extend_from_slice(b"hello\0\0\0");
        p.extend_from_slice(&[0; 4]);
        fill(Encap::RoceV2Ipv6, &mut p).unwrap();
        p
    }

    /// A RoCE v1 packet: GRH (next header 0x1B) + the same BTH and payload.
    fn sample_v1() -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&[0x60, 0x01, 0x23, 0x45, 0, 24, 0x1B, 64]);
        p.extend_from_slice(&[0xFE; 32]);
        p.extend_from_slice(&[0x04, 0x30, 0xFF, 0xFF, 0, 0, 0, 0x11, 0x80, 0, 0, 5]);
        p.extend_from_slice(b"hello\0\0\0");
        p.extend_from_slice(&[0; 4]);
        fill(Encap::RoceV1, &mut p).unwrap();
        p
    }

    /// Byte offsets of the masked bits, per encapsulation, with the mask of each byte.
    fn masked_bits(encap: Encap, pkt: &[u8]) -> Vec<(usize, u8)> {
        let mut v = Vec::new();
        let net = network_header_len(encap, pkt).unwrap();
        match encap {
            Encap::RoceV2Ipv4 => {
                v.extend([(1, 0xFF), (8, 0xFF), (10, 0xFF), (11, 0xFF)]);
            }
            _ => {
                v.extend([(0, 0x0F), (1, 0xFF), (2, 0xFF), (3, 0xFF), (7, 0xFF)]);
            }
        }
        let bth = bth_offset(encap, pkt).unwrap();
        if encap != Encap::RoceV1 {
            v.extend([(net + 6, 0xFF), (net + 7, 0xFF)]);
        }
        v.push((bth + 4, 0xFF));
        v
    }

    fn samples() -> [(Encap, Vec<u8>); 3] {
        [
            (Encap::RoceV2Ipv4, sample_v4()),
            (Encap::RoceV2Ipv6, sample_v6()),
            (Encap::RoceV1, sample_v1()),
        ]
    }

    #[test]
    fn known_value() {
        // Independent construction: CRC-32 of 8 x 0xFF and the masked bytes.
        let p = sample_v4();
        let mut m = p[..p.len() - 4].to_vec();
        for (at, mask) in masked_bits(Encap::RoceV2Ipv4, &p) {
            m[at] |= mask;
        }
        let mut all = Vec::from([0xFFu8; 8]);
        all.extend_from_slice(&m);
        let crc = super::super::crc32::crc32(&all);
        assert_eq!(icrc_v2_ipv4(&p[..p.len() - 4]), Ok(crc));
        assert_eq!(&p[p.len() - 4..], &crc.to_le_bytes());
        assert_eq!(verify(Encap::RoceV2Ipv4, &p), Ok(()));
    }

    #[test]
    fn v1_and_v2_differ() {
        // The same BTH and payload behind a GRH (v1) and an IPv6 + UDP header (v2).
        let v1 = sample_v1();
        let v6 = sample_v6();
        assert_eq!(verify(Encap::RoceV1, &v1), Ok(()));
        assert_eq!(verify(Encap::RoceV2Ipv6, &v6), Ok(()));
        assert_ne!(v1[v1.len() - 4..], v6[v6.len() - 4..]);
        // Hashing v1 bytes as v2 IPv6 masks different bytes (the "UDP checksum").
        assert!(verify(Encap::RoceV2Ipv6, &v1).is_err());
    }

    #[test]
    fn errors() {
        assert_eq!(
            icrc_v2_ipv4(&[]),
            Err(IcrcError::TooShort { needed: 20, len: 0 })
        );
        assert_eq!(icrc_v2_ipv4(&[0x65; 60]), Err(IcrcError::BadVersion(6)));
        assert_eq!(icrc_v2_ipv4(&[0x44; 60]), Err(IcrcError::BadIhl(4)));
        assert_eq!(icrc_v2_ipv6(&[0x45; 60]), Err(IcrcError::BadVersion(4)));
        assert_eq!(
            icrc_v2_ipv6(&[0x60; 59]),
            Err(IcrcError::TooShort {
                needed: 60,
                len: 59
            })
        );
        assert_eq!(
            icrc_v1(&[0x60; 51]),
            Err(IcrcError::TooShort {
                needed: 52,
                len: 51
            })
        );
        // IPv4 with the largest header: 60 + 8 + 12 bytes are masked.
        let mut big = [0u8; 80];
        big[0] = 0x4F;
        assert!(icrc_v2_ipv4(&big).is_ok());
        assert!(icrc_v2_ipv4(&big[..79]).is_err());
        assert_eq!(
            verify(Encap::RoceV2Ipv4, &[1, 2, 3]),
            Err(IcrcError::TooShort { needed: 4, len: 3 })
        );
        let mut p = sample_v4();
        let n = p.len();
        p[n - 1] ^= 1;
        assert!(matches!(
            verify(Encap::RoceV2Ipv4, &p),
            Err(IcrcError::Mismatch { .. })
        ));
        assert_eq!(
            fill(Encap::RoceV1, &mut [0u8; 2]),
            Err(IcrcError::TooShort { needed: 4, len: 2 })
        );
    }

    #[test]
    fn every_byte_and_bit() {
        for (encap, p) in samples() {
            let body = &p[..p.len() - 4];
            let base = compute(encap, body).unwrap();
            let masked = masked_bits(encap, &p);
            for at in 0..body.len() {
                let mask = masked
                    .iter()
                    .find(|&&(a, _)| a == at)
                    .map_or(0, |&(_, m)| m);
                for bit in 0..8 {
                    let mut m = body.to_vec();
                    m[at] ^= 1 << bit;
                    let r = compute(encap, &m);
                    if mask & (1 << bit) != 0 {
                        assert_eq!(r, Ok(base), "{encap:?} byte {at} bit {bit} is masked");
                    } else {
                        assert_ne!(r, Ok(base), "{encap:?} byte {at} bit {bit} is covered");
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn masked_fields_do_not_matter(values in proptest::collection::vec(any::<u8>(), 16)) {
            for (encap, p) in samples() {
                let base = verify(encap, &p);
                prop_assert_eq!(base, Ok(()));
                let mut m = p.clone();
                for (i, (at, mask)) in masked_bits(encap, &p).into_iter().enumerate() {
                    m[at] = (m[at] & !mask) | (values[i] & mask);
                }
                prop_assert_eq!(verify(encap, &m), Ok(()));
            }
        }

        #[test]
        fn covered_bytes_matter(at in any::<usize>(), x in 1u8..) {
            for (encap, p) in samples() {
                let body_len = p.len() - 4;
                let at = at % body_len;
                let masked = masked_bits(encap, &p);
                let mask = masked.iter().find(|&&(a, _)| a == at).map_or(0, |&(_, m)| m);
                let mut m = p.clone();
                m[at] ^= x;
                let changed_covered = x & !mask != 0;
                prop_assert_eq!(verify(encap, &m).is_ok(), !changed_covered);
            }
        }

        #[test]
        fn streaming_matches_one_shot(payload in proptest::collection::vec(any::<u8>(), 0..300), cut in any::<usize>()) {
            let mut p = sample_v4()[..40].to_vec();
            p.extend_from_slice(&payload);
            let one = icrc_v2_ipv4(&p).unwrap();
            let cut = 40 + cut % (payload.len() + 1);
            let mut s = Icrc::new(Encap::RoceV2Ipv4, &p[..cut]).unwrap();
            s.update(&p[cut..]);
            prop_assert_eq!(s.finish(), one);
        }

        #[test]
        fn split_matches_whole(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            for (encap, p) in samples() {
                let net_len = network_header_len(encap, &p).unwrap()
                    + if encap == Encap::RoceV1 { 0 } else { 8 };
                let mut whole = p[..net_len + 12].to_vec();
                whole.extend_from_slice(&payload);
                whole.extend_from_slice(&[0; 4]);
                let mut iba = whole[net_len..].to_vec();
                let expected = fill(encap, &mut whole).unwrap();
                let split = fill_split_with(&SoftCrc32, encap, &whole[..net_len], &mut iba);
                prop_assert_eq!(split, Ok(expected));
                prop_assert_eq!(&iba[..], &whole[net_len..]);
                // Verified in two pieces as whole, and refused with one bit changed.
                prop_assert_eq!(verify(encap, &whole), Ok(()));
                prop_assert_eq!(verify_split_with(&SoftCrc32, encap, &whole[..net_len], &iba), Ok(()));
                let last = iba.len() - 5;
                iba[last] ^= 1;
                prop_assert!(verify_split_with(&SoftCrc32, encap, &whole[..net_len], &iba).is_err());
            }
        }

        #[test]
        fn split_never_panics(net in proptest::collection::vec(any::<u8>(), 0..120),
                              iba in proptest::collection::vec(any::<u8>(), 0..40)) {
            for encap in [Encap::RoceV1, Encap::RoceV2Ipv4, Encap::RoceV2Ipv6] {
                let mut b = iba.clone();
                let _ = fill_split_with(&SoftCrc32, encap, &net, &mut b);
                let _ = verify_split_with(&SoftCrc32, encap, &net, &iba);
            }
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            for encap in [Encap::RoceV1, Encap::RoceV2Ipv4, Encap::RoceV2Ipv6] {
                let _ = compute(encap, &bytes);
                let _ = verify(encap, &bytes);
                let mut b = bytes.clone();
                let _ = fill(encap, &mut b);
            }
        }
    }
}
