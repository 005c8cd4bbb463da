// SPDX-License-Identifier: GPL-2.0
//! The kernel's own CRC implementations, used as independent oracles in KUnit tests of the
//! pure wire crate (and available to the data path where the kernel's may be faster).

use super::bindings;

/// CRC-32C (Castagnoli) of `data` computed by the kernel's `crc32c()` (lib/libcrc32c), with
/// the usual initial value and final inversion, so it equals the standard check value.
pub fn kernel_crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for chunk in data.chunks(u32::MAX as usize) {
        // SAFETY: `chunk` is valid for reads of `chunk.len()` bytes (which fits in `u32`) for
        // the duration of the call; `crc32c` only reads it and keeps no reference.
        crc = unsafe { bindings::crc32c(crc, chunk.as_ptr().cast(), chunk.len() as u32) };
    }
    !crc
}

/// IEEE CRC-32 of `data` computed by the kernel's `crc32_le()` (lib/crc32.c), with the usual
/// initial value and final inversion: the CRC the RoCE ICRC is built on.
pub fn kernel_crc32(data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes for the duration of the call;
    // `crc32_le` only reads it and keeps no reference.
    !unsafe { bindings::crc32_le(!0, data.as_ptr(), data.len()) }
}
