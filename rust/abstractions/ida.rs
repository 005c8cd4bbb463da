// SPDX-License-Identifier: GPL-2.0
//! Identities of live objects: the kernel's ID allocator (`struct ida`, `<linux/idr.h>`).
//!
//! An [`Ida`] hands out the lowest free number of a range; an [`IdaId`] owns one number and
//! gives it back when dropped. A number is therefore never shared by two live objects, however
//! many objects come and go (a counter would wrap), and the range bounds how many can live at
//! once.

use super::bindings;
use kernel::{prelude::*, sync::Arc, types::Opaque};

/// An allocator of the numbers `min..=max`.
///
/// # Invariants
///
/// `ida` is an initialised `struct ida` (`ida_init`), pinned for its whole life; every number
/// it holds allocated is owned by exactly one [`IdaId`], each of which keeps the `Ida` alive.
#[pin_data(PinnedDrop)]
pub struct Ida {
    #[pin]
    ida: Opaque<bindings::ida>,
    min: u32,
    max: u32,
}

// SAFETY: the IDA does its own locking (an IRQ-safe spinlock inside its XArray); all methods
// take `&self`, so it may be used and dropped from any thread.
unsafe impl Send for Ida {}
// SAFETY: every method takes `&self` and the IDA locks internally, so concurrent use from
// several threads is allowed.
unsafe impl Sync for Ida {}

impl Ida {
    /// A new allocator of `min..=max` (`min <= max <= i32::MAX`, the IDA's own limit).
    pub fn new(min: u32, max: u32) -> Result<Arc<Self>> {
        if min > max || max > i32::MAX as u32 {
            return Err(EINVAL);
        }
        Arc::pin_init(
            pin_init!(Self {
                // SAFETY: `ida_init` initialises the pinned, not yet used slot in place.
                ida <- Opaque::ffi_init(|p| unsafe { bindings::oxrdma_ida_init(p) }),
                min,
                max,
            }),
            GFP_KERNEL,
        )
    }

    /// The lowest free number (process context: may sleep to allocate). `ENOSPC` when every
    /// number of the range is live.
    pub fn alloc(self: &Arc<Self>) -> Result<IdaId> {
        // SAFETY: `self.ida` is initialised (type invariant); GFP_KERNEL is allowed because
        // callers are in process context (documented above).
        let r = unsafe {
            bindings::ida_alloc_range(
                self.ida.get(),
                self.min,
                self.max,
                kernel::bindings::GFP_KERNEL,
            )
        };
        kernel::error::to_result(r)?;
        // `r` is a number of the range, not negative.
        let id = r as u32;
        // INVARIANT: the number just allocated is owned by this `IdaId` alone.
        Ok(IdaId {
            ida: self.clone(),
            id,
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Ida {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: no `IdaId` is left (each holds an `Arc` to this value), so nothing uses the
        // IDA any more; `ida_destroy` frees its memory.
        unsafe { bindings::ida_destroy(self.ida.get()) };
    }
}

/// One live number of an [`Ida`], given back on drop.
pub struct IdaId {
    ida: Arc<Ida>,
    id: u32,
}

impl IdaId {
    /// The number.
    pub fn get(&self) -> u32 {
        self.id
    }
}

impl Drop for IdaId {
    fn drop(&mut self) {
        // SAFETY: `self.id` was allocated from `self.ida` and is owned by this value alone
        // (type invariant of `Ida`), so it is freed exactly once.
        unsafe { bindings::ida_free(self.ida.ida.get(), self.id) };
    }
}
