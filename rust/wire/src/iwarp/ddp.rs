// SPDX-License-Identifier: GPL-2.0

//! DDP (RFC 5041) segment headers and the RDMAP (RFC 5040) messages they carry.
//!
//! Every ULPDU that MPA frames starts with the 16-bit DDP/RDMAP control field:
//!
//! ```text
//!  byte 0 (DDP):   T (0x80, tagged) | L (0x40, last) | reserved (0x3c) | DDP version (0x03)
//!  byte 1 (RDMAP): RDMAP version (0xc0) | reserved (0x30) | opcode (0x0f)
//! ```
//!
//! followed by the tagged buffer header (STag 4, tagged offset 8) or the untagged one (a 32-bit
//! field that is reserved or, for send with invalidate, the STag to invalidate; queue number,
//! message sequence number and message offset, 4 each). An RDMA read request carries 28 more
//! bytes of RDMAP header in its untagged payload; a terminate message 4 bytes of terminate
//! control followed by the headers of the segment it terminates.
//!
//! RFC 7306's extensions add four untagged opcodes, each a single segment whose RDMAP header
//! is all it carries: immediate data (8 bytes, queue 0, consuming a receive like a send), and
//! atomic requests (52 bytes, queue 1 with the read requests) and responses (12 bytes, queue 3).
//!
//! [`parse`] reads and checks such a header and returns, on any error, the [`TermCode`] a
//! terminate message reports for it; [`Segment::write`] builds one. All fields are big endian.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

use core::fmt;

/// The DDP version of RFC 5041.
pub const DDP_VERSION: u8 = 1;
/// The RDMAP version of RFC 5040.
pub const RDMAP_VERSION: u8 = 1;

/// Bytes of the control field.
pub const CTRL_LEN: usize = 2;
/// Bytes of a tagged segment's header: control, STag, tagged offset.
pub const TAGGED_HDR_LEN: usize = 14;
/// Bytes of an untagged segment's header: control, reserved or invalidate STag, QN, MSN, MO.
pub const UNTAGGED_HDR_LEN: usize = 18;
/// Bytes of the RDMAP read request header that follows the untagged header.
pub const READ_REQUEST_LEN: usize = 28;
/// Bytes of the terminate control word that follows the untagged header of a terminate.
pub const TERMINATE_CTRL_LEN: usize = 4;
/// Bytes of the RFC 7306 immediate data header that follows the untagged header.
pub const IMMEDIATE_LEN: usize = 8;
/// Bytes of the RFC 7306 atomic request header that follows the untagged header.
pub const ATOMIC_REQUEST_LEN: usize = 52;
/// Bytes of the RFC 7306 atomic response header that follows the untagged header.
pub const ATOMIC_RESPONSE_LEN: usize = 12;
/// The longest header [`parse`] reads (an atomic request).
pub const MAX_HDR_LEN: usize = UNTAGGED_HDR_LEN + ATOMIC_REQUEST_LEN;

/// DDP control byte: tagged buffer model.
const DDP_TAGGED: u8 = 0x80;
/// DDP control byte: last segment of the message.
const DDP_LAST: u8 = 0x40;
/// DDP control byte: the version bits.
const DDP_VERSION_MASK: u8 = 0x03;
/// RDMAP control byte: the version bits.
const RDMAP_VERSION_SHIFT: u8 = 6;
/// RDMAP control byte: the opcode bits.
const RDMAP_OPCODE_MASK: u8 = 0x0f;

/// Untagged queue of send messages.
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA read requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of terminate messages.
pub const QN_TERMINATE: u32 = 2;
/// Untagged queue of atomic responses (RFC 7306).
pub const QN_ATOMIC_RESPONSE: u32 = 3;

/// An RDMAP opcode (RFC 5040, section 4.2; RFC 7306, section 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA write, tagged.
    Write = 0,
    /// RDMA read request, untagged queue 1.
    ReadRequest = 1,
    /// RDMA read response, tagged.
    ReadResponse = 2,
    /// Send, untagged queue 0.
    Send = 3,
    /// Send with invalidate.
    SendInvalidate = 4,
    /// Send with solicited event.
    SendSe = 5,
    /// Send with solicited event and invalidate.
    SendSeInvalidate = 6,
    /// Terminate, untagged queue 2.
    Terminate = 7,
    /// Immediate data (RFC 7306), untagged queue 0.
    ImmediateData = 8,
    /// Immediate data with solicited event (RFC 7306).
    ImmediateDataSe = 9,
    /// Atomic request (RFC 7306), untagged queue 1.
    AtomicRequest = 10,
    /// Atomic response (RFC 7306), untagged queue 3.
    AtomicResponse = 11,
}

impl Opcode {
    /// The opcode of the low four bits of `bits`, if RFC 5040 or RFC 7306 defines it.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits & RDMAP_OPCODE_MASK {
            0 => Self::Write,
            1 => Self::ReadRequest,
            2 => Self::ReadResponse,
            3 => Self::Send,
            4 => Self::SendInvalidate,
            5 => Self::SendSe,
            6 => Self::SendSeInvalidate,
            7 => Self::Terminate,
            8 => Self::ImmediateData,
            9 => Self::ImmediateDataSe,
            10 => Self::AtomicRequest,
            11 => Self::AtomicResponse,
            _ => return None,
        })
    }

    /// Whether the opcode's messages use the tagged buffer model.
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::Write | Self::ReadResponse)
    }

    /// Whether the opcode is one of the four sends.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendInvalidate | Self::SendSe | Self::SendSeInvalidate
        )
    }

    /// Whether a message of this opcode consumes a receive buffer: the sends and RFC 7306's
    /// immediate data.
    pub const fn takes_receive(self) -> bool {
        self.is_send() || matches!(self, Self::ImmediateData | Self::ImmediateDataSe)
    }

    /// Whether the opcode carries an STag to invalidate.
    pub const fn invalidates(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSeInvalidate)
    }

    /// Whether the opcode asks for a solicited event.
    pub const fn solicited(self) -> bool {
        matches!(
            self,
            Self::SendSe | Self::SendSeInvalidate | Self::ImmediateDataSe
        )
    }

    /// Whether the opcode is one of RFC 7306's extensions, which a peer understands only if
    /// it says so.
    pub const fn is_extension(self) -> bool {
        matches!(
            self,
            Self::ImmediateData
                | Self::ImmediateDataSe
                | Self::AtomicRequest
                | Self::AtomicResponse
        )
    }

    /// Whether a message of this opcode is one segment (read request, terminate and the
    /// extensions).
    pub const fn is_single(self) -> bool {
        matches!(self, Self::Terminate) || self.is_bare()
    }

    /// Whether a segment of this opcode carries nothing after its header (read request and
    /// the extensions; a terminate carries copies of the headers it reports).
    pub const fn is_bare(self) -> bool {
        matches!(self, Self::ReadRequest) || self.is_extension()
    }

    /// The untagged queue of the opcode's messages (`None` for tagged ones).
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::Write | Self::ReadResponse => None,
            Self::ReadRequest | Self::AtomicRequest => Some(QN_READ_REQUEST),
            Self::Terminate => Some(QN_TERMINATE),
            Self::AtomicResponse => Some(QN_ATOMIC_RESPONSE),
            _ => Some(QN_SEND),
        }
    }

    /// Bytes of the header of a segment of this opcode, control field included.
    pub const fn header_len(self) -> usize {
        match self {
            Self::Write | Self::ReadResponse => TAGGED_HDR_LEN,
            Self::ReadRequest => UNTAGGED_HDR_LEN + READ_REQUEST_LEN,
            Self::Terminate => UNTAGGED_HDR_LEN + TERMINATE_CTRL_LEN,
            Self::ImmediateData | Self::ImmediateDataSe => UNTAGGED_HDR_LEN + IMMEDIATE_LEN,
            Self::AtomicRequest => UNTAGGED_HDR_LEN + ATOMIC_REQUEST_LEN,
            Self::AtomicResponse => UNTAGGED_HDR_LEN + ATOMIC_RESPONSE_LEN,
            _ => UNTAGGED_HDR_LEN,
        }
    }
}

/// Where a segment's payload goes: the DDP part of its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Tagged buffer model: straight into the buffer the STag names, at the tagged offset.
    Tagged {
        /// The STag of the data sink.
        stag: u32,
        /// The tagged offset of the segment's first payload byte.
        to: u64,
    },
    /// Untagged buffer model: into the buffer the receiver queued for message `msn` of
    /// queue `qn`, at offset `mo`.
    Untagged {
        /// Queue number: [`QN_SEND`], [`QN_READ_REQUEST`], [`QN_TERMINATE`] or
        /// [`QN_ATOMIC_RESPONSE`].
        qn: u32,
        /// Message sequence number, counted per queue from 1.
        msn: u32,
        /// Message offset of the segment's first payload byte.
        mo: u32,
        /// The STag to invalidate (send with invalidate; the reserved field otherwise).
        inv_stag: u32,
    },
}

/// The RDMAP read request header (RFC 5040, section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequest {
    /// STag of the requester's buffer the response is written into.
    pub sink_stag: u32,
    /// Tagged offset in that buffer.
    pub sink_to: u64,
    /// Bytes to read.
    pub size: u32,
    /// STag of the responder's buffer read from.
    pub source_stag: u32,
    /// Tagged offset in that buffer.
    pub source_to: u64,
}

/// An RFC 7306 atomic operation (its AOpCode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicOp {
    /// Fetch and add, with field boundaries where the add mask has a bit set.
    FetchAdd = 0,
    /// Compare and swap, both masked.
    CmpSwap = 2,
}

/// The RFC 7306 atomic request header (section 4.1). Every operation is on 64 bits at a
/// 64-bit aligned tagged offset; the fields are big endian on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicRequest {
    /// The operation.
    pub op: AtomicOp,
    /// Chosen by the requester, returned in the response.
    pub req_id: u32,
    /// STag of the responder's buffer.
    pub stag: u32,
    /// Tagged offset of the 64-bit target.
    pub to: u64,
    /// The value added (fetch and add) or swapped in (compare and swap).
    pub data: u64,
    /// Add mask (field boundaries) or swap mask (the bits swapped in).
    pub data_mask: u64,
    /// The value compared with (compare and swap; 0 for fetch and add).
    pub compare: u64,
    /// The bits compared (compare and swap; all ones for fetch and add).
    pub compare_mask: u64,
}

impl AtomicRequest {
    /// A verbs fetch and add: a plain 64-bit add.
    pub const fn fetch_add(req_id: u32, stag: u32, to: u64, add: u64) -> Self {
        Self {
            op: AtomicOp::FetchAdd,
            req_id,
            stag,
            to,
            data: add,
            data_mask: 0,
            compare: 0,
            compare_mask: u64::MAX,
        }
    }

    /// A verbs compare and swap: all 64 bits compared and swapped.
    pub const fn cmp_swap(req_id: u32, stag: u32, to: u64, compare: u64, swap: u64) -> Self {
        Self {
            op: AtomicOp::CmpSwap,
            req_id,
            stag,
            to,
            data: swap,
            data_mask: u64::MAX,
            compare,
            compare_mask: u64::MAX,
        }
    }

    /// Whether the operation is a verbs one (no field boundaries, nothing masked), which the
    /// CPU's own fetch-and-add or compare-and-exchange performs as it is.
    pub const fn is_plain(&self) -> bool {
        match self.op {
            AtomicOp::FetchAdd => self.data_mask == 0,
            AtomicOp::CmpSwap => self.data_mask == u64::MAX && self.compare_mask == u64::MAX,
        }
    }

    /// The value the target holds after the operation, given the value `orig` it held
    /// before (RFC 7306, section 4.1's pseudocode): equal to `orig` when a comparison fails.
    pub const fn apply(&self, orig: u64) -> u64 {
        match self.op {
            AtomicOp::FetchAdd => masked_add(orig, self.data, self.data_mask),
            AtomicOp::CmpSwap => {
                if (self.compare ^ orig) & self.compare_mask != 0 {
                    orig
                } else {
                    (orig & !self.data_mask) | (self.data & self.data_mask)
                }
            }
        }
    }
}

/// `a + b` where a carry out of every bit set in `mask` is dropped: independent adds of the
/// fields whose most significant bits the mask marks (0: one 64-bit add).
pub const fn masked_add(a: u64, b: u64, mask: u64) -> u64 {
    // Per field, the sum is the plain sum with the carry into the next field removed: add
    // with the marked top bits cleared (no carry can leave them), then put back their sum
    // bit (a ^ b ^ the carry that came into them).
    let tops = mask;
    let low = (a & !tops).wrapping_add(b & !tops);
    low ^ ((a ^ b) & tops)
}

/// The RFC 7306 atomic response header (section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicResponse {
    /// The request's identifier.
    pub req_id: u32,
    /// The target's value before the operation.
    pub orig: u64,
}

/// The RDMAP header that follows the DDP header of some opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmapHeader {
    /// None: writes, read responses and sends.
    None,
    /// A read request's.
    ReadRequest(ReadRequest),
    /// A terminate's control word.
    Terminate(Terminate),
    /// Immediate data (RFC 7306).
    Immediate(u64),
    /// An atomic request (RFC 7306).
    AtomicRequest(AtomicRequest),
    /// An atomic response (RFC 7306).
    AtomicResponse(AtomicResponse),
}

/// The layer a terminate message blames (RFC 5040, section 4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP.
    Rdmap = 0,
    /// DDP.
    Ddp = 1,
    /// The lower layer protocol: MPA.
    Llp = 2,
}

/// What a terminate message reports: layer, error type and error code (RFC 5040 section 7,
/// RFC 5041 section 7, RFC 5044 section 8 and RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// The layer that found the error.
    pub layer: Layer,
    /// The error type (4 bits).
    pub etype: u8,
    /// The error code.
    pub ecode: u8,
}

impl TermCode {
    /// RDMAP, remote protection error: invalid STag.
    pub const RDMAP_INVALID_STAG: Self = Self::rdmap(1, 0x00);
    /// RDMAP, remote protection error: base or bounds violation.
    pub const RDMAP_BASE_BOUNDS: Self = Self::rdmap(1, 0x01);
    /// RDMAP, remote protection error: access rights violation.
    pub const RDMAP_ACCESS: Self = Self::rdmap(1, 0x02);
    /// RDMAP, remote protection error: STag not associated with the RDMAP stream.
    pub const RDMAP_STAG_NOT_ASSOCIATED: Self = Self::rdmap(1, 0x03);
    /// RDMAP, remote protection error: tagged offset wrap.
    pub const RDMAP_TO_WRAP: Self = Self::rdmap(1, 0x04);
    /// RDMAP, remote operation error: invalid RDMAP version.
    pub const RDMAP_VERSION: Self = Self::rdmap(2, 0x05);
    /// RDMAP, remote operation error: unexpected opcode.
    pub const RDMAP_OPCODE: Self = Self::rdmap(2, 0x06);
    /// RDMAP, remote operation error: catastrophic error, localized to this stream.
    pub const RDMAP_CATASTROPHIC_STREAM: Self = Self::rdmap(2, 0x07);
    /// RDMAP, remote operation error: the STag cannot be invalidated.
    pub const RDMAP_CANNOT_INVALIDATE: Self = Self::rdmap(2, 0x09);
    /// RDMAP, catastrophic error, unspecified.
    pub const RDMAP_CATASTROPHIC: Self = Self::rdmap(0, 0xff);
    /// DDP, tagged buffer error: invalid STag.
    pub const DDP_T_INVALID_STAG: Self = Self::ddp(1, 0x00);
    /// DDP, tagged buffer error: base or bounds violation.
    pub const DDP_T_BASE_BOUNDS: Self = Self::ddp(1, 0x01);
    /// DDP, tagged buffer error: STag not associated with the stream.
    pub const DDP_T_STAG_NOT_ASSOCIATED: Self = Self::ddp(1, 0x02);
    /// DDP, tagged buffer error: tagged offset wrap.
    pub const DDP_T_TO_WRAP: Self = Self::ddp(1, 0x03);
    /// DDP, tagged buffer error: invalid DDP version.
    pub const DDP_T_VERSION: Self = Self::ddp(1, 0x04);
    /// DDP, untagged buffer error: invalid queue number.
    pub const DDP_UT_INVALID_QN: Self = Self::ddp(2, 0x01);
    /// DDP, untagged buffer error: invalid MSN, no buffer available.
    pub const DDP_UT_NO_BUFFER: Self = Self::ddp(2, 0x02);
    /// DDP, untagged buffer error: invalid MSN, out of range.
    pub const DDP_UT_MSN_RANGE: Self = Self::ddp(2, 0x03);
    /// DDP, untagged buffer error: invalid message offset.
    pub const DDP_UT_INVALID_MO: Self = Self::ddp(2, 0x04);
    /// DDP, untagged buffer error: message too long for the receive buffer.
    pub const DDP_UT_TOO_LONG: Self = Self::ddp(2, 0x05);
    /// DDP, untagged buffer error: invalid DDP version.
    pub const DDP_UT_VERSION: Self = Self::ddp(2, 0x06);
    /// MPA: CRC error.
    pub const LLP_CRC: Self = Self::llp(0x02);
    /// MPA: marker or FPDU framing error (the stream lost its framing).
    pub const LLP_FRAMING: Self = Self::llp(0x03);
    /// MPA: invalid request or reply frame.
    pub const LLP_INVALID_RR: Self = Self::llp(0x04);
    /// MPA (RFC 6581): local catastrophic error.
    pub const LLP_LOCAL_CATASTROPHIC: Self = Self::llp(0x05);
    /// MPA (RFC 6581): insufficient IRD resources.
    pub const LLP_INSUFFICIENT_IRD: Self = Self::llp(0x06);
    /// MPA (RFC 6581): no matching ready-to-receive message.
    pub const LLP_NO_MATCHING_RTR: Self = Self::llp(0x07);

    const fn rdmap(etype: u8, ecode: u8) -> Self {
        Self {
            layer: Layer::Rdmap,
            etype,
            ecode,
        }
    }

    const fn ddp(etype: u8, ecode: u8) -> Self {
        Self {
            layer: Layer::Ddp,
            etype,
            ecode,
        }
    }

    const fn llp(ecode: u8) -> Self {
        Self {
            layer: Layer::Llp,
            etype: 0,
            ecode,
        }
    }
}

impl fmt::Display for TermCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layer = match self.layer {
            Layer::Rdmap => "RDMAP",
            Layer::Ddp => "DDP",
            Layer::Llp => "MPA",
        };
        write!(
            f,
            "{layer} error type {} code {:#04x}",
            self.etype, self.ecode
        )
    }
}

/// The terminate control word (RFC 5040, section 4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Terminate {
    /// What is reported.
    pub code: TermCode,
    /// M: the DDP segment length of the terminated segment is valid.
    pub segment_len_valid: bool,
    /// D: the terminated segment's DDP header follows.
    pub ddp_header: bool,
    /// R: the terminated message's RDMAP header follows.
    pub rdmap_header: bool,
}

impl Terminate {
    /// The 32-bit word on the wire.
    pub const fn to_word(self) -> u32 {
        ((self.code.layer as u32) << 28)
            | (((self.code.etype & 0x0f) as u32) << 24)
            | ((self.code.ecode as u32) << 16)
            | ((self.segment_len_valid as u32) << 15)
            | ((self.ddp_header as u32) << 14)
            | ((self.rdmap_header as u32) << 13)
    }

    /// Reads the word; `None` for an undefined layer.
    pub const fn from_word(word: u32) -> Option<Self> {
        let layer = match word >> 28 {
            0 => Layer::Rdmap,
            1 => Layer::Ddp,
            2 => Layer::Llp,
            _ => return None,
        };
        Some(Self {
            code: TermCode {
                layer,
                etype: ((word >> 24) & 0x0f) as u8,
                ecode: (word >> 16) as u8,
            },
            segment_len_valid: word & (1 << 15) != 0,
            ddp_header: word & (1 << 14) != 0,
            rdmap_header: word & (1 << 13) != 0,
        })
    }
}

/// One DDP segment's header, with what RDMAP adds to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The RDMAP opcode.
    pub opcode: Opcode,
    /// The DDP last flag: the message ends with this segment.
    pub last: bool,
    /// Where the payload goes.
    pub placement: Placement,
    /// The RDMAP header after the DDP header: the one the opcode has.
    pub rdmap: RdmapHeader,
}

impl Segment {
    /// Bytes of this segment's header, control field included.
    pub const fn header_len(&self) -> usize {
        self.opcode.header_len()
    }

    /// The read request header, if this is one.
    pub const fn read_request(&self) -> Option<ReadRequest> {
        match self.rdmap {
            RdmapHeader::ReadRequest(r) => Some(r),
            _ => None,
        }
    }

    /// The terminate control word, if this is a terminate.
    pub const fn terminate(&self) -> Option<Terminate> {
        match self.rdmap {
            RdmapHeader::Terminate(t) => Some(t),
            _ => None,
        }
    }

    /// Writes the header into the start of `out`; returns its length, or `None` if `out` is
    /// too short or the segment is inconsistent (placement model, queue or extra header not
    /// those of the opcode).
    pub fn write(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.header_len();
        let out = out.get_mut(..len)?;
        let tagged = self.opcode.is_tagged();
        out[0] = (if tagged { DDP_TAGGED } else { 0 })
            | (if self.last { DDP_LAST } else { 0 })
            | DDP_VERSION;
        out[1] = (RDMAP_VERSION << RDMAP_VERSION_SHIFT) | self.opcode as u8;
        match (self.placement, tagged) {
            (Placement::Tagged { stag, to }, true) => {
                copy(&mut out[2..6], &stag.to_be_bytes());
                copy(&mut out[6..14], &to.to_be_bytes());
            }
            (
                Placement::Untagged {
                    qn,
                    msn,
                    mo,
                    inv_stag,
                },
                false,
            ) => {
                if Some(qn) != self.opcode.queue() {
                    return None;
                }
                copy(&mut out[2..6], &inv_stag.to_be_bytes());
                copy(&mut out[6..10], &qn.to_be_bytes());
                copy(&mut out[10..14], &msn.to_be_bytes());
                copy(&mut out[14..18], &mo.to_be_bytes());
            }
            _ => return None,
        }
        let rr = &mut out[UNTAGGED_HDR_LEN.min(len)..];
        match (self.opcode, self.rdmap) {
            (Opcode::ReadRequest, RdmapHeader::ReadRequest(r)) => {
                copy(&mut rr[0..4], &r.sink_stag.to_be_bytes());
                copy(&mut rr[4..12], &r.sink_to.to_be_bytes());
                copy(&mut rr[12..16], &r.size.to_be_bytes());
                copy(&mut rr[16..20], &r.source_stag.to_be_bytes());
                copy(&mut rr[20..28], &r.source_to.to_be_bytes());
            }
            (Opcode::Terminate, RdmapHeader::Terminate(t)) => {
                copy(rr, &t.to_word().to_be_bytes());
            }
            (Opcode::ImmediateData | Opcode::ImmediateDataSe, RdmapHeader::Immediate(v)) => {
                copy(rr, &v.to_be_bytes());
            }
            (Opcode::AtomicRequest, RdmapHeader::AtomicRequest(a)) => {
                copy(&mut rr[0..4], &u32::from(a.op as u8).to_be_bytes());
                copy(&mut rr[4..8], &a.req_id.to_be_bytes());
                copy(&mut rr[8..12], &a.stag.to_be_bytes());
                copy(&mut rr[12..20], &a.to.to_be_bytes());
                copy(&mut rr[20..28], &a.data.to_be_bytes());
                copy(&mut rr[28..36], &a.data_mask.to_be_bytes());
                copy(&mut rr[36..44], &a.compare.to_be_bytes());
                copy(&mut rr[44..52], &a.compare_mask.to_be_bytes());
            }
            (Opcode::AtomicResponse, RdmapHeader::AtomicResponse(a)) => {
                copy(&mut rr[0..4], &a.req_id.to_be_bytes());
                copy(&mut rr[4..12], &a.orig.to_be_bytes());
            }
            (op, RdmapHeader::None) if !op.is_single() => {}
            _ => return None,
        }
        Some(len)
    }
}

impl Segment {
    /// Checks the payload length of a segment with this header: a read request and RFC
    /// 7306's messages carry nothing after their headers (for immediate data, exactly its 8
    /// bytes).
    pub const fn check_payload_len(&self, payload_len: usize) -> Result<(), TermCode> {
        if self.opcode.is_bare() && payload_len != 0 {
            return Err(TermCode::DDP_UT_INVALID_MO);
        }
        Ok(())
    }
}

/// Copies `src` into the start of `dst` (as much as fits). Unlike `copy_from_slice` it has no
/// length-mismatch panic path, which the 6.12 kernel's objtool does not know as `noreturn`
/// under newer compilers.
fn copy(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// Reads a big-endian u32 at `at` (the caller has checked the length).
#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

/// Reads a big-endian u64 at `at` (the caller has checked the length).
#[inline]
fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// The header length announced by the two control bytes `ctrl`, if they are valid: what a
/// stream parser must collect before calling [`parse`]. On error, the terminate code.
pub fn header_len(ctrl: [u8; 2]) -> Result<usize, TermCode> {
    let tagged = ctrl[0] & DDP_TAGGED != 0;
    if ctrl[0] & DDP_VERSION_MASK != DDP_VERSION {
        return Err(if tagged {
            TermCode::DDP_T_VERSION
        } else {
            TermCode::DDP_UT_VERSION
        });
    }
    if ctrl[1] >> RDMAP_VERSION_SHIFT != RDMAP_VERSION {
        return Err(TermCode::RDMAP_VERSION);
    }
    let opcode = Opcode::from_bits(ctrl[1]).ok_or(TermCode::RDMAP_OPCODE)?;
    if opcode.is_tagged() != tagged {
        return Err(TermCode::RDMAP_OPCODE);
    }
    Ok(opcode.header_len())
}

/// Parses the header at the start of the ULPDU `ulpdu` (which may go on with the payload, or
/// end with the header). Checks versions, opcode, the placement model and queue number the
/// opcode needs, and that read requests, terminates and RFC 7306's messages are single
/// segments (their payload length is [`Segment::check_payload_len`]'s). Reserved
/// bits are ignored, as RFC 5041 asks of a receiver. Returns the segment and its header
/// length, or the terminate code for the error.
pub fn parse(ulpdu: &[u8]) -> Result<(Segment, usize), TermCode> {
    let ctrl = [
        *ulpdu.first().ok_or(TermCode::LLP_FRAMING)?,
        *ulpdu.get(1).ok_or(TermCode::LLP_FRAMING)?,
    ];
    let len = header_len(ctrl)?;
    let h = ulpdu.get(..len).ok_or(TermCode::LLP_FRAMING)?;
    let opcode = Opcode::from_bits(ctrl[1]).ok_or(TermCode::RDMAP_OPCODE)?;
    let last = ctrl[0] & DDP_LAST != 0;
    let placement = if opcode.is_tagged() {
        Placement::Tagged {
            stag: be32(h, 2),
            to: be64(h, 6),
        }
    } else {
        let qn = be32(h, 6);
        if Some(qn) != opcode.queue() {
            return Err(TermCode::DDP_UT_INVALID_QN);
        }
        Placement::Untagged {
            qn,
            msn: be32(h, 10),
            mo: be32(h, 14),
            inv_stag: be32(h, 2),
        }
    };
    // Read requests, terminates and the extensions are one whole segment each.
    if opcode.is_single() {
        let mo = match placement {
            Placement::Untagged { mo, .. } => mo,
            Placement::Tagged { .. } => 0,
        };
        if !last || mo != 0 {
            return Err(TermCode::DDP_UT_INVALID_MO);
        }
    }
    let rr = &h[UNTAGGED_HDR_LEN.min(len)..];
    let rdmap = match opcode {
        Opcode::ReadRequest => RdmapHeader::ReadRequest(ReadRequest {
            sink_stag: be32(rr, 0),
            sink_to: be64(rr, 4),
            size: be32(rr, 12),
            source_stag: be32(rr, 16),
            source_to: be64(rr, 20),
        }),
        Opcode::Terminate => {
            RdmapHeader::Terminate(Terminate::from_word(be32(rr, 0)).ok_or(TermCode::RDMAP_OPCODE)?)
        }
        Opcode::ImmediateData | Opcode::ImmediateDataSe => RdmapHeader::Immediate(be64(rr, 0)),
        Opcode::AtomicRequest => RdmapHeader::AtomicRequest(AtomicRequest {
            // The AOpCode is the low 4 bits of the first word; the rest is reserved.
            op: match rr[3] & 0x0f {
                0 => AtomicOp::FetchAdd,
                2 => AtomicOp::CmpSwap,
                _ => return Err(TermCode::RDMAP_OPCODE),
            },
            req_id: be32(rr, 4),
            stag: be32(rr, 8),
            to: be64(rr, 12),
            data: be64(rr, 20),
            data_mask: be64(rr, 28),
            compare: be64(rr, 36),
            compare_mask: be64(rr, 44),
        }),
        Opcode::AtomicResponse => RdmapHeader::AtomicResponse(AtomicResponse {
            req_id: be32(rr, 0),
            orig: be64(rr, 4),
        }),
        _ => RdmapHeader::None,
    };
    Ok((
        Segment {
            opcode,
            last,
            placement,
            rdmap,
        },
        len,
    ))
}

/// The receive side's state of one untagged queue: which message comes next and how much of
/// it has arrived. Over TCP segments arrive in order, so the next segment must continue the
/// current message (or start the next one at offset 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UntaggedQueue {
    /// MSN of the message in progress or, between messages, of the next one (starts at 1).
    msn: u32,
    /// Payload bytes of the message in progress received so far.
    offset: u32,
}

/// Where an untagged segment's payload lands, as [`UntaggedQueue::accept`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedPlacement {
    /// The message's MSN.
    pub msn: u32,
    /// Offset in the message of the segment's first payload byte.
    pub offset: u32,
    /// Whether this segment starts the message (a new receive buffer is needed).
    pub first: bool,
    /// Whether this segment ends the message.
    pub last: bool,
}

impl UntaggedQueue {
    /// A queue before its first message (MSN 1).
    pub const fn new() -> Self {
        Self { msn: 1, offset: 0 }
    }

    /// The MSN the next message (or the one in progress) has.
    pub const fn msn(&self) -> u32 {
        self.msn
    }

    /// Whether a message is partly received.
    pub const fn in_progress(&self) -> bool {
        self.offset != 0
    }

    /// Accepts the segment with `msn`, `mo`, `last` and `payload_len` bytes of payload, or
    /// returns the terminate code: MSN not the expected one, an offset that does not continue
    /// the message, or a message longer than 2^32 bytes. `max_len` is the receive buffer's
    /// length once known (`u32::MAX` otherwise): a message that would not fit is
    /// [`TermCode::DDP_UT_TOO_LONG`].
    pub fn accept(
        &mut self,
        msn: u32,
        mo: u32,
        last: bool,
        payload_len: u32,
        max_len: u32,
    ) -> Result<UntaggedPlacement, TermCode> {
        if msn != self.msn {
            return Err(TermCode::DDP_UT_MSN_RANGE);
        }
        if mo != self.offset {
            return Err(TermCode::DDP_UT_INVALID_MO);
        }
        let end = mo
            .checked_add(payload_len)
            .ok_or(TermCode::DDP_UT_TOO_LONG)?;
        if end > max_len {
            return Err(TermCode::DDP_UT_TOO_LONG);
        }
        let placed = UntaggedPlacement {
            msn,
            offset: mo,
            first: mo == 0,
            last,
        };
        if last {
            self.msn = self.msn.wrapping_add(1);
            self.offset = 0;
        } else {
            self.offset = end;
        }
        Ok(placed)
    }
}

/// One segment of a message being sent: its header and which bytes of the message it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPlan {
    /// The header.
    pub segment: Segment,
    /// Offset in the message of the first payload byte.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
}

/// Cuts a message into DDP segments of at most a ULPDU of `mulpdu` bytes each, header
/// included. Each segment's placement (tagged offset or message offset) advances with the
/// bytes before it; the last one has the last flag. A message of zero bytes is one segment.
#[derive(Debug, Clone)]
pub struct Segmenter {
    /// The first segment's header (placement at the message start).
    first: Segment,
    /// Message bytes.
    total: u32,
    /// Payload bytes per segment.
    step: u32,
    /// Bytes already planned.
    done: u32,
    /// Whether the last segment has been planned.
    finished: bool,
}

impl Segmenter {
    /// Plans `total` bytes sent with the header `first` (its last flag is ignored) in ULPDUs
    /// of at most `mulpdu` bytes. `None` if `mulpdu` leaves no room for payload after the
    /// header, or if the opcode carries no payload (read request, terminate, RFC 7306's
    /// messages) and `total` is not 0.
    pub fn new(first: Segment, total: u32, mulpdu: u16) -> Option<Self> {
        let step = usize::from(mulpdu).checked_sub(first.header_len())?;
        if step == 0 || (first.opcode.is_bare() && total != 0) {
            return None;
        }
        Some(Self {
            first,
            total,
            step: step as u32,
            done: 0,
            finished: false,
        })
    }
}

impl Iterator for Segmenter {
    type Item = SegmentPlan;

    fn next(&mut self) -> Option<SegmentPlan> {
        if self.finished {
            return None;
        }
        let offset = self.done;
        let len = (self.total - offset).min(self.step);
        self.done += len;
        self.finished = self.done == self.total;
        let mut segment = self.first;
        segment.last = self.finished;
        segment.placement = match segment.placement {
            Placement::Tagged { stag, to } => Placement::Tagged {
                stag,
                to: to.wrapping_add(u64::from(offset)),
            },
            Placement::Untagged {
                qn,
                msn,
                mo,
                inv_stag,
            } => Placement::Untagged {
                qn,
                msn,
                mo: mo.wrapping_add(offset),
                inv_stag,
            },
        };
        Some(SegmentPlan {
            segment,
            offset,
            len,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn send(msn: u32, mo: u32, last: bool) -> Segment {
        Segment {
            opcode: Opcode::Send,
            last,
            placement: Placement::Untagged {
                qn: QN_SEND,
                msn,
                mo,
                inv_stag: 0,
            },
            rdmap: RdmapHeader::None,
        }
    }

    #[test]
    fn send_header_layout() {
        let mut b = [0u8; 32];
        assert_eq!(send(1, 0, true).write(&mut b), Some(18));
        assert_eq!(
            b[..18],
            [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        assert_eq!(parse(&b[..18]), Ok((send(1, 0, true), 18)));
    }

    #[test]
    fn write_and_read_request_layout() {
        let w = Segment {
            opcode: Opcode::Write,
            last: false,
            placement: Placement::Tagged {
                stag: 0x1234_5678,
                to: 0x1122_3344_5566_7788,
            },
            rdmap: RdmapHeader::None,
        };
        let mut b = [0u8; 64];
        assert_eq!(w.write(&mut b), Some(14));
        assert_eq!(b[0], 0x81);
        assert_eq!(b[1], 0x40);
        assert_eq!(b[2..6], [0x12, 0x34, 0x56, 0x78]);
        assert_eq!(parse(&b[..20]), Ok((w, 14)));

        let r = Segment {
            opcode: Opcode::ReadRequest,
            last: true,
            placement: Placement::Untagged {
                qn: QN_READ_REQUEST,
                msn: 7,
                mo: 0,
                inv_stag: 0,
            },
            rdmap: RdmapHeader::ReadRequest(ReadRequest {
                sink_stag: 1,
                sink_to: 2,
                size: 3,
                source_stag: 4,
                source_to: 5,
            }),
        };
        assert_eq!(r.write(&mut b), Some(46));
        assert_eq!(b[1], 0x41);
        assert_eq!(parse(&b[..46]), Ok((r, 46)));
        // Payload after a read request, or a read request that is not last, is refused.
        assert_eq!(r.check_payload_len(1), Err(TermCode::DDP_UT_INVALID_MO));
        assert_eq!(r.check_payload_len(0), Ok(()));
        b[0] &= !0x40;
        assert_eq!(parse(&b[..46]), Err(TermCode::DDP_UT_INVALID_MO));
    }

    #[test]
    fn bad_headers_get_their_terminate_codes() {
        let mut b = [0u8; 18];
        send(1, 0, true).write(&mut b).unwrap();
        let mut v = b;
        v[0] &= !0x03;
        assert_eq!(parse(&v), Err(TermCode::DDP_UT_VERSION));
        let mut v = b;
        v[1] &= 0x3f;
        assert_eq!(parse(&v), Err(TermCode::RDMAP_VERSION));
        let mut v = b;
        v[1] = 0x4c;
        assert_eq!(parse(&v), Err(TermCode::RDMAP_OPCODE));
        let mut v = b;
        v[0] |= 0x80; // tagged send
        assert_eq!(parse(&v), Err(TermCode::RDMAP_OPCODE));
        let mut v = b;
        v[9] = 1; // a send on the read request queue
        assert_eq!(parse(&v), Err(TermCode::DDP_UT_INVALID_QN));
        assert_eq!(parse(&b[..17]), Err(TermCode::LLP_FRAMING));
    }

    #[test]
    fn terminate_word() {
        let t = Terminate {
            code: TermCode::DDP_UT_NO_BUFFER,
            segment_len_valid: true,
            ddp_header: true,
            rdmap_header: false,
        };
        assert_eq!(t.to_word(), 0x1202_c000);
        assert_eq!(Terminate::from_word(t.to_word()), Some(t));
        assert_eq!(Terminate::from_word(0x3000_0000), None);
    }

    #[test]
    fn untagged_queue_sequence() {
        let mut q = UntaggedQueue::new();
        assert_eq!(
            q.accept(2, 0, true, 10, 100),
            Err(TermCode::DDP_UT_MSN_RANGE)
        );
        let p = q.accept(1, 0, false, 10, 100).unwrap();
        assert!(p.first && !p.last);
        assert_eq!(
            q.accept(1, 5, false, 10, 100),
            Err(TermCode::DDP_UT_INVALID_MO)
        );
        assert_eq!(
            q.accept(1, 10, true, 91, 100),
            Err(TermCode::DDP_UT_TOO_LONG)
        );
        let p = q.accept(1, 10, true, 90, 100).unwrap();
        assert!(!p.first && p.last);
        assert_eq!(q.msn(), 2);
        assert!(!q.in_progress());
    }

    #[test]
    fn segmenter_cuts_at_mulpdu() {
        let plans: Vec<_> = Segmenter::new(send(3, 0, false), 3000, 1442 - 2)
            .unwrap()
            .collect();
        assert_eq!(plans.len(), 3);
        assert_eq!(plans[0].len, 1440 - 18);
        assert_eq!(plans[2].offset + plans[2].len, 3000);
        assert!(plans[2].segment.last && !plans[0].segment.last);
        let zero: Vec<_> = Segmenter::new(send(3, 0, false), 0, 100).unwrap().collect();
        assert_eq!(zero.len(), 1);
        assert!(zero[0].segment.last);
        assert!(Segmenter::new(send(3, 0, false), 1, 18).is_none());
    }

    #[test]
    fn rfc7306_layouts() {
        let mut b = [0u8; MAX_HDR_LEN];
        let untagged = |opcode: Opcode, msn, rdmap| Segment {
            opcode,
            last: true,
            placement: Placement::Untagged {
                qn: opcode.queue().unwrap(),
                msn,
                mo: 0,
                inv_stag: 0,
            },
            rdmap,
        };
        let imm = untagged(
            Opcode::ImmediateDataSe,
            4,
            RdmapHeader::Immediate(0x0102_0304_0506_0708),
        );
        assert_eq!(imm.write(&mut b), Some(26));
        assert_eq!(b[..2], [0x41, 0x49]);
        assert_eq!(b[6..10], [0, 0, 0, 0]);
        assert_eq!(b[18..26], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(parse(&b[..26]), Ok((imm, 26)));
        assert_eq!(imm.check_payload_len(8), Err(TermCode::DDP_UT_INVALID_MO));

        let req = AtomicRequest::cmp_swap(0x11, 0x2233_4455, 0x1000, 5, 6);
        let a = untagged(Opcode::AtomicRequest, 9, RdmapHeader::AtomicRequest(req));
        assert_eq!(a.write(&mut b), Some(70));
        assert_eq!(b[1], 0x4a);
        assert_eq!(b[6..10], [0, 0, 0, 1]);
        assert_eq!(b[18..22], [0, 0, 0, 2]);
        assert_eq!(b[22..26], [0, 0, 0, 0x11]);
        assert_eq!(b[26..30], [0x22, 0x33, 0x44, 0x55]);
        assert_eq!(b[30..38], [0, 0, 0, 0, 0, 0, 0x10, 0]);
        assert_eq!(b[38..46], [0, 0, 0, 0, 0, 0, 0, 6]);
        assert_eq!(b[46..54], [0xff; 8]);
        assert_eq!(b[54..62], [0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(b[62..70], [0xff; 8]);
        assert_eq!(parse(&b[..70]), Ok((a, 70)));
        // Reserved bits of the AOpCode word are ignored; undefined AOpCodes are refused.
        b[18] = 0xf0;
        assert_eq!(parse(&b[..70]), Ok((a, 70)));
        b[21] = 1;
        assert_eq!(parse(&b[..70]), Err(TermCode::RDMAP_OPCODE));

        let resp = untagged(
            Opcode::AtomicResponse,
            1,
            RdmapHeader::AtomicResponse(AtomicResponse {
                req_id: 7,
                orig: u64::MAX - 1,
            }),
        );
        assert_eq!(resp.write(&mut b), Some(30));
        assert_eq!(b[6..10], [0, 0, 0, 3]);
        assert_eq!(b[18..22], [0, 0, 0, 7]);
        assert_eq!(parse(&b[..30]), Ok((resp, 30)));
        // The wrong queue, or more than one segment, is refused.
        b[9] = 0;
        assert_eq!(parse(&b[..30]), Err(TermCode::DDP_UT_INVALID_QN));
        b[9] = 3;
        b[0] &= !0x40;
        assert_eq!(parse(&b[..30]), Err(TermCode::DDP_UT_INVALID_MO));
        // A header that is not the opcode's is not written.
        let mut wrong = resp;
        wrong.rdmap = RdmapHeader::None;
        assert_eq!(wrong.write(&mut b), None);
    }

    #[test]
    fn atomic_semantics() {
        let fa = AtomicRequest::fetch_add(0, 0, 0, 5);
        assert!(fa.is_plain());
        assert_eq!(fa.apply(u64::MAX), 4);
        let cs = AtomicRequest::cmp_swap(0, 0, 0, 7, 9);
        assert!(cs.is_plain());
        assert_eq!(cs.apply(7), 9);
        assert_eq!(cs.apply(8), 8);
        // Two 32-bit fields: no carry from the low one into the high one.
        let two = AtomicRequest {
            data_mask: 0x8000_0000_8000_0000,
            ..AtomicRequest::fetch_add(0, 0, 0, 0x0000_0001_0000_0001)
        };
        assert!(!two.is_plain());
        assert_eq!(two.apply(0x0000_0005_ffff_ffff), 0x0000_0006_0000_0000);
        // Compare and swap of the low byte only.
        let low = AtomicRequest {
            data_mask: 0xff,
            compare_mask: 0xff,
            ..AtomicRequest::cmp_swap(0, 0, 0, 0x12, 0xab)
        };
        assert_eq!(low.apply(0x7700_0012), 0x7700_00ab);
        assert_eq!(low.apply(0x7700_0013), 0x7700_0013);
    }

    /// RFC 7306's bit-by-bit add: the carry out of a bit set in the mask is dropped.
    fn ripple_add(a: u64, b: u64, mask: u64) -> u64 {
        let (mut carry, mut sum) = (false, 0u64);
        for i in 0..64 {
            let bit = 1u64 << i;
            let (x, y) = (a & bit != 0, b & bit != 0);
            if x ^ y ^ carry {
                sum |= bit;
            }
            carry = ((x && y) || (carry && (x ^ y))) && mask & bit == 0;
        }
        sum
    }

    fn any_segment() -> impl Strategy<Value = Segment> {
        (
            0u8..12,
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(|(op, last, a, to, msn, mo)| {
                let opcode = Opcode::from_bits(op).unwrap();
                let placement = match opcode.queue() {
                    None => Placement::Tagged { stag: a, to },
                    Some(qn) => Placement::Untagged {
                        qn,
                        msn,
                        mo: if opcode.is_single() { 0 } else { mo },
                        inv_stag: a,
                    },
                };
                let rdmap = match opcode {
                    Opcode::ReadRequest => RdmapHeader::ReadRequest(ReadRequest {
                        sink_stag: a,
                        sink_to: to,
                        size: msn,
                        source_stag: mo,
                        source_to: !to,
                    }),
                    Opcode::Terminate => RdmapHeader::Terminate(Terminate {
                        code: TermCode::RDMAP_ACCESS,
                        segment_len_valid: last,
                        ddp_header: true,
                        rdmap_header: false,
                    }),
                    Opcode::ImmediateData | Opcode::ImmediateDataSe => {
                        RdmapHeader::Immediate(to.rotate_left(msn))
                    }
                    Opcode::AtomicRequest => RdmapHeader::AtomicRequest(AtomicRequest {
                        op: if last {
                            AtomicOp::FetchAdd
                        } else {
                            AtomicOp::CmpSwap
                        },
                        req_id: msn,
                        stag: a,
                        to,
                        data: !to,
                        data_mask: to.rotate_left(7),
                        compare: u64::from(mo),
                        compare_mask: to.rotate_left(13),
                    }),
                    Opcode::AtomicResponse => RdmapHeader::AtomicResponse(AtomicResponse {
                        req_id: a,
                        orig: to,
                    }),
                    _ => RdmapHeader::None,
                };
                Segment {
                    opcode,
                    last: last || opcode.is_single(),
                    placement,
                    rdmap,
                }
            })
    }

    proptest! {
        #[test]
        fn write_then_parse(seg in any_segment()) {
            let mut b = [0u8; MAX_HDR_LEN];
            let n = seg.write(&mut b).unwrap();
            prop_assert_eq!(n, seg.header_len());
            prop_assert_eq!(header_len([b[0], b[1]]), Ok(n));
            prop_assert_eq!(parse(&b[..n]), Ok((seg, n)));
        }

        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok((seg, n)) = parse(&b) {
                let mut out = [0u8; MAX_HDR_LEN];
                prop_assert_eq!(seg.write(&mut out), Some(n));
                // Reserved bits aside, the header reads back the same.
                prop_assert_eq!(parse(&out[..n]).map(|(s, _)| s), Ok(seg));
            }
        }

        #[test]
        fn masked_add_is_the_rfcs(a: u64, b: u64, mask: u64) {
            prop_assert_eq!(masked_add(a, b, mask), ripple_add(a, b, mask));
            prop_assert_eq!(masked_add(a, b, 0), a.wrapping_add(b));
        }

        #[test]
        fn segments_cover_the_message(total in 0u32..100_000, mulpdu in 19u16..9000) {
            let mut next = 0;
            let mut count = 0;
            for p in Segmenter::new(send(9, 0, false), total, mulpdu).unwrap() {
                prop_assert_eq!(p.offset, next);
                prop_assert!(p.len as usize + 18 <= mulpdu as usize);
                prop_assert_eq!(p.segment.placement, send(9, p.offset, false).placement);
                next += p.len;
                count += 1;
                prop_assert_eq!(p.segment.last, next == total);
            }
            prop_assert_eq!(next, total);
            prop_assert!(count >= 1);
        }
    }
}
