// SPDX-License-Identifier: GPL-2.0
//! The module's own workqueue.
//!
//! Work items run module code, so none may run after the module is gone. The 6.12 `kernel`
//! crate only offers the system queues, which a module cannot drain (flushing them is
//! deprecated). The module therefore creates one queue at load ([`ModuleWorkqueue::create`])
//! and destroys it, which waits for everything queued, at unload (dropping the value).
//!
//! # Contract
//!
//! Everything that queues work (verbs calls, timers, packet reception) is stopped before the
//! module drops its [`ModuleWorkqueue`]: devices are unregistered, their timers deleted and
//! their sockets closed first. [`queue`] is only called by such producers.

use super::bindings;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{prelude::*, str::CStr, workqueue::Queue};

static RAW: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// Ownership of the module's workqueue; at most one exists.
pub struct ModuleWorkqueue(());

impl ModuleWorkqueue {
    /// Creates the module's unbound workqueue named `name`.
    pub fn create(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated static string.
        let wq = unsafe { bindings::oxrdma_alloc_workqueue(name.as_char_ptr()) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        if RAW
            .compare_exchange(
                core::ptr::null_mut(),
                wq,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: ours, never published.
            unsafe { bindings::destroy_workqueue(wq) };
            return Err(EBUSY);
        }
        Ok(Self(()))
    }
}

impl Drop for ModuleWorkqueue {
    fn drop(&mut self) {
        let wq = RAW.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: created in `create`; producers are stopped (module contract), so this
            // drains what is queued and nothing is queued afterwards.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// The module's queue, or the system's unbound queue before it exists (module init only).
pub fn queue() -> &'static Queue {
    let wq = RAW.load(Ordering::Acquire);
    if wq.is_null() {
        return kernel::workqueue::system_unbound();
    }
    // SAFETY: a live workqueue until `ModuleWorkqueue::drop`, after which producers no longer
    // run (module contract).
    unsafe { Queue::from_raw(wq.cast::<kernel::bindings::workqueue_struct>()) }
}
