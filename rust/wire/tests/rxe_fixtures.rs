// SPDX-License-Identifier: GPL-2.0

//! Real RoCE v2 packets sent by Linux rxe (`fixtures/rxe-roce-v2.txt`, see
//! `fixtures/README.md`): every one parses, its fields agree with the capture tool's own
//! decoding, it is rebuilt byte for byte from the parsed headers, and its ICRC is reproduced
//! bit for bit.

use std::collections::BTreeSet;

use oxrdma_wire::headers::{NakCode, Syndrome};
use oxrdma_wire::icrc::{self, Encap, Icrc, IcrcError, ICRC_LEN, ROCE_V2_UDP_PORT};
use oxrdma_wire::opcode::Opcode;
use oxrdma_wire::packet::{self, Packet};

/// One fixture line.
struct Fixture {
    name: String,
    opcode: u8,
    pad: u8,
    payload_len: usize,
    frame: Vec<u8>,
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn fixtures() -> Vec<Fixture> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/rxe-roce-v2.txt");
    let text = std::fs::read_to_string(path).expect("fixture file");
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 5, "fixture line: {line}");
        out.push(Fixture {
            name: f[0].to_string(),
            opcode: u8::from_str_radix(f[1].trim_start_matches("0x"), 16).unwrap(),
            pad: f[2].parse().unwrap(),
            payload_len: f[3].parse().unwrap(),
            frame: hex(f[4]),
        });
    }
    out
}

/// The IP packet of an Ethernet frame, trimmed to the IP length, and its encapsulation.
fn ip_packet(frame: &[u8]) -> (Encap, &[u8]) {
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let ip = &frame[14..];
    match ethertype {
        0x0800 => {
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            (Encap::RoceV2Ipv4, &ip[..total])
        }
        0x86DD => {
            let payload = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            (Encap::RoceV2Ipv6, &ip[..40 + payload])
        }
        other => panic!("ethertype {other:#06x}"),
    }
}

/// The UDP payload (the IBA packet, ICRC included) of a RoCE v2 IP packet.
fn udp_payload(encap: Encap, ip: &[u8]) -> &[u8] {
    let net = icrc::network_header_len(encap, ip).unwrap();
    let udp = &ip[net..];
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), ROCE_V2_UDP_PORT);
    assert_eq!(u16::from_be_bytes([udp[4], udp[5]]) as usize, udp.len());
    assert_eq!(icrc::bth_offset(encap, ip).unwrap(), net + 8);
    &udp[8..]
}

struct Checked {
    encap: Encap,
    packet: Packet,
}

fn check(f: &Fixture) -> Checked {
    let (encap, ip) = ip_packet(&f.frame);
    let iba = udp_payload(encap, ip);
    let p = packet::parse(iba).unwrap_or_else(|e| panic!("{}: {e}", f.name));

    // The capture tool's independent decoding agrees.
    assert_eq!(p.opcode.value(), f.opcode, "{}", f.name);
    assert_eq!(p.pad, f.pad, "{}", f.name);
    assert_eq!(p.payload_len, f.payload_len, "{}", f.name);
    assert_eq!(p.len_without_icrc() + ICRC_LEN, iba.len(), "{}", f.name);

    // Rebuilt from the parsed headers and payload: the same bytes (rxe zeroes the pad).
    let mut buf = vec![0u8; iba.len()];
    let n = packet::build(&p.headers, p.payload(iba), &mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        &iba[..iba.len() - ICRC_LEN],
        "{}: rebuilt",
        f.name
    );

    // The ICRC, bit for bit, little-endian on the wire.
    let body = &ip[..ip.len() - ICRC_LEN];
    let wire = &ip[ip.len() - ICRC_LEN..];
    let computed = icrc::compute(encap, body).unwrap();
    assert_eq!(icrc::to_wire(computed), wire, "{}: ICRC", f.name);
    assert_eq!(icrc::verify(encap, ip), Ok(()), "{}", f.name);
    let named = match encap {
        Encap::RoceV2Ipv4 => icrc::icrc_v2_ipv4(body),
        _ => icrc::icrc_v2_ipv6(body),
    };
    assert_eq!(named, Ok(computed));
    let mut copy = ip.to_vec();
    let at = copy.len() - ICRC_LEN;
    copy[at..].fill(0);
    assert_eq!(icrc::fill(encap, &mut copy), Ok(computed));
    assert_eq!(copy, ip);

    // Streamed: the headers through the BTH, then the rest in 7-byte pieces.
    let bth_end = icrc::bth_offset(encap, ip).unwrap() + 12;
    let mut s = Icrc::new(encap, &body[..bth_end]).unwrap();
    for piece in body[bth_end..].chunks(7) {
        s.update(piece);
    }
    assert_eq!(s.finish(), computed);

    Checked { encap, packet: p }
}

#[test]
fn every_fixture_parses_and_its_icrc_is_reproduced() {
    let all = fixtures();
    assert!(all.len() >= 30, "only {} fixtures", all.len());
    for f in &all {
        check(f);
    }
}

#[test]
fn fixtures_cover_the_opcodes_and_cases() {
    let all = fixtures();
    let mut ops = BTreeSet::new();
    let mut pads = BTreeSet::new();
    let mut syndromes = BTreeSet::new();
    let mut encaps = BTreeSet::new();
    let mut masked_nonzero = false;
    for f in &all {
        let c = check(f);
        ops.insert(c.packet.opcode);
        pads.insert(c.packet.pad);
        encaps.insert(format!("{:?}", c.encap));
        if let Some(s) = c.packet.syndrome() {
            syndromes.insert(
                format!("{s:?}")
                    .split([' ', '('])
                    .next()
                    .unwrap()
                    .to_string(),
            );
            if let Syndrome::Nak(code) = s {
                syndromes.insert(format!("{code:?}"));
            }
        }
        let (_, ip) = ip_packet(&f.frame);
        if c.encap == Encap::RoceV2Ipv4 && ip[1] != 0 {
            masked_nonzero = true;
        }
    }
    use Opcode::*;
    for op in [
        RcSendFirst,
        RcSendMiddle,
        RcSendLast,
        RcSendLastImm,
        RcSendOnly,
        RcSendOnlyImm,
        RcRdmaWriteFirst,
        RcRdmaWriteMiddle,
        RcRdmaWriteLast,
        RcRdmaWriteLastImm,
        RcRdmaWriteOnly,
        RcRdmaWriteOnlyImm,
        RcRdmaReadRequest,
        RcRdmaReadResponseFirst,
        RcRdmaReadResponseMiddle,
        RcRdmaReadResponseLast,
        RcRdmaReadResponseOnly,
        RcAcknowledge,
        RcAtomicAcknowledge,
        RcCompareSwap,
        RcFetchAdd,
        RcSendLastInv,
        RcSendOnlyInv,
        UcSendFirst,
        UcSendLast,
        UcSendOnly,
        UcSendOnlyImm,
        UcRdmaWriteFirst,
        UcRdmaWriteLast,
        UcRdmaWriteOnlyImm,
        UdSendOnly,
        UdSendOnlyImm,
    ] {
        assert!(ops.contains(&op), "no fixture for {op:?}");
    }
    assert_eq!(pads, BTreeSet::from([0, 1, 2, 3]));
    for s in ["Ack", "RnrNak", "Nak", "RemoteAccessError"] {
        assert!(syndromes.contains(s), "no {s} fixture: {syndromes:?}");
    }
    assert!(encaps.contains("RoceV2Ipv4"));
    assert!(encaps.contains("RoceV2Ipv6"), "no IPv6 fixture");
    assert!(masked_nonzero, "no IPv4 fixture with a non-zero TOS");
}

/// Every field the annex masks can change on real packets without changing the ICRC; any
/// other byte changes it.
#[test]
fn masked_fields_on_real_packets() {
    for f in fixtures() {
        let (encap, ip) = ip_packet(&f.frame);
        let net = icrc::network_header_len(encap, ip).unwrap();
        let masked: Vec<(usize, u8)> = match encap {
            Encap::RoceV2Ipv4 => vec![(1, 0xFF), (8, 0xFF), (10, 0xFF), (11, 0xFF)],
            _ => vec![(0, 0x0F), (1, 0xFF), (2, 0xFF), (3, 0xFF), (7, 0xFF)],
        }
        .into_iter()
        .chain([(net + 6, 0xFF), (net + 7, 0xFF), (net + 8 + 4, 0xFF)])
        .collect();
        let mut m = ip.to_vec();
        for &(at, mask) in &masked {
            m[at] ^= mask;
        }
        assert_eq!(icrc::verify(encap, &m), Ok(()), "{}", f.name);
        // The BTH's FECN and BECN bits (RoCE v2 ECN) are in the masked byte.
        let mut m = ip.to_vec();
        m[net + 8 + 4] |= 0xC0;
        assert_eq!(icrc::verify(encap, &m), Ok(()));
        for at in (0..ip.len() - ICRC_LEN).filter(|a| !masked.iter().any(|m| m.0 == *a)) {
            let mut m = ip.to_vec();
            m[at] ^= 0x10;
            assert!(
                matches!(
                    icrc::verify(encap, &m),
                    Err(IcrcError::Mismatch { .. } | IcrcError::BadVersion(_))
                        | Err(IcrcError::TooShort { .. })
                ),
                "{}: byte {at}",
                f.name
            );
        }
    }
}

#[test]
fn rxe_naks_decode() {
    let mut seen = Vec::new();
    for f in fixtures() {
        let (encap, ip) = ip_packet(&f.frame);
        let p = packet::parse(udp_payload(encap, ip)).unwrap();
        if p.opcode == Opcode::RcAcknowledge {
            seen.push(p.syndrome().unwrap());
        }
    }
    assert!(seen.contains(&Syndrome::Nak(NakCode::RemoteAccessError)));
    assert!(seen.iter().any(|s| matches!(s, Syndrome::RnrNak { .. })));
    assert!(seen.iter().any(|s| matches!(s, Syndrome::Ack { .. })));
}
