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

// ---- a spinlock that disables interrupts ---------------------------------------------------

/// A spinlock taken with `spin_lock_irqsave`: usable from any context, including the softirq
/// and hard-interrupt contexts kernel verbs users post and poll from.
///
/// The 6.12 `kernel` crate has only `spin_lock` (which deadlocks if an interrupt handler on the
/// same CPU takes the lock its task holds) and `Mutex` (which sleeps). Build one with
/// [`new_spinlock_irq!`](crate::new_spinlock_irq).
pub type SpinLockIrq<T> = kernel::sync::lock::Lock<T, SpinLockIrqBackend>;

/// The [`SpinLockIrq`] backend: `spinlock_t` with the saved interrupt flags as guard state.
pub struct SpinLockIrqBackend;

// SAFETY: `spinlock_t` gives mutual exclusion; `lock` and the default `relock` both use
// `spin_lock_irqsave`, and `unlock` restores the flags that `lock` saved.
unsafe impl kernel::sync::lock::Backend for SpinLockIrqBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: `ptr` is valid for writes, `name` and `key` live forever (trait contract).
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised spinlock (trait contract); the two binding crates
        // name the same C type.
        unsafe { bindings::oxrdma_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: the caller owns the lock (trait contract); `flags` were saved by `lock`.
        unsafe { bindings::oxrdma_spin_unlock_irqrestore(ptr.cast(), *flags) }
    }
}

/// Builds a [`SpinLockIrq`] initialiser, with a lock class per call site (like
/// `new_spinlock!`).
#[macro_export]
macro_rules! new_spinlock_irq {
    ($inner:expr, $name:literal) => {
        kernel::sync::lock::Lock::<_, $crate::ox::sync::SpinLockIrqBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
