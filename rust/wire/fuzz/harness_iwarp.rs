// SPDX-License-Identifier: GPL-2.0
//
// The body of the `iwarp_stream` fuzz target, shared (by `include!`) between the cargo-fuzz
// target (fuzz_targets/iwarp_stream.rs) and a plain test (../tests/iwarp_fuzz_harness.rs).

/// What a deframer made of a whole stream: the header and payload of each FPDU that ended,
/// the error that stopped it if any, and whether the input ended between FPDUs.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The headers and payloads of the FPDUs that ended with a good CRC, in order.
    pub fpdus: Vec<(oxrdma_wire::iwarp::ddp::Segment, Vec<u8>)>,
    /// The error that ended the stream, if any.
    pub error: Option<oxrdma_wire::iwarp::ddp::TermCode>,
    /// Whether the input ended between FPDUs.
    pub at_boundary: bool,
}

/// Runs a deframer over `stream` fed in the pieces `cuts` splits it into (split offsets,
/// ascending), checking the invariants every step must keep; twice, step by step and taking
/// whole FPDUs first where it can (`Deframer::whole_with`), which must agree.
pub fn deframe_cut(stream: &[u8], cuts: &[usize], crc: bool, markers: bool) -> Outcome {
    let stepped = deframe_cut_by(stream, cuts, crc, markers, false);
    assert_eq!(deframe_cut_by(stream, cuts, crc, markers, true), stepped);
    stepped
}

fn deframe_cut_by(
    stream: &[u8],
    cuts: &[usize],
    crc: bool,
    markers: bool,
    whole_first: bool,
) -> Outcome {
    use oxrdma_wire::crc32c::SoftCrc32c;
    use oxrdma_wire::iwarp::stream::{Deframer, Event};
    let mut d = Deframer::new(crc, markers);
    let mut fpdus = Vec::new();
    let mut cur: Option<(oxrdma_wire::iwarp::ddp::Segment, Vec<u8>, usize)> = None;
    let mut prev = 0;
    for &end in cuts.iter().chain(core::iter::once(&stream.len())) {
        let end = end.clamp(prev, stream.len());
        let mut chunk = &stream[prev..end];
        prev = end;
        while !chunk.is_empty() {
            if whole_first && cur.is_none() {
                if let Some(w) = d.whole_with(&SoftCrc32c, chunk) {
                    let end = w.start + usize::from(w.payload_len);
                    assert!(w.consumed > 0 && end <= w.consumed && w.consumed <= chunk.len());
                    assert!(d.at_boundary());
                    fpdus.push((w.segment, chunk[w.start..end].to_vec()));
                    chunk = &chunk[w.consumed..];
                    continue;
                }
            }
            let step = match d.step(chunk) {
                Ok(s) => s,
                Err(e) => {
                    // Errors are final.
                    assert_eq!(d.step(b"x"), Err(e));
                    return Outcome {
                        fpdus,
                        error: Some(e),
                        at_boundary: false,
                    };
                }
            };
            assert!(step.consumed <= chunk.len());
            match step.event {
                Event::More => assert_eq!(step.consumed, chunk.len()),
                Event::Header {
                    segment,
                    payload_len,
                } => {
                    assert!(cur.is_none(), "a header inside an FPDU");
                    cur = Some((segment, Vec::new(), payload_len.into()));
                }
                Event::Payload { start, len } => {
                    assert!(len > 0 && start + len <= step.consumed);
                    let (_, p, want) = cur.as_mut().expect("payload without a header");
                    p.extend_from_slice(&chunk[start..start + len]);
                    assert!(p.len() <= *want, "more payload than announced");
                }
                Event::End => {
                    let (s, p, want) = cur.take().expect("an FPDU end without a header");
                    assert_eq!(p.len(), want);
                    fpdus.push((s, p));
                }
            }
            assert!(step.consumed > 0 || step.event != Event::More);
            chunk = &chunk[step.consumed..];
        }
    }
    Outcome {
        fpdus,
        error: None,
        at_boundary: d.at_boundary(),
    }
}

/// Builds a valid stream of sends and writes out of `data` (lengths and contents from its
/// bytes), framed with `crc` and `markers`, and returns it with the FPDUs it carries.
pub fn valid_stream(
    data: &[u8],
    crc: bool,
    markers: bool,
) -> (Vec<u8>, Vec<(oxrdma_wire::iwarp::ddp::Segment, Vec<u8>)>) {
    use oxrdma_wire::iwarp::ddp::{Opcode, Placement, RdmapHeader, Segment, Segmenter, QN_SEND};
    use oxrdma_wire::iwarp::mpa::Framer;
    let mut f = Framer::new(crc, markers);
    let mut stream = Vec::new();
    let mut fpdus = Vec::new();
    let mut rest = data;
    let mut msn = 1;
    while let [a, b, tail @ ..] = rest {
        let len = (usize::from(*a) << 4 | usize::from(*b)) % (tail.len() + 1);
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        let first = if a & 1 == 0 {
            Segment {
                opcode: Opcode::Send,
                last: false,
                placement: Placement::Untagged {
                    qn: QN_SEND,
                    msn,
                    mo: 0,
                    inv_stag: 0,
                },
                rdmap: RdmapHeader::None,
            }
        } else {
            Segment {
                opcode: Opcode::Write,
                last: false,
                placement: Placement::Tagged {
                    stag: u32::from(*b),
                    to: u64::from(*a) << 40,
                },
                rdmap: RdmapHeader::None,
            }
        };
        msn += u32::from(first.opcode == Opcode::Send);
        let mulpdu = 64 + u16::from(*b) * 8;
        for plan in Segmenter::new(first, len as u32, mulpdu).expect("mulpdu fits a header") {
            let mut hdr = [0u8; oxrdma_wire::iwarp::ddp::MAX_HDR_LEN];
            let n = plan.segment.write(&mut hdr).expect("consistent segment");
            let body = &payload[plan.offset as usize..(plan.offset + plan.len) as usize];
            let mut out = vec![0u8; f.wire_len(n + body.len())];
            let w = f.frame(&[&hdr[..n], body], &mut out).expect("room");
            assert_eq!(w, out.len());
            stream.extend_from_slice(&out);
            fpdus.push((plan.segment, body.to_vec()));
        }
    }
    (stream, fpdus)
}

/// The fuzz target: the first byte picks CRC and markers. The rest is used twice: as the
/// recipe of a valid stream, which must come back FPDU for FPDU however it is cut (every
/// split point in two pieces; and byte by byte), and as a raw hostile stream, which must
/// give the same outcome however it is cut, without panicking.
pub fn fuzz_iwarp(data: &[u8]) {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let crc = mode & 1 != 0;
    let markers = mode & 2 != 0;

    let (stream, fpdus) = valid_stream(data, crc, markers);
    let whole = deframe_cut(&stream, &[], crc, markers);
    assert_eq!(whole.error, None);
    assert!(whole.at_boundary);
    assert_eq!(whole.fpdus, fpdus);
    let step = (stream.len() / 64).max(1);
    for k in (0..=stream.len()).step_by(step) {
        assert_eq!(
            deframe_cut(&stream, &[k], crc, markers),
            whole,
            "split at {k}"
        );
    }
    if stream.len() <= 2048 {
        let every: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(deframe_cut(&stream, &every, crc, markers), whole);
    }

    let raw = deframe_cut(data, &[], crc, markers);
    for k in 0..=data.len().min(512) {
        assert_eq!(
            deframe_cut(data, &[k], crc, markers),
            raw,
            "raw split at {k}"
        );
    }
}
