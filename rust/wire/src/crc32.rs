// SPDX-License-Identifier: GPL-2.0

//! IEEE 802.3 CRC-32, the checksum underlying the RoCE invariant CRC (ICRC).
//!
//! Parameters: reflected polynomial `0xEDB8_8320` (normal form `0x04C1_1DB7`),
//! initial value `!0`, reflected input and output, final XOR `!0`. The check
//! value of the ASCII string `"123456789"` is `0xCBF4_3926`.
//!
//! This module is only the plain CRC; which header fields the ICRC masks
//! before hashing is handled elsewhere.
//!
//! Messages of 128 bytes or more are swept by a sparse multiple of the
//! polynomial (shifts and XORs, no tables: [`crcfold`]); the rest, and the
//! sweep's last bytes, by tables ("slicing-by-8", 8 KiB of tables computed at
//! compile time by a `const fn`).
//!
//! This file is self-contained: it is compiled both as a module of the
//! `oxrdma-wire` crate and, via `#[path]`, as a module of the kernel crate.

use super::crcfold::{self, SparseMultiple, Tables};

/// Reflected IEEE CRC-32 polynomial.
const POLY: u32 = 0xEDB8_8320;

/// Slicing-by-8 lookup tables ([`crcfold::Tables`]).
static TABLES: Tables = crcfold::make_tables(POLY);

/// Advances the raw (not inverted) CRC register `crc` over `data`, by tables.
fn update_tables(crc: u32, data: &[u8]) -> u32 {
    crcfold::update_tables(&TABLES, crc, data)
}

/// The generator divides `x^300 + x^155 + x^117 + x^89 + 1` (a sparse multiple: [`crcfold`]).
struct Ieee;

impl SparseMultiple for Ieee {
    const DISTANCES: &'static [u32] = &[145, 183, 211, 300];

    fn tail(state: u32, data: &[u8]) -> u32 {
        update_tables(state, data)
    }
}

/// Advances the raw (not inverted) CRC register `crc` over `data`.
fn update_raw(crc: u32, data: &[u8]) -> u32 {
    crcfold::update::<Ieee>(crc, data)
}

/// Streaming IEEE CRC-32 hasher.
///
/// Feeding the data in any number of [`update`](Self::update) calls gives
/// the same digest as one call with the concatenation.
///
/// ```
/// # use oxrdma_wire::crc32::{crc32, Crc32};
/// let mut h = Crc32::new();
/// h.update(b"1234");
/// h.update(b"56789");
/// assert_eq!(h.finish(), 0xCBF4_3926);
/// assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32 {
    /// The CRC register before the final XOR.
    state: u32,
}

impl Crc32 {
    /// Creates a hasher over the empty message.
    pub const fn new() -> Self {
        Self { state: !0 }
    }

    /// Appends `data` to the message.
    pub fn update(&mut self, data: &[u8]) {
        self.state = update_raw(self.state, data);
    }

    /// Returns the CRC-32 of everything passed to [`update`](Self::update)
    /// so far. The hasher is not consumed and can keep being updated.
    pub const fn finish(&self) -> u32 {
        !self.state
    }
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

/// Something that updates a CRC-32 register: the kernel's accelerated implementation in the
/// module, [`SoftCrc32`] (this module's tables) on the host. `state` is the register before
/// the final inversion (initially all ones), as [`Crc32`] keeps it.
pub trait Crc32Engine {
    /// The register after `data`.
    fn update_raw(&self, state: u32, data: &[u8]) -> u32;
}

/// This module's table-driven CRC-32 as a [`Crc32Engine`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftCrc32;

impl Crc32Engine for SoftCrc32 {
    fn update_raw(&self, state: u32, data: &[u8]) -> u32 {
        update_raw(state, data)
    }
}

/// Computes the IEEE CRC-32 of `data` in one call.
pub fn crc32(data: &[u8]) -> u32 {
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
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn empty_and_short() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(Crc32::new().finish(), 0);
        assert_eq!(crc32(b"a"), 0xE8B7_BE43);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn table_spot_values() {
        assert_eq!(TABLES[0][0], 0);
        assert_eq!(TABLES[0][1], 0x7707_3096);
        assert_eq!(TABLES[0][128], POLY);
        for t in &TABLES {
            assert_eq!(t[0], 0);
        }
    }

    #[test]
    fn every_length_and_alignment_matches_reference() {
        let mut buf = [0u8; 80];
        let mut x = 0x8765_4321u32;
        for b in buf.iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *b = (x >> 16) as u8;
        }
        for start in 0..8 {
            for end in start..buf.len() {
                let data = &buf[start..end];
                assert_eq!(crc32(data), reference(data), "{start}..{end}");
            }
        }
    }

    #[test]
    fn residue() {
        // Appending the digest (little endian) yields a constant residue.
        let mut msg = Vec::from(&b"hello world"[..]);
        let crc = crc32(&msg);
        msg.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(crc32(&msg), 0x2144_DF1C);
    }

    #[test]
    fn default_is_new() {
        assert_eq!(Crc32::default(), Crc32::new());
    }

    #[test]
    fn sparse_multiple() {
        crcfold::tests::check_multiple::<Ieee>(0x04C1_1DB7);
        crcfold::tests::check_sweep::<Ieee>();
    }

    proptest! {
        #[test]
        fn matches_reference(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
            prop_assert_eq!(crc32(&data), reference(&data));
        }

        #[test]
        fn streaming_equals_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..512),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            cuts.sort_unstable();
            let mut h = Crc32::new();
            let mut prev = 0;
            for &c in &cuts {
                h.update(&data[prev..c]);
                prev = c;
            }
            h.update(&data[prev..]);
            prop_assert_eq!(h.finish(), crc32(&data));
        }
    }
}
