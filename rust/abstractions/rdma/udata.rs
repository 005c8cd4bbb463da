// SPDX-License-Identifier: GPL-2.0
//! The userspace side of a verbs call: the driver-specific command and response data
//! (`struct ib_udata`) and, for create calls, the process's mmap space.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_udata`, `ib_respond_udata`),
//! `include/rdma/uverbs_ioctl.h` (`rdma_udata_to_uverbs_attr_bundle`).

use super::super::bindings;
use super::mmap::{MmapEntry, RingBuf};
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::{alloc::flags::GFP_KERNEL, alloc::KVec, prelude::*, sync::Arc};

/// Driver-specific data of a verbs call from userspace (`struct ib_udata`).
///
/// # Invariants
///
/// `raw` is a valid `struct ib_udata` for `'a`.
pub struct Udata<'a> {
    raw: NonNull<bindings::ib_udata>,
    _lt: PhantomData<&'a mut bindings::ib_udata>,
}

impl Udata<'_> {
    /// # Safety
    ///
    /// `raw` is a valid `struct ib_udata` for the returned value's lifetime.
    pub(super) unsafe fn from_raw(raw: NonNull<bindings::ib_udata>) -> Self {
        // INVARIANT: per the function's contract.
        Self {
            raw,
            _lt: PhantomData,
        }
    }

    /// Copies `resp` to userspace, cut to the length the caller's buffer has (older
    /// providers with a shorter response structure keep working).
    pub fn respond(&mut self, resp: &[u8]) -> Result {
        // SAFETY: `self.raw` is valid (type invariant); `resp` is readable for its length.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_respond_udata(self.raw.as_ptr(), resp.as_ptr().cast(), resp.len())
        })
    }

    /// Length of the driver-specific command data userspace sent.
    pub fn inlen(&self) -> usize {
        // SAFETY: `self.raw` is valid (type invariant).
        unsafe { bindings::oxrdma_udata_inlen(self.raw.as_ptr()) }
    }
}

/// A create call from a process (CQ, QP, SRQ): its response buffer and the process's mmap
/// space. Memory the driver makes mappable here stays mappable until the object is destroyed
/// (or at once withdrawn if the create fails).
///
/// # Invariants
///
/// `uctx` is the live user context of the call, for `'a`; every entry in `maps` was inserted
/// into it.
pub struct UserCall<'a> {
    udata: Udata<'a>,
    uctx: NonNull<bindings::ib_ucontext>,
    maps: KVec<MmapEntry>,
}

impl<'a> UserCall<'a> {
    /// # Safety
    ///
    /// `udata` is the driver udata of a user verbs call, valid for `'a`.
    pub(super) unsafe fn new(udata: NonNull<bindings::ib_udata>) -> Result<Self> {
        // SAFETY: a user call's udata is embedded in its attribute bundle, which names the
        // caller's live ucontext.
        let uctx = NonNull::new(unsafe { bindings::oxrdma_udata_ucontext(udata.as_ptr()) })
            .ok_or(EINVAL)?;
        // INVARIANT: the context of this call; no entries yet.
        Ok(Self {
            // SAFETY: valid for `'a` (function contract).
            udata: unsafe { Udata::from_raw(udata) },
            uctx,
            maps: KVec::new(),
        })
    }

    /// The mmap entries made during the call, to keep with the object.
    pub(super) fn into_maps(self) -> KVec<MmapEntry> {
        self.maps
    }

    /// Copies the driver's response to the process (see [`Udata::respond`]).
    pub fn respond(&mut self, resp: &[u8]) -> Result {
        self.udata.respond(resp)
    }

    /// Makes `ring` mappable by the process; returns the offset to map it at (in the create
    /// response). The mapping is withdrawn when the object is destroyed.
    pub fn map_ring(&mut self, ring: &Arc<RingBuf>) -> Result<u64> {
        self.maps.reserve(1, GFP_KERNEL)?;
        // The entry is kept in `maps`, which the adapter moves into the object (destroyed
        // before the context), or which drops at once when the create fails.
        // SAFETY: the context is live during the call (type invariant) and outlives the entry
        // (above).
        let (entry, offset) = unsafe { MmapEntry::insert(self.uctx.as_ptr(), ring)? };
        // Room was reserved above.
        let _ = self.maps.push(entry, GFP_KERNEL);
        // INVARIANT: the entry was inserted into `uctx`.
        Ok(offset)
    }
}
