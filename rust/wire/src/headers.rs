// SPDX-License-Identifier: GPL-2.0

//! The InfiniBand transport headers as carried by RoCE (IBA vol 1, 9.2-9.3; RoCE v2 annex A17).
//!
//! One type per header: [`Bth`] (base transport header) and the extension headers [`Deth`],
//! [`Feth`], [`Reth`], [`AtomicEth`], [`Aeth`], [`AtomicAckEth`], [`ImmDt`] and [`Ieth`]. Each
//! has a `LEN`, a `decode` from exactly `LEN` bytes (which cannot fail: every bit pattern
//! decodes, reserved bits are ignored) and an `encode` to `LEN` bytes (fields wider than their
//! wire width are truncated, reserved bits are written as zero; [`Bth::fits`] and friends tell
//! whether a value survives). Everything is big-endian, as on the wire.
//!
//! Which headers follow the BTH is decided by the opcode (see the `opcode` module); parsing and
//! building whole packets is in the `packet` module.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

use super::psn::Psn;

const U24: u32 = 0x00FF_FFFF;

const fn be16(b0: u8, b1: u8) -> u16 {
    u16::from_be_bytes([b0, b1])
}

const fn be24(b0: u8, b1: u8, b2: u8) -> u32 {
    u32::from_be_bytes([0, b0, b1, b2])
}

const fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

const fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes([
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
        b[at + 6],
        b[at + 7],
    ])
}

/// Base Transport Header (12 bytes, IBA 9.2).
///
/// ```text
/// byte 0     OpCode
/// byte 1     SE(7) M(6) PadCnt(5:4) TVer(3:0)
/// bytes 2-3  P_Key
/// byte 4     FECN(7) BECN(6) reserved(5:0)  -- "resv8a" in IBA; RoCE v2 (A17) uses the top two
///            bits for ECN notification, as rxe does
/// bytes 5-7  DestQP
/// byte 8     AckReq(7) reserved(6:0)
/// bytes 9-11 PSN
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bth {
    /// The opcode byte (see `opcode::Opcode::from_u8`).
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// MigReq: the path migration state.
    pub mig_req: bool,
    /// Pad count: how many bytes (0..=3) pad the payload to a multiple of 4.
    pub pad_count: u8,
    /// Transport header version, 4 bits; 0 is the only version defined.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification (RoCE v2).
    pub fecn: bool,
    /// Backward explicit congestion notification (RoCE v2).
    pub becn: bool,
    /// Destination QP number, 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

/// The default partition's key, full membership: the one entry of a RoCE port's P_Key table.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Whether a packet's BTH P_Key `pkt` is accepted by a port whose P_Key is `port` (IBA
/// 10.9.3): the same partition (the low 15 bits), and at least one of the two a full member
/// (bit 15). Anything else is dropped (and counted) without a response.
pub const fn pkey_matches(pkt: u16, port: u16) -> bool {
    pkt & 0x7fff == port & 0x7fff && (pkt | port) & 0x8000 != 0
}

/// The destination QP of packets to a multicast group (IBA 9.2): every QP attached to the group
/// whose GID the packet carries (the destination IP address in RoCE v2).
pub const MULTICAST_QPN: u32 = 0xff_ffff;

impl Bth {
    /// Length on the wire.
    pub const LEN: usize = 12;

    /// Decodes a BTH; reserved bits are ignored.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Bth {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            mig_req: b[1] & 0x40 != 0,
            pad_count: (b[1] >> 4) & 3,
            tver: b[1] & 0x0F,
            pkey: be16(b[2], b[3]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qp: be24(b[5], b[6], b[7]),
            ack_req: b[8] & 0x80 != 0,
            psn: Psn::new(be24(b[9], b[10], b[11])),
        }
    }

    /// Encodes the BTH; `pad_count`, `tver` and `dest_qp` are truncated to their widths.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        let qp = self.dest_qp.to_be_bytes();
        let psn = self.psn.get().to_be_bytes();
        let pkey = self.pkey.to_be_bytes();
        [
            self.opcode,
            (self.solicited as u8) << 7
                | (self.mig_req as u8) << 6
                | (self.pad_count & 3) << 4
                | (self.tver & 0x0F),
            pkey[0],
            pkey[1],
            (self.fecn as u8) << 7 | (self.becn as u8) << 6,
            qp[1],
            qp[2],
            qp[3],
            (self.ack_req as u8) << 7,
            psn[1],
            psn[2],
            psn[3],
        ]
    }

    /// Whether every field fits its wire width (so that `decode(encode())` is the identity).
    pub const fn fits(&self) -> bool {
        self.pad_count <= 3 && self.tver <= 0x0F && self.dest_qp <= U24
    }
}

/// Datagram Extended Transport Header (8 bytes, IBA 9.3): Q_Key, then a reserved byte and
/// the 24-bit source QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number, 24 bits.
    pub src_qp: u32,
}

impl Deth {
    /// Length on the wire.
    pub const LEN: usize = 8;

    /// Decodes a DETH; the reserved byte is ignored.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Deth {
            qkey: be32(b, 0),
            src_qp: be24(b[5], b[6], b[7]),
        }
    }

    /// Encodes the DETH; `src_qp` is truncated to 24 bits.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        let k = self.qkey.to_be_bytes();
        let q = self.src_qp.to_be_bytes();
        [k[0], k[1], k[2], k[3], 0, q[1], q[2], q[3]]
    }

    /// Whether `src_qp` fits 24 bits.
    pub const fn fits(&self) -> bool {
        self.src_qp <= U24
    }
}

/// Flush Extended Transport Header (4 bytes, IBA 1.5): 26 reserved bits, the selectivity level
/// (bits 5:4) and the placement type (bits 3:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Feth {
    /// Selectivity level, 2 bits.
    pub selectivity: u8,
    /// Placement type, 4 bits.
    pub placement: u8,
}

impl Feth {
    /// Length on the wire.
    pub const LEN: usize = 4;

    /// Decodes a FETH; reserved bits are ignored.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Feth {
            selectivity: (b[3] >> 4) & 3,
            placement: b[3] & 0x0F,
        }
    }

    /// Encodes the FETH; both fields are truncated to their widths.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        [
            0,
            0,
            0,
            (self.selectivity & 3) << 4 | (self.placement & 0x0F),
        ]
    }

    /// Whether both fields fit their widths.
    pub const fn fits(&self) -> bool {
        self.selectivity <= 3 && self.placement <= 0x0F
    }
}

/// RDMA Extended Transport Header (16 bytes, IBA 9.3): virtual address, R_Key, DMA length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA operation in bytes.
    pub dma_len: u32,
}

impl Reth {
    /// Length on the wire.
    pub const LEN: usize = 16;

    /// Decodes a RETH.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Reth {
            va: be64(b, 0),
            rkey: be32(b, 8),
            dma_len: be32(b, 12),
        }
    }

    /// Encodes the RETH.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        put(&mut out, 0, &self.va.to_be_bytes());
        put(&mut out, 8, &self.rkey.to_be_bytes());
        put(&mut out, 12, &self.dma_len.to_be_bytes());
        out
    }
}

/// Atomic Extended Transport Header (28 bytes, IBA 9.3): virtual address, R_Key, swap (or
/// add) data, compare data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap data for CmpSwap, add data for FetchAdd.
    pub swap_add: u64,
    /// Compare data for CmpSwap (unused by FetchAdd).
    pub compare: u64,
}

impl AtomicEth {
    /// Length on the wire.
    pub const LEN: usize = 28;

    /// Decodes an AtomicETH.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        AtomicEth {
            va: be64(b, 0),
            rkey: be32(b, 8),
            swap_add: be64(b, 12),
            compare: be64(b, 20),
        }
    }

    /// Encodes the AtomicETH.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        put(&mut out, 0, &self.va.to_be_bytes());
        put(&mut out, 8, &self.rkey.to_be_bytes());
        put(&mut out, 12, &self.swap_add.to_be_bytes());
        put(&mut out, 20, &self.compare.to_be_bytes());
        out
    }
}

/// NAK codes of an AETH syndrome (IBA vol 1, 9.7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error: a packet was skipped; the requester resends from the AETH's PSN.
    PsnSequenceError = 0,
    /// Invalid request (unsupported opcode, length error, ...).
    InvalidRequest = 1,
    /// Remote access error (R_Key, bounds or access rights).
    RemoteAccessError = 2,
    /// Remote operational error.
    RemoteOperationalError = 3,
    /// Invalid RD request (Reliable Datagram only).
    InvalidRdRequest = 4,
}

/// The decoded syndrome of an AETH (IBA vol 1, 9.7.5): bit 7 reserved (0), bits 6:5 the
/// kind (00 ACK, 01 RNR NAK, 10 reserved, 11 NAK), bits 4:0 its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a 5-bit credit count code (see [`credits_from_code`];
    /// 31 means "no credit information").
    Ack {
        /// The credit count code, 0..=31.
        credit_code: u8,
    },
    /// Receiver not ready NAK with a 5-bit timer code (see [`rnr_timer_us`]).
    RnrNak {
        /// The minimum RNR NAK timer code, 0..=31.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes a syndrome byte; `None` for the reserved encodings (bit 7 set, kind `10`, NAK
    /// codes 5 to 31).
    pub const fn from_byte(b: u8) -> Option<Self> {
        if b & 0x80 != 0 {
            return None;
        }
        let value = b & 0x1F;
        match (b >> 5) & 3 {
            0 => Some(Syndrome::Ack { credit_code: value }),
            1 => Some(Syndrome::RnrNak { timer: value }),
            3 => match value {
                0 => Some(Syndrome::Nak(NakCode::PsnSequenceError)),
                1 => Some(Syndrome::Nak(NakCode::InvalidRequest)),
                2 => Some(Syndrome::Nak(NakCode::RemoteAccessError)),
                3 => Some(Syndrome::Nak(NakCode::RemoteOperationalError)),
                4 => Some(Syndrome::Nak(NakCode::InvalidRdRequest)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Encodes the syndrome byte; 5-bit values are truncated.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credit_code } => credit_code & 0x1F,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            Syndrome::Nak(code) => 0x60 | code as u8,
        }
    }
}

/// Credit count code of an ACK syndrome that means "no credit information" (the responder's
/// receive queue is not flow controlled, e.g. with an SRQ).
pub const CREDITS_INVALID: u8 = 31;

/// The number of receive WQEs a credit count code (0..=30) stands for (IBA vol 1, 9.7.7: 0, 1,
/// 2, 3, 4, 6, 8, 12, ... 32768); `None` for 31 ([`CREDITS_INVALID`]) and above.
pub const fn credits_from_code(code: u8) -> Option<u32> {
    match code {
        0 => Some(0),
        1 => Some(1),
        2..=30 => {
            // Even codes 2k are 2^k; odd codes 2k+1 are 3 * 2^(k-1).
            let k = (code / 2) as u32;
            if code & 1 == 0 {
                Some(1 << k)
            } else {
                Some(3 << (k - 1))
            }
        }
        _ => None,
    }
}

/// The largest credit count code whose credits do not exceed `credits`.
pub const fn code_from_credits(credits: u32) -> u8 {
    let mut code = 0u8;
    while code < 30 {
        match credits_from_code(code + 1) {
            Some(c) if c <= credits => code += 1,
            _ => break,
        }
    }
    code
}

/// The minimum RNR NAK timer of a timer code, in microseconds (IBA vol 1, 9.7.5): code 0
/// is 655.36 ms, codes 1 to 31 run from 0.01 ms to 491.52 ms.
pub const fn rnr_timer_us(code: u8) -> u32 {
    // In units of 10 us.
    const TABLE: [u32; 32] = [
        65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    ];
    TABLE[(code & 0x1F) as usize] * 10
}

/// ACK Extended Transport Header (4 bytes, IBA 9.3): syndrome and 24-bit MSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Aeth {
    /// The raw syndrome byte (see [`Aeth::syndrome`]).
    pub syndrome: u8,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl Aeth {
    /// Length on the wire.
    pub const LEN: usize = 4;

    /// An AETH with syndrome `syndrome`.
    pub const fn new(syndrome: Syndrome, msn: u32) -> Self {
        Aeth {
            syndrome: syndrome.to_byte(),
            msn,
        }
    }

    /// Decodes an AETH (the syndrome is kept raw; see [`Aeth::syndrome`]).
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Aeth {
            syndrome: b[0],
            msn: be24(b[1], b[2], b[3]),
        }
    }

    /// Encodes the AETH; `msn` is truncated to 24 bits.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        let m = self.msn.to_be_bytes();
        [self.syndrome, m[1], m[2], m[3]]
    }

    /// The decoded syndrome, `None` if it is a reserved encoding.
    pub const fn syndrome(&self) -> Option<Syndrome> {
        Syndrome::from_byte(self.syndrome)
    }

    /// Whether `msn` fits 24 bits.
    pub const fn fits(&self) -> bool {
        self.msn <= U24
    }
}

/// Atomic Acknowledge Extended Transport Header (8 bytes, IBA 9.3): the original remote
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEth {
    /// The value at the remote address before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Length on the wire.
    pub const LEN: usize = 8;

    /// Decodes an AtomicAckETH.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        AtomicAckEth { orig: be64(b, 0) }
    }

    /// Encodes the AtomicAckETH.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        self.orig.to_be_bytes()
    }
}

/// Immediate data (4 bytes, IBA 9.3).
///
/// The value is opaque to the transport: `data` is the four bytes read big-endian, so the
/// verbs-level `imm_data` (network byte order) is `data.to_be()` on a little-endian host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ImmDt {
    /// The immediate data, read as a big-endian integer.
    pub data: u32,
}

impl ImmDt {
    /// Length on the wire.
    pub const LEN: usize = 4;

    /// Decodes immediate data.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        ImmDt { data: be32(b, 0) }
    }

    /// Encodes immediate data.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        self.data.to_be_bytes()
    }
}

/// Invalidate Extended Transport Header (4 bytes, IBA 9.3): the R_Key to invalidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ieth {
    /// The remote key to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Length on the wire.
    pub const LEN: usize = 4;

    /// Decodes an IETH.
    pub const fn decode(b: &[u8; Self::LEN]) -> Self {
        Ieth { rkey: be32(b, 0) }
    }

    /// Encodes the IETH.
    pub const fn encode(&self) -> [u8; Self::LEN] {
        self.rkey.to_be_bytes()
    }
}

/// Copies `src` into `out` at `at` (const-evaluable; callers pass in-range constants).
const fn put(out: &mut [u8], at: usize, src: &[u8]) {
    let mut i = 0;
    while i < src.len() {
        out[at + i] = src[i];
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pkey_matching() {
        assert!(pkey_matches(0xffff, DEFAULT_PKEY));
        // A limited member of the default partition, to a full member port.
        assert!(pkey_matches(0x7fff, DEFAULT_PKEY));
        assert!(!pkey_matches(0x7fff, 0x7fff), "two limited members");
        assert!(!pkey_matches(0x8001, DEFAULT_PKEY), "another partition");
        assert!(!pkey_matches(0x0000, DEFAULT_PKEY), "the invalid P_Key");
        assert!(pkey_matches(0x8001, 0x0001));
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bth_layout() {
        let bth = Bth {
            opcode: 0x0A,
            solicited: true,
            mig_req: false,
            pad_count: 3,
            tver: 0,
            pkey: 0xFFFF,
            fecn: true,
            becn: false,
            dest_qp: 0x12_3456,
            ack_req: true,
            psn: Psn::new(0xAB_CDEF),
        };
        let b = bth.encode();
        assert_eq!(
            b,
            [0x0A, 0xB0, 0xFF, 0xFF, 0x80, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF]
        );
        assert_eq!(Bth::decode(&b), bth);
        // Reserved bits are ignored on decode and not written on encode.
        let mut r = b;
        r[4] |= 0x3F;
        r[8] |= 0x7F;
        assert_eq!(Bth::decode(&r), bth);
        let wide = Bth {
            dest_qp: 0x1FF_FFFF,
            pad_count: 4,
            ..bth
        };
        assert!(!wide.fits());
        assert!(bth.fits());
        assert_eq!(Bth::decode(&wide.encode()).dest_qp, 0xFF_FFFF);
    }

    #[test]
    fn extension_layouts() {
        let d = Deth {
            qkey: 0x1111_2222,
            src_qp: 0xAB_CDEF,
        };
        assert_eq!(d.encode(), [0x11, 0x11, 0x22, 0x22, 0, 0xAB, 0xCD, 0xEF]);
        let r = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x0A0B_0C0D,
            dma_len: 0x1000,
        };
        assert_eq!(
            r.encode(),
            [1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D, 0, 0, 0x10, 0]
        );
        let a = AtomicEth {
            va: 1,
            rkey: 2,
            swap_add: 3,
            compare: 4,
        };
        let e = a.encode();
        assert_eq!(e[7], 1);
        assert_eq!(e[11], 2);
        assert_eq!(e[19], 3);
        assert_eq!(e[27], 4);
        assert_eq!(AtomicEth::decode(&e), a);
        let f = Feth {
            selectivity: 2,
            placement: 5,
        };
        assert_eq!(f.encode(), [0, 0, 0, 0x25]);
        assert_eq!(Feth::decode(&[0xFF, 0xFF, 0xFF, 0xC5]).placement, 5);
        assert_eq!(
            Aeth::new(Syndrome::Nak(NakCode::RemoteAccessError), 7).encode(),
            [0x62, 0, 0, 7]
        );
        assert_eq!(ImmDt { data: 0x0102_0304 }.encode(), [1, 2, 3, 4]);
        assert_eq!(Ieth::decode(&[0, 0, 1, 0]).rkey, 256);
        assert_eq!(
            AtomicAckEth { orig: 0x0102 }.encode(),
            [0, 0, 0, 0, 0, 0, 1, 2]
        );
    }

    #[test]
    fn syndromes() {
        assert_eq!(
            Syndrome::from_byte(0x1F),
            Some(Syndrome::Ack { credit_code: 31 })
        );
        assert_eq!(
            Syndrome::from_byte(0x38),
            Some(Syndrome::RnrNak { timer: 24 })
        );
        assert_eq!(
            Syndrome::from_byte(0x60),
            Some(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::from_byte(0x61),
            Some(Syndrome::Nak(NakCode::InvalidRequest))
        );
        assert_eq!(
            Syndrome::from_byte(0x63),
            Some(Syndrome::Nak(NakCode::RemoteOperationalError))
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Some(Syndrome::Nak(NakCode::InvalidRdRequest))
        );
        assert_eq!(Syndrome::from_byte(0x65), None);
        assert_eq!(Syndrome::from_byte(0x40), None);
        assert_eq!(Syndrome::from_byte(0x80), None);
        for b in 0..=255u8 {
            if let Some(s) = Syndrome::from_byte(b) {
                assert_eq!(s.to_byte(), b);
            }
        }
        let ack = Aeth::decode(&[0x1F, 0, 1, 2]);
        assert_eq!(ack.msn, 0x102);
        assert_eq!(
            ack.syndrome(),
            Some(Syndrome::Ack {
                credit_code: CREDITS_INVALID
            })
        );
    }

    #[test]
    fn credit_table() {
        let expected = [
            0u32, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
        ];
        for (code, &n) in expected.iter().enumerate() {
            assert_eq!(credits_from_code(code as u8), Some(n), "code {code}");
            assert_eq!(code_from_credits(n), code as u8);
            if n > 4 {
                assert_eq!(code_from_credits(n - 1), code as u8 - 1);
            }
        }
        assert_eq!(credits_from_code(31), None);
        assert_eq!(credits_from_code(200), None);
        assert_eq!(code_from_credits(u32::MAX), 30);
    }

    #[test]
    fn rnr_timers() {
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(rnr_timer_us(1), 10);
        assert_eq!(rnr_timer_us(14), 1_280);
        assert_eq!(rnr_timer_us(24), 40_960);
        assert_eq!(rnr_timer_us(31), 491_520);
    }

    proptest! {
        #[test]
        fn bth_round_trip(b in any::<[u8; 12]>()) {
            let bth = Bth::decode(&b);
            prop_assert!(bth.fits());
            let mut masked = b;
            masked[4] &= 0xC0;
            masked[8] &= 0x80;
            prop_assert_eq!(bth.encode(), masked);
        }

        #[test]
        fn ext_round_trips(b in any::<[u8; 28]>()) {
            let r: &[u8; 16] = b[..16].try_into().unwrap();
            prop_assert_eq!(&Reth::decode(r).encode(), r);
            prop_assert_eq!(AtomicEth::decode(&b).encode(), b);
            let a: &[u8; 8] = b[..8].try_into().unwrap();
            prop_assert_eq!(&AtomicAckEth::decode(a).encode(), a);
            let mut d = *a;
            d[4] = 0;
            prop_assert_eq!(Deth::decode(a).encode(), d);
            let f: &[u8; 4] = b[..4].try_into().unwrap();
            prop_assert_eq!(&Aeth::decode(f).encode(), f);
            prop_assert_eq!(&ImmDt::decode(f).encode(), f);
            prop_assert_eq!(&Ieth::decode(f).encode(), f);
            prop_assert_eq!(Feth::decode(f).encode(), [0, 0, 0, f[3] & 0x3F]);
        }
    }
}
