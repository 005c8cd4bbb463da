// SPDX-License-Identifier: GPL-2.0
//! A `static` mutex for the driver's slow-path registries.
//!
//! The 6.12 `kernel` crate has no way to put a `Mutex` in a `static` (it must be pinned and
//! initialised at run time). Link creation, netdev events and module unload all need global
//! state reachable from C callbacks that carry no context, so this wraps one C
//! `DEFINE_MUTEX` (in `rust/helpers`) around data that can be built in a `const`.
//!
//! All `GlobalMutex` instances share that single lock: never hold one while taking another,
//! and never hold it across calls that can take the RTNL or ib_core's registration locks
//! (netdev notifiers run under the RTNL and take it).

use super::bindings;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

/// Data protected by the driver's global mutex.
///
/// # Invariants
///
/// `data` is only accessed through a [`GlobalGuard`], which exists only while the C mutex
/// `oxrdma_global_mutex` is held by the current task.
pub struct GlobalMutex<T> {
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by the global mutex (type invariant), so sharing the
// wrapper between threads is sound when `T` may be sent between them.
unsafe impl<T: Send> Sync for GlobalMutex<T> {}

impl<T> GlobalMutex<T> {
    /// Wraps `data`; usable in a `static` initialiser.
    pub const fn new(data: T) -> Self {
        Self {
            data: UnsafeCell::new(data),
        }
    }

    /// Takes the global mutex (sleeping) and gives access to the data.
    pub fn lock(&self) -> GlobalGuard<'_, T> {
        // SAFETY: the mutex is statically initialised; this context may sleep (all callers
        // are process-context slow paths).
        unsafe { bindings::oxrdma_global_lock() };
        // INVARIANT: the mutex is held until the guard is dropped.
        GlobalGuard { lock: self }
    }
}

/// Access to a [`GlobalMutex`]'s data; unlocks on drop.
pub struct GlobalGuard<'a, T> {
    lock: &'a GlobalMutex<T>,
}

impl<T> Deref for GlobalGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the global mutex is held while the guard lives (type invariant).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for GlobalGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the global mutex is held while the guard lives, and `&mut self` makes this
        // the only access through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for GlobalGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this task took the mutex in `GlobalMutex::lock`.
        unsafe { bindings::oxrdma_global_unlock() };
    }
}
