// SPDX-License-Identifier: GPL-2.0
//! A kernel timer (`struct timer_list`) embedded in an `Arc`-shared object, calling back into
//! it.
//!
//! C: `include/linux/timer.h`. The 6.12 `kernel` crate has no timers.
//!
//! # Ownership
//!
//! Like a work item, a pending timer owns a reference to its object: arming it hands over an
//! `Arc` clone, the expiry consumes it. So the object lives while its timer is pending, and
//! nothing keeps it alive otherwise (no reference cycle through its own timer). Before its
//! module goes, the owner stops the timer for good with [`Timer::cancel`].

use super::bindings;
use super::sync::SpinLockIrq;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::{Arc, ArcBorrow},
    types::Opaque,
};

/// What a [`Timer`] calls when it expires.
pub trait TimerHandler: Send + Sync + Sized + 'static {
    /// Called in softirq context: must not sleep (queue work instead).
    fn expired(this: ArcBorrow<'_, Self>);
}

/// A one-shot timer inside an object of type `T`, re-armed with [`Timer::arm_us`].
///
/// # Invariants
///
/// `raw` is set up with `expired::<T>` and never moves (the timer is pinned). `owner` is the
/// object given at construction; it is only compared with the `Arc`s the timer is armed with,
/// and dereferenced only through the reference a pending timer owns: while `raw` is pending,
/// the timer owns one reference to `owner` (from `Arc::into_raw`). Once `stopped` is set, the
/// timer is never armed again.
#[repr(C)]
#[pin_data]
pub struct Timer<T: TimerHandler> {
    #[pin]
    raw: Opaque<bindings::timer_list>,
    owner: NonNull<T>,
    #[pin]
    stopped: SpinLockIrq<bool>,
}

// SAFETY: the timer calls may be made from any thread; `owner` is only compared or used
// through a counted reference; the target is `Send + Sync`.
unsafe impl<T: TimerHandler> Send for Timer<T> {}
// SAFETY: the `&self` methods are serialised by the timer core and the `stopped` lock, and
// `owner` is only compared or used through a counted reference.
unsafe impl<T: TimerHandler> Sync for Timer<T> {}

impl<T: TimerHandler> Timer<T> {
    /// A stopped timer of the object being initialised at `owner` (in `pin_init!(&this in ...)`,
    /// pass `this`): it can only be armed with an `Arc` of that object.
    pub fn new(owner: NonNull<T>) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `timer_setup` initialises the pinned slot in place.
            raw <- Opaque::ffi_init(|p| unsafe {
                bindings::oxrdma_timer_setup(p, Some(expired::<T>))
            }),
            owner,
            stopped <- crate::new_spinlock_irq!(false, "oxrdma_timer"),
        })
    }

    /// Arms with `how` (`mod_timer` or `timer_reduce`), handing over a reference of `owner`.
    fn arm(&self, owner: &Arc<T>, how: impl FnOnce(*mut bindings::timer_list) -> i32) {
        if !core::ptr::eq(&**owner, self.owner.as_ptr()) {
            // Not this timer's object: arming would not keep the right object alive.
            return;
        }
        let handed = Arc::into_raw(owner.clone());
        let was_pending = {
            let stopped = self.stopped.lock();
            if *stopped {
                true
            } else {
                // INVARIANT: if the timer was not pending, it now owns `handed`.
                how(self.raw.get()) != 0
            }
        };
        if was_pending {
            // The pending timer already owns a reference (or the timer is stopped).
            // SAFETY: `handed` came from `into_raw` above and is not owned by the timer.
            drop(unsafe { Arc::from_raw(handed) });
        }
    }

    /// (Re)starts the timer of `owner` (the object it is in) to expire `us` microseconds from
    /// now (at jiffy granularity, never early). Nothing once cancelled.
    pub fn arm_us(&self, owner: &Arc<T>, us: u64) {
        // SAFETY: set-up timer (type invariant); `mod_timer` synchronises internally.
        self.arm(owner, |t| unsafe {
            bindings::mod_timer(t, bindings::oxrdma_jiffies_after_us(us))
        });
    }

    /// Starts the timer of `owner` to expire `us` microseconds from now unless it is already
    /// due earlier (`timer_reduce`). Nothing once cancelled.
    pub fn arm_earlier_us(&self, owner: &Arc<T>, us: u64) {
        // SAFETY: set-up timer (type invariant); `timer_reduce` synchronises internally.
        self.arm(owner, |t| unsafe {
            bindings::timer_reduce(t, bindings::oxrdma_jiffies_after_us(us))
        });
    }

    /// Stops the timer for good: a pending expiry is cancelled (and its reference dropped), a
    /// running one waited for. Process context, not from the expiry handler.
    pub fn cancel(&self) {
        let was_pending = {
            let mut stopped = self.stopped.lock();
            *stopped = true;
            // SAFETY: set-up timer (type invariant).
            unsafe { bindings::timer_delete(self.raw.get()) != 0 }
        };
        if was_pending {
            // SAFETY: the pending timer owned one reference (type invariant); it was
            // cancelled, so that reference is ours to drop.
            drop(unsafe { Arc::from_raw(self.owner.as_ptr()) });
        }
        // SAFETY: set-up timer; waits for an expiry running on another CPU (process context).
        unsafe { bindings::timer_delete_sync(self.raw.get()) };
    }
}

/// # Safety
///
/// Called by the timer core for a timer set up by `Timer::<T>::new`.
unsafe extern "C" fn expired<T: TimerHandler>(t: *mut bindings::timer_list) {
    // The timer was pending, so it owned a reference to `owner` (type invariant), which keeps
    // the owner and the timer in it alive. `raw` is the first field (`Opaque` is transparent).
    // SAFETY: `t` is the `raw` of a live `Timer<T>`; its pending reference moves here.
    let owner = unsafe { Arc::from_raw((*t.cast::<Timer<T>>()).owner.as_ptr()) };
    T::expired(owner.as_arc_borrow());
    // Dropping the last reference frees the object, timer included, inside its own expiry,
    // which the timer core allows (it does not touch the timer after the callback).
    drop(owner);
}

/// Microseconds of the monotonic clock: the time base of the protocol state machines.
pub fn now_us() -> u64 {
    // SAFETY: reads the clock.
    unsafe { bindings::oxrdma_now_us() }
}
