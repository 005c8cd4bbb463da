// SPDX-License-Identifier: GPL-2.0
//! The kernel's own CRC implementations: the accelerated CRC-32 of the crypto API for the data
//! path, and the library functions as independent oracles in KUnit tests of the pure wire
//! crate.

use super::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// The kernel's "crc32" hash (`crypto_shash`): the CPU's carry-less multiplication where it
/// has one (`crc32-pclmul` on x86), else the table-driven `crc32_le()`.
///
/// # Invariants
///
/// `tfm` is a transform from `crypto_alloc_shash("crc32")`, owned by this value.
pub struct Crc32Shash {
    tfm: NonNull<bindings::crypto_shash>,
}

// SAFETY: a shash transform may be used from several threads at once (each update has its own
// descriptor on the caller's stack) and freed from any process context.
unsafe impl Send for Crc32Shash {}
// SAFETY: see `Send`: `update` only reads the transform.
unsafe impl Sync for Crc32Shash {}

impl Crc32Shash {
    /// Allocates the transform (process context; may load the module of the implementation).
    pub fn new() -> Result<Self> {
        let name = kernel::c_str!("crc32").as_char_ptr();
        // SAFETY: the name is a NUL-terminated static string; returns a transform or an error
        // pointer.
        let tfm = unsafe { bindings::crypto_alloc_shash(name, 0, 0) };
        let tfm = kernel::error::from_err_ptr(tfm)?;
        // INVARIANT: a transform we own.
        Ok(Self {
            tfm: NonNull::new(tfm).ok_or(ENOMEM)?,
        })
    }

    /// The CRC-32 register `crc` (before any final inversion, like `crc32_le()`) after `data`.
    /// Any context.
    pub fn update(&self, crc: u32, data: &[u8]) -> u32 {
        // SAFETY: `tfm` is a live "crc32" transform (type invariant); `data` is readable for
        // its length; the helper keeps no reference.
        unsafe {
            bindings::oxrdma_crc32_update(self.tfm.as_ptr(), crc, data.as_ptr().cast(), data.len())
        }
    }
}

impl Drop for Crc32Shash {
    fn drop(&mut self) {
        // SAFETY: owned (type invariant), freed once.
        unsafe { bindings::oxrdma_crypto_free_shash(self.tfm.as_ptr()) };
    }
}

/// The CRC-32C (Castagnoli) register `crc` after `data` (no initial or final inversion),
/// computed by the kernel's `crc32c()` (lib/libcrc32c: the crypto API's best "crc32c", the
/// CPU's CRC32 instruction where it has one). Any context.
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    let mut crc = crc;
    for chunk in data.chunks(u32::MAX as usize) {
        // SAFETY: `chunk` is valid for reads of `chunk.len()` bytes (which fits in `u32`) for
        // the duration of the call; `crc32c` only reads it and keeps no reference.
        crc = unsafe { bindings::crc32c(crc, chunk.as_ptr().cast(), chunk.len() as u32) };
    }
    crc
}

/// CRC-32C (Castagnoli) of `data` computed by the kernel's `crc32c()` (lib/libcrc32c), with
/// the usual initial value and final inversion, so it equals the standard check value.
pub fn kernel_crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// IEEE CRC-32 of `data` computed by the kernel's `crc32_le()` (lib/crc32.c), with the usual
/// initial value and final inversion: the CRC the RoCE ICRC is built on.
pub fn kernel_crc32(data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes for the duration of the call;
    // `crc32_le` only reads it and keeps no reference.
    !unsafe { bindings::crc32_le(!0, data.as_ptr(), data.len()) }
}
