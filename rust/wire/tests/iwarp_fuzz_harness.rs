// SPDX-License-Identifier: GPL-2.0

//! The `iwarp_stream` fuzz target's checks (`fuzz/harness_iwarp.rs`) as a plain test on
//! stable: deterministic random inputs in every CRC/marker mode, and mutations of valid
//! streams (bit flips, truncations, insertions) fed as hostile streams at every split.

include!("../fuzz/harness_iwarp.rs");

mod common;
use common::Rng;

#[test]
fn random_inputs() {
    let mut rng = Rng(0x1DEA_5EED_0BAD_F00D);
    for i in 0..400 {
        let len = rng.below(if i % 10 == 0 { 4000 } else { 300 });
        let v: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        fuzz_iwarp(&v);
    }
}

#[test]
fn mutated_valid_streams() {
    let mut rng = Rng(0xC0FF_EE00_1234_5678);
    for i in 0..300 {
        let crc = i % 2 == 0;
        let markers = i % 3 == 0;
        let len = rng.below(1500);
        let recipe: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let (mut s, fpdus) = valid_stream(&recipe, crc, markers);
        if s.is_empty() {
            continue;
        }
        match rng.below(3) {
            0 => {
                let at = rng.below(s.len());
                s[at] ^= 1 << rng.below(8);
            }
            1 => s.truncate(rng.below(s.len())),
            _ => {
                let at = rng.below(s.len());
                s.insert(at, rng.next() as u8);
            }
        }
        let whole = deframe_cut(&s, &[], crc, markers);
        // Whatever passed is a prefix of what was sent (CRC-protected or truncated only).
        if crc {
            assert_eq!(whole.fpdus[..], fpdus[..whole.fpdus.len()]);
        }
        for k in (0..=s.len()).step_by((s.len() / 40).max(1)) {
            assert_eq!(deframe_cut(&s, &[k], crc, markers), whole, "split at {k}");
        }
    }
}
