// SPDX-License-Identifier: GPL-2.0

//! Parsing and building IBA transport packets: BTH, extension headers, payload, pad, ICRC.
//!
//! An IBA transport packet, as RoCE carries it (in a UDP datagram to port 4791 for RoCE v2,
//! after the GRH for RoCE v1), is
//!
//! ```text
//! BTH (12) | extension headers (by opcode) | payload | pad (0..=3, BTH PadCnt) | ICRC (4)
//! ```
//!
//! [`parse`] takes exactly those bytes (from the first byte of the BTH through the ICRC) and
//! returns a [`Packet`]: the typed opcode, the headers ([`Headers`]: the BTH and one `Option`
//! per extension header), and where the payload is. It validates everything that can be
//! checked without connection state and returns a [`ParseError`] otherwise; it never panics,
//! whatever the input. [`parse_without_icrc`] does the same for a packet whose ICRC has already
//! been stripped. The ICRC itself is checked by the `icrc` module, which needs the IP (or GRH)
//! header as well.
//!
//! [`write_headers`] and [`build`] go the other way, into a caller-provided buffer.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

use core::fmt;
use core::ops::Range;

use super::headers::{Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Feth, Ieth, ImmDt, Reth, Syndrome};
use super::opcode::{ExtHeaders, Opcode, PayloadRule, Position};

/// Length of the invariant CRC that ends every IBA transport packet.
pub const ICRC_LEN: usize = 4;

/// The headers of a packet: the BTH and the extension headers its opcode calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headers {
    /// Base transport header.
    pub bth: Bth,
    /// Datagram ETH (UD).
    pub deth: Option<Deth>,
    /// Flush ETH (FLUSH).
    pub feth: Option<Feth>,
    /// RDMA ETH (first/only RDMA WRITE, RDMA READ request, FLUSH, ATOMIC WRITE).
    pub reth: Option<Reth>,
    /// Atomic ETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<AtomicEth>,
    /// ACK ETH (acknowledgements, read responses but the middle ones).
    pub aeth: Option<Aeth>,
    /// Atomic acknowledge ETH.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// Immediate data.
    pub imm_dt: Option<ImmDt>,
    /// Invalidate ETH.
    pub ieth: Option<Ieth>,
}

impl Headers {
    /// Headers with `bth` and no extension header.
    pub const fn new(bth: Bth) -> Self {
        Headers {
            bth,
            deth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm_dt: None,
            ieth: None,
        }
    }

    /// The set of extension headers present.
    pub const fn present(&self) -> ExtHeaders {
        let mut set = ExtHeaders::NONE;
        if self.deth.is_some() {
            set = set.with(ExtHeaders::DETH);
        }
        if self.feth.is_some() {
            set = set.with(ExtHeaders::FETH);
        }
        if self.reth.is_some() {
            set = set.with(ExtHeaders::RETH);
        }
        if self.atomic_eth.is_some() {
            set = set.with(ExtHeaders::ATOMIC_ETH);
        }
        if self.aeth.is_some() {
            set = set.with(ExtHeaders::AETH);
        }
        if self.atomic_ack_eth.is_some() {
            set = set.with(ExtHeaders::ATOMIC_ACK_ETH);
        }
        if self.imm_dt.is_some() {
            set = set.with(ExtHeaders::IMM_DT);
        }
        if self.ieth.is_some() {
            set = set.with(ExtHeaders::IETH);
        }
        set
    }

    /// Length of the BTH plus the extension headers present.
    pub const fn encoded_len(&self) -> usize {
        Bth::LEN + self.present().len()
    }

    /// Whether every field fits its wire width.
    pub const fn fits(&self) -> bool {
        self.bth.fits()
            && match self.deth {
                Some(d) => d.fits(),
                None => true,
            }
            && match self.feth {
                Some(f) => f.fits(),
                None => true,
            }
            && match self.aeth {
                Some(a) => a.fits(),
                None => true,
            }
    }
}

/// A parsed IBA transport packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet {
    /// The opcode (also in `headers.bth.opcode`, as a byte).
    pub opcode: Opcode,
    /// The headers.
    pub headers: Headers,
    /// Length of the BTH and the extension headers: the offset of the payload.
    pub header_len: usize,
    /// Length of the payload, without the pad bytes.
    pub payload_len: usize,
    /// Number of pad bytes after the payload (the BTH pad count).
    pub pad: u8,
}

impl Packet {
    /// Where the payload is in the parsed bytes.
    pub const fn payload_range(&self) -> Range<usize> {
        self.header_len..self.header_len + self.payload_len
    }

    /// The payload, given the bytes that were parsed (empty if `bytes` is too short).
    pub fn payload<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        bytes.get(self.payload_range()).unwrap_or(&[])
    }

    /// Length of the packet without its ICRC: headers, payload and pad; the offset of the
    /// ICRC.
    pub const fn len_without_icrc(&self) -> usize {
        self.header_len + self.payload_len + self.pad as usize
    }

    /// The AETH syndrome, decoded, if the packet has an AETH.
    pub const fn syndrome(&self) -> Option<Syndrome> {
        match self.headers.aeth {
            Some(a) => a.syndrome(),
            None => None,
        }
    }
}

/// Why bytes are not a valid IBA transport packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than a BTH (and the ICRC, if expected).
    TooShort {
        /// The length given.
        len: usize,
    },
    /// The BTH transport header version is not 0.
    UnsupportedTver(u8),
    /// The opcode is reserved, or of an unsupported transport (RD, XRC, vendor).
    UnknownOpcode(u8),
    /// Too short for the headers the opcode calls for (and the ICRC, if expected).
    Truncated {
        /// The opcode.
        opcode: Opcode,
        /// The length the headers (and ICRC) need.
        needed: usize,
        /// The length given.
        len: usize,
    },
    /// The bytes between the headers and the ICRC do not fit the opcode's payload rule: a
    /// payload where none is allowed, or not the fixed length.
    PayloadLength {
        /// The opcode.
        opcode: Opcode,
        /// Number of bytes between the headers and the ICRC.
        len: usize,
    },
    /// Payload plus pad is not a multiple of 4 bytes.
    Misaligned {
        /// Number of bytes between the headers and the ICRC.
        len: usize,
    },
    /// The pad count is larger than the payload area, or not 0 where it must be (packets
    /// without payload or with a fixed one; FIRST and MIDDLE packets).
    BadPad {
        /// The BTH pad count.
        pad: u8,
        /// Number of bytes between the headers and the ICRC.
        len: usize,
    },
    /// A FIRST, MIDDLE or LAST packet without payload.
    EmptyPayload(Opcode),
    /// The AETH syndrome is a reserved encoding.
    ReservedSyndrome(u8),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ParseError::TooShort { len } => write!(f, "{len} bytes: shorter than a BTH"),
            ParseError::UnsupportedTver(v) => write!(f, "BTH TVer {v} is not 0"),
            ParseError::UnknownOpcode(op) => write!(f, "unknown or unsupported opcode {op:#04x}"),
            ParseError::Truncated {
                opcode,
                needed,
                len,
            } => write!(f, "{opcode:?} needs {needed} bytes, got {len}"),
            ParseError::PayloadLength { opcode, len } => {
                write!(f, "{opcode:?} cannot carry {len} payload bytes")
            }
            ParseError::Misaligned { len } => {
                write!(f, "payload and pad of {len} bytes: not a multiple of 4")
            }
            ParseError::BadPad { pad, len } => {
                write!(
                    f,
                    "pad count {pad} invalid with {len} payload and pad bytes"
                )
            }
            ParseError::EmptyPayload(opcode) => write!(f, "{opcode:?} without payload"),
            ParseError::ReservedSyndrome(s) => write!(f, "reserved AETH syndrome {s:#04x}"),
        }
    }
}

/// The next `N` bytes of `b` at `*at`, advancing `*at`.
fn take<'a, const N: usize>(b: &'a [u8], at: &mut usize) -> Option<&'a [u8; N]> {
    let s = b.get(*at..)?.get(..N)?;
    *at += N;
    s.try_into().ok()
}

/// Parses an IBA transport packet that ends with its ICRC (as in a RoCE v2 UDP payload); the
/// ICRC is not checked.
pub fn parse(bytes: &[u8]) -> Result<Packet, ParseError> {
    parse_with_trailer(bytes, ICRC_LEN)
}

/// Parses an IBA transport packet without ICRC: BTH through the last pad byte.
pub fn parse_without_icrc(bytes: &[u8]) -> Result<Packet, ParseError> {
    parse_with_trailer(bytes, 0)
}

fn parse_with_trailer(bytes: &[u8], trailer: usize) -> Result<Packet, ParseError> {
    let len = bytes.len();
    let body = match len.checked_sub(trailer) {
        Some(n) => bytes.get(..n).unwrap_or(&[]),
        None => return Err(ParseError::TooShort { len }),
    };
    let mut at = 0;
    let bth = match take::<{ Bth::LEN }>(body, &mut at) {
        Some(b) => Bth::decode(b),
        None => return Err(ParseError::TooShort { len }),
    };
    if bth.tver != 0 {
        return Err(ParseError::UnsupportedTver(bth.tver));
    }
    let opcode = Opcode::from_u8(bth.opcode).ok_or(ParseError::UnknownOpcode(bth.opcode))?;
    let info = opcode.info();
    let header_len = opcode.header_len();
    let truncated = ParseError::Truncated {
        opcode,
        needed: header_len + trailer,
        len,
    };
    if body.len() < header_len {
        return Err(truncated);
    }

    let mut h = Headers::new(bth);
    let want = info.headers;
    // In wire order (ExtHeaders::ORDER).
    if want.contains(ExtHeaders::DETH) {
        h.deth = Some(Deth::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::FETH) {
        h.feth = Some(Feth::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::RETH) {
        h.reth = Some(Reth::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::ATOMIC_ETH) {
        h.atomic_eth = Some(AtomicEth::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::AETH) {
        let aeth = Aeth::decode(take(body, &mut at).ok_or(truncated)?);
        if aeth.syndrome().is_none() {
            return Err(ParseError::ReservedSyndrome(aeth.syndrome));
        }
        h.aeth = Some(aeth);
    }
    if want.contains(ExtHeaders::ATOMIC_ACK_ETH) {
        h.atomic_ack_eth = Some(AtomicAckEth::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::IMM_DT) {
        h.imm_dt = Some(ImmDt::decode(take(body, &mut at).ok_or(truncated)?));
    }
    if want.contains(ExtHeaders::IETH) {
        h.ieth = Some(Ieth::decode(take(body, &mut at).ok_or(truncated)?));
    }

    // Payload and pad: everything between the headers and the ICRC.
    let area = body.len() - header_len;
    let pad = bth.pad_count;
    let bad_pad = ParseError::BadPad { pad, len: area };
    let payload_len = match info.payload {
        PayloadRule::None | PayloadRule::Fixed(_) => {
            let fixed = match info.payload {
                PayloadRule::Fixed(n) => n as usize,
                _ => 0,
            };
            if area != fixed {
                return Err(ParseError::PayloadLength { opcode, len: area });
            }
            if pad != 0 {
                return Err(bad_pad);
            }
            area
        }
        PayloadRule::Data => {
            if area & 3 != 0 {
                return Err(ParseError::Misaligned { len: area });
            }
            if pad as usize > area {
                return Err(bad_pad);
            }
            let payload_len = area - pad as usize;
            match info.position {
                Position::First | Position::Middle if pad != 0 => return Err(bad_pad),
                Position::First | Position::Middle | Position::Last if payload_len == 0 => {
                    return Err(ParseError::EmptyPayload(opcode))
                }
                _ => {}
            }
            payload_len
        }
    };
    Ok(Packet {
        opcode,
        headers: h,
        header_len,
        payload_len,
        pad,
    })
}

/// Why headers cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildError {
    /// `bth.opcode` is reserved or of an unsupported transport.
    UnknownOpcode(u8),
    /// `bth.tver` is not 0.
    UnsupportedTver(u8),
    /// The extension headers present are not the ones the opcode calls for.
    HeaderMismatch {
        /// The headers the opcode calls for.
        expected: ExtHeaders,
        /// The headers present.
        present: ExtHeaders,
    },
    /// The payload length breaks the opcode's rule: a payload where none is allowed, not the
    /// fixed length, empty for a FIRST/MIDDLE/LAST packet, or not a multiple of 4 for a
    /// FIRST/MIDDLE packet.
    PayloadLength {
        /// The opcode.
        opcode: Opcode,
        /// The payload length.
        len: usize,
    },
    /// A field does not fit its wire width (a QP number or MSN above 24 bits, ...).
    FieldRange,
    /// The AETH syndrome is a reserved encoding.
    ReservedSyndrome(u8),
    /// The buffer is too small.
    BufferTooSmall {
        /// The length needed.
        needed: usize,
        /// The buffer's length.
        len: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BuildError::UnknownOpcode(op) => write!(f, "unknown or unsupported opcode {op:#04x}"),
            BuildError::UnsupportedTver(v) => write!(f, "BTH TVer {v} is not 0"),
            BuildError::HeaderMismatch { expected, present } => write!(
                f,
                "extension headers {:#04x} present, opcode needs {:#04x}",
                present.bits(),
                expected.bits()
            ),
            BuildError::PayloadLength { opcode, len } => {
                write!(f, "{opcode:?} cannot carry {len} payload bytes")
            }
            BuildError::FieldRange => write!(f, "a header field exceeds its wire width"),
            BuildError::ReservedSyndrome(s) => write!(f, "reserved AETH syndrome {s:#04x}"),
            BuildError::BufferTooSmall { needed, len } => {
                write!(f, "buffer of {len} bytes, {needed} needed")
            }
        }
    }
}

/// The pad count for a payload of `payload_len` bytes: 0..=3 bytes up to a multiple of 4.
pub const fn pad_for(payload_len: usize) -> u8 {
    (payload_len.wrapping_neg() & 3) as u8
}

/// Checks `headers` and `payload_len` against the opcode's rules; returns the opcode.
fn check(headers: &Headers, payload_len: usize) -> Result<Opcode, BuildError> {
    let bth = &headers.bth;
    let opcode = Opcode::from_u8(bth.opcode).ok_or(BuildError::UnknownOpcode(bth.opcode))?;
    if bth.tver != 0 {
        return Err(BuildError::UnsupportedTver(bth.tver));
    }
    let info = opcode.info();
    let present = headers.present();
    if present != info.headers {
        return Err(BuildError::HeaderMismatch {
            expected: info.headers,
            present,
        });
    }
    if !headers.fits() {
        return Err(BuildError::FieldRange);
    }
    if let Some(a) = headers.aeth {
        if a.syndrome().is_none() {
            return Err(BuildError::ReservedSyndrome(a.syndrome));
        }
    }
    let ok = match info.payload {
        PayloadRule::None => payload_len == 0,
        PayloadRule::Fixed(n) => payload_len == n as usize,
        PayloadRule::Data => match info.position {
            Position::First | Position::Middle => payload_len > 0 && payload_len & 3 == 0,
            Position::Last => payload_len > 0,
            Position::Only => true,
        },
    };
    if !ok {
        return Err(BuildError::PayloadLength {
            opcode,
            len: payload_len,
        });
    }
    Ok(opcode)
}

/// Writes `src` into `buf` at `*at`, advancing `*at`.
fn put(buf: &mut [u8], at: &mut usize, src: &[u8]) {
    if let Some(dst) = buf.get_mut(*at..).and_then(|b| b.get_mut(..src.len())) {
        dst.copy_from_slice(src);
    }
    *at += src.len();
}

/// Writes the BTH and extension headers of a packet with a `payload_len`-byte payload into
/// the start of `buf`; returns their length (the offset of the payload).
///
/// The BTH pad count is computed from `payload_len` (`headers.bth.pad_count` is ignored);
/// every other field is written as given. The headers present must be exactly the ones the
/// opcode calls for, the payload length must follow the opcode's rule (see [`BuildError`]),
/// `bth.tver` must be 0, and every field must fit its wire width.
pub fn write_headers(
    headers: &Headers,
    payload_len: usize,
    buf: &mut [u8],
) -> Result<usize, BuildError> {
    check(headers, payload_len)?;
    let len = headers.encoded_len();
    if buf.len() < len {
        return Err(BuildError::BufferTooSmall {
            needed: len,
            len: buf.len(),
        });
    }
    let bth = Bth {
        pad_count: pad_for(payload_len),
        ..headers.bth
    };
    let mut at = 0;
    put(buf, &mut at, &bth.encode());
    if let Some(x) = headers.deth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.feth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.reth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.atomic_eth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.aeth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.atomic_ack_eth {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.imm_dt {
        put(buf, &mut at, &x.encode());
    }
    if let Some(x) = headers.ieth {
        put(buf, &mut at, &x.encode());
    }
    Ok(at)
}

/// Length of a packet with these headers and a `payload_len`-byte payload, pad included and
/// ICRC excluded; `None` on overflow.
pub const fn packet_len(headers: &Headers, payload_len: usize) -> Option<usize> {
    match headers.encoded_len().checked_add(payload_len) {
        Some(n) => n.checked_add(pad_for(payload_len) as usize),
        None => None,
    }
}

/// Writes a whole packet but its ICRC into the start of `buf`: the headers (as
/// [`write_headers`]), `payload` and zeroed pad bytes. Returns the length written, which is
/// where the ICRC goes (`icrc::fill` computes it once the IP header is in front).
pub fn build(headers: &Headers, payload: &[u8], buf: &mut [u8]) -> Result<usize, BuildError> {
    let opcode = check(headers, payload.len())?;
    let total = packet_len(headers, payload.len()).ok_or(BuildError::PayloadLength {
        opcode,
        len: payload.len(),
    })?;
    if buf.len() < total {
        return Err(BuildError::BufferTooSmall {
            needed: total,
            len: buf.len(),
        });
    }
    let mut at = write_headers(headers, payload.len(), buf)?;
    put(buf, &mut at, payload);
    let pad = [0u8; 3];
    put(buf, &mut at, &pad[..pad_for(payload.len()) as usize]);
    Ok(at)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::super::headers::NakCode;
    use super::super::psn::Psn;
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn bth(op: Opcode) -> Bth {
        Bth {
            opcode: op.value(),
            pkey: 0xFFFF,
            dest_qp: 0x11,
            psn: Psn::new(5),
            ..Bth::default()
        }
    }

    /// Headers for `op` with every extension header it needs, filled with fixed values.
    fn headers_for(op: Opcode) -> Headers {
        let want = op.headers();
        let mut h = Headers::new(bth(op));
        if want.contains(ExtHeaders::DETH) {
            h.deth = Some(Deth {
                qkey: 0x1111_1111,
                src_qp: 2,
            });
        }
        if want.contains(ExtHeaders::FETH) {
            h.feth = Some(Feth {
                selectivity: 1,
                placement: 1,
            });
        }
        if want.contains(ExtHeaders::RETH) {
            h.reth = Some(Reth {
                va: 0x1000,
                rkey: 0x42,
                dma_len: 8,
            });
        }
        if want.contains(ExtHeaders::ATOMIC_ETH) {
            h.atomic_eth = Some(AtomicEth {
                va: 0x2000,
                rkey: 0x43,
                swap_add: 1,
                compare: 2,
            });
        }
        if want.contains(ExtHeaders::AETH) {
            h.aeth = Some(Aeth::new(Syndrome::Ack { credit_code: 31 }, 1));
        }
        if want.contains(ExtHeaders::ATOMIC_ACK_ETH) {
            h.atomic_ack_eth = Some(AtomicAckEth { orig: 9 });
        }
        if want.contains(ExtHeaders::IMM_DT) {
            h.imm_dt = Some(ImmDt { data: 0xABCD });
        }
        if want.contains(ExtHeaders::IETH) {
            h.ieth = Some(Ieth { rkey: 0x44 });
        }
        h
    }

    /// A payload length valid for `op`, from `seed`.
    fn valid_len(op: Opcode, seed: usize) -> usize {
        let info = op.info();
        match info.payload {
            PayloadRule::None => 0,
            PayloadRule::Fixed(n) => n as usize,
            PayloadRule::Data => match info.position {
                Position::First | Position::Middle => 4 * (1 + seed % 1024),
                Position::Last => 1 + seed % 4096,
                Position::Only => seed % 4097,
            },
        }
    }

    fn built(h: &Headers, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 4200];
        let n = build(h, payload, &mut buf).unwrap();
        buf.truncate(n);
        buf.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        buf
    }

    #[test]
    fn every_opcode_round_trips() {
        for &op in Opcode::ALL {
            for seed in [0usize, 1, 2, 3, 33, 1023] {
                let len = valid_len(op, seed);
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let h = headers_for(op);
                let bytes = built(&h, &payload);
                let p = parse(&bytes).unwrap_or_else(|e| panic!("{op:?} {len}: {e}"));
                assert_eq!(p.opcode, op);
                assert_eq!(p.header_len, op.header_len());
                assert_eq!(p.payload_len, len);
                assert_eq!(p.pad, pad_for(len));
                assert_eq!(p.payload(&bytes), &payload[..]);
                assert_eq!(p.len_without_icrc() + ICRC_LEN, bytes.len());
                let mut expect = h;
                expect.bth.pad_count = pad_for(len);
                assert_eq!(p.headers, expect);
                let no_icrc = &bytes[..bytes.len() - ICRC_LEN];
                assert_eq!(parse_without_icrc(no_icrc), Ok(p));
            }
        }
    }

    #[test]
    fn send_only_with_odd_length() {
        let h = headers_for(Opcode::RcSendOnly);
        let bytes = built(&h, b"hello");
        assert_eq!(bytes.len(), 12 + 8 + 4);
        assert_eq!(bytes[1] >> 4 & 3, 3);
        assert_eq!(&bytes[12..20], b"hello\0\0\0");
        let p = parse(&bytes).unwrap();
        assert_eq!(p.payload_range(), 12..17);
        assert_eq!(p.syndrome(), None);
    }

    #[test]
    fn rejects() {
        let ok = built(&headers_for(Opcode::RcSendOnly), b"abcde");
        assert_eq!(parse(&ok[..3]), Err(ParseError::TooShort { len: 3 }));
        assert_eq!(parse(&ok[..12]), Err(ParseError::TooShort { len: 12 }));
        let mut t = ok.clone();
        t[1] |= 1;
        assert_eq!(parse(&t), Err(ParseError::UnsupportedTver(1)));
        for op in [0x15u8, 0x40, 0x66, 0xA0, 0xFF] {
            let mut t = ok.clone();
            t[0] = op;
            assert_eq!(parse(&t), Err(ParseError::UnknownOpcode(op)));
        }
        // Pad count larger than the payload area.
        let mut t = built(&headers_for(Opcode::RcSendOnly), b"");
        t[1] |= 0x30;
        assert_eq!(parse(&t), Err(ParseError::BadPad { pad: 3, len: 0 }));
        // Misaligned payload area.
        let mut t = ok.clone();
        t.insert(14, 0);
        assert_eq!(parse(&t), Err(ParseError::Misaligned { len: 9 }));
        // Payload on an ACK; ACK truncated.
        let ack = built(&headers_for(Opcode::RcAcknowledge), b"");
        assert_eq!(parse(&ack).unwrap().payload_len, 0);
        let mut t = ack.clone();
        t.extend_from_slice(&[0; 4]);
        assert_eq!(
            parse(&t),
            Err(ParseError::PayloadLength {
                opcode: Opcode::RcAcknowledge,
                len: 4
            })
        );
        assert_eq!(
            parse(&ack[..ack.len() - 1]),
            Err(ParseError::Truncated {
                opcode: Opcode::RcAcknowledge,
                needed: 20,
                len: 19
            })
        );
        // Pad on a packet without payload.
        let mut t = ack.clone();
        t[1] |= 0x10;
        assert_eq!(parse(&t), Err(ParseError::BadPad { pad: 1, len: 0 }));
        // Reserved syndrome.
        let mut t = ack.clone();
        t[12] = 0x41;
        assert_eq!(parse(&t), Err(ParseError::ReservedSyndrome(0x41)));
        // FIRST with pad, LAST without payload.
        let mut first = built(&headers_for(Opcode::RcSendFirst), &[0; 256]);
        first[1] |= 0x10;
        assert_eq!(parse(&first), Err(ParseError::BadPad { pad: 1, len: 256 }));
        let mut last = built(&headers_for(Opcode::RcSendLast), &[1]);
        last[1] = 0;
        last.drain(12..16);
        assert_eq!(
            parse(&last),
            Err(ParseError::EmptyPayload(Opcode::RcSendLast))
        );
        // ATOMIC WRITE carries exactly 8 bytes.
        let mut aw = built(&headers_for(Opcode::RcAtomicWrite), &[7; 8]);
        aw.drain(28..32);
        assert_eq!(
            parse(&aw),
            Err(ParseError::PayloadLength {
                opcode: Opcode::RcAtomicWrite,
                len: 4
            })
        );
    }

    #[test]
    fn build_rejects() {
        let mut buf = [0u8; 128];
        let mut h = headers_for(Opcode::RcRdmaWriteOnly);
        h.reth = None;
        assert_eq!(
            write_headers(&h, 0, &mut buf),
            Err(BuildError::HeaderMismatch {
                expected: ExtHeaders::RETH,
                present: ExtHeaders::NONE
            })
        );
        let mut h = headers_for(Opcode::RcSendOnly);
        h.imm_dt = Some(ImmDt { data: 1 });
        assert!(matches!(
            write_headers(&h, 0, &mut buf),
            Err(BuildError::HeaderMismatch { .. })
        ));
        let mut h = headers_for(Opcode::RcSendOnly);
        h.bth.opcode = 0x15;
        assert_eq!(
            write_headers(&h, 0, &mut buf),
            Err(BuildError::UnknownOpcode(0x15))
        );
        let mut h = headers_for(Opcode::RcSendOnly);
        h.bth.tver = 1;
        assert_eq!(
            write_headers(&h, 0, &mut buf),
            Err(BuildError::UnsupportedTver(1))
        );
        let mut h = headers_for(Opcode::RcSendOnly);
        h.bth.dest_qp = 1 << 24;
        assert_eq!(write_headers(&h, 0, &mut buf), Err(BuildError::FieldRange));
        let mut h = headers_for(Opcode::RcAcknowledge);
        h.aeth = Some(Aeth {
            syndrome: 0x7F,
            msn: 0,
        });
        assert_eq!(
            write_headers(&h, 0, &mut buf),
            Err(BuildError::ReservedSyndrome(0x7F))
        );
        let h = headers_for(Opcode::RcAcknowledge);
        assert_eq!(
            write_headers(&h, 4, &mut buf),
            Err(BuildError::PayloadLength {
                opcode: Opcode::RcAcknowledge,
                len: 4
            })
        );
        let h = headers_for(Opcode::RcSendMiddle);
        assert!(write_headers(&h, 6, &mut buf).is_err());
        assert!(write_headers(&h, 0, &mut buf).is_err());
        assert_eq!(write_headers(&h, 8, &mut buf), Ok(12));
        let h = headers_for(Opcode::RcCompareSwap);
        assert_eq!(
            write_headers(&h, 0, &mut buf[..39]),
            Err(BuildError::BufferTooSmall {
                needed: 40,
                len: 39
            })
        );
        let h = headers_for(Opcode::RcSendOnly);
        assert_eq!(
            build(&h, &[1; 5], &mut buf[..19]),
            Err(BuildError::BufferTooSmall {
                needed: 20,
                len: 19
            })
        );
        assert_eq!(packet_len(&h, usize::MAX), None);
    }

    #[test]
    fn nak_packet() {
        let mut h = headers_for(Opcode::RcAcknowledge);
        h.aeth = Some(Aeth::new(
            Syndrome::Nak(NakCode::PsnSequenceError),
            0x12_3456,
        ));
        let bytes = built(&h, &[]);
        assert_eq!(&bytes[12..16], &[0x60, 0x12, 0x34, 0x56]);
        let p = parse(&bytes).unwrap();
        assert_eq!(p.syndrome(), Some(Syndrome::Nak(NakCode::PsnSequenceError)));
    }

    #[test]
    fn pad_values() {
        assert_eq!(pad_for(0), 0);
        assert_eq!(pad_for(1), 3);
        assert_eq!(pad_for(2), 2);
        assert_eq!(pad_for(3), 1);
        assert_eq!(pad_for(4), 0);
        assert_eq!(pad_for(usize::MAX), 1);
    }

    #[test]
    fn error_messages() {
        use std::string::ToString;
        assert_eq!(
            ParseError::UnknownOpcode(0x15).to_string(),
            "unknown or unsupported opcode 0x15"
        );
        assert_eq!(
            BuildError::BufferTooSmall { needed: 2, len: 1 }.to_string(),
            "buffer of 1 bytes, 2 needed"
        );
    }

    fn arb_bth(op: Opcode) -> impl Strategy<Value = Bth> {
        (
            any::<(bool, bool, u16, bool, bool, bool)>(),
            0u32..1 << 24,
            0u32..1 << 24,
        )
            .prop_map(move |((se, m, pkey, f, b, a), qp, psn)| Bth {
                opcode: op.value(),
                solicited: se,
                mig_req: m,
                pad_count: 0,
                tver: 0,
                pkey,
                fecn: f,
                becn: b,
                dest_qp: qp,
                ack_req: a,
                psn: Psn::new(psn),
            })
    }

    /// Random headers for a random opcode, and a valid payload length for it.
    fn arb_packet() -> impl Strategy<Value = (Headers, usize)> {
        (0..Opcode::ALL.len(), any::<usize>()).prop_flat_map(|(i, seed)| {
            let op = Opcode::ALL[i];
            let want = op.headers();
            (
                arb_bth(op),
                any::<(u32, u32, u8, u8, u64, u32, u32)>(),
                any::<(u64, u64, u64, u32, u32)>(),
                (0u8..0x60, 0u32..1 << 24),
            )
                .prop_map(move |(bth, a, b, (syn, msn))| {
                    let mut h = Headers::new(bth);
                    if want.contains(ExtHeaders::DETH) {
                        h.deth = Some(Deth {
                            qkey: a.0,
                            src_qp: a.1 & 0xFF_FFFF,
                        });
                    }
                    if want.contains(ExtHeaders::FETH) {
                        h.feth = Some(Feth {
                            selectivity: a.2 & 3,
                            placement: a.3 & 15,
                        });
                    }
                    if want.contains(ExtHeaders::RETH) {
                        h.reth = Some(Reth {
                            va: a.4,
                            rkey: a.5,
                            dma_len: a.6,
                        });
                    }
                    if want.contains(ExtHeaders::ATOMIC_ETH) {
                        h.atomic_eth = Some(AtomicEth {
                            va: b.0,
                            rkey: b.3,
                            swap_add: b.1,
                            compare: b.2,
                        });
                    }
                    if want.contains(ExtHeaders::AETH) {
                        // ACK or RNR NAK with any value, or one of the five NAK codes.
                        let syndrome = if syn < 0x40 { syn } else { 0x60 | (syn % 5) };
                        h.aeth = Some(Aeth { syndrome, msn });
                    }
                    if want.contains(ExtHeaders::ATOMIC_ACK_ETH) {
                        h.atomic_ack_eth = Some(AtomicAckEth { orig: b.1 });
                    }
                    if want.contains(ExtHeaders::IMM_DT) {
                        h.imm_dt = Some(ImmDt { data: b.3 });
                    }
                    if want.contains(ExtHeaders::IETH) {
                        h.ieth = Some(Ieth { rkey: b.4 });
                    }
                    (h, valid_len(op, seed))
                })
        })
    }

    proptest! {
        #[test]
        fn build_parse_round_trip((h, len) in arb_packet(), fill in any::<u8>()) {
            let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(fill)).collect();
            let bytes = built(&h, &payload);
            let p = parse(&bytes).unwrap();
            let mut expect = h;
            expect.bth.pad_count = pad_for(len);
            prop_assert_eq!(p.headers, expect);
            prop_assert_eq!(p.payload(&bytes), &payload[..]);
            prop_assert_eq!(p.len_without_icrc(), bytes.len() - ICRC_LEN);
            // Rebuilding from the parsed headers gives the same bytes.
            prop_assert_eq!(built(&p.headers, p.payload(&bytes)), bytes);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = parse(&bytes) {
                prop_assert_eq!(p.len_without_icrc() + ICRC_LEN, bytes.len());
                prop_assert!(p.payload_range().end <= bytes.len());
            }
            let _ = parse_without_icrc(&bytes);
        }

        #[test]
        fn parse_never_panics_near_valid((h, len) in arb_packet(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), cut in any::<usize>()) {
            let payload = vec![0x5A; len];
            let mut bytes = built(&h, &payload);
            for (at, x) in flips {
                let n = bytes.len();
                bytes[at % n] ^= x;
            }
            let n = cut % (bytes.len() + 1);
            if let Ok(p) = parse(&bytes[..n]) {
                prop_assert_eq!(p.len_without_icrc() + ICRC_LEN, n);
            }
        }
    }
}
