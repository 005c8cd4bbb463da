// SPDX-License-Identifier: GPL-2.0
//! User memory pinned for a memory region (`struct ib_umem`), and bounds-checked access to it.
//!
//! C: `include/rdma/ib_umem.h`.

use super::super::{
    bindings,
    page_ref::{PageRange, PageRef},
    sync::in_task,
    workqueue,
};
use core::ptr::NonNull;
use kernel::{
    alloc::{flags::GFP_KERNEL, KVec},
    error::from_err_ptr,
    impl_has_work, new_work,
    page::PAGE_SIZE,
    prelude::*,
    workqueue::{Work, WorkItem},
};

/// One pinned page of a [`UserMem`].
///
/// # Invariants
///
/// Points to a page pinned by the owning `ib_umem` for as long as the [`UserMem`] lives.
#[derive(Clone, Copy)]
struct PinnedPage(NonNull<bindings::page>);

/// A pinned range of a process's memory.
///
/// It may be dropped in any context: `ib_umem_release` may sleep, so a drop in softirq context
/// (the last reference of a memory region going away during packet processing) hands the
/// release to the module's workqueue, through a work item allocated with the range.
///
/// # Invariants
///
/// `release.umem` is a live `ib_umem` owned by this value; `pages` are its pages in address
/// order; byte `i` of the range is at byte `(first_offset + i) % PAGE_SIZE` of page
/// `(first_offset + i) / PAGE_SIZE`, for `i < len`.
pub struct UserMem {
    release: Option<Pin<KBox<Release>>>,
    pages: KVec<PinnedPage>,
    first_offset: usize,
    len: usize,
}

/// The release of a pinned range, run now or as a work item.
///
/// # Invariants
///
/// `umem` is a live `ib_umem` that this value releases when it runs, and nothing else does.
#[pin_data]
struct Release {
    umem: NonNull<bindings::ib_umem>,
    #[pin]
    work: Work<Release>,
}

impl_has_work! {
    impl HasWork<Self> for Release { self.work }
}

// SAFETY: an `ib_umem` may be released from any thread in process context, which is where
// `run` executes.
unsafe impl Send for Release {}
// SAFETY: no `&self` method reaches the umem.
unsafe impl Sync for Release {}

impl Release {
    fn run_now(&self) {
        // SAFETY: the umem is owned by this value (type invariant) and released once: `run`
        // consumes the value.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

impl WorkItem for Release {
    type Pointer = Pin<KBox<Release>>;

    fn run(this: Pin<KBox<Release>>) {
        this.run_now();
    }
}

// SAFETY: the pages stay pinned until the umem is released; they are accessed through
// temporary kernel mappings from any thread; the release runs in process context (see
// `Drop`).
unsafe impl Send for UserMem {}
// SAFETY: all accessors take `&self` and only copy bytes or use atomic instructions.
unsafe impl Sync for UserMem {}

/// Why an access to a [`UserMem`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// Outside the range.
    Bounds,
    /// An atomic on an address that is not 8-byte aligned.
    Alignment,
}

impl UserMem {
    /// Pins `len` bytes at user address `addr` of the calling process for `ib` with the
    /// `IB_ACCESS_*` flags `access` (`ib_umem_get`).
    ///
    /// # Safety
    ///
    /// `ib` must be a registered `ib_device` and the caller must run in the context of a verbs
    /// call from the process owning `addr`.
    pub(crate) unsafe fn get(
        ib: *mut bindings::ib_device,
        addr: u64,
        len: u64,
        access: i32,
    ) -> Result<Self> {
        let len_usize = usize::try_from(len).map_err(|_| EINVAL)?;
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        // SAFETY: per the function's contract; returns a umem or an error pointer.
        let umem = from_err_ptr(unsafe { bindings::ib_umem_get(ib, addr, len_usize, access) })?;
        let umem = NonNull::new(umem).ok_or(EINVAL)?;
        let release = |e: Error| -> Error {
            // SAFETY: the umem is ours and not yet handed out.
            unsafe { bindings::ib_umem_release(umem.as_ptr()) };
            e
        };
        // SAFETY: `umem` is live.
        let npages = unsafe { bindings::oxrdma_umem_num_pages(umem.as_ptr()) };
        // SAFETY: `umem` is live.
        let first_offset = unsafe { bindings::oxrdma_umem_offset(umem.as_ptr()) };
        let mut raw: KVec<*mut bindings::page> = KVec::new();
        for _ in 0..npages {
            raw.push(core::ptr::null_mut(), GFP_KERNEL)
                .map_err(|_| release(ENOMEM))?;
        }
        // SAFETY: `raw` has room for `npages` entries.
        let got = unsafe { bindings::oxrdma_umem_pages(umem.as_ptr(), raw.as_mut_ptr(), npages) };
        if got != npages || first_offset + len_usize > npages * PAGE_SIZE {
            return Err(release(EFAULT));
        }
        let mut pages = KVec::with_capacity(npages, GFP_KERNEL).map_err(|_| release(ENOMEM))?;
        for p in raw.iter() {
            let p = NonNull::new(*p).ok_or(EFAULT).map_err(release)?;
            // INVARIANT: a page of the umem, pinned until its release.
            pages
                .push(PinnedPage(p), GFP_KERNEL)
                .map_err(|_| release(ENOMEM))?;
        }
        let rel = KBox::pin_init(
            pin_init!(Release {
                umem,
                work <- new_work!("oxrdma_umem_release"),
            }),
            GFP_KERNEL,
        )
        .map_err(release)?;
        // INVARIANT: the umem moves into the release, owned by this value.
        Ok(Self {
            release: Some(rel),
            pages,
            first_offset,
            len: len_usize,
        })
    }

    /// Length of the range, bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f(page, offset in page, start in the caller's buffer, length)` for each piece of
    /// `[off, off + len)`.
    fn for_each_piece(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(PinnedPage, usize, usize, usize),
    ) -> Result<(), AccessError> {
        let end = off.checked_add(len).ok_or(AccessError::Bounds)?;
        if end > self.len {
            return Err(AccessError::Bounds);
        }
        let mut done = 0;
        while done < len {
            let abs = self.first_offset + off + done;
            let page = self.pages[abs / PAGE_SIZE];
            let in_page = abs % PAGE_SIZE;
            let n = (PAGE_SIZE - in_page).min(len - done);
            f(page, in_page, done, n);
            done += n;
        }
        Ok(())
    }

    /// Calls `f` with a reference to each page piece of `[off, off + len)`, in order: for a
    /// socket to send those bytes from the pages themselves.
    pub fn page_ranges(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(PageRange),
    ) -> Result<(), AccessError> {
        self.for_each_piece(off, len, |p, in_page, _, n| {
            // SAFETY: `p` is pinned while `self` lives (type invariant), so it is referenced
            // during the call.
            let page = unsafe { PageRef::get(p.0) };
            if let Some(r) = PageRange::new(page, in_page, n) {
                f(r);
            }
        })
    }

    /// Copies `dst.len()` bytes at offset `off` of the range into `dst`.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), AccessError> {
        let ptr = dst.as_mut_ptr();
        self.for_each_piece(off, dst.len(), |p, in_page, at, n| {
            // SAFETY: `p` is pinned (type invariant); `in_page + n <= PAGE_SIZE`; `at + n` is
            // within `dst`.
            unsafe { bindings::oxrdma_page_read(p.0.as_ptr(), in_page, ptr.add(at).cast(), n) }
        })
    }

    /// Copies `src` to offset `off` of the range.
    pub fn write(&self, off: usize, src: &[u8]) -> Result<(), AccessError> {
        let ptr = src.as_ptr();
        self.for_each_piece(off, src.len(), |p, in_page, at, n| {
            // SAFETY: `p` is pinned (type invariant); `in_page + n <= PAGE_SIZE`; `at + n` is
            // within `src`.
            unsafe { bindings::oxrdma_page_write(p.0.as_ptr(), in_page, ptr.add(at).cast(), n) }
        })
    }

    fn atomic_page(&self, off: usize) -> Result<(PinnedPage, usize), AccessError> {
        if off.checked_add(8).map_or(true, |e| e > self.len) {
            return Err(AccessError::Bounds);
        }
        let abs = self.first_offset + off;
        if abs % 8 != 0 {
            return Err(AccessError::Alignment);
        }
        // 8-aligned and 8 bytes long: within one page.
        Ok((self.pages[abs / PAGE_SIZE], abs % PAGE_SIZE))
    }

    /// Atomically: if the u64 at `off` equals `cmp`, stores `swap`. Returns the old value.
    pub fn compare_swap(&self, off: usize, cmp: u64, swap: u64) -> Result<u64, AccessError> {
        let (p, in_page) = self.atomic_page(off)?;
        // SAFETY: pinned page, 8-aligned offset inside it.
        Ok(unsafe { bindings::oxrdma_page_cmpxchg64(p.0.as_ptr(), in_page, cmp, swap) })
    }

    /// Atomically adds `add` to the u64 at `off`. Returns the old value.
    pub fn fetch_add(&self, off: usize, add: u64) -> Result<u64, AccessError> {
        let (p, in_page) = self.atomic_page(off)?;
        // SAFETY: pinned page, 8-aligned offset inside it.
        Ok(unsafe { bindings::oxrdma_page_fetch_add64(p.0.as_ptr(), in_page, add) })
    }
}

impl Drop for UserMem {
    /// Unpins the pages: now in process context, else from the module's workqueue.
    fn drop(&mut self) {
        let Some(rel) = self.release.take() else {
            return;
        };
        if in_task() {
            rel.run_now();
        } else {
            // The module's workqueue is drained before the module goes (its contract).
            workqueue::queue().enqueue(rel);
        }
    }
}
