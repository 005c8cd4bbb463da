// SPDX-License-Identifier: GPL-2.0
//! Counted references to pages, and byte ranges of them: what a socket can send from without
//! copying ([`super::tcp::TcpSocket::send_pages`]).
//!
//! A [`PageRef`] holds one reference on its page (`get_page`/`put_page`), so the page stays
//! allocated while it lives, whoever else drops theirs (a memory region unpinning its pages,
//! a socket freeing the buffers it sent from). Reading the page's bytes is not offered here:
//! a process may be writing them.
//!
//! C: `include/linux/mm.h`.

use super::bindings;
use core::ptr::NonNull;
use kernel::alloc::flags::{__GFP_ZERO, GFP_KERNEL};
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;

/// One reference to a page.
///
/// # Invariants
///
/// `0` is a valid page on which this value holds one reference, dropped with it.
pub struct PageRef(NonNull<bindings::page>);

// SAFETY: a page reference may be taken and dropped from any context and any thread.
unsafe impl Send for PageRef {}
// SAFETY: `&PageRef` only gives the page's address.
unsafe impl Sync for PageRef {}

impl PageRef {
    /// Takes a reference on `page`.
    ///
    /// # Safety
    ///
    /// `page` is a valid page that someone holds a reference on (or keeps pinned) for the
    /// duration of the call.
    pub(crate) unsafe fn get(page: NonNull<bindings::page>) -> Self {
        // SAFETY: a referenced page may take another reference (the caller's contract).
        unsafe { bindings::oxrdma_get_page(page.as_ptr()) };
        // INVARIANT: the reference taken above.
        Self(page)
    }

    /// A new zeroed page, of which this is the only reference (process context).
    pub fn alloc_zeroed() -> Result<Self> {
        let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
        let ptr = NonNull::new(page.as_ptr().cast::<bindings::page>()).ok_or(ENOMEM)?;
        // INVARIANT: the allocation's reference, which `page` would have dropped, is this
        // value's from now on.
        core::mem::forget(page);
        Ok(Self(ptr))
    }

    /// Copies `src` to byte `off` of the page.
    pub fn write(&self, off: usize, src: &[u8]) -> Result {
        if off.checked_add(src.len()).map_or(true, |e| e > PAGE_SIZE) {
            return Err(EINVAL);
        }
        // SAFETY: the page is referenced (type invariant); `off + src.len() <= PAGE_SIZE`;
        // `src` is valid for reads of its length during the call.
        unsafe { bindings::oxrdma_page_write(self.as_ptr(), off, src.as_ptr().cast(), src.len()) };
        Ok(())
    }

    /// Copies byte `off` of the page on into `dst`.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        if off.checked_add(dst.len()).map_or(true, |e| e > PAGE_SIZE) {
            return Err(EINVAL);
        }
        // SAFETY: the page is referenced (type invariant); `off + dst.len() <= PAGE_SIZE`;
        // `dst` is valid for writes of its length during the call.
        unsafe {
            bindings::oxrdma_page_read(self.as_ptr(), off, dst.as_mut_ptr().cast(), dst.len())
        };
        Ok(())
    }

    pub(crate) fn as_ptr(&self) -> *mut bindings::page {
        self.0.as_ptr()
    }
}

impl Clone for PageRef {
    fn clone(&self) -> Self {
        // SAFETY: this value holds a reference on the page (type invariant).
        unsafe { Self::get(self.0) }
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: this value holds a reference (type invariant), dropped once, here.
        unsafe { bindings::oxrdma_put_page(self.0.as_ptr()) };
    }
}

/// Bytes `[off, off + len)` of a referenced page.
///
/// # Invariants
///
/// `off + len <= PAGE_SIZE`.
pub struct PageRange {
    page: PageRef,
    off: u32,
    len: u32,
}

impl PageRange {
    /// Bytes `[off, off + len)` of `page`; `None` if they do not fit in a page.
    pub fn new(page: PageRef, off: usize, len: usize) -> Option<Self> {
        let end = off.checked_add(len)?;
        if end > PAGE_SIZE {
            return None;
        }
        // INVARIANT: checked above; both fit in `u32` as they are at most `PAGE_SIZE`.
        Some(Self {
            page,
            off: off as u32,
            len: len as u32,
        })
    }

    /// The length of the range, bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops the first `n` bytes of the range (all of them if `n` is larger).
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len()) as u32;
        // INVARIANT: `off + len` is unchanged.
        self.off += n;
        self.len -= n;
    }

    pub(crate) fn piece(&self) -> bindings::oxrdma_page_piece {
        bindings::oxrdma_page_piece {
            page: self.page.as_ptr(),
            off: self.off,
            len: self.len,
        }
    }
}
