// SPDX-License-Identifier: GPL-2.0
//! A kernel timer (`struct timer_list`) that calls back into an `Arc`-shared object.
//!
//! C: `include/linux/timer.h`. The 6.12 `kernel` crate has no timers.

use super::bindings;
use core::ptr::addr_of_mut;
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox},
    prelude::*,
    sync::{Arc, ArcBorrow},
};

/// What a [`Timer`] calls when it expires.
pub trait TimerHandler: Send + Sync + 'static {
    /// Called in softirq context: must not sleep (queue work instead).
    fn expired(this: ArcBorrow<'_, Self>);
}

/// # Invariants
///
/// `timer` is at offset 0 and was set up with `expired::<T>`; `target` comes from
/// `Arc::into_raw` and is released in `Timer::drop` after the timer is stopped for good.
#[repr(C)]
struct Raw<T> {
    timer: bindings::timer_list,
    target: *const T,
}

/// A one-shot timer, re-armed with [`Timer::arm_us`]. Dropping it waits for a running
/// callback and cancels a pending one; it must be dropped in process context.
///
/// # Invariants
///
/// `raw` is a set-up timer that is never moved (boxed) and holds a reference on the target.
pub struct Timer<T: TimerHandler> {
    raw: KBox<Raw<T>>,
}

// SAFETY: `mod_timer` and `timer_delete_sync` may be called from any thread; the target is
// `Send + Sync`.
unsafe impl<T: TimerHandler> Send for Timer<T> {}
// SAFETY: see `Send`; the only `&self` method is `arm_us`, which the timer core serialises.
unsafe impl<T: TimerHandler> Sync for Timer<T> {}

impl<T: TimerHandler> Timer<T> {
    /// A stopped timer that will call `T::expired(target)`.
    pub fn new(target: Arc<T>) -> Result<Self> {
        let raw = KBox::new(
            Raw {
                timer: Default::default(),
                target: Arc::into_raw(target),
            },
            GFP_KERNEL,
        );
        let mut raw = raw?;
        // SAFETY: the box is never moved out of (only dropped), so the timer's address is
        // stable; `expired::<T>` matches the `Raw<T>` layout.
        unsafe { bindings::oxrdma_timer_setup(addr_of_mut!(raw.timer), Some(expired::<T>)) };
        // INVARIANT: set up above, holding the target's reference.
        Ok(Self { raw })
    }

    /// (Re)starts the timer to expire `us` microseconds from now (at jiffy granularity,
    /// never early).
    pub fn arm_us(&self, us: u64) {
        let t = (&raw const self.raw.timer).cast_mut();
        // SAFETY: set-up timer (type invariant); `mod_timer` synchronises internally.
        unsafe { bindings::mod_timer(t, bindings::oxrdma_jiffies_after_us(us)) };
    }

    /// Starts the timer to expire `us` microseconds from now unless it is already due
    /// earlier (`timer_reduce`).
    pub fn arm_earlier_us(&self, us: u64) {
        let t = (&raw const self.raw.timer).cast_mut();
        // SAFETY: set-up timer (type invariant); `timer_reduce` synchronises internally.
        unsafe { bindings::timer_reduce(t, bindings::oxrdma_jiffies_after_us(us)) };
    }
}

impl<T: TimerHandler> Drop for Timer<T> {
    fn drop(&mut self) {
        // SAFETY: set-up timer; after this no callback runs or is pending (it does not re-arm
        // itself: `expired` only calls the handler, and nothing else holds `self`).
        unsafe { bindings::timer_delete_sync(addr_of_mut!(self.raw.timer)) };
        // SAFETY: the reference taken in `new`, released once.
        drop(unsafe { Arc::from_raw(self.raw.target) });
    }
}

/// # Safety
///
/// Called by the timer core for a timer set up by `Timer::<T>::new`.
unsafe extern "C" fn expired<T: TimerHandler>(t: *mut bindings::timer_list) {
    // SAFETY: `t` is the first field of a live `Raw<T>` (the `Timer` waits for callbacks
    // before freeing it), which holds a reference on the target.
    let target = unsafe { ArcBorrow::from_raw((*t.cast::<Raw<T>>()).target) };
    T::expired(target);
}

/// Microseconds of the monotonic clock: the time base of the protocol state machines.
pub fn now_us() -> u64 {
    // SAFETY: reads the clock.
    unsafe { bindings::oxrdma_now_us() }
}
