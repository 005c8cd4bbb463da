// SPDX-License-Identifier: GPL-2.0
//! Random numbers from the kernel's CRNG.

use super::bindings;

/// A random `u32` from the kernel's CRNG (`get_random_u32`): what neither a process nor a
/// network peer can predict. Any context.
pub fn u32() -> u32 {
    // SAFETY: `get_random_u32` takes no arguments, touches only the CRNG's per-CPU state and
    // may be called from any context.
    unsafe { bindings::get_random_u32() }
}
