// SPDX-License-Identifier: GPL-2.0
//! Memory shared with a process through `mmap` of the uverbs file: the queue rings.
//!
//! C: `rdma_user_mmap_entry_*` in `include/rdma/ib_verbs.h`, `remap_vmalloc_range`.
//!
//! # Lifetimes
//!
//! A ring's memory ([`RingBuf`], vmapped pages) is reference counted: the driver holds
//! [`Arc<RingBuf>`]s and the mmap entry holds one more until ib_core releases the entry
//! (`mmap_free`, once the object is destroyed and no `mmap` call holds the entry). A
//! process's mapping holds no entry: `remap_vmalloc_range` inserts each page with a page
//! reference of its own (`vm_insert_page`), so the pages stay until the process unmaps them,
//! also after the [`RingBuf`] is freed (`vfree` then drops only its own references). So the
//! kernel never writes to freed memory and the process never maps freed memory, also when
//! ib_core destroys a process's objects under its mappings (`disassociate_ucontext`).
//!
//! The entry itself ([`MmapEntry`]) is bound to the user context. A driver makes it through
//! [`UserCall::map_ring`](super::udata::UserCall::map_ring) during a create call; the adapter
//! keeps it with the object (CQ, QP, SRQ) and removes it when the object is destroyed, which
//! uverbs does before it frees the context.
//!
//! # The process is hostile
//!
//! The process can write any byte of a ring at any time. [`RingBuf`] gives only copies and
//! single atomic loads/stores; the driver validates what it reads (rust/uapi `RingView`).

use super::super::bindings;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox},
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Arc,
};

/// Zeroed kernel memory that a process may map.
///
/// # Invariants
///
/// `ring` is an `oxrdma_ring_alloc` allocation of `len` bytes (a multiple of `PAGE_SIZE`),
/// owned by this value, whose memory (a `VM_USERMAP` vmalloc area) starts at `buf`;
/// `len >= 4`.
pub struct RingBuf {
    ring: NonNull<bindings::oxrdma_ring>,
    buf: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory, accessed only by copies and atomics.
unsafe impl Send for RingBuf {}
// SAFETY: shared access is only by copies and atomics, which tolerate concurrency.
unsafe impl Sync for RingBuf {}

impl RingBuf {
    /// Zeroed memory of at least `len` bytes (whole pages), not yet mappable, for a kernel
    /// user.
    pub fn new(len: usize) -> Result<Arc<Self>> {
        Self::alloc(len, false)
    }

    /// [`RingBuf::new`] for a process: its pages are charged to the calling task's memory
    /// cgroup, so that `memory.max` bounds what a process pins in rings.
    pub fn new_charged(len: usize) -> Result<Arc<Self>> {
        Self::alloc(len, true)
    }

    fn alloc(len: usize, account: bool) -> Result<Arc<Self>> {
        let len = len.checked_add(PAGE_SIZE - 1).ok_or(EINVAL)? & !(PAGE_SIZE - 1);
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: plain allocation of whole pages, zeroed by the helper.
        let raw = unsafe { bindings::oxrdma_ring_alloc(len, account) };
        let ring = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: a fresh allocation; its `addr` is set (and not null) on success.
        let buf = unsafe { NonNull::new_unchecked((*ring.as_ptr()).addr.cast::<u8>()) };
        // INVARIANT: a fresh oxrdma_ring_alloc allocation of `len` bytes at `buf`. (Should
        // `Arc::new` fail, the drop of `this` frees it.)
        let this = Self { ring, buf, len };
        Ok(Arc::new(this, GFP_KERNEL)?)
    }

    /// A reference on page `index` of the memory, as a process's mapping of it holds one.
    pub fn page(&self, index: usize) -> Option<super::super::page_ref::PageRef> {
        if index >= self.len / PAGE_SIZE {
            return None;
        }
        // SAFETY: in bounds (checked above) of the live area (type invariant).
        let page = unsafe {
            kernel::bindings::vmalloc_to_page(self.buf.as_ptr().add(index * PAGE_SIZE).cast())
        };
        // SAFETY: a page of the area, which holds a reference on it while `self` lives.
        Some(unsafe { super::super::page_ref::PageRef::get(NonNull::new(page.cast())?) })
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never).
    pub fn is_empty(&self) -> bool {
        false
    }

    fn atomic(&self, off: usize) -> Option<&AtomicU32> {
        if off % 4 != 0 || off.checked_add(4)? > self.len {
            return None;
        }
        // The kernel only accesses this offset atomically; a process's writes are whole words.
        // SAFETY: in bounds and 4-aligned (vmalloc memory is page aligned).
        Some(unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(off).cast()) })
    }

    /// `smp_load_acquire` of the u32 at `off`; 0 if `off` is out of bounds or misaligned.
    pub fn load_acquire(&self, off: usize) -> u32 {
        self.atomic(off).map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// `smp_store_release` of `v` to the u32 at `off`; nothing if out of bounds/misaligned.
    pub fn store_release(&self, off: usize, v: u32) {
        if let Some(a) = self.atomic(off) {
            a.store(v, Ordering::Release)
        }
    }

    /// Atomic OR into the u32 at `off`, sequentially consistent (a full barrier).
    pub fn fetch_or(&self, off: usize, v: u32) -> u32 {
        self.atomic(off)
            .map_or(0, |a| a.fetch_or(v, Ordering::SeqCst))
    }

    /// Atomic AND-NOT of the u32 at `off`, sequentially consistent (a full barrier).
    pub fn fetch_clear(&self, off: usize, v: u32) -> u32 {
        self.atomic(off)
            .map_or(0, |a| a.fetch_and(!v, Ordering::SeqCst))
    }

    /// Copies `dst.len()` bytes from offset `off`; `EINVAL` if out of bounds.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        if off.checked_add(dst.len()).map_or(true, |e| e > self.len) {
            return Err(EINVAL);
        }
        // SAFETY: bounds checked above; the process may write concurrently, which the C copy
        // tolerates (the result is validated as a copy).
        unsafe {
            bindings::oxrdma_copy_shared(
                dst.as_mut_ptr().cast(),
                self.buf.as_ptr().add(off).cast(),
                dst.len(),
            )
        };
        Ok(())
    }

    /// Copies `src` to offset `off`; `EINVAL` if out of bounds.
    pub fn write(&self, off: usize, src: &[u8]) -> Result {
        if off.checked_add(src.len()).map_or(true, |e| e > self.len) {
            return Err(EINVAL);
        }
        // SAFETY: bounds checked above; the process may read or write concurrently, which the C
        // copy tolerates (it only copies bytes).
        unsafe {
            bindings::oxrdma_copy_shared(
                self.buf.as_ptr().add(off).cast(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        Ok(())
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        // The last reference may go in softirq context (a packet's QP reference): the helper
        // then frees from the module's queue, whose destruction at unload waits for it.
        // (No kernel reference to the memory remains: the mmap entry holds an `Arc` until
        // ib_core's `mmap_free`; a process's mappings hold page references of their own.)
        let wq = super::super::workqueue::queue_ptr();
        // SAFETY: owned allocation (type invariant), freed once; `wq` is a live workqueue.
        unsafe { bindings::oxrdma_ring_free(self.ring.as_ptr(), wq) };
    }
}

/// The mmap entry ib_core keeps in the context's table.
///
/// # Invariants
///
/// `rdma` is at offset 0; `ring` comes from `Arc::into_raw` and is released in `mmap_free`.
#[repr(C)]
struct Entry {
    rdma: bindings::rdma_user_mmap_entry,
    ring: *const RingBuf,
}

/// An mmap entry registered with a user context.
///
/// # Invariants
///
/// `entry` was inserted into a live user context's table and not yet removed.
pub(super) struct MmapEntry {
    entry: NonNull<Entry>,
}

// SAFETY: the entry is only removed (on drop), which ib_core allows from any thread.
unsafe impl Send for MmapEntry {}
// SAFETY: no method reaches the entry through `&self`.
unsafe impl Sync for MmapEntry {}

impl MmapEntry {
    /// Makes `ring` mappable by the process of `uctx`. Returns the entry and the mmap offset
    /// the process maps it at.
    ///
    /// # Safety
    ///
    /// `uctx` must be a live user context, and the returned entry must be dropped before the
    /// context is freed.
    pub(super) unsafe fn insert(
        uctx: *mut bindings::ib_ucontext,
        ring: &Arc<RingBuf>,
    ) -> Result<(Self, u64)> {
        let mut entry = KBox::new(
            Entry {
                rdma: Default::default(),
                ring: core::ptr::null(),
            },
            GFP_KERNEL,
        )?;
        // The entry's reference is taken once the entry exists: a failed allocation must not
        // leak it.
        entry.ring = Arc::into_raw(ring.clone());
        let entry = KBox::into_raw(entry);
        // SAFETY: `uctx` is live (contract); `entry` is a fresh entry, its `rdma` part zeroed,
        // that ib_core keeps until `mmap_free`.
        let ret = unsafe { bindings::rdma_user_mmap_entry_insert(uctx, entry.cast(), ring.len()) };
        if ret != 0 {
            // SAFETY: not inserted, so still ours alone: releases the `Arc` and the box.
            unsafe {
                drop(Arc::from_raw((*entry).ring));
                drop(KBox::from_raw(entry));
            }
            return Err(Error::from_errno(ret));
        }
        // SAFETY: inserted; `start_pgoff` is set by the insertion and stays constant.
        let offset = unsafe { (*entry).rdma.start_pgoff } << PAGE_SHIFT;
        // INVARIANT: just inserted.
        let reg = Self {
            // SAFETY: `KBox::into_raw` never returns NULL.
            entry: unsafe { NonNull::new_unchecked(entry) },
        };
        Ok((reg, offset as u64))
    }
}

impl Drop for MmapEntry {
    fn drop(&mut self) {
        // SAFETY: inserted and not removed (type invariant); the context is live (`insert`'s
        // contract). ib_core frees the entry once no `mmap` call holds it (module doc).
        unsafe { bindings::rdma_user_mmap_entry_remove(self.entry.as_ptr().cast()) };
    }
}

/// Maps the ring of the entry registered at the VMA's offset (ib_core's `mmap` op).
///
/// # Safety
///
/// `uctx` is a live user context whose entries were all made by [`MmapEntry::insert`], `vma`
/// the VMA being set up for it.
pub(super) unsafe fn map(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> Result {
    // SAFETY: arguments valid (function contract); returns a referenced entry whose length
    // matches the VMA's, or NULL.
    let e = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if e.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the context's entries are `Entry`s (`rdma` at offset 0; function contract); the
    // reference taken above keeps it and its ring alive.
    let ring = unsafe { &*(*e.cast::<Entry>()).ring };
    // SAFETY: `ring.buf` is a VM_USERMAP area of `ring.len` bytes (`RingBuf` invariant),
    // which the entry's length check made equal to the VMA's length.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, ring.buf.as_ptr().cast(), 0) };
    // SAFETY: drops the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(e) };
    kernel::error::to_result(ret)
}

/// Frees an entry whose last reference is gone (ib_core's `mmap_free` op).
///
/// # Safety
///
/// `e` is an entry made by [`MmapEntry::insert`], released by ib_core for the last time.
pub(super) unsafe fn free(e: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: an `Entry` made by `KBox::into_raw` in `MmapEntry::insert` (offset 0), freed
    // only here (function contract).
    let entry = unsafe { KBox::from_raw(e.cast::<Entry>()) };
    // SAFETY: the `Arc` reference the entry held (`Entry` invariant).
    drop(unsafe { Arc::from_raw(entry.ring) });
}
