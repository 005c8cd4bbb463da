// SPDX-License-Identifier: GPL-2.0

//! Real iWARP traffic sent by Linux siw (`fixtures/siw-iwarp.txt` and
//! `fixtures/siw-iwarp-stream.txt`, see `fixtures/README.md`): every MPA request and reply
//! parses and is rebuilt, and the negotiation agrees with siw's; every FPDU deframes, whole and
//! cut at every byte, into the header and payload it carries, is rebuilt byte for byte (siw's
//! pad garbage aside) and its CRC reproduced; a flipped bit is a CRC error; and both directions
//! of a whole rping connection deframe into a plausible rping exchange under any chunking.
//!
//! Two things siw does that the RFCs do not, and how the codec meets them:
//!
//! * siw sometimes sends non-zero pad bytes (and covers them with the CRC): the deframer
//!   ignores their contents; our framer sends zeros, so the rebuilt FPDU differs from siw's in
//!   the pad and (hence) the CRC field only.
//! * siw's terminate control word has its bitfields in the wrong order on x86 (layer and error
//!   type swapped within byte 0, M/D/R at 0x01/0x02/0x04 of byte 2): the deframer still
//!   delivers a header for both TERMINATE fixtures, with the RFC 5040 reading of those bytes
//!   (which is not what siw meant; see `siw_terminates`).

use std::collections::{BTreeMap, BTreeSet};

use oxrdma_wire::crc32c::crc32c;
use oxrdma_wire::iwarp::ddp::{
    self, Layer, Opcode, Placement, Segment, TermCode, Terminate, CTRL_LEN, MAX_HDR_LEN,
    QN_READ_REQUEST, QN_SEND, QN_TERMINATE, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN,
};
use oxrdma_wire::iwarp::mpa::{
    crc_from_wire, crc_to_wire, pad_len, Framer, IrdOrd, Policy, RrError, RrHeader, RrKind, Rtr,
    RtrSet, CRC_LEN, IRD_ORD_LEN, LEN_FIELD, RR_HDR_LEN,
};
use oxrdma_wire::iwarp::stream::{Deframer, Event, Step};

/// Request/reply flag bits (byte 16).
const FLAG_MARKERS: u8 = 0x80;
const FLAG_CRC: u8 = 0x40;
const FLAG_REJECT: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
/// siw's private flag (set with `try_gso`), which [`RrHeader::parse`] ignores.
const FLAG_SIW_GSO: u8 = 0x08;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Req,
    Rep,
    Fpdu,
}

/// One line of `siw-iwarp.txt`.
struct Fixture {
    name: String,
    kind: Kind,
    crc: bool,
    /// The RDMAP opcode column (FPDUs only).
    opcode: Option<u8>,
    /// The ULPDU length (FPDUs) or private data length (req/rep) column.
    len: usize,
    bytes: Vec<u8>,
}

impl Fixture {
    /// The connection the unit belongs to (`crc1-rping#1`).
    fn conn(&self) -> &str {
        self.name.split(':').next().unwrap()
    }

    /// The direction (`i2r`/`r2i`) and index of the unit in that direction's stream.
    fn position(&self) -> (&str, usize) {
        let mut it = self.name.split(':').skip(1);
        let dir = it.next().unwrap();
        (dir, it.next().unwrap().parse().unwrap())
    }
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn lines(file: &str) -> Vec<Vec<String>> {
    let path = format!("{}/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("fixture file");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn fixtures() -> Vec<Fixture> {
    lines("siw-iwarp.txt")
        .into_iter()
        .map(|f| {
            assert_eq!(f.len(), 6, "fixture line: {f:?}");
            let kind = match f[1].as_str() {
                "req" => Kind::Req,
                "rep" => Kind::Rep,
                "fpdu" => Kind::Fpdu,
                k => panic!("{}: kind {k}", f[0]),
            };
            let crc = match f[2].as_str() {
                "0" => false,
                "1" => true,
                c => panic!("{}: CRC column {c}", f[0]),
            };
            let opcode = (f[3] != "-").then(|| f[3].parse().unwrap());
            assert_eq!(opcode.is_some(), kind == Kind::Fpdu, "{}", f[0]);
            Fixture {
                name: f[0].clone(),
                kind,
                crc,
                opcode,
                len: f[4].parse().unwrap(),
                bytes: hex(&f[5]),
            }
        })
        .collect()
}

/// The two directions of `siw-iwarp-stream.txt`: (`i2r`/`r2i`, bytes).
fn streams() -> Vec<(String, Vec<u8>)> {
    lines("siw-iwarp-stream.txt")
        .into_iter()
        .map(|f| {
            assert_eq!(f.len(), 2, "stream line");
            (f[0].clone(), hex(&f[1]))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// MPA request and reply frames.

/// The parsed header and (revision 2, enhanced) IRD/ORD words of a req/rep fixture, after
/// checking every field against the bytes and rebuilding them.
fn check_rr(f: &Fixture) -> (RrHeader, Option<IrdOrd>) {
    let b = &f.bytes;
    let (kind, other) = match f.kind {
        Kind::Req => (RrKind::Request, RrKind::Reply),
        Kind::Rep => (RrKind::Reply, RrKind::Request),
        Kind::Fpdu => unreachable!(),
    };
    let h = RrHeader::parse(b, kind).unwrap_or_else(|e| panic!("{}: {e:?}", f.name));
    assert_eq!(RrHeader::parse(b, other), Err(RrError::Key), "{}", f.name);
    assert_eq!(
        RrHeader::parse(&b[..RR_HDR_LEN - 1], kind),
        Err(RrError::Short)
    );

    let flags = b[16];
    assert_eq!(h.kind, kind);
    assert_eq!(h.markers, flags & FLAG_MARKERS != 0, "{}", f.name);
    assert_eq!(h.crc, flags & FLAG_CRC != 0, "{}", f.name);
    assert_eq!(h.crc, f.crc, "{}: CRC column", f.name);
    assert_eq!(h.reject, flags & FLAG_REJECT != 0, "{}", f.name);
    assert_eq!(h.revision, b[17], "{}", f.name);
    assert_eq!(
        h.enhanced,
        h.revision == 2 && flags & FLAG_ENHANCED != 0,
        "{}",
        f.name
    );
    assert_eq!(usize::from(h.pd_len), b.len() - RR_HDR_LEN, "{}", f.name);
    assert_eq!(usize::from(h.pd_len), f.len, "{}", f.name);
    // What siw sent: no markers, no reject; the flags seen are exactly these.
    assert!(!h.markers && !h.reject, "{}", f.name);
    assert!([0x10, 0x50, 0x40, 0x58].contains(&flags), "{}", f.name);

    // Rebuilt: the same 20 bytes, but for siw's private flag, which we neither read nor send.
    let mut expect = [0u8; RR_HDR_LEN];
    expect.copy_from_slice(&b[..RR_HDR_LEN]);
    expect[16] &= !FLAG_SIW_GSO;
    assert_eq!(h.to_bytes(), expect, "{}: rebuilt", f.name);
    assert_eq!(RrHeader::parse(&h.to_bytes(), kind), Ok(h));

    let words = h.enhanced.then(|| {
        // siw's revision 2 private data is the IRD/ORD words and nothing else.
        assert_eq!(usize::from(h.pd_len), IRD_ORD_LEN, "{}", f.name);
        let pd = &b[RR_HDR_LEN..];
        let w = IrdOrd::parse(pd).unwrap_or_else(|e| panic!("{}: {e:?}", f.name));
        assert_eq!(w.ird, u16::from_be_bytes([pd[0], pd[1]]) & 0x3fff);
        assert_eq!(w.ord, u16::from_be_bytes([pd[2], pd[3]]) & 0x3fff);
        assert_eq!(w.to_bytes()[..], pd[..], "{}: IRD/ORD rebuilt", f.name);
        w
    });
    if h.revision == 1 {
        assert!(!h.enhanced && h.pd_len == 0, "{}", f.name);
    }
    (h, words)
}

#[test]
fn every_request_and_reply_parses_and_rebuilds() {
    let mut n = BTreeMap::new();
    for f in fixtures().iter().filter(|f| f.kind != Kind::Fpdu) {
        check_rr(f);
        assert_eq!(f.position().1, 0, "{}: req/rep not first", f.name);
        assert_eq!(
            f.position().0,
            if f.kind == Kind::Req { "i2r" } else { "r2i" }
        );
        *n.entry(f.kind).or_insert(0) += 1;
    }
    assert_eq!(n, BTreeMap::from([(Kind::Req, 31), (Kind::Rep, 31)]));
}

/// Each connection's request and reply: what our negotiation makes of them agrees with siw's
/// choices (the responder's reply rebuilt from its parameters, the initiator's view of it).
#[test]
fn siw_negotiation_agrees_with_policy() {
    let all = fixtures();
    let mut conns: BTreeMap<&str, [Option<&Fixture>; 2]> = BTreeMap::new();
    for f in all.iter().filter(|f| f.kind != Kind::Fpdu) {
        let slot = &mut conns.entry(f.conn()).or_default()[(f.kind == Kind::Rep) as usize];
        assert!(slot.is_none(), "{}: two of a kind", f.name);
        *slot = Some(f);
    }
    assert_eq!(conns.len(), 31);
    let mut p2p = 0;
    for (conn, [req, rep]) in conns {
        let (req, rep) = (req.unwrap(), rep.unwrap());
        let (qh, qw) = check_rr(req);
        let (ph, pw) = check_rr(rep);
        // The reply echoes the request's flags byte (siw's 0x08 included).
        assert_eq!(req.bytes[16], rep.bytes[16], "{conn}");
        assert_eq!(qh.revision, ph.revision, "{conn}");
        let offered = qw.filter(|w| w.peer_to_peer).map(|w| w.rtr);
        if offered.is_some() {
            p2p += 1;
        }

        // The responder, with siw's parameters, answers exactly as siw did.
        let responder = Policy {
            revision: ph.revision,
            crc: ph.crc,
            markers: false,
            ird: pw.map_or(0, |w| w.ird),
            ord: pw.map_or(0, |w| w.ord),
            // siw accepts (and chooses in this order) write, then read.
            rtr: offered.map(|_| RtrSet {
                send: false,
                write: true,
                read: true,
            }),
            rdmap_ext: false,
        };
        let (h, w, neg) = responder.reply(&qh, qw, 0, false).unwrap();
        assert_eq!(h, ph, "{conn}: reply header");
        assert_eq!(w, pw, "{conn}: reply IRD/ORD");
        assert_eq!(neg.crc, rep.crc, "{conn}");
        assert!(!neg.markers_rx && !neg.markers_tx);

        // The initiator accepts the reply.
        let initiator = Policy {
            revision: qh.revision,
            crc: qh.crc,
            markers: false,
            ird: qw.map_or(0, |w| w.ird),
            ord: qw.map_or(0, |w| w.ord),
            rtr: offered,
            rdmap_ext: false,
        };
        let neg = initiator.complete(&qh, &ph, pw).unwrap();
        assert_eq!(neg.crc, req.crc, "{conn}");
        assert_eq!(neg.revision, qh.revision);
        assert_eq!(
            neg.rtr,
            offered.map(|_| Rtr::Write),
            "{conn}: ready-to-receive"
        );
    }
    assert_eq!(p2p, 1, "one peer-to-peer connection");
}

// ---------------------------------------------------------------------------------------------
// FPDUs through the deframer.

/// One FPDU as the deframer delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fpdu {
    segment: Segment,
    payload_len: u16,
    payload: Vec<u8>,
    /// The FPDU ended (with a good CRC, if CRCs are on).
    ended: bool,
}

/// What a deframer made of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    fpdus: Vec<Fpdu>,
    error: Option<TermCode>,
    at_boundary: bool,
}

/// Feeds `chunks` in order to a deframer without markers, checking each step's invariants.
fn deframe<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, crc: bool) -> Outcome {
    let mut d = Deframer::new(crc, false);
    let mut fpdus: Vec<Fpdu> = Vec::new();
    for mut chunk in chunks {
        while !chunk.is_empty() {
            let Step { consumed, event } = match d.step(chunk) {
                Ok(step) => step,
                Err(e) => {
                    // Errors are final.
                    assert_eq!(d.step(chunk), Err(e));
                    assert!(!d.at_boundary());
                    return Outcome {
                        fpdus,
                        error: Some(e),
                        at_boundary: false,
                    };
                }
            };
            assert!(consumed > 0 && consumed <= chunk.len());
            let open = fpdus.last_mut().filter(|f| !f.ended);
            match event {
                Event::More => assert_eq!(consumed, chunk.len()),
                Event::Header {
                    segment,
                    payload_len,
                } => {
                    assert!(open.is_none(), "a header inside an FPDU");
                    fpdus.push(Fpdu {
                        segment,
                        payload_len,
                        payload: Vec::new(),
                        ended: false,
                    });
                }
                Event::Payload { start, len } => {
                    assert!(len > 0 && start + len <= consumed);
                    let f = open.expect("payload without a header");
                    f.payload.extend_from_slice(&chunk[start..start + len]);
                    assert!(f.payload.len() <= usize::from(f.payload_len));
                }
                Event::End => {
                    let f = open.expect("an FPDU end without a header");
                    assert_eq!(f.payload.len(), usize::from(f.payload_len));
                    f.ended = true;
                }
            }
            chunk = &chunk[consumed..];
        }
    }
    Outcome {
        fpdus,
        error: None,
        at_boundary: d.at_boundary(),
    }
}

/// Where the parts of an FPDU are: (ULPDU length, offset of the pad, offset of the CRC field).
fn layout(b: &[u8]) -> (usize, usize, usize) {
    let ulpdu_len = usize::from(u16::from_be_bytes([b[0], b[1]]));
    let pad_at = LEN_FIELD + ulpdu_len;
    (ulpdu_len, pad_at, pad_at + pad_len(ulpdu_len))
}

/// Offset in the ULPDU of the terminate control word's byte 2, where siw puts M/D/R.
const TERM_FLAGS_AT: usize = UNTAGGED_HDR_LEN + 2;

/// Deframes an FPDU fixture whole and cut at every byte, rebuilds it and reproduces its CRC;
/// returns what the deframer delivered.
fn check_fpdu(f: &Fixture) -> Fpdu {
    let b = &f.bytes;
    let name = &f.name;
    let (ulpdu_len, pad_at, crc_at) = layout(b);
    assert_eq!(ulpdu_len, f.len, "{name}: length column");
    assert_eq!(b.len(), crc_at + CRC_LEN, "{name}: FPDU length");
    let ulpdu = &b[LEN_FIELD..pad_at];
    assert_eq!(Some(ulpdu[1] & 0x0f), f.opcode, "{name}: opcode column");
    let pad = &b[pad_at..crc_at];
    assert_eq!(
        pad.iter().any(|&x| x != 0),
        name.ends_with("-nonzero"),
        "{name}: pad {pad:02x?}"
    );

    // Our CRC-32C over the FPDU as sent (pad garbage included) is the CRC field, LSB first.
    let field = crc_from_wire(b[crc_at..].try_into().unwrap());
    if f.crc {
        assert_eq!(field, crc32c(&b[..crc_at]), "{name}: CRC");
        assert_eq!(crc_to_wire(field)[..], b[crc_at..]);
    } else {
        assert_eq!(field, 0, "{name}: CRC field without CRC");
    }

    // Deframed whole: exactly one header, its payload, and the end with the CRC accepted.
    let whole = deframe([&b[..]], f.crc);
    assert_eq!(whole.error, None, "{name}");
    assert!(whole.at_boundary, "{name}");
    assert_eq!(whole.fpdus.len(), 1, "{name}");
    let got = whole.fpdus[0].clone();
    assert!(got.ended, "{name}");
    assert_eq!(Some(got.segment.opcode as u8), f.opcode, "{name}");
    let (seg, hdr_len) = ddp::parse(ulpdu).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(seg, got.segment, "{name}");
    assert_eq!(hdr_len + usize::from(got.payload_len), ulpdu_len, "{name}");
    assert_eq!(got.payload[..], ulpdu[hdr_len..], "{name}: payload");
    // Cut anywhere: the same.
    for k in 0..=b.len() {
        assert_eq!(
            deframe([&b[..k], &b[k..]], f.crc),
            whole,
            "{name}: cut at {k}"
        );
    }

    // Rebuilt from the parsed header and the payload.
    let mut hdr = [0u8; MAX_HDR_LEN];
    let n = got.segment.write(&mut hdr).unwrap();
    assert_eq!(n, hdr_len, "{name}");
    if got.segment.opcode == Opcode::Terminate {
        // siw's M/D/R bits sit where RFC 5040 has reserved bits, which we read as nothing
        // and send as zeros: the one header byte that cannot be reproduced.
        assert_eq!(hdr[TERM_FLAGS_AT], 0, "{name}");
        assert_ne!(ulpdu[TERM_FLAGS_AT], 0, "{name}");
        hdr[TERM_FLAGS_AT] = ulpdu[TERM_FLAGS_AT];
    }
    assert_eq!(hdr[..n], ulpdu[..n], "{name}: header rebuilt");
    let mut framer = Framer::new(f.crc, false);
    assert_eq!(framer.wire_len(ulpdu_len), b.len(), "{name}");
    let mut out = vec![0u8; b.len()];
    assert_eq!(
        framer.frame(&[&hdr[..n], &got.payload], &mut out),
        Ok(b.len())
    );
    // Our pad is zeros (siw's is sometimes stale bytes), and the CRC covers our pad.
    let mut expect = b.clone();
    expect[pad_at..crc_at].fill(0);
    if f.crc {
        let crc = crc_to_wire(crc32c(&expect[..crc_at]));
        expect[crc_at..].copy_from_slice(&crc);
    }
    assert_eq!(expect == *b, !name.ends_with("-nonzero"), "{name}");
    assert_eq!(out, expect, "{name}: FPDU rebuilt");
    got
}

#[test]
fn every_fpdu_deframes_at_every_cut_and_rebuilds() {
    let all = fixtures();
    let mut crc_of: BTreeMap<&str, bool> = BTreeMap::new();
    for f in all.iter().filter(|f| f.kind == Kind::Rep) {
        crc_of.insert(f.conn(), check_rr(f).0.crc);
    }
    let mut n = 0;
    for f in all.iter().filter(|f| f.kind == Kind::Fpdu) {
        // siw uses CRCs exactly when the reply has the C flag.
        assert_eq!(Some(&f.crc), crc_of.get(f.conn()), "{}", f.name);
        assert!(f.position().1 > 0);
        check_fpdu(f);
        n += 1;
    }
    assert_eq!(n, 42);
}

/// The fixtures cover every RDMAP opcode siw sends, both buffer models, last and not last,
/// every pad count and non-zero pads, with and without CRCs.
#[test]
fn fixtures_cover_the_cases() {
    let mut ops = BTreeSet::new();
    let mut shapes = BTreeSet::new();
    let mut pads = BTreeSet::new();
    let (mut nonzero_pad, mut crc_off, mut crc_on, mut empty) = (0, 0, 0, 0);
    for f in fixtures().iter().filter(|f| f.kind == Kind::Fpdu) {
        let got = check_fpdu(f);
        ops.insert(got.segment.opcode as u8);
        let tagged = matches!(got.segment.placement, Placement::Tagged { .. });
        shapes.insert((tagged, got.segment.last));
        let (ulpdu_len, pad_at, crc_at) = layout(&f.bytes);
        pads.insert(pad_len(ulpdu_len));
        if f.bytes[pad_at..crc_at].iter().any(|&x| x != 0) {
            nonzero_pad += 1;
        }
        if got.payload.is_empty() {
            empty += 1;
        }
        if f.crc {
            crc_on += 1;
        } else {
            crc_off += 1;
        }
    }
    assert_eq!(ops, (0..=7).collect());
    assert_eq!(shapes.len(), 4, "{shapes:?}");
    assert_eq!(pads, (0..=3).collect());
    assert!(nonzero_pad >= 2, "{nonzero_pad}");
    assert!(empty >= 1, "no FPDU without payload");
    assert_eq!((crc_on, crc_off), (36, 6));
}

/// siw's terminate control word, read the way siw lays out its bitfields on x86 (`iwarp.h`
/// declares them for big-endian order under `__LITTLE_ENDIAN_BITFIELD`).
fn siw_terminate(w: &[u8]) -> Terminate {
    let layer = match w[0] & 0x0f {
        0 => Layer::Rdmap,
        1 => Layer::Ddp,
        2 => Layer::Llp,
        l => panic!("layer {l}"),
    };
    Terminate {
        code: TermCode {
            layer,
            etype: w[0] >> 4,
            ecode: w[1],
        },
        segment_len_valid: w[2] & 0x01 != 0,
        ddp_header: w[2] & 0x02 != 0,
        rdmap_header: w[2] & 0x04 != 0,
    }
}

/// Both TERMINATEs deframe into a header (the word's layer nibble is a valid one either
/// way), but the RFC 5040 reading of siw's word is not what siw meant: M/D/R are lost (they
/// are in reserved bits), and the bad read's RDMAP/remote protection comes out as DDP/type 0.
/// The headers that follow the word are what siw says they are.
#[test]
fn siw_terminates() {
    let all = fixtures();
    let find = |name: &str| all.iter().find(|f| f.name == name).unwrap();
    let terms: Vec<_> = all
        .iter()
        .filter(|f| f.opcode == Some(Opcode::Terminate as u8))
        .collect();
    assert_eq!(terms.len(), 2);
    for f in terms {
        let got = check_fpdu(f);
        let ulpdu = &f.bytes[LEN_FIELD..];
        let word = &ulpdu[UNTAGGED_HDR_LEN..UNTAGGED_HDR_LEN + 4];
        assert!(got.segment.last, "{}", f.name);
        assert_eq!(
            got.segment.placement,
            Placement::Untagged {
                qn: QN_TERMINATE,
                msn: 1,
                mo: 0,
                inv_stag: 0
            },
            "{}",
            f.name
        );
        let rfc = got.segment.terminate().unwrap();
        let meant = siw_terminate(word);
        assert_eq!(
            rfc,
            Terminate::from_word(u32::from_be_bytes(word.try_into().unwrap())).unwrap()
        );
        assert!(!rfc.segment_len_valid && !rfc.ddp_header && !rfc.rdmap_header);
        assert_ne!(rfc, meant, "{}", f.name);
        // What our encoder sends for siw's meaning differs from siw's bytes.
        assert_ne!(meant.to_word().to_be_bytes()[..], word[..]);
        // The payload: the terminated segment's DDP segment length, then its headers.
        let seg_len = usize::from(u16::from_be_bytes([got.payload[0], got.payload[1]]));
        let (inner, inner_len) = ddp::parse(&got.payload[2..]).unwrap();
        assert_eq!(inner_len, got.payload.len() - 2, "{}", f.name);
        if f.name.starts_with("crc1-ops#1:") {
            // An RDMA write to a bad STag: DDP, tagged buffer error, invalid STag, M and D.
            assert_eq!(word, [0x11, 0x00, 0x03, 0x00]);
            assert_eq!(
                meant,
                Terminate {
                    code: TermCode::DDP_T_INVALID_STAG,
                    segment_len_valid: true,
                    ddp_header: true,
                    rdmap_header: false,
                }
            );
            // Layer and type happen to be equal nibbles: the code reads right, M/D do not.
            assert_eq!(rfc.code, TermCode::DDP_T_INVALID_STAG);
            // The terminated write is the fixture that went out before it.
            let write = find("crc1-ops#1:i2r:7:write-T-L-pad2");
            let (wseg, _) = ddp::parse(&write.bytes[LEN_FIELD..]).unwrap();
            assert_eq!(inner, wseg);
            assert_eq!(inner_len, TAGGED_HDR_LEN);
            assert_eq!(got.payload[2..], write.bytes[LEN_FIELD..][..TAGGED_HDR_LEN]);
            // siw's "DDP segment length" is the write's payload (24 - 14), not its ULPDU.
            assert_eq!(seg_len, write.len - TAGGED_HDR_LEN, "DDP segment length");
        } else {
            // An RDMA read from a bad STag: RDMAP, remote protection, invalid STag, M, D, R.
            assert!(f.name.starts_with("crc1-ops-badread#1:"), "{}", f.name);
            assert_eq!(word, [0x10, 0x00, 0x07, 0x00]);
            assert_eq!(
                meant,
                Terminate {
                    code: TermCode::RDMAP_INVALID_STAG,
                    segment_len_valid: true,
                    ddp_header: true,
                    rdmap_header: true,
                }
            );
            assert_eq!(
                rfc.code,
                TermCode {
                    layer: Layer::Ddp,
                    etype: 0,
                    ecode: 0
                }
            );
            assert_eq!(seg_len, 0);
            // siw's reconstructed read request: its MSN field holds the read size.
            assert_eq!(inner.opcode, Opcode::ReadRequest);
            let size = inner.read_request().unwrap().size;
            assert_eq!(size, 7);
            assert!(
                matches!(inner.placement, Placement::Untagged { qn: QN_READ_REQUEST, msn, .. } if msn == size)
            );
        }
    }
}

/// One bit flipped anywhere after the length field (control field, header fields, payload,
/// pad, CRC field) of a CRC FPDU: the FPDU never passes and the deframer reports a CRC error,
/// also for a control field whose header would not fit the ULPDU. Without CRCs, a payload flip
/// goes through.
#[test]
fn a_flipped_bit_is_a_crc_error() {
    let (mut checked, mut oversized) = (0, 0);
    for f in fixtures().iter().filter(|f| f.kind == Kind::Fpdu) {
        let (ulpdu_len, _, _) = layout(&f.bytes);
        if !f.crc {
            let mut b = f.bytes.clone();
            b[LEN_FIELD + ulpdu_len - 1] ^= 0x80;
            let o = deframe([&b[..]], false);
            assert_eq!(o.error, None, "{}", f.name);
            assert!(o.fpdus[0].ended);
            continue;
        }
        for at in LEN_FIELD..f.bytes.len() {
            for bit in 0..8 {
                // Every bit of the control field; one bit (varying) of every other byte.
                if at >= LEN_FIELD + CTRL_LEN && bit != at % 8 {
                    continue;
                }
                let mut b = f.bytes.clone();
                b[at] ^= 1 << bit;
                let o = deframe([&b[..]], true);
                assert!(o.fpdus.iter().all(|p| !p.ended), "{}: byte {at}", f.name);
                let ctrl = [b[LEN_FIELD], b[LEN_FIELD + 1]];
                if matches!(ddp::header_len(ctrl), Ok(len) if len > ulpdu_len) {
                    oversized += 1;
                }
                assert_eq!(
                    o.error,
                    Some(TermCode::LLP_CRC),
                    "{}: byte {at} bit {bit}",
                    f.name
                );
                checked += 1;
                if at == LEN_FIELD + ulpdu_len / 2 {
                    // Fed in pieces, the same.
                    for k in [1, at, b.len() - 1] {
                        assert_eq!(deframe([&b[..k], &b[k..]], true), o);
                    }
                }
            }
        }
    }
    assert!(checked > 10_000 && oversized > 0, "{checked} {oversized}");
}

// ---------------------------------------------------------------------------------------------
// The whole rping connection.

/// Cuts a stream of FPDUs (after the req/rep frame) into units by their length fields.
fn cut_units(s: &[u8]) -> Vec<&[u8]> {
    let mut units = Vec::new();
    let mut at = 0;
    while at < s.len() {
        let (_, _, crc_at) = layout(&s[at..]);
        units.push(&s[at..at + crc_at + CRC_LEN]);
        at += crc_at + CRC_LEN;
    }
    assert_eq!(at, s.len(), "the stream ends inside an FPDU");
    units
}

#[test]
fn rping_streams_deframe_in_any_chunking() {
    let all = fixtures();
    let mut dirs = BTreeMap::new();
    for (dir, s) in streams() {
        let kind = match dir.as_str() {
            "i2r" => RrKind::Request,
            "r2i" => RrKind::Reply,
            d => panic!("direction {d}"),
        };
        let h = RrHeader::parse(&s, kind).unwrap();
        assert!(h.crc && h.enhanced && h.revision == 2 && !h.markers);
        let body = &s[RR_HDR_LEN + usize::from(h.pd_len)..];

        let whole = deframe([body], true);
        assert_eq!(whole.error, None, "{dir}");
        assert!(whole.at_boundary, "{dir}");
        assert!(whole.fpdus.iter().all(|f| f.ended), "{dir}");
        for n in [1, 7, 13, 512] {
            assert_eq!(deframe(body.chunks(n), true), whole, "{dir}: chunks of {n}");
        }

        // Cut by hand: every CRC is good, one FPDU each, same headers and payloads.
        let units = cut_units(body);
        assert_eq!(units.len(), whole.fpdus.len(), "{dir}");
        for (i, (u, got)) in units.iter().zip(&whole.fpdus).enumerate() {
            let crc_at = u.len() - CRC_LEN;
            let field = crc_from_wire(u[crc_at..].try_into().unwrap());
            assert_eq!(field, crc32c(&u[..crc_at]), "{dir} FPDU {i}: CRC");
            let alone = deframe([*u], true).fpdus;
            assert_eq!(alone.len(), 1, "{dir} FPDU {i}");
            assert_eq!(alone[0], *got, "{dir} FPDU {i}");
            // The fixture file's units of this connection are these very bytes.
            let index = i + 1;
            if let Some(f) = all.iter().find(|f| {
                f.conn() == "crc1-rping#1" && f.kind == Kind::Fpdu && f.position() == (&dir, index)
            }) {
                assert_eq!(f.bytes[..], u[..], "{}", f.name);
            }
        }
        // So is the req/rep.
        let rr = all
            .iter()
            .find(|f| f.conn() == "crc1-rping#1" && f.position() == (&dir, 0))
            .unwrap();
        assert_eq!(rr.bytes[..], s[..RR_HDR_LEN + usize::from(h.pd_len)]);
        dirs.insert(dir, whole.fpdus);
    }
    let (i2r, r2i) = (&dirs["i2r"], &dirs["r2i"]);

    // rping -C 3: per round, the client advertises its source buffer (send), the server
    // reads it (read request, read response), says go (send), the client advertises its sink
    // buffer (send), the server writes the data back (write) and says go (send).
    let ops = |v: &[Fpdu]| v.iter().map(|f| f.segment.opcode).collect::<Vec<_>>();
    use Opcode::*;
    assert_eq!(ops(i2r), [Send, ReadResponse, Send].repeat(3));
    assert_eq!(ops(r2i), [ReadRequest, Send, Write, Send].repeat(3));
    assert_eq!(i2r.len() + r2i.len(), 21);

    // Untagged messages: one segment each, MSN counting from 1 on each queue.
    for v in [i2r, r2i] {
        let mut next = BTreeMap::from([(QN_SEND, 1), (QN_READ_REQUEST, 1)]);
        for f in v {
            assert!(f.segment.last);
            if let Placement::Untagged { qn, msn, mo, .. } = f.segment.placement {
                let n = next.get_mut(&qn).unwrap();
                assert_eq!((msn, mo), (*n, 0));
                *n += 1;
            }
        }
    }

    // The data: each read answers its request, and the write echoes what was read.
    let advert = |f: &Fpdu| {
        assert_eq!(f.segment.opcode, Send);
        let p = &f.payload;
        assert_eq!(p.len(), 16, "rping's buffer advertisement");
        let to = u64::from_be_bytes(p[..8].try_into().unwrap());
        let stag = u32::from_be_bytes(p[8..12].try_into().unwrap());
        let len = u32::from_be_bytes(p[12..16].try_into().unwrap());
        (stag, to, len)
    };
    for round in 0..3 {
        let (src, resp, sink) = (&i2r[3 * round], &i2r[3 * round + 1], &i2r[3 * round + 2]);
        let (req, write) = (&r2i[4 * round], &r2i[4 * round + 2]);
        let rr = req.segment.read_request().unwrap();
        assert_eq!((rr.source_stag, rr.source_to, rr.size), advert(src));
        assert_eq!(
            resp.segment.placement,
            Placement::Tagged {
                stag: rr.sink_stag,
                to: rr.sink_to
            }
        );
        assert_eq!(resp.payload.len(), rr.size as usize);
        let (stag, to, len) = advert(sink);
        assert_eq!(write.segment.placement, Placement::Tagged { stag, to });
        assert_eq!(write.payload.len(), len as usize);
        assert_eq!(write.payload, resp.payload);
        assert!(resp
            .payload
            .starts_with(format!("rdma-ping-{round}: ").as_bytes()));
        // The server's go-aheads are empty advertisements.
        assert_eq!(advert(&r2i[4 * round + 1]), (0, 0, 0));
        assert_eq!(advert(&r2i[4 * round + 3]), (0, 0, 0));
    }
}
