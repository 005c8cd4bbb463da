// SPDX-License-Identifier: GPL-2.0
//! Locks the 6.12 `kernel` crate lacks: a mutex for `static` data, spinlocks that disable
//! interrupts or bottom halves.

use super::bindings;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::{str::CStr, types::Opaque};

/// A mutex around `static` data, for state reachable from C callbacks that carry no context
/// (`rdma link add`, module unload).
///
/// The 6.12 `kernel` crate cannot put a `Mutex` in a `static` (a `struct mutex` must be
/// initialised in place at run time). Each `GlobalMutex` has a C mutex of its own, with a
/// lockdep class of its own, initialised on first use; its data is built in a `const`.
/// Process context only (it sleeps).
///
/// # Invariants
///
/// `mutex` is initialised once `state` is `READY` (and only by the one caller that moved it
/// from `UNINIT` to `INIT`); `data` is only accessed through a [`GlobalGuard`], which exists
/// only while the current task holds `mutex`. A `GlobalMutex` is used only through
/// `&'static` references, so it never moves after `mutex` is initialised.
pub struct GlobalMutex<T> {
    state: AtomicU8,
    mutex: Opaque<kernel::bindings::mutex>,
    key: Opaque<kernel::bindings::lock_class_key>,
    name: &'static CStr,
    data: UnsafeCell<T>,
}

const UNINIT: u8 = 0;
const INIT: u8 = 1;
const READY: u8 = 2;

// SAFETY: access to `data` is serialised by the mutex (type invariant), so sharing the
// wrapper between threads is sound when `T` may be sent between them.
unsafe impl<T: Send> Sync for GlobalMutex<T> {}

impl<T> GlobalMutex<T> {
    /// Wraps `data`; for a `static` initialiser. `name` names the lock for lockdep.
    pub const fn new(data: T, name: &'static CStr) -> Self {
        Self {
            state: AtomicU8::new(UNINIT),
            mutex: Opaque::uninit(),
            key: Opaque::uninit(),
            name,
            data: UnsafeCell::new(data),
        }
    }

    /// Initialises the C mutex on first use.
    fn ready(&'static self) {
        loop {
            match self
                .state
                .compare_exchange(UNINIT, INIT, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    // The key is in the same static, as lockdep requires of class keys.
                    // SAFETY: only this caller moved the state out of `UNINIT`, so it alone
                    // initialises the mutex, which lives in a `static` and never moves.
                    unsafe {
                        kernel::bindings::__mutex_init(
                            self.mutex.get(),
                            self.name.as_char_ptr(),
                            self.key.get(),
                        )
                    };
                    // INVARIANT: initialised before `READY` is published.
                    self.state.store(READY, Ordering::Release);
                    return;
                }
                Err(READY) => return,
                // Another task is initialising it: a few instructions.
                Err(_) => core::hint::spin_loop(),
            }
        }
    }

    /// Takes the mutex (sleeping) and gives access to the data.
    pub fn lock(&'static self) -> GlobalGuard<T> {
        self.ready();
        // SAFETY: initialised (`ready`); callers are in process context (documented above).
        unsafe { kernel::bindings::mutex_lock(self.mutex.get()) };
        // INVARIANT: the mutex is held until the guard is dropped.
        GlobalGuard { lock: self }
    }
}

/// Access to a [`GlobalMutex`]'s data; unlocks on drop.
pub struct GlobalGuard<T: 'static> {
    lock: &'static GlobalMutex<T>,
}

impl<T> Deref for GlobalGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the mutex is held while the guard lives (type invariant of `GlobalMutex`).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for GlobalGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the mutex is held while the guard lives, and `&mut self` makes this the only
        // access through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for GlobalGuard<T> {
    fn drop(&mut self) {
        // SAFETY: this task took the mutex in `GlobalMutex::lock`.
        unsafe { kernel::bindings::mutex_unlock(self.lock.mutex.get()) };
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

// ---- a spinlock that disables bottom halves ------------------------------------------------

/// A spinlock taken with `spin_lock_bh`: for state that process context and softirq context
/// (packet reception, timers) both use. Code holding it may transmit packets (softirqs run
/// when it is released). Not for hard-interrupt context: use [`SpinLockIrq`] there. Build one
/// with [`new_spinlock_bh!`](crate::new_spinlock_bh).
pub type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinLockBhBackend>;

/// The [`SpinLockBh`] backend: `spinlock_t` with bottom halves disabled while held.
pub struct SpinLockBhBackend;

// SAFETY: `spinlock_t` gives mutual exclusion; `lock` and the default `relock` both use
// `spin_lock_bh`, and `unlock` is `spin_unlock_bh`, which re-enables what `lock` disabled.
unsafe impl kernel::sync::lock::Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

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
        unsafe { bindings::oxrdma_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard: &Self::GuardState) {
        // SAFETY: the caller owns the lock (trait contract), taken with `spin_lock_bh`.
        unsafe { bindings::oxrdma_spin_unlock_bh(ptr.cast()) }
    }
}

/// Builds a [`SpinLockBh`] initialiser, with a lock class per call site (like
/// `new_spinlock!`).
#[macro_export]
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal) => {
        kernel::sync::lock::Lock::<_, $crate::ox::sync::SpinLockBhBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}

/// Whether the caller runs in process context (not in a hard or soft interrupt): where it may
/// sleep if it holds no spinlock.
pub fn in_task() -> bool {
    // SAFETY: reads the preempt count.
    unsafe { bindings::oxrdma_in_task() }
}

/// Whether a task waits for this CPU: the scheduler has asked the current context to yield
/// at its next chance. Work that can go on elsewhere (in a work item, which the scheduler
/// shares out) should, rather than keep the CPU in a soft interrupt.
pub fn need_resched() -> bool {
    // SAFETY: reads the current task's flags.
    unsafe { bindings::oxrdma_need_resched() }
}
