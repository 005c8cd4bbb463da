// SPDX-License-Identifier: GPL-2.0
//! The module's own workqueues.
//!
//! Work items run module code, so none may run after the module is gone. The 6.12 `kernel`
//! crate only offers the system queues, which a module cannot drain (flushing them is
//! deprecated). The module therefore creates its queues at load ([`ModuleWorkqueue::create`])
//! and destroys them, which waits for everything queued, at unload (dropping the value): an
//! unbound one ([`queue`]), and a per-CPU high-priority one whose work items run on the CPU
//! they are queued for ([`enqueue_on`]).
//!
//! # Contract
//!
//! Everything that queues work (verbs calls, timers, packet reception) is stopped before the
//! module drops its [`ModuleWorkqueue`]: devices are unregistered, their timers deleted and
//! their sockets closed first. [`queue`] is only called by such producers.

use super::bindings;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
    prelude::*,
    str::CStr,
    workqueue::{Queue, RawWorkItem},
};

static RAW: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());
static PERCPU: AtomicPtr<bindings::workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// Ownership of the module's workqueues; at most one exists.
pub struct ModuleWorkqueue(());

impl ModuleWorkqueue {
    /// Creates the module's workqueues: the unbound one named `name`, the per-CPU
    /// high-priority one named `percpu_name`.
    pub fn create(name: &'static CStr, percpu_name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated static string.
        let wq = unsafe { bindings::oxrdma_alloc_workqueue(name.as_char_ptr()) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        let percpu_name = percpu_name.as_char_ptr();
        // SAFETY: `percpu_name` is a NUL-terminated static string.
        let pc = unsafe { bindings::oxrdma_alloc_percpu_highpri_workqueue(percpu_name) };
        if pc.is_null() {
            // SAFETY: ours, never published.
            unsafe { bindings::destroy_workqueue(wq) };
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
            // SAFETY: both ours, never published.
            unsafe {
                bindings::destroy_workqueue(wq);
                bindings::destroy_workqueue(pc);
            }
            return Err(EBUSY);
        }
        // Only the winner of the exchange above gets here, so `PERCPU` is null.
        PERCPU.store(pc, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for ModuleWorkqueue {
    fn drop(&mut self) {
        // Destroyed before the pointer is cleared: a work item that queues itself again while
        // the queue drains goes to the module's queue (which takes it while draining), not to
        // the system's.
        for raw in [&PERCPU, &RAW] {
            let wq = raw.load(Ordering::Acquire);
            if !wq.is_null() {
                // SAFETY: created in `create`; producers are stopped (module contract), so
                // this drains what is queued and nothing is queued afterwards.
                unsafe { bindings::destroy_workqueue(wq) };
                raw.store(core::ptr::null_mut(), Ordering::Release);
            }
        }
    }
}

/// The C pointer of [`queue`]: the module's queue, or the system's unbound queue before it
/// exists (module init only), live until the module's queue is destroyed.
pub fn queue_ptr() -> *mut bindings::workqueue_struct {
    let wq = RAW.load(Ordering::Acquire);
    if wq.is_null() {
        // SAFETY: a static of the kernel, set at boot and never changed.
        return unsafe { kernel::bindings::system_unbound_wq }.cast();
    }
    wq
}

/// Waits until the work queued on the module's queue so far has run (process context).
pub fn flush() {
    let wq = RAW.load(Ordering::Acquire);
    if !wq.is_null() {
        // SAFETY: a live workqueue until `ModuleWorkqueue::drop` (module contract).
        unsafe { kernel::bindings::__flush_workqueue(wq.cast()) };
    }
}

/// The module's queue, or the system's unbound queue before it exists (module init only).
pub fn queue() -> &'static Queue {
    // SAFETY: a live workqueue until `ModuleWorkqueue::drop`, after which producers no longer
    // run (module contract), or the system's, which lives forever.
    unsafe { Queue::from_raw(queue_ptr().cast::<kernel::bindings::workqueue_struct>()) }
}

/// The next online CPU after the one this runs on (wrapping around; the same one if it is
/// the only one online). Only a hint: the caller may move to another CPU right after.
pub fn next_online_cpu() -> u32 {
    // SAFETY: reads the online mask and the current CPU's number; no requirements.
    unsafe { bindings::oxrdma_next_online_cpu() }
}

/// Whether more than one CPU is online (a hint, as for [`next_online_cpu`]).
pub fn several_cpus_online() -> bool {
    // SAFETY: reads the count of online CPUs; no requirements.
    unsafe { bindings::oxrdma_several_cpus_online() }
}

/// Queues `w` on the module's per-CPU high-priority workqueue, to run on `cpu` (an online
/// CPU; if it goes offline meanwhile, the workqueue moves the work elsewhere). Before the
/// queues exist (module init only), on the unbound queue. Returns what queueing `w`
/// returns: whether it was queued (it was not if it already is).
pub fn enqueue_on<W, const ID: u64>(cpu: u32, w: W) -> W::EnqueueOutput
where
    W: RawWorkItem<ID> + Send + 'static,
{
    let wq = PERCPU.load(Ordering::Acquire);
    if wq.is_null() {
        return queue().enqueue(w);
    }
    // As `Queue::enqueue`, on a workqueue that lives until `ModuleWorkqueue::drop`, after
    // which producers no longer run (module contract).
    // SAFETY: `W` is `Send + 'static`; the closure passes the work pointer, valid for the
    // call, to `queue_work_on` on a live queue, which returns true exactly when it queued it.
    unsafe {
        w.__enqueue(move |work_ptr| {
            kernel::bindings::queue_work_on(
                cpu as core::ffi::c_int,
                wq.cast::<kernel::bindings::workqueue_struct>(),
                work_ptr,
            )
        })
    }
}
