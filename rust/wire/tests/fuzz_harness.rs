// SPDX-License-Identifier: GPL-2.0

//! The `parse` fuzz target's checks (`fuzz/harness.rs`) run as a plain test, on stable and
//! without libFuzzer: over the fixtures (as IP packets and as IBA packets), deterministic
//! mutations of them (bit flips, byte changes, truncations, insertions, removals, valid
//! opcodes written in), and random bytes. `cargo +nightly fuzz run parse` (in `fuzz/`)
//! explores further.

include!("../fuzz/harness.rs");

mod common;
use common::Rng;

/// The IP packets of the fixtures (Ethernet stripped, trimmed to the IP length).
fn fixture_ip_packets() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/rxe-roce-v2.txt");
    let text = std::fs::read_to_string(path).expect("fixture file");
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let h = line.split_whitespace().nth(4).expect("frame column");
        let frame: Vec<u8> = (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect();
        let ip = &frame[14..];
        let len = if ip[0] >> 4 == 4 {
            u16::from_be_bytes([ip[2], ip[3]]) as usize
        } else {
            40 + u16::from_be_bytes([ip[4], ip[5]]) as usize
        };
        out.push(ip[..len].to_vec());
    }
    assert!(!out.is_empty());
    out
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(6) {
            0 if !v.is_empty() => {
                let at = rng.below(v.len());
                v[at] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let at = rng.below(v.len());
                v[at] = rng.byte();
            }
            2 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            3 => {
                let at = rng.below(v.len() + 1);
                let b = rng.byte();
                v.insert(at, b);
            }
            4 if !v.is_empty() => {
                let at = rng.below(v.len());
                v.remove(at);
            }
            _ => {
                // Interesting BTH values: the first two bytes of the IBA packet.
                if v.len() > 1 {
                    v[0] = [
                        0x00, 0x04, 0x0A, 0x0C, 0x10, 0x11, 0x12, 0x13, 0x1C, 0x1D, 0x64, 0x81,
                    ][rng.below(12)];
                    v[1] &= 0xF0;
                }
            }
        }
    }
    v
}

#[test]
fn fixtures() {
    for ip in fixture_ip_packets() {
        fuzz_one(&ip);
        // The IBA packet alone (IPv4: 20-byte header; IPv6: 40), with and without ICRC.
        let bth = if ip[0] >> 4 == 4 { 28 } else { 48 };
        fuzz_one(&ip[bth..]);
        fuzz_one(&ip[bth..ip.len() - 4]);
    }
}

#[test]
fn mutated_fixtures() {
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let seeds = fixture_ip_packets();
    for seed in &seeds {
        let bth = if seed[0] >> 4 == 4 { 28 } else { 48 };
        for _ in 0..300 {
            fuzz_one(&mutate(&mut rng, seed));
            fuzz_one(&mutate(&mut rng, &seed[bth..]));
        }
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0xFEED_FACE_CAFE_BEEF);
    for _ in 0..30_000 {
        let len = rng.below(160);
        let mut v: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        // Half the time, a valid opcode with TVer 0, so that parsing gets past the BTH.
        if len > 1 && rng.below(2) == 0 {
            let ops = oxrdma_wire::opcode::Opcode::ALL;
            v[0] = ops[rng.below(ops.len())].value();
            v[1] &= 0xF0;
        }
        fuzz_one(&v);
    }
}
