// SPDX-License-Identifier: GPL-2.0

//! MPA (RFC 5044, with RFC 6581's enhanced connection establishment): the request and reply
//! frames that start an iWARP connection, their negotiation, and the framing of ULPDUs into
//! FPDUs on the transmit side (the receive side is [`super::stream`]).
//!
//! An FPDU is `ULPDU length (2) | ULPDU | pad to 4 bytes | CRC (4)`, with a 4-byte marker
//! (`reserved (2) | FPDUPTR (2)`) inserted at every 512th byte of the stream when the receiver
//! asked for markers. The first marker sits at the first byte after the MPA request or reply
//! frame; FPDUPTR is the distance from the marker back to its FPDU's ULPDU length field (0 for
//! a marker immediately before the length field). The CRC is CRC-32C over the FPDU from its
//! first byte (a marker or the length field) through the pad, markers included, and is zero
//! when CRCs were not negotiated.
//!
//! This file is self-contained apart from its sibling modules and `crc32c`: it is compiled
//! both as a module of the `oxrdma-wire` crate and, via `#[path]`, of the kernel crate.

use super::super::crc32c::{Crc32c, Crc32cEngine, SoftCrc32c};

/// The key of an MPA request frame.
pub const KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// The key of an MPA reply frame.
pub const KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Bytes of a request or reply frame's header (key, flags, revision, private data length).
pub const RR_HDR_LEN: usize = 20;
/// The most private data a request or reply frame may carry (RFC 5044).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Bytes of RFC 6581's IRD/ORD words at the start of a revision 2 frame's private data.
pub const IRD_ORD_LEN: usize = 4;
/// The largest IRD or ORD RFC 6581 can express.
pub const IRD_ORD_MAX: u16 = 0x3fff;
/// Bytes of the ULPDU length field.
pub const LEN_FIELD: usize = 2;
/// Bytes of the CRC field.
pub const CRC_LEN: usize = 4;
/// Bytes of a marker.
pub const MARKER_LEN: usize = 4;
/// Distance between markers in the stream.
pub const MARKER_INTERVAL: u32 = 512;

/// Request/reply flags byte: the sender wants markers in what it receives.
const FLAG_MARKERS: u8 = 0x80;
/// Request/reply flags byte: the sender wants CRCs.
const FLAG_CRC: u8 = 0x40;
/// Reply flags byte: the connection is rejected.
const FLAG_REJECT: u8 = 0x20;
/// Request/reply flags byte (revision 2): the private data starts with RFC 6581's IRD/ORD.
const FLAG_ENHANCED: u8 = 0x10;
/// Request flags byte, a reserved bit of RFC 5044 (oxiwarp's): the initiator offers RFC
/// 7306's extensions. RFC 7306 leaves their negotiation to each implementation; a receiver
/// ignores reserved bits, as RFC 5044 asks.
const FLAG_EXT_OFFER: u8 = 0x04;
/// Reply flags byte, a reserved bit (oxiwarp's): the responder takes the offer. A bit other
/// than the offer's, because siw answers with its copy of the request's flags byte, so an
/// echoed offer must not read as an acceptance.
const FLAG_EXT_ACCEPT: u8 = 0x02;

/// IRD word: peer-to-peer mode (a ready-to-receive message follows the reply).
const P2P: u16 = 0x8000;
/// IRD word: a zero-length send may be the ready-to-receive message.
const RTR_SEND: u16 = 0x4000;
/// ORD word: a zero-length RDMA write may be the ready-to-receive message.
const RTR_WRITE: u16 = 0x8000;
/// ORD word: a zero-length RDMA read may be the ready-to-receive message.
const RTR_READ: u16 = 0x4000;

/// Why a request or reply frame is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RrError {
    /// Fewer bytes than the frame needs.
    Short,
    /// Not the expected key (request where a reply was due, or not MPA at all).
    Key,
    /// A revision this implementation does not speak (1 and 2 are spoken).
    Revision(u8),
    /// More private data than RFC 5044 allows.
    PrivateDataTooLong(u16),
    /// An enhanced frame whose private data cannot hold the IRD/ORD words.
    NoIrdOrd,
    /// The peer rejected the connection (reply with the reject flag).
    Rejected,
    /// The reply's parameters do not go with the request (markers or CRC refused, a
    /// ready-to-receive kind that was not offered).
    Mismatch,
}

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RrKind {
    /// The initiator's frame.
    Request,
    /// The responder's frame.
    Reply,
}

/// The header of a request or reply frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrHeader {
    /// Request or reply.
    pub kind: RrKind,
    /// M: the sender wants markers in the stream it receives.
    pub markers: bool,
    /// C: the sender wants CRCs.
    pub crc: bool,
    /// R: the connection is rejected (replies only).
    pub reject: bool,
    /// The private data starts with RFC 6581's IRD/ORD words (revision 2 only).
    pub enhanced: bool,
    /// RFC 7306's extensions offered (request) or taken (reply): oxiwarp's reserved bits.
    pub rdmap_ext: bool,
    /// MPA revision, 1 or 2.
    pub revision: u8,
    /// Bytes of private data after the header (IRD/ORD words included).
    pub pd_len: u16,
}

/// The flags byte's bit that says the extensions are offered or taken in a frame of `kind`.
const fn ext_flag(kind: RrKind) -> u8 {
    match kind {
        RrKind::Request => FLAG_EXT_OFFER,
        RrKind::Reply => FLAG_EXT_ACCEPT,
    }
}

impl RrHeader {
    /// Parses the first [`RR_HDR_LEN`] bytes of `b` as a frame of kind `kind`. Unknown flag
    /// bits are ignored; the enhanced flag counts only in revision 2.
    pub fn parse(b: &[u8], kind: RrKind) -> Result<Self, RrError> {
        let b = b.get(..RR_HDR_LEN).ok_or(RrError::Short)?;
        let key = match kind {
            RrKind::Request => &KEY_REQUEST,
            RrKind::Reply => &KEY_REPLY,
        };
        if b[..16] != key[..] {
            return Err(RrError::Key);
        }
        let flags = b[16];
        let revision = b[17];
        if !(1..=2).contains(&revision) {
            return Err(RrError::Revision(revision));
        }
        let pd_len = u16::from_be_bytes([b[18], b[19]]);
        if usize::from(pd_len) > MAX_PRIVATE_DATA {
            return Err(RrError::PrivateDataTooLong(pd_len));
        }
        let enhanced = revision == 2 && flags & FLAG_ENHANCED != 0;
        if enhanced && usize::from(pd_len) < IRD_ORD_LEN {
            return Err(RrError::NoIrdOrd);
        }
        Ok(Self {
            kind,
            markers: flags & FLAG_MARKERS != 0,
            crc: flags & FLAG_CRC != 0,
            reject: kind == RrKind::Reply && flags & FLAG_REJECT != 0,
            enhanced,
            rdmap_ext: flags & ext_flag(kind) != 0,
            revision,
            pd_len,
        })
    }

    /// The header's bytes.
    pub fn to_bytes(&self) -> [u8; RR_HDR_LEN] {
        let mut b = [0u8; RR_HDR_LEN];
        copy(
            &mut b[..16],
            match self.kind {
                RrKind::Request => &KEY_REQUEST,
                RrKind::Reply => &KEY_REPLY,
            },
        );
        b[16] = (if self.markers { FLAG_MARKERS } else { 0 })
            | (if self.crc { FLAG_CRC } else { 0 })
            | (if self.reject { FLAG_REJECT } else { 0 })
            | (if self.enhanced { FLAG_ENHANCED } else { 0 })
            | (if self.rdmap_ext {
                ext_flag(self.kind)
            } else {
                0
            });
        b[17] = self.revision;
        copy(&mut b[18..20], &self.pd_len.to_be_bytes());
        b
    }
}

/// Which ready-to-receive messages (RFC 6581) a side can send or accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtrSet {
    /// A zero-length send.
    pub send: bool,
    /// A zero-length RDMA write.
    pub write: bool,
    /// A zero-length RDMA read.
    pub read: bool,
}

/// The ready-to-receive message of a peer-to-peer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rtr {
    /// A zero-length send.
    Send,
    /// A zero-length RDMA write.
    Write,
    /// A zero-length RDMA read.
    Read,
}

/// RFC 6581's IRD/ORD words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IrdOrd {
    /// Inbound RDMA read requests the sender can have outstanding (14 bits).
    pub ird: u16,
    /// Outbound RDMA read requests the sender wants to have outstanding (14 bits).
    pub ord: u16,
    /// Peer-to-peer mode: a ready-to-receive message follows.
    pub peer_to_peer: bool,
    /// The ready-to-receive kinds offered (request) or the one chosen (reply).
    pub rtr: RtrSet,
}

impl IrdOrd {
    /// Reads the words from the first [`IRD_ORD_LEN`] bytes of the private data.
    pub fn parse(b: &[u8]) -> Result<Self, RrError> {
        let b = b.get(..IRD_ORD_LEN).ok_or(RrError::NoIrdOrd)?;
        let ird = u16::from_be_bytes([b[0], b[1]]);
        let ord = u16::from_be_bytes([b[2], b[3]]);
        Ok(Self {
            ird: ird & IRD_ORD_MAX,
            ord: ord & IRD_ORD_MAX,
            peer_to_peer: ird & P2P != 0,
            rtr: RtrSet {
                send: ird & RTR_SEND != 0,
                write: ord & RTR_WRITE != 0,
                read: ord & RTR_READ != 0,
            },
        })
    }

    /// The words' bytes (IRD and ORD above 14 bits are clamped).
    pub fn to_bytes(&self) -> [u8; IRD_ORD_LEN] {
        let ird = self.ird.min(IRD_ORD_MAX)
            | (if self.peer_to_peer { P2P } else { 0 })
            | (if self.rtr.send { RTR_SEND } else { 0 });
        let ord = self.ord.min(IRD_ORD_MAX)
            | (if self.rtr.write { RTR_WRITE } else { 0 })
            | (if self.rtr.read { RTR_READ } else { 0 });
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        [a, b, c, d]
    }
}

/// What one side wants from a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// MPA revision to speak (1 or 2; a responder answers in the initiator's revision if
    /// lower).
    pub revision: u8,
    /// Ask for CRCs.
    pub crc: bool,
    /// Ask for markers in the stream this side receives.
    pub markers: bool,
    /// Inbound RDMA reads this side can serve at once.
    pub ird: u16,
    /// Outbound RDMA reads this side wants outstanding at once.
    pub ord: u16,
    /// Peer-to-peer mode: the ready-to-receive messages this side can send (as initiator)
    /// or accept (as responder); `None` for client-server mode.
    pub rtr: Option<RtrSet>,
    /// Offer (initiator) or take (responder) RFC 7306's extensions.
    pub rdmap_ext: bool,
}

/// The parameters both sides use once the reply is through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The revision of the exchange.
    pub revision: u8,
    /// CRCs are sent and checked.
    pub crc: bool,
    /// Markers go into the stream this side sends.
    pub markers_tx: bool,
    /// Markers come in the stream this side receives.
    pub markers_rx: bool,
    /// This side's inbound RDMA reads at once.
    pub ird: u16,
    /// This side's outbound RDMA reads at once.
    pub ord: u16,
    /// The ready-to-receive message (peer-to-peer mode).
    pub rtr: Option<Rtr>,
    /// Both sides speak RFC 7306's extensions (immediate data, atomics).
    pub rdmap_ext: bool,
}

impl Policy {
    /// The initiator's request header and, for revision 2, its IRD/ORD words (the ULP's
    /// private data of `ulp_pd_len` bytes follows them).
    pub fn request(&self, ulp_pd_len: u16) -> Result<(RrHeader, Option<IrdOrd>), RrError> {
        let enhanced = self.revision == 2;
        let words = enhanced.then_some(IrdOrd {
            ird: self.ird,
            ord: self.ord,
            peer_to_peer: self.rtr.is_some(),
            rtr: self.rtr.unwrap_or_default(),
        });
        let header = RrHeader {
            kind: RrKind::Request,
            markers: self.markers,
            crc: self.crc,
            reject: false,
            enhanced,
            rdmap_ext: self.rdmap_ext,
            revision: self.revision,
            pd_len: pd_len(enhanced, ulp_pd_len)?,
        };
        Ok((header, words))
    }

    /// The responder's answer to `req` (with its IRD/ORD words `words`): the reply header,
    /// its IRD/ORD words, and what the connection uses. `reject` builds a rejecting reply
    /// (the returned parameters are then meaningless).
    pub fn reply(
        &self,
        req: &RrHeader,
        words: Option<IrdOrd>,
        ulp_pd_len: u16,
        reject: bool,
    ) -> Result<(RrHeader, Option<IrdOrd>, Negotiated), RrError> {
        let revision = self.revision.min(req.revision).max(1);
        let enhanced = revision == 2 && req.enhanced;
        let peer = if enhanced { words } else { None };
        // The initiator's reads are bounded by what this side can serve and the other way
        // round; without RFC 6581 neither side learns the other's numbers.
        let (ird, ord) = match peer {
            Some(w) => (self.ird, self.ord.min(w.ird)),
            None => (self.ird, self.ord),
        };
        let rtr = match (self.rtr, peer) {
            (Some(ours), Some(w)) if w.peer_to_peer => {
                let offered = w.rtr;
                Some(if offered.write && ours.write {
                    Rtr::Write
                } else if offered.read && ours.read {
                    Rtr::Read
                } else if offered.send && ours.send {
                    Rtr::Send
                } else if reject {
                    Rtr::Write
                } else {
                    return Err(RrError::Mismatch);
                })
            }
            _ => None,
        };
        let reply_words = enhanced.then_some(IrdOrd {
            ird,
            ord,
            peer_to_peer: rtr.is_some(),
            rtr: rtr_set(rtr),
        });
        let crc = self.crc || req.crc;
        let rdmap_ext = self.rdmap_ext && req.rdmap_ext && !reject;
        let header = RrHeader {
            kind: RrKind::Reply,
            markers: self.markers,
            crc,
            reject,
            enhanced,
            rdmap_ext,
            revision,
            pd_len: pd_len(enhanced, ulp_pd_len)?,
        };
        let negotiated = Negotiated {
            revision,
            crc,
            markers_tx: req.markers,
            markers_rx: self.markers,
            ird,
            ord,
            rtr,
            rdmap_ext,
        };
        Ok((header, reply_words, negotiated))
    }

    /// The initiator's view once the reply `rep` (with its IRD/ORD words `words`) to the
    /// request `req` this side sent is in. A reply that rejects, or whose parameters do
    /// not fit the request, is an error.
    pub fn complete(
        &self,
        req: &RrHeader,
        rep: &RrHeader,
        words: Option<IrdOrd>,
    ) -> Result<Negotiated, RrError> {
        if rep.reject {
            return Err(RrError::Rejected);
        }
        if rep.revision > req.revision {
            return Err(RrError::Revision(rep.revision));
        }
        let peer = if rep.enhanced && req.enhanced {
            words
        } else {
            None
        };
        let rtr = match peer {
            Some(w) if w.peer_to_peer => {
                let offered = self.rtr.ok_or(RrError::Mismatch)?;
                let chosen = w.rtr;
                match (chosen.write, chosen.read, chosen.send) {
                    (true, false, false) if offered.write => Some(Rtr::Write),
                    (false, true, false) if offered.read => Some(Rtr::Read),
                    (false, false, true) if offered.send => Some(Rtr::Send),
                    _ => return Err(RrError::Mismatch),
                }
            }
            _ => None,
        };
        let ord = match peer {
            Some(w) => self.ord.min(w.ird),
            None => self.ord,
        };
        Ok(Negotiated {
            revision: rep.revision,
            crc: req.crc || rep.crc,
            markers_tx: rep.markers,
            markers_rx: req.markers,
            ird: self.ird,
            ord,
            rtr,
            rdmap_ext: self.rdmap_ext && req.rdmap_ext && rep.rdmap_ext,
        })
    }
}

/// The set with only `rtr` in it.
fn rtr_set(rtr: Option<Rtr>) -> RtrSet {
    RtrSet {
        send: rtr == Some(Rtr::Send),
        write: rtr == Some(Rtr::Write),
        read: rtr == Some(Rtr::Read),
    }
}

/// The private data length of a frame carrying `ulp` bytes of the ULP's private data.
fn pd_len(enhanced: bool, ulp: u16) -> Result<u16, RrError> {
    let total = usize::from(ulp) + if enhanced { IRD_ORD_LEN } else { 0 };
    if total > MAX_PRIVATE_DATA {
        return Err(RrError::PrivateDataTooLong(total as u16));
    }
    Ok(total as u16)
}

/// Pad bytes after a ULPDU of `ulpdu_len` bytes (the length field and the ULPDU end on a
/// 4-byte boundary).
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ulpdu_len + LEN_FIELD) % 4) % 4
}

/// The largest ULPDU an FPDU within `emss` bytes (the TCP effective maximum segment size) can
/// carry, with or without markers (RFC 5044, section 5.1). `None` if none fits.
pub fn mulpdu(emss: u32, markers: bool) -> Option<u16> {
    let room = if markers {
        let marker_bytes = MARKER_LEN as u32 * emss.div_ceil(MARKER_INTERVAL);
        emss.checked_sub(LEN_FIELD as u32 + CRC_LEN as u32 + marker_bytes + emss % 4)?
    } else {
        // 2 + ULPDU + pad + 4 <= emss.
        ((emss.checked_sub(CRC_LEN as u32)? / 4) * 4).checked_sub(LEN_FIELD as u32)?
    };
    (room > 0).then(|| room.min(u32::from(u16::MAX)) as u16)
}

/// The CRC field's bytes for the CRC-32C `crc`: least significant byte first, as Linux siw
/// sends it (the byte order of the kernel's crc32c digest) and as iSCSI does.
pub const fn crc_to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// The CRC-32C a CRC field holds.
pub const fn crc_from_wire(field: [u8; 4]) -> u32 {
    u32::from_le_bytes(field)
}

/// Why an FPDU cannot be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The ULPDU exceeds 65535 bytes, or (with markers) its FPDU is too long for FPDUPTR.
    TooLong,
    /// The output buffer is shorter than [`Framer::wire_len`].
    NoRoom,
    /// [`Framer::seal`] on a stream with markers (which cannot be framed in place).
    Markers,
    /// [`Framer::seal_around`] on a stream with CRCs (whose payload it does not see).
    Crc,
}

/// The transmit side of a connection's MPA stream in full operation: frames ULPDUs into FPDUs,
/// with CRCs and markers as negotiated, and keeps the stream position markers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framer {
    /// Fill the CRC field.
    crc: bool,
    /// Insert markers.
    markers: bool,
    /// Stream position, modulo [`MARKER_INTERVAL`], since the first FPDU.
    pos: u32,
}

impl Framer {
    /// A stream about to send its first FPDU.
    pub const fn new(crc: bool, markers: bool) -> Self {
        Self {
            crc,
            markers,
            pos: 0,
        }
    }

    /// Whether CRCs are filled in.
    pub const fn crc(&self) -> bool {
        self.crc
    }

    /// Whether markers are inserted.
    pub const fn markers(&self) -> bool {
        self.markers
    }

    /// Bytes the FPDU of a ULPDU of `ulpdu_len` bytes takes on the wire if sent next.
    pub fn wire_len(&self, ulpdu_len: usize) -> usize {
        let plain = LEN_FIELD + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN;
        if !self.markers {
            return plain;
        }
        plain + MARKER_LEN * markers_in(self.pos, plain)
    }

    /// Writes the FPDU of the ULPDU made of `parts` (in order) into `out`, and returns its
    /// length; the stream position moves past it.
    pub fn frame(&mut self, parts: &[&[u8]], out: &mut [u8]) -> Result<usize, FrameError> {
        self.frame_with(&SoftCrc32c, parts, out)
    }

    /// [`Framer::frame`], with the CRC computed by `crc`.
    pub fn frame_with<E: Crc32cEngine>(
        &mut self,
        crc: &E,
        parts: &[&[u8]],
        out: &mut [u8],
    ) -> Result<usize, FrameError> {
        let ulpdu_len: usize = parts.iter().map(|p| p.len()).sum();
        let len = u16::try_from(ulpdu_len).map_err(|_| FrameError::TooLong)?;
        let total = self.wire_len(ulpdu_len);
        if self.markers && total > usize::from(u16::MAX) {
            return Err(FrameError::TooLong);
        }
        let out = out.get_mut(..total).ok_or(FrameError::NoRoom)?;
        // The length field's stream position: after a marker due at the FPDU's start.
        let header_pos = if self.markers && self.pos % MARKER_INTERVAL == 0 {
            MARKER_LEN as u32
        } else {
            0
        };
        let mut w = MarkedWriter {
            out,
            at: 0,
            pos: self.pos,
            markers: self.markers,
            header_pos,
            crc: self.crc.then_some((crc, Crc32c::new())),
        };
        w.put(&len.to_be_bytes());
        for p in parts {
            w.put(p);
        }
        w.put(&[0u8; 3][..pad_len(ulpdu_len)]);
        // A marker due right before the CRC field is covered by the CRC.
        w.marker_if_due();
        let crc = w
            .crc
            .take()
            .map_or([0; 4], |(_, c)| crc_to_wire(c.finish()));
        w.put(&crc);
        debug_assert_eq!(w.at, total);
        self.pos = (self.pos + total as u32) % MARKER_INTERVAL;
        Ok(total)
    }
}

impl Framer {
    /// Frames in place, on a stream without markers: `out[LEN_FIELD..][..ulpdu_len]` already
    /// holds the ULPDU (built there, saving the copy [`Framer::frame`] makes); writes the
    /// length field before it and the pad and CRC after it. Returns the FPDU's length,
    /// [`Framer::wire_len`].
    pub fn seal(&mut self, out: &mut [u8], ulpdu_len: usize) -> Result<usize, FrameError> {
        self.seal_with(&SoftCrc32c, out, ulpdu_len)
    }

    /// [`Framer::seal`], with the CRC computed by `crc`.
    pub fn seal_with<E: Crc32cEngine>(
        &mut self,
        crc: &E,
        out: &mut [u8],
        ulpdu_len: usize,
    ) -> Result<usize, FrameError> {
        if self.markers {
            return Err(FrameError::Markers);
        }
        let len = u16::try_from(ulpdu_len).map_err(|_| FrameError::TooLong)?;
        let total = self.wire_len(ulpdu_len);
        let out = out.get_mut(..total).ok_or(FrameError::NoRoom)?;
        let [hi, lo] = len.to_be_bytes();
        out[0] = hi;
        out[1] = lo;
        let end = total - CRC_LEN;
        out[LEN_FIELD + ulpdu_len..end].fill(0);
        let crc = if self.crc {
            let mut c = Crc32c::new();
            c.update_with(crc, &out[..end]);
            crc_to_wire(c.finish())
        } else {
            [0; 4]
        };
        for (d, b) in out[end..].iter_mut().zip(crc) {
            *d = b;
        }
        self.pos = (self.pos + total as u32) % MARKER_INTERVAL;
        Ok(total)
    }
}

impl Framer {
    /// Frames an FPDU whose ULPDU payload is sent from elsewhere, on a stream without CRCs
    /// and markers: `head` starts with room for the length field, followed by the ULPDU's
    /// `hdr_len` header bytes (already written); its `payload_len` payload bytes follow on
    /// the wire, then `trailer`, which receives the pad and the (zero) CRC field. Writes the
    /// length field, returns the trailer's length; the stream position moves past the FPDU.
    pub fn seal_around(
        &mut self,
        head: &mut [u8],
        hdr_len: usize,
        payload_len: usize,
        trailer: &mut [u8],
    ) -> Result<usize, FrameError> {
        if self.markers {
            return Err(FrameError::Markers);
        }
        if self.crc {
            return Err(FrameError::Crc);
        }
        let ulpdu_len = hdr_len
            .checked_add(payload_len)
            .ok_or(FrameError::TooLong)?;
        let len = u16::try_from(ulpdu_len).map_err(|_| FrameError::TooLong)?;
        let tail = pad_len(ulpdu_len) + CRC_LEN;
        if head.len() < LEN_FIELD + hdr_len {
            return Err(FrameError::NoRoom);
        }
        let trailer = trailer.get_mut(..tail).ok_or(FrameError::NoRoom)?;
        let [hi, lo] = len.to_be_bytes();
        head[0] = hi;
        head[1] = lo;
        trailer.fill(0);
        let total = self.wire_len(ulpdu_len);
        self.pos = (self.pos + total as u32) % MARKER_INTERVAL;
        Ok(tail)
    }
}

/// Markers an FPDU of `plain` bytes (without markers) starting at stream position `pos`
/// gets: one before each of its bytes that falls on a multiple of [`MARKER_INTERVAL`].
fn markers_in(pos: u32, plain: usize) -> usize {
    let mut count = 0;
    let mut p = pos % MARKER_INTERVAL;
    let mut left = plain;
    loop {
        if p == 0 {
            count += 1;
            p = MARKER_LEN as u32;
        }
        let chunk = left.min((MARKER_INTERVAL - p) as usize);
        left -= chunk;
        if left == 0 {
            return count;
        }
        p = (p + chunk as u32) % MARKER_INTERVAL;
    }
}

/// Writes an FPDU's bytes, inserting markers, and runs the CRC over everything written.
struct MarkedWriter<'a, E> {
    out: &'a mut [u8],
    /// Bytes written to `out`.
    at: usize,
    /// Stream position (modulo the marker interval) of the next byte.
    pos: u32,
    markers: bool,
    /// Offset in the FPDU of its length field (what FPDUPTR points back to).
    header_pos: u32,
    /// The CRC's engine and register, when CRCs are on.
    crc: Option<(&'a E, Crc32c)>,
}

impl<E: Crc32cEngine> MarkedWriter<'_, E> {
    /// Writes a marker if the next byte's stream position is due one.
    fn marker_if_due(&mut self) {
        if self.markers && self.pos == 0 {
            let ptr = (self.at as u32).saturating_sub(self.header_pos) as u16;
            let [a, b] = ptr.to_be_bytes();
            self.emit(&[0, 0, a, b]);
        }
    }

    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            self.marker_if_due();
            let room = if self.markers {
                (MARKER_INTERVAL - self.pos) as usize
            } else {
                bytes.len()
            };
            let (now, rest) = bytes.split_at(bytes.len().min(room));
            self.emit(now);
            bytes = rest;
        }
    }

    fn emit(&mut self, b: &[u8]) {
        copy(&mut self.out[self.at..self.at + b.len()], b);
        if let Some((e, c)) = self.crc.as_mut() {
            c.update_with(*e, b);
        }
        self.at += b.len();
        self.pos = (self.pos + b.len() as u32) % MARKER_INTERVAL;
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

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn policy(revision: u8) -> Policy {
        Policy {
            revision,
            crc: true,
            markers: false,
            ird: 128,
            ord: 128,
            rtr: None,
            rdmap_ext: false,
        }
    }

    #[test]
    fn request_header_bytes() {
        let (h, w) = policy(2).request(10).unwrap();
        let b = h.to_bytes();
        assert_eq!(&b[..16], b"MPA ID Req Frame");
        assert_eq!(b[16], 0x50);
        assert_eq!(b[17], 2);
        assert_eq!(b[18..20], [0, 14]);
        assert_eq!(RrHeader::parse(&b, RrKind::Request), Ok(h));
        assert_eq!(RrHeader::parse(&b, RrKind::Reply), Err(RrError::Key));
        assert_eq!(w.unwrap().to_bytes(), [0, 128, 0, 128]);
    }

    #[test]
    fn bad_frames() {
        let (h, _) = policy(2).request(0).unwrap();
        let mut b = h.to_bytes();
        assert_eq!(
            RrHeader::parse(&b[..19], RrKind::Request),
            Err(RrError::Short)
        );
        b[17] = 3;
        assert_eq!(
            RrHeader::parse(&b, RrKind::Request),
            Err(RrError::Revision(3))
        );
        b[17] = 2;
        b[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(
            RrHeader::parse(&b, RrKind::Request),
            Err(RrError::PrivateDataTooLong(513))
        );
        b[18..20].copy_from_slice(&2u16.to_be_bytes());
        assert_eq!(RrHeader::parse(&b, RrKind::Request), Err(RrError::NoIrdOrd));
        assert_eq!(
            policy(2).request(509),
            Err(RrError::PrivateDataTooLong(513))
        );
    }

    #[test]
    fn negotiation_client_server() {
        let ini = policy(2);
        let resp = Policy {
            crc: false,
            ird: 16,
            ord: 4,
            ..policy(2)
        };
        let (req, w) = ini.request(0).unwrap();
        let (rep, rw, r) = resp.reply(&req, w, 0, false).unwrap();
        let i = ini.complete(&req, &rep, rw).unwrap();
        assert!(i.crc && r.crc);
        assert_eq!((r.ird, r.ord), (16, 4));
        assert_eq!((i.ird, i.ord), (128, 16));
        assert_eq!(i.rtr, None);
        assert_eq!(r.rtr, None);
    }

    #[test]
    fn negotiation_revision_1_and_markers() {
        let ini = Policy {
            markers: true,
            ..policy(2)
        };
        let resp = Policy {
            crc: false,
            ..policy(1)
        };
        let (req, w) = ini.request(3).unwrap();
        let (rep, rw, r) = resp.reply(&req, w, 3, false).unwrap();
        assert_eq!(rep.revision, 1);
        assert!(!rep.enhanced && rw.is_none());
        assert_eq!(rep.pd_len, 3);
        let i = ini.complete(&req, &rep, rw).unwrap();
        assert!(i.markers_rx && !i.markers_tx);
        assert!(r.markers_tx && !r.markers_rx);
        assert_eq!(i.revision, 1);
    }

    #[test]
    fn negotiation_peer_to_peer() {
        let ini = Policy {
            rtr: Some(RtrSet {
                send: false,
                write: true,
                read: true,
            }),
            ..policy(2)
        };
        let resp = Policy {
            rtr: Some(RtrSet {
                send: true,
                write: false,
                read: true,
            }),
            ..policy(2)
        };
        let (req, w) = ini.request(0).unwrap();
        let (rep, rw, r) = resp.reply(&req, w, 0, false).unwrap();
        assert_eq!(r.rtr, Some(Rtr::Read));
        assert_eq!(ini.complete(&req, &rep, rw).unwrap().rtr, Some(Rtr::Read));
        // A responder that accepts none of the offered kinds cannot answer.
        let none = Policy {
            rtr: Some(RtrSet {
                send: true,
                write: false,
                read: false,
            }),
            ..policy(2)
        };
        assert_eq!(none.reply(&req, w, 0, false), Err(RrError::Mismatch));
        // A reply naming a kind that was not offered is refused.
        let bad = IrdOrd {
            rtr: RtrSet {
                send: true,
                write: false,
                read: false,
            },
            ..rw.unwrap()
        };
        assert_eq!(ini.complete(&req, &rep, Some(bad)), Err(RrError::Mismatch));
        let mut rejected = rep;
        rejected.reject = true;
        assert_eq!(ini.complete(&req, &rejected, rw), Err(RrError::Rejected));
    }

    #[test]
    fn negotiation_rdmap_extensions() {
        let ext = Policy {
            rdmap_ext: true,
            ..policy(2)
        };
        let (req, w) = ext.request(0).unwrap();
        let b = req.to_bytes();
        assert_eq!(b[16], 0x54);
        assert_eq!(RrHeader::parse(&b, RrKind::Request), Ok(req));
        // Both sides speak them.
        let (rep, rw, r) = ext.reply(&req, w, 0, false).unwrap();
        assert_eq!(rep.to_bytes()[16], 0x52);
        assert!(r.rdmap_ext);
        assert!(ext.complete(&req, &rep, rw).unwrap().rdmap_ext);
        // A responder that does not.
        let (rep, rw, r) = policy(2).reply(&req, w, 0, false).unwrap();
        assert!(!r.rdmap_ext);
        assert!(!ext.complete(&req, &rep, rw).unwrap().rdmap_ext);
        // A responder that echoes the request's flags byte (siw) has not taken the offer.
        let mut echo = rep.to_bytes();
        echo[16] = b[16];
        let echoed = RrHeader::parse(&echo, RrKind::Reply).unwrap();
        assert!(!echoed.rdmap_ext);
        assert!(!ext.complete(&req, &echoed, rw).unwrap().rdmap_ext);
        // An initiator that does not offer them.
        let (plain, pw) = policy(2).request(0).unwrap();
        let (rep, rw, r) = ext.reply(&plain, pw, 0, false).unwrap();
        assert!(!r.rdmap_ext && !rep.rdmap_ext);
        assert!(!policy(2).complete(&plain, &rep, rw).unwrap().rdmap_ext);
    }

    #[test]
    fn pad_and_mulpdu() {
        assert_eq!(pad_len(18), 0);
        assert_eq!(pad_len(19), 3);
        assert_eq!(pad_len(21), 1);
        assert_eq!(mulpdu(1448, false), Some(1442));
        assert_eq!(mulpdu(1449, false), Some(1442));
        assert_eq!(mulpdu(1448, true), Some(1430));
        assert_eq!(mulpdu(5, false), None);
        for emss in 8..5000 {
            for m in [false, true] {
                if let Some(u) = mulpdu(emss, m) {
                    let f = Framer::new(true, m);
                    let mut worst = 0;
                    for pos in (0..MARKER_INTERVAL).step_by(4) {
                        let f = Framer { pos, ..f };
                        worst = worst.max(f.wire_len(u.into()));
                    }
                    assert!(worst <= emss as usize, "emss {emss} markers {m}: {worst}");
                }
            }
        }
    }

    #[test]
    fn fpdu_without_markers() {
        let mut f = Framer::new(true, false);
        let mut out = [0u8; 64];
        let n = f.frame(&[&[1, 2, 3], &[4]], &mut out).unwrap();
        assert_eq!(n, 2 + 4 + 2 + 4);
        assert_eq!(out[..8], [0, 4, 1, 2, 3, 4, 0, 0]);
        let crc = super::super::super::crc32c::crc32c(&out[..8]);
        assert_eq!(crc_from_wire([out[8], out[9], out[10], out[11]]), crc);
        let mut nocrc = Framer::new(false, false);
        let n = nocrc.frame(&[&[9; 18]], &mut out).unwrap();
        assert_eq!(n, 24);
        assert_eq!(out[20..24], [0; 4]);
        assert_eq!(f.frame(&[&[0; 65536]], &mut out), Err(FrameError::TooLong));
        assert_eq!(f.frame(&[&[0; 61]], &mut out), Err(FrameError::NoRoom));
    }

    #[test]
    fn seal_frames_in_place_as_frame_does() {
        for crc in [false, true] {
            for n in [0usize, 1, 2, 3, 4, 5, 17, 1000, 1447] {
                let ulpdu: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
                let mut a = Framer::new(crc, false);
                let mut b = a;
                let mut want = vec![0xAA; n + 16];
                let w = a.frame(&[&ulpdu], &mut want).unwrap();
                let mut got = vec![0xAA; n + 16];
                got[LEN_FIELD..LEN_FIELD + n].copy_from_slice(&ulpdu);
                assert_eq!(b.seal(&mut got, n), Ok(w));
                assert_eq!(got[..w], want[..w], "crc {crc} len {n}");
                assert_eq!(a, b);
            }
        }
        let mut f = Framer::new(true, false);
        assert_eq!(f.seal(&mut [0u8; 16], 13), Err(FrameError::NoRoom));
        assert_eq!(f.seal(&mut [0u8; 16], 65536), Err(FrameError::TooLong));
        let mut m = Framer::new(true, true);
        assert_eq!(m.seal(&mut [0u8; 64], 4), Err(FrameError::Markers));
    }

    #[test]
    fn seal_around_frames_as_frame_does() {
        for hdr in [0usize, 14, 18, 28] {
            for n in [0usize, 1, 2, 3, 4, 5, 4096, 32749] {
                let h: Vec<u8> = (0..hdr).map(|i| (i * 5 + 1) as u8).collect();
                let payload: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
                let mut a = Framer::new(false, false);
                let mut b = a;
                let mut want = vec![0xAA; hdr + n + 16];
                let w = a.frame(&[&h, &payload], &mut want).unwrap();
                let mut head = vec![0xAA; LEN_FIELD + hdr];
                head[LEN_FIELD..].copy_from_slice(&h);
                let mut trailer = [0xAAu8; 8];
                let t = b.seal_around(&mut head, hdr, n, &mut trailer).unwrap();
                let mut got = head.clone();
                got.extend_from_slice(&payload);
                got.extend_from_slice(&trailer[..t]);
                assert_eq!(got.len(), w, "hdr {hdr} len {n}");
                assert_eq!(got[..], want[..w], "hdr {hdr} len {n}");
                assert_eq!(a, b);
            }
        }
        let mut f = Framer::new(false, false);
        assert_eq!(
            f.seal_around(&mut [0u8; 4], 4, 0, &mut [0u8; 8]),
            Err(FrameError::NoRoom)
        );
        assert_eq!(
            f.seal_around(&mut [0u8; 6], 4, 1, &mut [0u8; 4]),
            Err(FrameError::NoRoom)
        );
        assert_eq!(
            f.seal_around(&mut [0u8; 6], 4, 65532, &mut [0u8; 8]),
            Err(FrameError::TooLong)
        );
        let mut c = Framer::new(true, false);
        assert_eq!(
            c.seal_around(&mut [0u8; 6], 4, 0, &mut [0u8; 8]),
            Err(FrameError::Crc)
        );
        let mut m = Framer::new(false, true);
        assert_eq!(
            m.seal_around(&mut [0u8; 6], 4, 0, &mut [0u8; 8]),
            Err(FrameError::Markers)
        );
    }

    /// Removes the markers from a stream framed from position 0, checking each one's
    /// FPDUPTR against the FPDU starts `starts` (offsets of length fields in the stream).
    fn strip(stream: &[u8], starts: &[usize]) -> Vec<u8> {
        let mut plain = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            if at % MARKER_INTERVAL as usize == 0 {
                let m = &stream[at..at + 4];
                assert_eq!(m[..2], [0, 0]);
                let ptr = u16::from_be_bytes([m[2], m[3]]) as usize;
                // The FPDU this marker belongs to: the last one starting at or before it,
                // or the one right after it.
                let owner = starts
                    .iter()
                    .rev()
                    .find(|&&s| s <= at)
                    .copied()
                    .filter(|_| !starts.contains(&(at + 4)));
                match owner {
                    Some(s) => assert_eq!(ptr, at - s, "marker at {at}"),
                    None => assert_eq!(ptr, 0, "leading marker at {at}"),
                }
                at += 4;
                continue;
            }
            let end = stream.len().min((at / 512 + 1) * 512);
            plain.extend_from_slice(&stream[at..end]);
            at = end;
        }
        plain
    }

    proptest! {
        #[test]
        fn markers_every_512_bytes(lens in proptest::collection::vec(0usize..3000, 1..8)) {
            let mut f = Framer::new(true, true);
            let mut plainf = Framer::new(true, false);
            let mut stream = Vec::new();
            let mut plain = Vec::new();
            let mut starts = Vec::new();
            for (i, len) in lens.iter().enumerate() {
                let ulpdu = vec![i as u8; *len];
                let mut out = vec![0u8; f.wire_len(*len)];
                let n = f.frame(&[&ulpdu], &mut out).unwrap();
                prop_assert_eq!(n, out.len());
                // The length field follows a leading marker if one is due.
                let lead = if stream.len() % 512 == 0 { 4 } else { 0 };
                starts.push(stream.len() + lead);
                stream.extend_from_slice(&out);
                let mut p = vec![0u8; plainf.wire_len(*len)];
                plainf.frame(&[&ulpdu], &mut p).unwrap();
                plain.extend_from_slice(&p[..p.len() - 4]);
                plain.extend_from_slice(&[0; 4]);
            }
            // Without the markers (and with CRC fields blanked) it is the plain stream.
            let mut stripped = strip(&stream, &starts);
            prop_assert_eq!(stripped.len(), plain.len());
            let mut at = 0;
            for len in &lens {
                let fl = 2 + len + pad_len(*len) + 4;
                stripped[at + fl - 4..at + fl].fill(0);
                at += fl;
            }
            prop_assert_eq!(stripped, plain);
        }
    }
}
