// SPDX-License-Identifier: GPL-2.0
//! Event sinks of the verbs objects: a driver raises a CQ's completion and error events, a
//! QP's and an SRQ's asynchronous events, through these typed handles, which it may keep
//! (and use from any context) after the object is gone: then they do nothing.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_event`, the objects' `event_handler` and
//! `comp_handler`).

use super::super::bindings;
use super::super::sync::SpinLockIrq;
use core::ptr::NonNull;
use kernel::{alloc::flags::GFP_KERNEL, prelude::*, sync::Arc};

/// A C verbs object an event sink may point to.
pub trait EventObject {}
impl EventObject for bindings::ib_cq {}
impl EventObject for bindings::ib_qp {}
impl EventObject for bindings::ib_srq {}

/// The object an event sink points to, or `None` once it is destroyed.
struct Target<O: EventObject>(Option<NonNull<O>>);

// SAFETY: the pointer is only dereferenced under the sink's lock while it is `Some`, which the
// adapter guarantees means the object is live (it revokes the target in the object's destroy
// callback before the object's memory goes); ib_core objects may be used from any thread.
unsafe impl<O: EventObject> Send for Target<O> {}

/// A revocable reference to an ib_core object.
///
/// # Invariants
///
/// While the target is `Some`, it points to a live object of its type: the adapter creates the
/// sink in the object's create callback and revokes it in its destroy callback (or when the
/// create fails), before ib_core frees the object.
///
/// The lock disables interrupts: kernel verbs users poll CQs (which reads a QP's target
/// through this) from softirq and hard-interrupt context.
pub(super) struct Revocable<O: EventObject> {
    t: Arc<SpinLockIrq<Target<O>>>,
}

impl<O: EventObject> Clone for Revocable<O> {
    fn clone(&self) -> Self {
        Self { t: self.t.clone() }
    }
}

impl<O: EventObject> Revocable<O> {
    /// A sink for `obj`.
    ///
    /// # Safety
    ///
    /// `obj` is live until [`Revocable::revoke`] is called on this sink or a clone.
    pub(super) unsafe fn new(obj: NonNull<O>) -> Result<Self> {
        // INVARIANT: the caller revokes before `obj` goes.
        Ok(Self {
            t: Arc::pin_init(
                crate::new_spinlock_irq!(Target(Some(obj)), "oxrdma_event_target"),
                GFP_KERNEL,
            )?,
        })
    }

    /// The object is going: later events go nowhere. Waits for a call in progress on another
    /// CPU (it holds the lock).
    pub(super) fn revoke(&self) {
        self.t.lock().0 = None;
    }

    /// Runs `f` on the object while it is live; `None` once revoked.
    pub(super) fn with<R>(&self, f: impl FnOnce(NonNull<O>) -> R) -> Option<R> {
        let g = self.t.lock();
        g.0.map(f)
    }
}

/// Delivers `kind` to an object's asynchronous event handler.
///
/// # Safety
///
/// `device`, `element` and `handler`/`context` are those of a live object of `device`.
unsafe fn dispatch(
    device: *mut bindings::ib_device,
    kind: bindings::ib_event_type,
    element: bindings::ib_event__bindgen_ty_1,
    handler: Option<unsafe extern "C" fn(*mut bindings::ib_event, *mut core::ffi::c_void)>,
    context: *mut core::ffi::c_void,
) {
    let mut ev = bindings::ib_event {
        device,
        event: kind,
        element,
    };
    if let Some(h) = handler {
        // SAFETY: the handler ib_core installed for the live object (function contract); it
        // copies what it keeps of the event.
        unsafe { h(&mut ev, context) }
    }
}

/// Raises a CQ's completion and error events.
#[derive(Clone)]
pub struct CqEvents(pub(super) Revocable<bindings::ib_cq>);

impl CqEvents {
    /// Calls the CQ's completion handler (the completion channel's event).
    pub fn completion(&self) {
        self.0.with(|cq| {
            let cq = cq.as_ptr();
            // SAFETY: live CQ (`Revocable` invariant); ib_core set the handler and its context
            // at creation.
            unsafe {
                if let Some(h) = (*cq).comp_handler {
                    h(cq, (*cq).cq_context)
                }
            }
        });
    }

    /// Raises `IB_EVENT_CQ_ERR` (a completion was lost: the CQ overflowed).
    pub fn error(&self) {
        self.0.with(|cq| {
            let cq = cq.as_ptr();
            // SAFETY: live CQ (`Revocable` invariant), so its device, handler and context are.
            unsafe {
                let mut el = bindings::ib_event__bindgen_ty_1::default();
                el.cq = cq;
                dispatch(
                    (*cq).device,
                    bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    el,
                    (*cq).event_handler,
                    (*cq).cq_context,
                );
            }
        });
    }
}

/// QP asynchronous events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP went to the error state on its own (`IB_EVENT_QP_FATAL`).
    Fatal,
    /// A request could not be executed (`IB_EVENT_QP_REQ_ERR`).
    RequestError,
    /// Remote access violation (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
    /// Last WQE reached on an SRQ-attached QP in error (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
    /// The send queue drained (`IB_EVENT_SQ_DRAINED`).
    SqDrained,
    /// The first packet arrived in RTR (`IB_EVENT_COMM_EST`).
    CommEstablished,
}

impl QpEvent {
    fn to_raw(self) -> bindings::ib_event_type {
        match self {
            Self::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            Self::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            Self::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Self::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            Self::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            Self::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
        }
    }
}

/// Raises a QP's asynchronous events; also names the QP in a kernel user's work completions.
#[derive(Clone)]
pub struct QpEvents(pub(super) Revocable<bindings::ib_qp>);

impl QpEvents {
    /// Raises `ev`.
    pub fn raise(&self, ev: QpEvent) {
        self.0.with(|qp| {
            let qp = qp.as_ptr();
            // SAFETY: live QP (`Revocable` invariant), so its device, handler and context are.
            unsafe {
                let mut el = bindings::ib_event__bindgen_ty_1::default();
                el.qp = qp;
                dispatch(
                    (*qp).device,
                    ev.to_raw(),
                    el,
                    (*qp).event_handler,
                    (*qp).qp_context,
                );
            }
        });
    }
}

/// An asynchronous event of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqEvent {
    /// Fewer receive WRs wait than the armed limit (`IB_EVENT_SRQ_LIMIT_REACHED`).
    LimitReached,
    /// The SRQ failed: it can no longer be read (`IB_EVENT_SRQ_ERR`).
    Error,
}

impl SrqEvent {
    fn to_raw(self) -> bindings::ib_event_type {
        match self {
            Self::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            Self::Error => bindings::ib_event_type_IB_EVENT_SRQ_ERR,
        }
    }
}

/// Raises an SRQ's asynchronous events.
#[derive(Clone)]
pub struct SrqEvents(pub(super) Revocable<bindings::ib_srq>);

impl SrqEvents {
    /// Raises `ev`.
    pub fn raise(&self, ev: SrqEvent) {
        self.0.with(|srq| {
            let srq = srq.as_ptr();
            // SAFETY: live SRQ (`Revocable` invariant), so its device, handler and context are.
            unsafe {
                let mut el = bindings::ib_event__bindgen_ty_1::default();
                el.srq = srq;
                dispatch(
                    (*srq).device,
                    ev.to_raw(),
                    el,
                    (*srq).event_handler,
                    (*srq).srq_context,
                );
            }
        });
    }
}
