// SPDX-License-Identifier: GPL-2.0

//! CRC-32C (Castagnoli), as used by iWARP MPA (RFC 5044) and iSCSI.
//!
//! Parameters: reflected polynomial `0x82F6_3B78` (normal form `0x1EDC_6F41`),
//! initial value `!0`, reflected input and output, final XOR `!0`. The check
//! value of the ASCII string `"123456789"` is `0xE306_9283`.
//!
//! Messages of 128 bytes or more are swept by a sparse multiple of the
//! polynomial (shifts and XORs, no tables: [`crcfold`]); the rest, and the
//! sweep's last bytes, by tables ("slicing-by-8", 8 KiB of tables computed at
//! compile time by a `const fn`).
//!
//! The digest is returned as a plain `u32`; the caller decides how it is laid
//! out on the wire (MPA transmits it in network byte order, iSCSI in little
//! endian).
//!
//! This file is self-contained: it is compiled both as a module of the
//! `oxrdma-wire` crate and, via `#[path]`, as a module of the kernel crate.

use super::crcfold::{self, SparseMultiple, Tables};

/// Reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Slicing-by-8 lookup tables ([`crcfold::Tables`]).
static TABLES: Tables = crcfold::make_tables(POLY);

/// Advances the raw (not inverted) CRC register `crc` over `data`, by tables.
fn update_tables(crc: u32, data: &[u8]) -> u32 {
    crcfold::update_tables(&TABLES, crc, data)
}

/// The generator divides `x^209 + x^144 + x^54 + x^39 + x^14 + 1` (a sparse multiple:
/// [`crcfold`]).
struct Castagnoli;

impl SparseMultiple for Castagnoli {
    const DISTANCES: &'static [u32] = &[65, 155, 170, 195, 209];

    fn tail(state: u32, data: &[u8]) -> u32 {
        update_tables(state, data)
    }
}

/// Advances the raw (not inverted) CRC register `crc` over `data`.
fn update_raw(crc: u32, data: &[u8]) -> u32 {
    crcfold::update::<Castagnoli>(crc, data)
}

/// Streaming CRC-32C hasher.
///
/// Feeding the data in any number of [`update`](Self::update) calls gives
/// the same digest as one call with the concatenation.
///
/// ```
/// # use oxrdma_wire::crc32c::{crc32c, Crc32c};
/// let mut h = Crc32c::new();
/// h.update(b"1234");
/// h.update(b"56789");
/// assert_eq!(h.finish(), 0xE306_9283);
/// assert_eq!(crc32c(b"123456789"), 0xE306_9283);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32c {
    /// The CRC register before the final XOR.
    state: u32,
}

impl Crc32c {
    /// Creates a hasher over the empty message.
    pub const fn new() -> Self {
        Self { state: !0 }
    }

    /// Appends `data` to the message.
    pub fn update(&mut self, data: &[u8]) {
        self.state = update_raw(self.state, data);
    }

    /// Appends `data` to the message, computed by `engine`.
    pub fn update_with<E: Crc32cEngine>(&mut self, engine: &E, data: &[u8]) {
        self.state = engine.update_raw(self.state, data);
    }

    /// Returns the CRC-32C of everything passed to [`update`](Self::update)
    /// so far. The hasher is not consumed and can keep being updated.
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

/// A CRC-32C implementation: how the register changes over some bytes (no initial or final
/// inversion). The kernel module plugs in the kernel's own (`crc32c()`, accelerated where
/// the CPU has an instruction for it); [`SoftCrc32c`] is this module's tables.
pub trait Crc32cEngine {
    /// The register after `data`.
    fn update_raw(&self, state: u32, data: &[u8]) -> u32;
}

/// This module's table-driven CRC-32C as a [`Crc32cEngine`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftCrc32c;

impl Crc32cEngine for SoftCrc32c {
    fn update_raw(&self, state: u32, data: &[u8]) -> u32 {
        update_raw(state, data)
    }
}

/// Computes the CRC-32C of `data` in one call.
pub fn crc32c(data: &[u8]) -> u32 {
    !update_raw(!0, data)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// Bit-at-a-time reference implementation, straight from the definition.
    fn reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn empty_and_short() {
        assert_eq!(crc32c(b""), 0);
        assert_eq!(Crc32c::new().finish(), 0);
        assert_eq!(crc32c(b"a"), 0xC1D0_4330);
        assert_eq!(
            crc32c(b"The quick brown fox jumps over the lazy dog"),
            0x2262_0404
        );
    }

    // RFC 3720 appendix B.4 / RFC 7143 appendix A.4.
    #[test]
    fn rfc3720_zeros() {
        assert_eq!(crc32c(&[0x00; 32]), 0x8A91_36AA);
    }

    #[test]
    fn rfc3720_ones() {
        assert_eq!(crc32c(&[0xFF; 32]), 0x62A8_AB43);
    }

    #[test]
    fn rfc3720_incrementing() {
        let mut buf = [0u8; 32];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = i as u8;
        }
        assert_eq!(crc32c(&buf), 0x46DD_794E);
    }

    #[test]
    fn rfc3720_decrementing() {
        let mut buf = [0u8; 32];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = 31 - i as u8;
        }
        assert_eq!(crc32c(&buf), 0x113F_DB5C);
    }

    #[test]
    fn rfc3720_iscsi_read_pdu() {
        let pdu: [u8; 48] = [
            0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, //
            0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, //
            0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
            0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        ];
        // The RFC lists the digest as the bytes 56 3a 96 d9 in wire
        // (little-endian) order.
        assert_eq!(crc32c(&pdu), 0xD996_3A56);
        assert_eq!(crc32c(&pdu).to_le_bytes(), [0x56, 0x3A, 0x96, 0xD9]);
    }

    #[test]
    fn table_spot_values() {
        assert_eq!(TABLES[0][0], 0);
        assert_eq!(TABLES[0][1], 0xF26B_8303);
        assert_eq!(TABLES[0][128], POLY);
        for t in &TABLES {
            assert_eq!(t[0], 0);
        }
    }

    #[test]
    fn every_length_and_alignment_matches_reference() {
        let mut buf = [0u8; 80];
        let mut x = 0x1234_5678u32;
        for b in buf.iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *b = (x >> 16) as u8;
        }
        for start in 0..8 {
            for end in start..buf.len() {
                let data = &buf[start..end];
                assert_eq!(crc32c(data), reference(data), "{start}..{end}");
            }
        }
    }

    #[test]
    fn residue() {
        // Appending the digest (little endian) yields a constant residue.
        let mut msg = Vec::from(&b"hello world"[..]);
        let crc = crc32c(&msg);
        msg.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(crc32c(&msg), 0x4867_4BC7);
    }

    #[test]
    fn default_is_new() {
        assert_eq!(Crc32c::default(), Crc32c::new());
    }

    #[test]
    fn sparse_multiple() {
        crcfold::tests::check_multiple::<Castagnoli>(0x1EDC_6F41);
        crcfold::tests::check_sweep::<Castagnoli>();
    }

    proptest! {
        #[test]
        fn matches_reference(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
            prop_assert_eq!(crc32c(&data), reference(&data));
        }

        #[test]
        fn streaming_equals_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..512),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            cuts.sort_unstable();
            let mut h = Crc32c::new();
            let mut prev = 0;
            for &c in &cuts {
                h.update(&data[prev..c]);
                prev = c;
            }
            h.update(&data[prev..]);
            prop_assert_eq!(h.finish(), crc32c(&data));
        }
    }
}
