// SPDX-License-Identifier: GPL-2.0
//! The iWARP connection manager's side of a provider: connection identifiers, the parameters
//! of connect and accept, and the events a provider reports.
//!
//! ib_core's iw_cm calls a provider's `iw_connect`, `iw_accept`, `iw_reject`,
//! `iw_create_listen` and `iw_destroy_listen` ([`super::driver::Driver`]'s `iw_*` ops) with a
//! [`CmId`]; the provider reports how each connection goes with [`CmId::event`]:
//!
//! * a listener: [`EventKind::ConnectRequest`] for each peer whose MPA request came in, with a
//!   provider token the iw_cm hands back in the new identifier it then accepts or rejects
//!   ([`CmId::provider_token`]);
//! * the active side: [`EventKind::ConnectReply`] once the MPA reply came in (status 0) or the
//!   attempt failed (`-ECONNREFUSED` when rejected, `-ECONNRESET`, `-ETIMEDOUT`);
//! * the passive side: [`EventKind::Established`] once accepted;
//! * both: [`EventKind::Disconnect`] when the peer closes, then [`EventKind::Close`] when the
//!   connection is gone, after which the iw_cm drops its reference on the QP.
//!
//! The iw_cm copies what an event carries and queues it: events may be reported from any
//! context. A provider keeps an identifier with an `ARef<CmId>` (the iw_cm's `add_ref` and
//! `rem_ref`).
//!
//! Tokens instead of pointers: the iw_cm stores the provider data of a connection request in
//! the new identifier and gives it back only if the application accepts or rejects; it may as
//! well be destroyed first, or never created at all (allocation failure). A token is looked
//! up by the provider, so none of these cases leaves anything dangling.
//!
//! C: `include/rdma/iw_cm.h`.

use super::super::bindings;
use super::super::tcp::SockAddr;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::types::{AlwaysRefCounted, Opaque};

/// An iw_cm connection identifier (`struct iw_cm_id`).
///
/// # Invariants
///
/// A `&CmId` is only created for an identifier the iw_cm keeps alive for the borrow (a call
/// of the provider's ops, or a reference held with `add_ref`).
#[repr(transparent)]
pub struct CmId(Opaque<bindings::iw_cm_id>);

// SAFETY: the iw_cm's identifiers may be used and released on any thread; events are queued
// by the iw_cm under its own lock.
unsafe impl Send for CmId {}
// SAFETY: see `Send`; the fields read are set before the provider sees the identifier.
unsafe impl Sync for CmId {}

// SAFETY: `add_ref`/`rem_ref` keep the identifier allocated while the count is non-zero.
unsafe impl AlwaysRefCounted for CmId {
    fn inc_ref(&self) {
        // SAFETY: live identifier (type invariant).
        unsafe { bindings::oxrdma_iw_add_ref(self.0.get()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller owns a reference (trait contract).
        unsafe { bindings::oxrdma_iw_rem_ref(obj.as_ptr().cast()) };
    }
}

/// What an event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A peer asks to connect (on a listener).
    ConnectRequest,
    /// The outcome of a connect (active side).
    ConnectReply,
    /// An accepted connection is up (passive side).
    Established,
    /// The peer closed the connection.
    Disconnect,
    /// The connection is gone.
    Close,
}

/// An event for the iw_cm.
pub struct Event<'a> {
    /// What happened.
    pub kind: EventKind,
    /// 0, or a negative errno (connect replies and closes).
    pub status: i32,
    /// The connection's local address.
    pub local: Option<SockAddr>,
    /// The connection's remote address.
    pub remote: Option<SockAddr>,
    /// The peer's private data (requests and replies; at most 255 bytes are passed).
    pub private_data: &'a [u8],
    /// The provider's token for a connection request.
    pub token: usize,
    /// The peer's ORD and IRD (requests and replies).
    pub ord: u8,
    /// See `ord`.
    pub ird: u8,
}

impl<'a> Event<'a> {
    /// An event of `kind` with no data.
    pub fn new(kind: EventKind) -> Self {
        Self {
            kind,
            status: 0,
            local: None,
            remote: None,
            private_data: &[],
            token: 0,
            ord: 0,
            ird: 0,
        }
    }
}

/// The parameters of a connect or accept (`struct iw_cm_conn_param`).
#[derive(Clone, Copy, Debug)]
pub struct ConnParams<'a> {
    /// The application's private data for the peer.
    pub private_data: &'a [u8],
    /// Outbound RDMA reads the application wants outstanding.
    pub ord: u32,
    /// Inbound RDMA reads it can serve.
    pub ird: u32,
    /// The QP to connect.
    pub qpn: u32,
}

impl<'a> ConnParams<'a> {
    /// # Safety
    ///
    /// `p` is valid for `'a`, its private data valid for `private_data_len` bytes.
    pub(super) unsafe fn from_raw(p: *const bindings::iw_cm_conn_param) -> Self {
        // SAFETY: function contract.
        let p = unsafe { &*p };
        let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
            &[][..]
        } else {
            // SAFETY: function contract.
            unsafe {
                core::slice::from_raw_parts(p.private_data.cast::<u8>(), p.private_data_len.into())
            }
        };
        Self {
            private_data,
            ord: p.ord,
            ird: p.ird,
            qpn: p.qpn,
        }
    }
}

impl CmId {
    /// # Safety
    ///
    /// `p` is a live identifier for `'a` (an op's argument).
    pub(super) unsafe fn from_raw<'a>(p: *mut bindings::iw_cm_id) -> &'a Self {
        // SAFETY: transparent wrapper; liveness per the caller.
        unsafe { &*p.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::iw_cm_id {
        self.0.get()
    }

    /// The local address to use (the iw_cm's mapped one; oxrdma maps none, so it is the
    /// address the application chose).
    pub fn local_addr(&self) -> Option<SockAddr> {
        // SAFETY: live identifier (type invariant); the iw_cm sets the address before it
        // calls the provider and does not change it meanwhile.
        SockAddr::from_raw(unsafe { &(*self.as_raw()).m_local_addr })
    }

    /// The remote address (mapped, as [`CmId::local_addr`]).
    pub fn remote_addr(&self) -> Option<SockAddr> {
        // SAFETY: as in `local_addr`.
        SockAddr::from_raw(unsafe { &(*self.as_raw()).m_remote_addr })
    }

    /// The provider token of a connection request, in the identifier the iw_cm made for it.
    pub fn provider_token(&self) -> usize {
        // SAFETY: live identifier (type invariant); the iw_cm wrote it at creation.
        unsafe { (*self.as_raw()).provider_data as usize }
    }

    /// Reports `ev`; the iw_cm copies it (`ENOMEM` if it cannot).
    pub fn event(&self, ev: &Event<'_>) -> Result {
        let mut raw = bindings::iw_cm_event {
            event: match ev.kind {
                EventKind::ConnectRequest => bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST,
                EventKind::ConnectReply => bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
                EventKind::Established => bindings::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
                EventKind::Disconnect => bindings::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
                EventKind::Close => bindings::iw_cm_event_type_IW_CM_EVENT_CLOSE,
            },
            status: ev.status,
            provider_data: ev.token as *mut core::ffi::c_void,
            ord: ev.ord,
            ird: ev.ird,
            ..Default::default()
        };
        if let Some(a) = ev.local {
            raw.local_addr = a.to_raw().0;
        }
        if let Some(a) = ev.remote {
            raw.remote_addr = a.to_raw().0;
        }
        let pd = &ev.private_data[..ev.private_data.len().min(u8::MAX.into())];
        if !pd.is_empty() {
            // The iw_cm copies the private data (`kmemdup`) before the call returns.
            raw.private_data = pd.as_ptr() as *mut core::ffi::c_void;
            raw.private_data_len = pd.len() as u8;
        }
        // SAFETY: live identifier (type invariant); `raw` and the private data it points to
        // are valid for the call, and the iw_cm's handler copies what it keeps.
        kernel::error::to_result(unsafe { bindings::oxrdma_iw_event(self.as_raw(), &mut raw) })
    }
}
