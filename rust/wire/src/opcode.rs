// SPDX-License-Identifier: GPL-2.0

//! InfiniBand transport opcodes (IBA vol 1, 9.2) as carried by RoCE.
//!
//! The opcode is the first byte of the Base Transport Header. Its top three bits select the
//! transport service ([`Transport`]), the low five bits the operation. This module knows the
//! opcodes of the RC, UC and UD services plus the RoCE v2 congestion notification packet (CNP,
//! annex A17); for each it records which extension headers follow the BTH, in wire order
//! ([`ExtHeaders`]), whether a payload follows them ([`PayloadRule`]) and where the packet
//! sits in its message ([`Position`]). Reliable Datagram, XRC and the manufacturer-specific
//! ranges are not supported: [`Opcode::from_u8`] returns `None` for them, as for the reserved
//! codes.
//!
//! Besides the IBA 1.2 operations the table has the IBA 1.5 RC operations FLUSH (`0x1C`: FETH
//! then RETH, no payload) and ATOMIC WRITE (`0x1D`: RETH and an 8-byte payload), which Linux
//! 6.12's rxe implements.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

/// The transport service of an opcode: its top three bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connection, `000`.
    Rc,
    /// Unreliable Connection, `001`.
    Uc,
    /// Reliable Datagram, `010` (no opcode of it is supported).
    Rd,
    /// Unreliable Datagram, `011`.
    Ud,
    /// RoCE v2 congestion notification, `100` (CNP, RoCE v2 annex A17).
    Cnp,
    /// Extended Reliable Connection, `101` (no opcode of it is supported).
    Xrc,
    /// Manufacturer specific, `110` and `111`.
    Vendor,
}

impl Transport {
    /// The transport service selected by the top three bits of `opcode`.
    pub const fn of(opcode: u8) -> Self {
        match opcode >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Vendor,
        }
    }
}

/// A set of extension transport headers, one bit each.
///
/// Whatever the set, the headers appear on the wire in one fixed order, the order of the
/// constants below (and of [`ExtHeaders::ORDER`]): DETH, FETH, RETH, AtomicETH, AETH,
/// AtomicAckETH, ImmDt, IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders(u8);

impl ExtHeaders {
    /// No extension header.
    pub const NONE: Self = Self(0);
    /// Datagram ETH (8 bytes: Q_Key, source QP).
    pub const DETH: Self = Self(1 << 0);
    /// Flush ETH (4 bytes: selectivity level, placement type).
    pub const FETH: Self = Self(1 << 1);
    /// RDMA ETH (16 bytes: virtual address, R_Key, DMA length).
    pub const RETH: Self = Self(1 << 2);
    /// Atomic ETH (28 bytes: virtual address, R_Key, swap/add data, compare data).
    pub const ATOMIC_ETH: Self = Self(1 << 3);
    /// ACK ETH (4 bytes: syndrome, MSN).
    pub const AETH: Self = Self(1 << 4);
    /// Atomic acknowledge ETH (8 bytes: original remote data).
    pub const ATOMIC_ACK_ETH: Self = Self(1 << 5);
    /// Immediate data (4 bytes).
    pub const IMM_DT: Self = Self(1 << 6);
    /// Invalidate ETH (4 bytes: R_Key).
    pub const IETH: Self = Self(1 << 7);

    /// Every extension header, in wire order, with its length in bytes.
    pub const ORDER: [(ExtHeaders, usize); 8] = [
        (Self::DETH, 8),
        (Self::FETH, 4),
        (Self::RETH, 16),
        (Self::ATOMIC_ETH, 28),
        (Self::AETH, 4),
        (Self::ATOMIC_ACK_ETH, 8),
        (Self::IMM_DT, 4),
        (Self::IETH, 4),
    ];

    /// The raw bit set.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The set with the raw bits `bits` (every bit value names a header).
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The union of two sets.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every header of `other` is in this set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Total length in bytes of the headers in the set.
    pub const fn len(self) -> usize {
        let mut total = 0;
        let mut i = 0;
        while i < Self::ORDER.len() {
            let (h, len) = Self::ORDER[i];
            if self.contains(h) {
                total += len;
            }
            i += 1;
        }
        total
    }
}

/// Whether a payload follows the headers of an opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// No payload: the ICRC follows the last header, and the pad count is 0.
    None,
    /// A payload of any length (subject to the [`Position`] rules), padded to a multiple of 4.
    Data,
    /// Exactly this many bytes, pad count 0 (ATOMIC WRITE's 8 bytes, a CNP's 16 reserved bytes).
    Fixed(u8),
}

/// Where a packet sits in its message (IBA vol 1, ch. 9).
///
/// FIRST and MIDDLE packets carry exactly one path MTU of payload, LAST packets 1 to PMTU
/// bytes, ONLY packets 0 to PMTU bytes; since every PMTU is a multiple of 4, only LAST and
/// ONLY packets can have pad bytes. Packets that are not part of a segmented message
/// (requests without payload, acknowledgements, CNPs) count as ONLY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// The first packet of a multi-packet message.
    First,
    /// A packet between the first and the last.
    Middle,
    /// The last packet of a multi-packet message.
    Last,
    /// The single packet of a message.
    Only,
}

/// The operation an opcode belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND (with or without immediate data or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate data).
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response.
    RdmaReadResponse,
    /// Acknowledge (ACK, NAK, RNR NAK).
    Acknowledge,
    /// Atomic acknowledge.
    AtomicAcknowledge,
    /// CmpSwap atomic request.
    CompareSwap,
    /// FetchAdd atomic request.
    FetchAdd,
    /// FLUSH request.
    Flush,
    /// ATOMIC WRITE request.
    AtomicWrite,
    /// RoCE v2 congestion notification packet.
    Cnp,
}

impl Operation {
    /// Whether packets of this operation are sent by a responder (read responses and
    /// acknowledgements) rather than by a requester.
    pub const fn is_response(self) -> bool {
        matches!(
            self,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }
}

/// The static description of an opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// The opcode.
    pub opcode: Opcode,
    /// Its name in the IBA tables, e.g. `"RC SEND First"`.
    pub name: &'static str,
    /// The operation it belongs to.
    pub operation: Operation,
    /// Its place in a message.
    pub position: Position,
    /// The extension headers that follow the BTH.
    pub headers: ExtHeaders,
    /// Length of the BTH plus the extension headers.
    pub header_len: usize,
    /// Whether a payload follows the headers.
    pub payload: PayloadRule,
}

macro_rules! opcodes {
    ($($(#[doc = $doc:literal])* $variant:ident = $value:literal, $name:literal, $op:ident,
        $pos:ident, [$($hdr:ident),*], $payload:expr;)*) => {
        /// A supported transport opcode; its discriminant is the BTH opcode byte.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $($(#[doc = $doc])* $variant = $value,)*
        }

        impl Opcode {
            /// Every supported opcode, in increasing order of value.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            /// The opcode with BTH value `value`, or `None` if it is reserved or belongs to an
            /// unsupported transport (RD, XRC, manufacturer specific).
            pub const fn from_u8(value: u8) -> Option<Self> {
                match value {
                    $($value => Some(Opcode::$variant),)*
                    _ => None,
                }
            }

            /// The static description of the opcode (a table lookup: every received and
            /// sent packet asks).
            pub const fn info(self) -> &'static OpcodeInfo {
                match self {
                    $(Opcode::$variant => {
                        const HEADERS: ExtHeaders = ExtHeaders::NONE$(.with(ExtHeaders::$hdr))*;
                        const INFO: OpcodeInfo = OpcodeInfo {
                            opcode: Opcode::$variant,
                            name: $name,
                            operation: Operation::$op,
                            position: Position::$pos,
                            headers: HEADERS,
                            header_len: BTH_LEN + HEADERS.len(),
                            payload: $payload,
                        };
                        &INFO
                    })*
                }
            }
        }
    };
}

opcodes! {
    /// RC SEND First.
    RcSendFirst = 0x00, "RC SEND First", Send, First, [], PayloadRule::Data;
    /// RC SEND Middle.
    RcSendMiddle = 0x01, "RC SEND Middle", Send, Middle, [], PayloadRule::Data;
    /// RC SEND Last.
    RcSendLast = 0x02, "RC SEND Last", Send, Last, [], PayloadRule::Data;
    /// RC SEND Last with Immediate.
    RcSendLastImm = 0x03, "RC SEND Last with Immediate", Send, Last, [IMM_DT],
        PayloadRule::Data;
    /// RC SEND Only.
    RcSendOnly = 0x04, "RC SEND Only", Send, Only, [], PayloadRule::Data;
    /// RC SEND Only with Immediate.
    RcSendOnlyImm = 0x05, "RC SEND Only with Immediate", Send, Only, [IMM_DT],
        PayloadRule::Data;
    /// RC RDMA WRITE First.
    RcRdmaWriteFirst = 0x06, "RC RDMA WRITE First", RdmaWrite, First, [RETH], PayloadRule::Data;
    /// RC RDMA WRITE Middle.
    RcRdmaWriteMiddle = 0x07, "RC RDMA WRITE Middle", RdmaWrite, Middle, [], PayloadRule::Data;
    /// RC RDMA WRITE Last.
    RcRdmaWriteLast = 0x08, "RC RDMA WRITE Last", RdmaWrite, Last, [], PayloadRule::Data;
    /// RC RDMA WRITE Last with Immediate.
    RcRdmaWriteLastImm = 0x09, "RC RDMA WRITE Last with Immediate", RdmaWrite, Last, [IMM_DT],
        PayloadRule::Data;
    /// RC RDMA WRITE Only.
    RcRdmaWriteOnly = 0x0A, "RC RDMA WRITE Only", RdmaWrite, Only, [RETH], PayloadRule::Data;
    /// RC RDMA WRITE Only with Immediate.
    RcRdmaWriteOnlyImm = 0x0B, "RC RDMA WRITE Only with Immediate", RdmaWrite, Only,
        [RETH, IMM_DT], PayloadRule::Data;
    /// RC RDMA READ Request.
    RcRdmaReadRequest = 0x0C, "RC RDMA READ Request", RdmaReadRequest, Only, [RETH],
        PayloadRule::None;
    /// RC RDMA READ response First.
    RcRdmaReadResponseFirst = 0x0D, "RC RDMA READ response First", RdmaReadResponse, First,
        [AETH], PayloadRule::Data;
    /// RC RDMA READ response Middle.
    RcRdmaReadResponseMiddle = 0x0E, "RC RDMA READ response Middle", RdmaReadResponse, Middle,
        [], PayloadRule::Data;
    /// RC RDMA READ response Last.
    RcRdmaReadResponseLast = 0x0F, "RC RDMA READ response Last", RdmaReadResponse, Last,
        [AETH], PayloadRule::Data;
    /// RC RDMA READ response Only.
    RcRdmaReadResponseOnly = 0x10, "RC RDMA READ response Only", RdmaReadResponse, Only,
        [AETH], PayloadRule::Data;
    /// RC Acknowledge (ACK, NAK or RNR NAK, by the AETH syndrome).
    RcAcknowledge = 0x11, "RC Acknowledge", Acknowledge, Only, [AETH], PayloadRule::None;
    /// RC ATOMIC Acknowledge.
    RcAtomicAcknowledge = 0x12, "RC ATOMIC Acknowledge", AtomicAcknowledge, Only,
        [AETH, ATOMIC_ACK_ETH], PayloadRule::None;
    /// RC CmpSwap.
    RcCompareSwap = 0x13, "RC CmpSwap", CompareSwap, Only, [ATOMIC_ETH], PayloadRule::None;
    /// RC FetchAdd.
    RcFetchAdd = 0x14, "RC FetchAdd", FetchAdd, Only, [ATOMIC_ETH], PayloadRule::None;
    /// RC SEND Last with Invalidate.
    RcSendLastInv = 0x16, "RC SEND Last with Invalidate", Send, Last, [IETH], PayloadRule::Data;
    /// RC SEND Only with Invalidate.
    RcSendOnlyInv = 0x17, "RC SEND Only with Invalidate", Send, Only, [IETH], PayloadRule::Data;
    /// RC FLUSH (IBA 1.5).
    RcFlush = 0x1C, "RC FLUSH", Flush, Only, [FETH, RETH], PayloadRule::None;
    /// RC ATOMIC WRITE (IBA 1.5).
    RcAtomicWrite = 0x1D, "RC ATOMIC WRITE", AtomicWrite, Only, [RETH], PayloadRule::Fixed(8);
    /// UC SEND First.
    UcSendFirst = 0x20, "UC SEND First", Send, First, [], PayloadRule::Data;
    /// UC SEND Middle.
    UcSendMiddle = 0x21, "UC SEND Middle", Send, Middle, [], PayloadRule::Data;
    /// UC SEND Last.
    UcSendLast = 0x22, "UC SEND Last", Send, Last, [], PayloadRule::Data;
    /// UC SEND Last with Immediate.
    UcSendLastImm = 0x23, "UC SEND Last with Immediate", Send, Last, [IMM_DT],
        PayloadRule::Data;
    /// UC SEND Only.
    UcSendOnly = 0x24, "UC SEND Only", Send, Only, [], PayloadRule::Data;
    /// UC SEND Only with Immediate.
    UcSendOnlyImm = 0x25, "UC SEND Only with Immediate", Send, Only, [IMM_DT],
        PayloadRule::Data;
    /// UC RDMA WRITE First.
    UcRdmaWriteFirst = 0x26, "UC RDMA WRITE First", RdmaWrite, First, [RETH], PayloadRule::Data;
    /// UC RDMA WRITE Middle.
    UcRdmaWriteMiddle = 0x27, "UC RDMA WRITE Middle", RdmaWrite, Middle, [], PayloadRule::Data;
    /// UC RDMA WRITE Last.
    UcRdmaWriteLast = 0x28, "UC RDMA WRITE Last", RdmaWrite, Last, [], PayloadRule::Data;
    /// UC RDMA WRITE Last with Immediate.
    UcRdmaWriteLastImm = 0x29, "UC RDMA WRITE Last with Immediate", RdmaWrite, Last, [IMM_DT],
        PayloadRule::Data;
    /// UC RDMA WRITE Only.
    UcRdmaWriteOnly = 0x2A, "UC RDMA WRITE Only", RdmaWrite, Only, [RETH], PayloadRule::Data;
    /// UC RDMA WRITE Only with Immediate.
    UcRdmaWriteOnlyImm = 0x2B, "UC RDMA WRITE Only with Immediate", RdmaWrite, Only,
        [RETH, IMM_DT], PayloadRule::Data;
    /// UD SEND Only.
    UdSendOnly = 0x64, "UD SEND Only", Send, Only, [DETH], PayloadRule::Data;
    /// UD SEND Only with Immediate.
    UdSendOnlyImm = 0x65, "UD SEND Only with Immediate", Send, Only, [DETH, IMM_DT],
        PayloadRule::Data;
    /// RoCE v2 Congestion Notification Packet: the BTH (destination QP = the congested
    /// flow's source QP, P_Key, PSN 0) and 16 reserved bytes.
    Cnp = 0x81, "CNP", Cnp, Only, [], PayloadRule::Fixed(16);
}

impl Opcode {
    /// The BTH opcode byte.
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// The transport service.
    pub const fn transport(self) -> Transport {
        Transport::of(self as u8)
    }

    /// The operation.
    pub const fn operation(self) -> Operation {
        self.info().operation
    }

    /// Its place in a message.
    pub const fn position(self) -> Position {
        self.info().position
    }

    /// The extension headers that follow the BTH.
    pub const fn headers(self) -> ExtHeaders {
        self.info().headers
    }

    /// Length of the BTH plus the extension headers.
    pub const fn header_len(self) -> usize {
        self.info().header_len
    }

    /// Whether the opcode carries immediate data.
    pub const fn has_immediate(self) -> bool {
        self.info().headers.contains(ExtHeaders::IMM_DT)
    }
}

/// Length of the Base Transport Header.
pub const BTH_LEN: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        // RC: 21 + 2 (invalidate) + 2 (IBA 1.5); UC: 12; UD: 2; CNP.
        assert_eq!(Opcode::ALL.len(), 40);
        let mut prev = None;
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op.value()), Some(op));
            assert_eq!(op.info().opcode, op);
            if let Some(p) = prev {
                assert!(p < op);
            }
            prev = Some(op);
            let info = op.info();
            assert_eq!(info.header_len, BTH_LEN + info.headers.len(), "{op:?}");
            // Responses are RC only; UD only has SEND Only.
            if info.operation.is_response() {
                assert_eq!(op.transport(), Transport::Rc);
            }
            if op.transport() == Transport::Ud {
                assert!(info.headers.contains(ExtHeaders::DETH));
            }
            // Only FIRST/ONLY writes have a RETH, and every read response but MIDDLE an AETH.
            if info.operation == Operation::RdmaWrite {
                let first = matches!(info.position, Position::First | Position::Only);
                assert_eq!(info.headers.contains(ExtHeaders::RETH), first, "{op:?}");
            }
            if info.operation == Operation::RdmaReadResponse {
                let aeth = info.position != Position::Middle;
                assert_eq!(info.headers.contains(ExtHeaders::AETH), aeth, "{op:?}");
            }
        }
        for v in 0..=255u8 {
            if let Some(op) = Opcode::from_u8(v) {
                assert_eq!(op.value(), v);
            }
        }
    }

    #[test]
    fn uc_mirrors_rc() {
        for v in 0x00..=0x0Bu8 {
            let rc = Opcode::from_u8(v).unwrap().info();
            let uc = Opcode::from_u8(v | 0x20).unwrap().info();
            assert_eq!(rc.headers, uc.headers);
            assert_eq!(rc.payload, uc.payload);
            assert_eq!(rc.position, uc.position);
            assert_eq!(rc.operation, uc.operation);
            assert_eq!(&rc.name[2..], &uc.name[2..]);
        }
        for v in 0x2C..=0x3Fu8 {
            assert_eq!(Opcode::from_u8(v), None);
        }
    }

    #[test]
    fn reserved_and_unsupported() {
        for v in [
            0x15u8, 0x18, 0x19, 0x1A, 0x1B, 0x1E, 0x1F, 0x40, 0x60, 0x63, 0x66, 0x80,
        ] {
            assert_eq!(Opcode::from_u8(v), None, "{v:#x}");
        }
        for v in 0xA0..=0xFFu8 {
            assert_eq!(Opcode::from_u8(v), None);
        }
        assert_eq!(Transport::of(0x4C), Transport::Rd);
        assert_eq!(Transport::of(0xA0), Transport::Xrc);
        assert_eq!(Transport::of(0xE0), Transport::Vendor);
        assert_eq!(Transport::of(0x81), Transport::Cnp);
    }

    #[test]
    fn header_lengths() {
        assert_eq!(ExtHeaders::NONE.len(), 0);
        assert_eq!(Opcode::RcSendOnly.header_len(), 12);
        assert_eq!(Opcode::RcRdmaWriteOnlyImm.header_len(), 12 + 16 + 4);
        assert_eq!(Opcode::RcAtomicAcknowledge.header_len(), 12 + 4 + 8);
        assert_eq!(Opcode::RcCompareSwap.header_len(), 12 + 28);
        assert_eq!(Opcode::UdSendOnlyImm.header_len(), 12 + 8 + 4);
        assert_eq!(Opcode::RcFlush.header_len(), 12 + 4 + 16);
        assert_eq!(Opcode::RcSendOnlyInv.header_len(), 12 + 4);
        let all = ExtHeaders::ORDER
            .iter()
            .fold(ExtHeaders::NONE, |a, &(h, _)| a.with(h));
        assert_eq!(all.bits(), 0xFF);
        assert_eq!(all.len(), 76);
        assert!(Opcode::RcSendLastImm.has_immediate());
        assert!(!Opcode::RcSendLast.has_immediate());
        assert_eq!(
            ExtHeaders::from_bits(0x14),
            ExtHeaders::RETH.with(ExtHeaders::AETH)
        );
        assert!(ExtHeaders::default().is_empty());
    }
}
