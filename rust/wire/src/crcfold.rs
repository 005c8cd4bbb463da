// SPDX-License-Identifier: GPL-2.0

//! A table-free bulk pass for the reflected CRC-32 family, by sparse multiples of the
//! generator, and the slicing-by-8 tables that take the rest.
//!
//! A CRC register depends on the message only modulo the generator `G`. If `P = x^N +
//! x^k1 + ... + x^kj + 1` is a multiple of `G` with few terms, adding `x^e * P` to the
//! message changes nothing modulo `G`; choosing `e` so that `x^e * x^N` is a message bit
//! that is set clears that bit and flips the bits `N - k1`, ..., `N - kj` and `N` positions
//! later in the stream. Done for a whole 64-bit word at once (when every such distance is
//! at least 64, the word's own bits are not flipped), the word becomes zero and its value
//! moves forward as a few shifts and XORs into the words that follow. Sweeping the message
//! from its start leaves zeros followed by a tail of about `N` bits, whose register a table
//! computes. Under a CPU emulator every table lookup is an emulated memory access, where a
//! shift or an XOR is one host instruction; on real hardware the kernel's carry-less
//! multiplication or CRC instruction is faster than either.
//!
//! The register's initial value is the same as an XOR into the message's first four bytes
//! (the register's update does exactly that), and leading zero bits leave a zero register
//! unchanged: so the register after the message is the table's register, from zero, after
//! the tail.
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate
//! and, via `#[path]`, as a module of the kernel crate.

/// Words (64 bits) swept as a block; a word's value moves less than `WINDOW - 1` words
/// forward (every distance of a [`SparseMultiple`] is below `64 * (WINDOW - 1)`).
const WINDOW: usize = 8;

/// A CRC whose generator divides a sparse polynomial.
pub(crate) trait SparseMultiple {
    /// For the multiple `x^N + x^k1 + ... + x^kj + 1`: the distances `N - k1`, ..., `N -
    /// kj`, `N`, in bits; each at least 64 and below `64 * (WINDOW - 1)`.
    const DISTANCES: &'static [u32];

    /// The largest distance (checked against the window when the CRC is used).
    const MAX_DISTANCE: usize = max_distance(Self::DISTANCES);

    /// The raw register after `data` from `state`, by any other method (tables).
    fn tail(state: u32, data: &[u8]) -> u32;
}

/// Messages shorter than this many bytes are left to [`SparseMultiple::tail`] whole: the
/// sweep must clear a block to pay for assembling the tail. At least one block of any
/// message this long is swept (`8 * MIN_LEN >= 64 * (2 * WINDOW - 1)`).
pub(crate) const MIN_LEN: usize = 128;

/// The largest of `distances`, which must all be in the window.
const fn max_distance(distances: &[u32]) -> usize {
    let mut max = 0;
    let mut i = 0;
    while i < distances.len() {
        let d = distances[i] as usize;
        assert!(d >= 64 && d < 64 * (WINDOW - 1));
        if d > max {
            max = d;
        }
        i += 1;
    }
    max
}

/// The raw (not inverted) register after `data` from `state`, for the CRC `S`.
#[inline(always)]
pub(crate) fn update<S: SparseMultiple>(state: u32, data: &[u8]) -> u32 {
    if data.len() < MIN_LEN {
        return S::tail(state, data);
    }
    // Word `q` may be swept when everything it moves lands inside the message
    // (64 * q + 63 + MAX_DISTANCE < 8 * len); whole blocks of WINDOW words are.
    let sweepable = (8 * data.len() - S::MAX_DISTANCE - 64) / 64 + 1;
    let blocks = sweepable / WINDOW;
    // `pending[q % WINDOW]`: what earlier words moved into word `q`, for the words after
    // the current one. Indexed by constants only (the block is unrolled), it stays in
    // registers.
    let mut pending = [0u64; WINDOW];
    pending[0] = u64::from(state);
    for block in data.chunks_exact(8 * WINDOW).take(blocks) {
        sweep_word::<S, 0>(&mut pending, block);
        sweep_word::<S, 1>(&mut pending, block);
        sweep_word::<S, 2>(&mut pending, block);
        sweep_word::<S, 3>(&mut pending, block);
        sweep_word::<S, 4>(&mut pending, block);
        sweep_word::<S, 5>(&mut pending, block);
        sweep_word::<S, 6>(&mut pending, block);
        sweep_word::<S, 7>(&mut pending, block);
    }
    // The tail: the bytes after the swept blocks, with what was moved into them (the
    // first word of the tail is a block's first: `pending` is in order).
    let rest = &data[8 * WINDOW * blocks..];
    let mut tail = [0u8; 16 * WINDOW];
    tail[..rest.len()].copy_from_slice(rest);
    for (chunk, p) in tail.chunks_exact_mut(8).zip(pending) {
        for (b, m) in chunk.iter_mut().zip(p.to_le_bytes()) {
            *b ^= m;
        }
    }
    S::tail(0, &tail[..rest.len()])
}

/// Clears word `J` of `block` (WINDOW words): its value, with what was moved into it, moves
/// to the words at each distance.
#[inline(always)]
fn sweep_word<S: SparseMultiple, const J: usize>(pending: &mut [u64; WINDOW], block: &[u8]) {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&block[8 * J..8 * J + 8]);
    let v = u64::from_le_bytes(bytes) ^ pending[J];
    pending[J] = 0;
    for &d in S::DISTANCES {
        let (at, shift) = (J + (d / 64) as usize, d % 64);
        pending[at % WINDOW] ^= v << shift;
        if shift != 0 {
            pending[(at + 1) % WINDOW] ^= v >> (64 - shift);
        }
    }
}

/// Slicing-by-8 lookup tables of a reflected CRC-32: `[0]` is the classic byte-at-a-time
/// table; `[k][i]` is the register contribution of byte `i` followed by `k` zero bytes.
pub(crate) type Tables = [[u32; 256]; 8];

/// Builds the slicing-by-8 tables for the reflected polynomial `poly` (at compile time).
pub(crate) const fn make_tables(poly: u32) -> Tables {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut slice = 1;
    while slice < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[slice - 1][i];
            tables[slice][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        slice += 1;
    }
    tables
}

/// Advances the raw (not inverted) register `crc` over `data` by the tables `t`.
pub(crate) fn update_tables(t: &Tables, mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xFF) as usize];
    }
    crc
}

/// Checks for the tests of each CRC.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The multiple whose distances `S` gives, reduced a bit at a time by the generator
    /// `x^32 + generator` (normal form), leaves nothing.
    pub(crate) fn check_multiple<S: SparseMultiple>(generator: u32) {
        // A polynomial of degree below 512 as four u128 words.
        let top = S::MAX_DISTANCE;
        let mut p = [0u128; 4];
        p[top / 128] ^= 1 << (top % 128);
        for &d in S::DISTANCES {
            let t = top - d as usize;
            p[t / 128] ^= 1 << (t % 128);
        }
        let g = (1u128 << 32) | u128::from(generator);
        for deg in (32..512).rev() {
            if p[deg / 128] >> (deg % 128) & 1 == 1 {
                let (w, s) = ((deg - 32) / 128, (deg - 32) % 128);
                p[w] ^= g << s;
                if s > 95 {
                    p[w + 1] ^= g >> (128 - s);
                }
            }
        }
        assert_eq!(p, [0; 4]);
    }

    /// The sweep gives the tables' register at every length from 0 to 1100 bytes, at two
    /// alignments, from four initial registers.
    pub(crate) fn check_sweep<S: SparseMultiple>() {
        let mut buf = [0u8; 1100];
        let mut x = 0x1234_5679u32;
        for b in buf.iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *b = (x >> 16) as u8;
        }
        for state in [0, !0, 0x8000_0001, x] {
            for start in [0, 3] {
                for end in start..buf.len() {
                    let data = &buf[start..end];
                    assert_eq!(
                        update::<S>(state, data),
                        S::tail(state, data),
                        "{state:#x} {start}..{end}"
                    );
                }
            }
        }
    }
}
