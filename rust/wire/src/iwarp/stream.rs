// SPDX-License-Identifier: GPL-2.0

//! The receive side of an MPA stream in full operation: FPDUs out of a TCP byte stream cut at
//! arbitrary places.
//!
//! [`Deframer::step`] takes whatever bytes the socket has and reports, one at a time, what
//! they complete: a segment's DDP/RDMAP header (buffered inside, at most
//! [`ddp::MAX_HDR_LEN`](super::ddp::MAX_HDR_LEN) bytes), a run of payload bytes (a range of the
//! caller's input, never buffered, so the caller places it straight into the target memory),
//! and the end of an FPDU whose CRC matched. Markers are checked and removed; the CRC runs over
//! every byte of the FPDU. Every error is a [`TermCode`] and is final: the stream has lost its
//! framing and the connection must end.
//!
//! A segment whose header is invalid delivers no payload; its error is reported at the end of
//! its FPDU, after the CRC, so a corrupted header counts as the CRC error it is.
//!
//! This file is self-contained apart from its sibling modules and `crc32c`: it is compiled
//! both as a module of the `oxrdma-wire` crate and, via `#[path]`, of the kernel crate.

use super::super::crc32c::{Crc32c, Crc32cEngine, SoftCrc32c};
use super::ddp::{self, Segment, TermCode, CTRL_LEN, MAX_HDR_LEN};
use super::mpa::{crc_from_wire, pad_len, CRC_LEN, LEN_FIELD, MARKER_INTERVAL, MARKER_LEN};

/// What a [`Deframer::step`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// All input consumed; nothing completed.
    More,
    /// A segment's header; its payload (`payload_len` bytes) follows in [`Event::Payload`]s.
    Header {
        /// The header.
        segment: Segment,
        /// Payload bytes of the segment.
        payload_len: u16,
    },
    /// `len` payload bytes of the current segment, at `start` in the input of this step.
    Payload {
        /// Offset in the input.
        start: usize,
        /// Bytes.
        len: usize,
    },
    /// The current FPDU ended and its CRC (if negotiated) matched.
    End,
}

/// A whole FPDU that [`Deframer::whole_with`] took at once: its payload is
/// `input[start..start + payload_len]`, and `start + payload_len <= consumed <= input.len()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole {
    /// The segment's header.
    pub segment: Segment,
    /// Offset of its payload in the input.
    pub start: usize,
    /// Bytes of payload.
    pub payload_len: u16,
    /// Input bytes the FPDU took (the next step starts after them).
    pub consumed: usize,
}

/// The result of one [`Deframer::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Input bytes consumed (the next step starts after them).
    pub consumed: usize,
    /// What they completed.
    pub event: Event,
}

/// Where in an FPDU the next byte belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Len,
    Header,
    Payload,
    Pad,
    Crc,
}

/// The receive state of one MPA stream.
#[derive(Debug, Clone)]
pub struct Deframer {
    /// Check CRCs.
    crc_on: bool,
    /// Markers come in this stream.
    markers: bool,
    /// Stream position, modulo [`MARKER_INTERVAL`], since the first FPDU.
    pos: u32,
    /// The final error, once one happened.
    failed: Option<TermCode>,
    part: Part,
    crc: Crc32c,
    /// Bytes of the current FPDU so far, markers included.
    fpdu_at: u32,
    /// Offset in the current FPDU of its length field.
    len_at: u32,
    /// Marker bytes collected (a marker can be cut by the stream).
    marker: [u8; MARKER_LEN],
    marker_have: usize,
    /// Bytes of the current part collected (length, header, CRC).
    buf: [u8; MAX_HDR_LEN],
    have: usize,
    /// Header bytes expected (known once the control field is in).
    hdr_len: usize,
    ulpdu_len: u16,
    /// Payload and pad bytes still to come.
    left: usize,
    /// The error of an invalid header, reported at the end of its FPDU.
    pending: Option<TermCode>,
}

impl Deframer {
    /// The state at the first byte after the MPA request or reply frame.
    pub const fn new(crc_on: bool, markers: bool) -> Self {
        Self {
            crc_on,
            markers,
            pos: 0,
            failed: None,
            part: Part::Len,
            crc: Crc32c::new(),
            fpdu_at: 0,
            len_at: 0,
            marker: [0; MARKER_LEN],
            marker_have: 0,
            buf: [0; MAX_HDR_LEN],
            have: 0,
            hdr_len: 0,
            ulpdu_len: 0,
            left: 0,
            pending: None,
        }
    }

    /// Whether the stream is between FPDUs (a connection may end cleanly only there).
    pub const fn at_boundary(&self) -> bool {
        matches!(self.part, Part::Len) && self.fpdu_at == 0 && self.failed.is_none()
    }

    /// Consumes bytes from `input` until one event completes or the input runs out.
    pub fn step(&mut self, input: &[u8]) -> Result<Step, TermCode> {
        self.step_with(&SoftCrc32c, input)
    }

    /// [`Deframer::step`], with CRCs computed by `crc`.
    pub fn step_with<E: Crc32cEngine>(&mut self, crc: &E, input: &[u8]) -> Result<Step, TermCode> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.run(crc, input);
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    /// The common case in one call: when the stream is between FPDUs, has no markers, and
    /// `input` starts with a whole FPDU whose header is valid and whose CRC (if on) matches,
    /// takes that FPDU and returns it, as [`Event::Header`], [`Event::Payload`] and
    /// [`Event::End`] would, its CRC already checked. Otherwise takes nothing and returns
    /// `None`: [`Deframer::step_with`] then goes on (and reports any error).
    pub fn whole_with<E: Crc32cEngine>(&mut self, crc: &E, input: &[u8]) -> Option<Whole> {
        if self.markers || !self.at_boundary() {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([*input.first()?, *input.get(1)?]));
        let covered = LEN_FIELD + len + pad_len(len);
        let consumed = covered + CRC_LEN;
        let fpdu = input.get(..consumed)?;
        let ulpdu = &fpdu[LEN_FIELD..LEN_FIELD + len];
        let hdr_len = ddp::header_len([*ulpdu.first()?, *ulpdu.get(1)?]).ok()?;
        let payload_len = len.checked_sub(hdr_len)?;
        let payload_len16 = u16::try_from(payload_len).ok()?;
        let (segment, _) = ddp::parse(ulpdu.get(..hdr_len)?).ok()?;
        segment.check_payload_len(payload_len).ok()?;
        if self.crc_on {
            let mut c = Crc32c::new();
            c.update_with(crc, &fpdu[..covered]);
            let want = &fpdu[covered..];
            if crc_from_wire([want[0], want[1], want[2], want[3]]) != c.finish() {
                return None;
            }
        }
        self.advance(consumed);
        // Between FPDUs again, as `advance` left the FPDU's count.
        self.fpdu_at = 0;
        Some(Whole {
            segment,
            start: LEN_FIELD + hdr_len,
            payload_len: payload_len16,
            consumed,
        })
    }

    fn run<E: Crc32cEngine>(&mut self, crc: &E, input: &[u8]) -> Result<Step, TermCode> {
        let mut at = 0;
        loop {
            // A marker is due at every multiple of the interval (and may be cut).
            if self.markers && (self.pos == 0 || self.marker_have > 0) {
                if at == input.len() {
                    return Ok(Step {
                        consumed: at,
                        event: Event::More,
                    });
                }
                let n = (MARKER_LEN - self.marker_have).min(input.len() - at);
                if self.marker_have == 0 && self.part == Part::Len && self.have == 0 {
                    // A marker before the length field: it leads the FPDU.
                    self.len_at = self.fpdu_at + MARKER_LEN as u32;
                }
                copy(
                    &mut self.marker[self.marker_have..self.marker_have + n],
                    &input[at..at + n],
                );
                self.marker_have += n;
                self.consume(crc, &input[at..at + n]);
                at += n;
                if self.marker_have == MARKER_LEN {
                    self.marker_have = 0;
                    let marker_at = self.fpdu_at - MARKER_LEN as u32;
                    let expect = marker_at.saturating_sub(self.len_at);
                    let ptr = u16::from_be_bytes([self.marker[2], self.marker[3]]);
                    if u32::from(ptr) != expect {
                        return Err(TermCode::LLP_FRAMING);
                    }
                }
                continue;
            }
            if at == input.len() {
                return Ok(Step {
                    consumed: at,
                    event: Event::More,
                });
            }
            // Bytes available before the next marker.
            let room = if self.markers {
                (MARKER_INTERVAL - self.pos) as usize
            } else {
                usize::MAX
            };
            let avail = (input.len() - at).min(room);
            match self.part {
                Part::Len | Part::Header | Part::Crc => {
                    let want = match self.part {
                        Part::Len => LEN_FIELD,
                        Part::Header if self.hdr_len == 0 => CTRL_LEN,
                        Part::Header => self.hdr_len,
                        _ => CRC_LEN,
                    };
                    let n = (want - self.have).min(avail);
                    copy(&mut self.buf[self.have..self.have + n], &input[at..at + n]);
                    self.have += n;
                    if self.part != Part::Crc {
                        self.consume(crc, &input[at..at + n]);
                    } else {
                        self.advance(n);
                    }
                    at += n;
                    if self.have < want {
                        continue;
                    }
                    if let Some(event) = self.part_complete()? {
                        return Ok(Step {
                            consumed: at,
                            event,
                        });
                    }
                }
                Part::Payload | Part::Pad => {
                    let n = self.left.min(avail);
                    self.consume(crc, &input[at..at + n]);
                    let start = at;
                    at += n;
                    self.left -= n;
                    let payload = self.part == Part::Payload;
                    if self.left == 0 {
                        self.part = if payload { Part::Pad } else { Part::Crc };
                        if payload {
                            self.left = pad_len(usize::from(self.ulpdu_len));
                        }
                    }
                    if payload && n > 0 && self.pending.is_none() {
                        return Ok(Step {
                            consumed: at,
                            event: Event::Payload { start, len: n },
                        });
                    }
                }
            }
        }
    }

    /// The length field, control field, header or CRC is complete: move on.
    fn part_complete(&mut self) -> Result<Option<Event>, TermCode> {
        match self.part {
            Part::Len => {
                self.ulpdu_len = u16::from_be_bytes([self.buf[0], self.buf[1]]);
                if usize::from(self.ulpdu_len) < CTRL_LEN {
                    return Err(TermCode::LLP_FRAMING);
                }
                self.part = Part::Header;
                self.hdr_len = 0;
                self.have = 0;
                Ok(None)
            }
            Part::Header if self.hdr_len == 0 => {
                match ddp::header_len([self.buf[0], self.buf[1]]) {
                    Ok(len) if len <= usize::from(self.ulpdu_len) => self.hdr_len = len,
                    // A header longer than its ULPDU: the FPDU is skipped like any other
                    // invalid header, so a corrupted control field is reported as the CRC
                    // error it is.
                    Ok(_) => self.skip(TermCode::LLP_FRAMING, CTRL_LEN),
                    Err(e) => self.skip(e, CTRL_LEN),
                }
                Ok(None)
            }
            Part::Header => {
                let payload_len = usize::from(self.ulpdu_len) - self.hdr_len;
                let parsed = ddp::parse(&self.buf[..self.hdr_len])
                    .and_then(|(s, _)| s.check_payload_len(payload_len).map(|()| s));
                match parsed {
                    Ok(segment) => {
                        self.part = Part::Payload;
                        self.left = payload_len;
                        self.have = 0;
                        if self.left == 0 {
                            self.part = Part::Pad;
                            self.left = pad_len(usize::from(self.ulpdu_len));
                        }
                        Ok(Some(Event::Header {
                            segment,
                            payload_len: payload_len as u16,
                        }))
                    }
                    Err(e) => {
                        self.skip(e, self.hdr_len);
                        Ok(None)
                    }
                }
            }
            Part::Crc => {
                let got = crc_from_wire([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                if self.crc_on && got != self.crc.finish() {
                    return Err(TermCode::LLP_CRC);
                }
                if let Some(e) = self.pending {
                    return Err(e);
                }
                self.part = Part::Len;
                self.have = 0;
                self.fpdu_at = 0;
                self.len_at = 0;
                self.crc = Crc32c::new();
                Ok(Some(Event::End))
            }
            Part::Payload | Part::Pad => Ok(None),
        }
    }

    /// An invalid header whose first `seen` ULPDU bytes are in: skip the rest of the FPDU
    /// and report `e` at its end.
    fn skip(&mut self, e: TermCode, seen: usize) {
        self.pending = Some(e);
        self.part = Part::Payload;
        self.left = usize::from(self.ulpdu_len) - seen;
        self.have = 0;
        if self.left == 0 {
            self.part = Part::Pad;
            self.left = pad_len(usize::from(self.ulpdu_len));
        }
    }

    /// Bytes of the FPDU covered by the CRC (computed only when CRCs are on).
    fn consume<E: Crc32cEngine>(&mut self, crc: &E, b: &[u8]) {
        if self.crc_on {
            self.crc.update_with(crc, b);
        }
        self.advance(b.len());
    }

    fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n as u32) % MARKER_INTERVAL;
        self.fpdu_at = self.fpdu_at.wrapping_add(n as u32);
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

    use super::super::ddp::{
        Opcode, Placement, RdmapHeader, ReadRequest, QN_READ_REQUEST, QN_SEND,
    };
    use super::super::mpa::Framer;
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn send_header(msn: u32, mo: u32, last: bool) -> [u8; 18] {
        let s = Segment {
            opcode: Opcode::Send,
            last,
            placement: Placement::Untagged {
                qn: QN_SEND,
                msn,
                mo,
                inv_stag: 0,
            },
            rdmap: RdmapHeader::None,
        };
        let mut b = [0u8; 18];
        s.write(&mut b).unwrap();
        b
    }

    /// Frames `payloads` as sends (one FPDU each) into one stream.
    fn stream(payloads: &[Vec<u8>], crc: bool, markers: bool) -> Vec<u8> {
        let mut f = Framer::new(crc, markers);
        let mut out = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            let h = send_header(i as u32 + 1, 0, true);
            let mut b = vec![0u8; f.wire_len(18 + p.len())];
            f.frame(&[&h, p], &mut b).unwrap();
            out.extend_from_slice(&b);
        }
        out
    }

    /// [`deframe_by`] both ways, step by step and taking whole FPDUs first where it can:
    /// they must agree.
    fn deframe(
        s: &[u8],
        cuts: &[usize],
        crc: bool,
        markers: bool,
    ) -> (Vec<Vec<u8>>, Option<TermCode>) {
        let stepped = deframe_by(s, cuts, crc, markers, false);
        assert_eq!(deframe_by(s, cuts, crc, markers, true), stepped);
        stepped
    }

    /// Feeds `s` to a deframer in chunks of the sizes `cuts` (cycled) and collects the
    /// payload of each FPDU (`whole`: taking whole FPDUs at once where it can); the first
    /// error ends it, and a stream that ends inside an FPDU returns
    /// [`TermCode::LLP_FRAMING`].
    fn deframe_by(
        s: &[u8],
        cuts: &[usize],
        crc: bool,
        markers: bool,
        whole: bool,
    ) -> (Vec<Vec<u8>>, Option<TermCode>) {
        let mut d = Deframer::new(crc, markers);
        let mut got = Vec::new();
        let mut cur = Vec::new();
        let mut headers = 0;
        let mut at = 0;
        let mut i = 0;
        while at < s.len() {
            let n = cuts[i % cuts.len()].max(1).min(s.len() - at);
            i += 1;
            let mut chunk = &s[at..at + n];
            at += n;
            while !chunk.is_empty() {
                if let Some(w) = whole.then(|| d.whole_with(&SoftCrc32c, chunk)).flatten() {
                    let end = w.start + usize::from(w.payload_len);
                    assert!(end <= w.consumed);
                    assert_eq!(w.segment.opcode, Opcode::Send);
                    assert!(d.at_boundary());
                    got.push(chunk[w.start..end].to_vec());
                    headers += 1;
                    chunk = &chunk[w.consumed..];
                    continue;
                }
                let step = match d.step(chunk) {
                    Ok(step) => step,
                    Err(e) => return (got, Some(e)),
                };
                match step.event {
                    Event::More => assert_eq!(step.consumed, chunk.len()),
                    Event::Header {
                        segment,
                        payload_len,
                    } => {
                        assert_eq!(segment.opcode, Opcode::Send);
                        headers += 1;
                        cur.reserve(payload_len.into());
                    }
                    Event::Payload { start, len } => {
                        assert!(start + len <= step.consumed);
                        cur.extend_from_slice(&chunk[start..start + len]);
                    }
                    Event::End => {
                        assert_eq!(headers, got.len() + 1);
                        got.push(core::mem::take(&mut cur));
                    }
                }
                chunk = &chunk[step.consumed..];
            }
        }
        // A stream that ended mid-FPDU: mark it with a framing error.
        let end = (!d.at_boundary()).then_some(TermCode::LLP_FRAMING);
        (got, end)
    }

    #[test]
    fn whole_stream_one_step_at_a_time() {
        let p = vec![vec![1u8; 5], vec![2u8; 1000], vec![], vec![3u8; 3]];
        for markers in [false, true] {
            for crc in [false, true] {
                let s = stream(&p, crc, markers);
                for cut in [1, 2, 3, 7, 512, 4096] {
                    let (got, err) = deframe(&s, &[cut], crc, markers);
                    assert_eq!(err, None, "cut {cut}");
                    assert_eq!(got, p);
                }
            }
        }
    }

    /// Counts the bytes it is given, computing like the tables.
    #[derive(Default)]
    struct Counting(core::cell::Cell<usize>);

    impl Crc32cEngine for Counting {
        fn update_raw(&self, state: u32, data: &[u8]) -> u32 {
            self.0.set(self.0.get() + data.len());
            SoftCrc32c.update_raw(state, data)
        }
    }

    #[test]
    fn the_engine_given_computes_every_crc_and_only_when_on() {
        let payload = [5u8; 99];
        for crc in [false, true] {
            let (tx, rx) = (Counting::default(), Counting::default());
            let mut f = Framer::new(crc, false);
            let mut out = [0u8; 256];
            let hdr = send_header(1, 0, true);
            let n = f.frame_with(&tx, &[&hdr, &payload], &mut out).unwrap();
            let mut d = Deframer::new(crc, false);
            let mut at = 0;
            let mut got = 0;
            while at < n {
                let step = d.step_with(&rx, &out[at..n]).unwrap();
                if let Event::Payload { len, .. } = step.event {
                    got += len;
                }
                at += step.consumed;
            }
            assert_eq!(got, payload.len());
            // Everything but the CRC field, on each side; nothing without CRCs.
            let covered = if crc { n - CRC_LEN } else { 0 };
            assert_eq!((tx.0.get(), rx.0.get()), (covered, covered), "crc {crc}");
        }
    }

    #[test]
    fn crc_error_is_final() {
        let p = vec![vec![7u8; 100], vec![8u8; 100]];
        let mut s = stream(&p, true, false);
        s[50] ^= 1;
        let (got, err) = deframe(&s, &[64], true, false);
        assert!(got.is_empty());
        assert_eq!(err, Some(TermCode::LLP_CRC));
        // Without CRCs the same flip goes unnoticed in the payload.
        let mut s = stream(&p, false, false);
        s[50] ^= 1;
        assert_eq!(deframe(&s, &[64], false, false).1, None);
    }

    #[test]
    fn bad_header_reported_after_its_crc() {
        let p = [vec![7u8; 10]];
        // A valid CRC over a header with a bad RDMAP version: the header's error.
        let mut f = Framer::new(true, false);
        let mut h = send_header(1, 0, true);
        h[1] = 0x03;
        let mut s = vec![0u8; f.wire_len(28)];
        f.frame(&[&h, &p[0]], &mut s).unwrap();
        for cut in [5, usize::MAX] {
            let (got, err) = deframe(&s, &[cut], true, false);
            assert!(got.is_empty());
            assert_eq!(err, Some(TermCode::RDMAP_VERSION));
        }
        // The same bytes with the CRC broken: a CRC error.
        let last = s.len() - 1;
        s[last] ^= 0xff;
        for cut in [5, usize::MAX] {
            assert_eq!(deframe(&s, &[cut], true, false).1, Some(TermCode::LLP_CRC));
        }
    }

    #[test]
    fn marker_pointing_elsewhere_is_a_framing_error() {
        let p = vec![vec![1u8; 700]];
        let mut s = stream(&p, true, true);
        // The marker at 512 points back to the length field at 4: 508.
        assert_eq!(u16::from_be_bytes([s[514], s[515]]), 508);
        s[515] ^= 4;
        assert_eq!(
            deframe(&s, &[100], true, true).1,
            Some(TermCode::LLP_FRAMING)
        );
    }

    #[test]
    fn short_ulpdu_is_a_framing_error() {
        let s = [0u8, 1, 0x41, 0, 0, 0, 0, 0];
        assert_eq!(
            deframe(&s, &[8], false, false).1,
            Some(TermCode::LLP_FRAMING)
        );
        // A ULPDU shorter than its header.
        let mut s = vec![0u8, 10];
        s.extend_from_slice(&send_header(1, 0, true)[..10]);
        s.extend_from_slice(&[0; 4]);
        for cut in [8, usize::MAX] {
            assert_eq!(
                deframe(&s, &[cut], false, false).1,
                Some(TermCode::LLP_FRAMING)
            );
        }
    }

    /// Frames `seg` with `payload` as one FPDU.
    fn fpdu(seg: &Segment, payload: &[u8], crc: bool) -> Vec<u8> {
        let mut h = [0u8; MAX_HDR_LEN];
        let n = seg.write(&mut h).unwrap();
        let mut f = Framer::new(crc, false);
        let mut out = vec![0u8; f.wire_len(n + payload.len())];
        f.frame(&[&h[..n], payload], &mut out).unwrap();
        out
    }

    #[test]
    fn whole_with_takes_only_what_it_can_check() {
        let send = Segment {
            opcode: Opcode::Send,
            last: true,
            placement: Placement::Untagged {
                qn: QN_SEND,
                msn: 1,
                mo: 0,
                inv_stag: 0,
            },
            rdmap: RdmapHeader::None,
        };
        for crc in [false, true] {
            let s = fpdu(&send, &[9, 8, 7], crc);
            // The FPDU and more: it is taken, the rest left.
            let mut more = s.clone();
            more.extend_from_slice(&[1, 2]);
            let mut d = Deframer::new(crc, false);
            let w = d.whole_with(&SoftCrc32c, &more).unwrap();
            assert_eq!((w.segment, w.consumed), (send, s.len()));
            assert_eq!(
                &more[w.start..w.start + usize::from(w.payload_len)],
                &[9, 8, 7]
            );
            assert!(d.at_boundary());
            // One byte short: nothing taken.
            let mut d = Deframer::new(crc, false);
            assert_eq!(d.whole_with(&SoftCrc32c, &s[..s.len() - 1]), None);
            assert!(d.at_boundary());
            // Inside an FPDU, or on a stream with markers: never.
            let mut d = Deframer::new(crc, false);
            assert_eq!(d.step(&s[..1]).unwrap().consumed, 1);
            assert_eq!(d.whole_with(&SoftCrc32c, &s[1..]), None);
            assert_eq!(Deframer::new(crc, true).whole_with(&SoftCrc32c, &s), None);
        }
        // A bad CRC, a bad DDP version, a ULPDU shorter than its header, payload after a
        // READ request: declined, so that stepping reports the error.
        let mut bad_crc = fpdu(&send, &[9], true);
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 1;
        let mut bad_version = fpdu(&send, &[9], false);
        bad_version[2] ^= 0x01;
        let mut short = vec![0u8, 10];
        short.extend_from_slice(&send_header(1, 0, true)[..10]);
        short.extend_from_slice(&[0; 4]);
        let read = Segment {
            opcode: Opcode::ReadRequest,
            last: true,
            placement: Placement::Untagged {
                qn: QN_READ_REQUEST,
                msn: 1,
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
        let read_with_payload = fpdu(&read, &[1], false);
        for (s, crc) in [
            (&bad_crc, true),
            (&bad_version, false),
            (&short, false),
            (&read_with_payload, false),
        ] {
            let mut d = Deframer::new(crc, false);
            assert_eq!(d.whole_with(&SoftCrc32c, s), None);
            assert!(d.at_boundary());
            assert!(deframe(s, &[usize::MAX], crc, false).1.is_some());
        }
    }

    proptest! {
        #[test]
        fn any_cut_gives_the_payloads_back(
            p in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..6),
            cuts in proptest::collection::vec(1usize..700, 1..8),
            crc in any::<bool>(),
            markers in any::<bool>(),
        ) {
            let s = stream(&p, crc, markers);
            let (got, err) = deframe(&s, &cuts, crc, markers);
            prop_assert_eq!(err, None);
            prop_assert_eq!(got, p);
        }

        #[test]
        fn corruption_never_passes_the_crc(
            p in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..600), 1..4),
            flip in any::<usize>(),
            bit in 0u8..8,
            markers in any::<bool>(),
        ) {
            let mut s = stream(&p, true, markers);
            let i = flip % s.len();
            s[i] ^= 1 << bit;
            let (got, err) = deframe(&s, &[97], true, markers);
            // Every FPDU that ended before the flipped byte is intact; the one with the
            // flipped byte never passes (an error, or a length that waits for more).
            let _ = err;
            prop_assert!(got.len() < p.len());
            prop_assert_eq!(&got[..], &p[..got.len()]);
        }

        #[test]
        fn garbage_never_panics(
            s in proptest::collection::vec(any::<u8>(), 0..3000),
            cut in 1usize..300,
            crc in any::<bool>(),
            markers in any::<bool>(),
        ) {
            let mut d = Deframer::new(crc, markers);
            for chunk in s.chunks(cut) {
                let mut c = chunk;
                let mut guard = 0;
                while !c.is_empty() {
                    guard += 1;
                    prop_assert!(guard < 10_000);
                    if let Some(w) = d.whole_with(&SoftCrc32c, c) {
                        prop_assert!(w.start + usize::from(w.payload_len) <= w.consumed);
                        prop_assert!(w.consumed > 0 && w.consumed <= c.len());
                        c = &c[w.consumed..];
                        continue;
                    }
                    match d.step(c) {
                        Ok(st) => {
                            if let Event::Payload { start, len } = st.event {
                                prop_assert!(start + len <= st.consumed);
                            }
                            prop_assert!(st.consumed <= c.len());
                            prop_assert!(st.consumed > 0 || st.event != Event::More || c.is_empty());
                            c = &c[st.consumed..];
                        }
                        Err(e) => {
                            prop_assert_eq!(d.step(c), Err(e));
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}
