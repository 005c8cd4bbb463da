// SPDX-License-Identifier: GPL-2.0
//! Memory that kernel verbs users name by DMA address: DMA MRs and fast-registration page
//! lists.
//!
//! oxrdma devices have no DMA device, so ib_core's `ib_uses_virt_dma()` holds for them: the
//! `ib_dma_map_*` helpers return kernel virtual addresses, and a DMA address in an SGE, a page
//! list or an R_Key'd range is a kernel virtual address. Hardware would DMA to it; oxrdma copies
//! with the CPU. Each access is checked page by page: an address outside the kernel's linear map
//! (`virt_addr_valid`) is refused, never dereferenced.
//!
//! C: `include/rdma/ib_verbs.h` (`ib_dma_map_sg`, `ib_sg_to_pages`), `lib/scatterlist.c`.

use super::super::bindings;
use super::super::sync::SpinLockIrq;
use super::umem::AccessError;
use core::num::NonZeroU64;
use kernel::{
    alloc::{flags::GFP_KERNEL, KVec},
    page::PAGE_SIZE,
    prelude::*,
    sync::Arc,
};

/// One page-bounded piece of an access: the page, the offset in it, the length.
fn piece(addr: u64, len: usize) -> Result<(*mut bindings::page, usize, usize), AccessError> {
    // SAFETY: only computes the page of an address in the linear map; NULL otherwise.
    let page = unsafe { bindings::oxrdma_virt_page(addr) };
    if page.is_null() {
        return Err(AccessError::Bounds);
    }
    let in_page = (addr % PAGE_SIZE as u64) as usize;
    Ok((page, in_page, (PAGE_SIZE - in_page).min(len)))
}

/// Calls `f(page, offset in page, offset in the caller's buffer, length)` for each piece of
/// `[addr, addr + len)`, checking every page before the first copy.
fn for_each_piece(
    addr: u64,
    len: usize,
    mut f: impl FnMut(*mut bindings::page, usize, usize, usize),
) -> Result<(), AccessError> {
    addr.checked_add(len as u64).ok_or(AccessError::Bounds)?;
    let mut done = 0;
    while done < len {
        let (_, _, n) = piece(addr + done as u64, len - done)?;
        done += n;
    }
    let mut done = 0;
    while done < len {
        let (p, in_page, n) = piece(addr + done as u64, len - done)?;
        f(p, in_page, done, n);
        done += n;
    }
    Ok(())
}

fn read_at(addr: u64, dst: &mut [u8]) -> Result<(), AccessError> {
    let ptr = dst.as_mut_ptr();
    for_each_piece(addr, dst.len(), |p, in_page, at, n| {
        // SAFETY: `p` is a page of the linear map, `in_page + n <= PAGE_SIZE`, `at + n` is
        // within `dst`.
        unsafe { bindings::oxrdma_page_read(p, in_page, ptr.add(at).cast(), n) }
    })
}

fn write_at(addr: u64, src: &[u8]) -> Result<(), AccessError> {
    let ptr = src.as_ptr();
    for_each_piece(addr, src.len(), |p, in_page, at, n| {
        // SAFETY: `p` is a page of the linear map, `in_page + n <= PAGE_SIZE`, `at + n` is
        // within `src`.
        unsafe { bindings::oxrdma_page_write(p, in_page, ptr.add(at).cast(), n) }
    })
}

fn atomic_page(addr: u64) -> Result<(*mut bindings::page, usize), AccessError> {
    if addr % 8 != 0 {
        return Err(AccessError::Alignment);
    }
    let (p, in_page, _) = piece(addr, 8)?;
    Ok((p, in_page))
}

/// All of kernel memory, by DMA address: what a DMA MR (`ib_get_dma_mr`, the PD's
/// `local_dma_lkey`) gives access to.
///
/// # Invariants
///
/// Only made by the `get_dma_mr` glue for a kernel verbs user. The kernel verbs contract makes
/// that user responsible for which addresses it posts or exposes (as with hardware DMA); this
/// type adds that every access stays within the linear map.
pub struct KernelMem(());

impl KernelMem {
    pub(crate) fn new() -> Self {
        Self(())
    }

    /// Copies `dst.len()` bytes at DMA address `addr` into `dst`.
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result<(), AccessError> {
        read_at(addr, dst)
    }

    /// Copies `src` to DMA address `addr`.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result<(), AccessError> {
        write_at(addr, src)
    }

    /// Atomic compare and swap of the u64 at `addr`; returns the old value.
    pub fn compare_swap(&self, addr: u64, cmp: u64, swap: u64) -> Result<u64, AccessError> {
        let (p, in_page) = atomic_page(addr)?;
        // SAFETY: a linear-map page, 8-aligned offset inside it.
        Ok(unsafe { bindings::oxrdma_page_cmpxchg64(p, in_page, cmp, swap) })
    }

    /// Atomic fetch and add on the u64 at `addr`; returns the old value.
    pub fn fetch_add(&self, addr: u64, add: u64) -> Result<u64, AccessError> {
        let (p, in_page) = atomic_page(addr)?;
        // SAFETY: a linear-map page, 8-aligned offset inside it.
        Ok(unsafe { bindings::oxrdma_page_fetch_add64(p, in_page, add) })
    }
}

struct PageList {
    /// DMA addresses of the pages, `page_size` aligned: the first `n` are mapped (the room is
    /// the `max_num_sg` of `ib_alloc_mr`).
    pages: KVec<u64>,
    n: usize,
    page_size: NonZeroU64,
    /// Offset of the first mapped byte in the first page.
    first_offset: u64,
}

/// The page list of a fast-registration MR (`ib_alloc_mr` with `IB_MR_TYPE_MEM_REG`), filled
/// by `ib_map_mr_sg` and used once an `IB_WR_REG_MR` made the MR valid.
///
/// Offsets are relative to the MR's first byte (its `iova` at registration).
///
/// # Invariants
///
/// The page addresses come from `ib_sg_to_pages` over a scatterlist the kernel verbs user
/// mapped with `ib_dma_map_sg` (the same contract as [`KernelMem`]); accesses go through the
/// linear-map check.
#[pin_data]
pub struct FastRegPages {
    #[pin]
    st: SpinLockIrq<PageList>,
}

impl FastRegPages {
    /// An empty list with room for `max` pages (allocated now: `ib_map_mr_sg` may be called in
    /// atomic context).
    pub(crate) fn new(max: usize) -> Result<Arc<Self>> {
        let pages = KVec::from_elem(0u64, max, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                st <- crate::new_spinlock_irq!(
                    PageList { pages, n: 0, page_size: NonZeroU64::MIN, first_offset: 0 },
                    "oxrdma_frmr_pages"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Starts a new mapping with `page_size`-byte pages.
    pub(crate) fn begin(&self, page_size: u64) {
        let mut st = self.st.lock();
        st.n = 0;
        st.page_size = NonZeroU64::new(page_size).unwrap_or(NonZeroU64::MIN);
        st.first_offset = 0;
    }

    /// Appends a page (the `set_page` callback of `ib_sg_to_pages`).
    pub(crate) fn push(&self, addr: u64) -> Result {
        let mut st = self.st.lock();
        let n = st.n;
        *st.pages.get_mut(n).ok_or(ENOMEM)? = addr;
        st.n += 1;
        Ok(())
    }

    /// Ends the mapping: the first byte is at `iova` (`ib_sg_to_pages` set it).
    pub(crate) fn finish(&self, iova: u64) {
        let mut st = self.st.lock();
        st.first_offset = iova % st.page_size;
    }

    /// Bytes the mapped pages cover from the first byte on.
    pub fn mapped_len(&self) -> u64 {
        let st = self.st.lock();
        (st.n as u64 * st.page_size.get()).saturating_sub(st.first_offset)
    }

    /// Calls `f(DMA address, offset in the caller's buffer, length)` for each page piece of
    /// `[off, off + len)`.
    fn walk(
        &self,
        off: u64,
        len: usize,
        mut f: impl FnMut(u64, usize, usize) -> Result<(), AccessError>,
    ) -> Result<(), AccessError> {
        let st = self.st.lock();
        let end = off.checked_add(len as u64).ok_or(AccessError::Bounds)?;
        let covered = (st.n as u64 * st.page_size.get()).saturating_sub(st.first_offset);
        if end > covered {
            return Err(AccessError::Bounds);
        }
        let mut done = 0usize;
        while done < len {
            let abs = st.first_offset + off + done as u64;
            let page = *st
                .pages
                .get((abs / st.page_size) as usize)
                .ok_or(AccessError::Bounds)?;
            let in_page = abs % st.page_size;
            let n = ((st.page_size.get() - in_page) as usize).min(len - done);
            f(page + in_page, done, n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes at offset `off` of the mapping into `dst`.
    pub fn read(&self, off: u64, dst: &mut [u8]) -> Result<(), AccessError> {
        self.walk(off, dst.len(), |a, at, n| read_at(a, &mut dst[at..at + n]))
    }

    /// Copies `src` to offset `off` of the mapping.
    pub fn write(&self, off: u64, src: &[u8]) -> Result<(), AccessError> {
        self.walk(off, src.len(), |a, at, n| write_at(a, &src[at..at + n]))
    }

    fn atomic_addr(&self, off: u64) -> Result<u64, AccessError> {
        let mut addr = None;
        self.walk(off, 8, |a, _, n| {
            if n != 8 {
                return Err(AccessError::Alignment);
            }
            addr = Some(a);
            Ok(())
        })?;
        addr.ok_or(AccessError::Bounds)
    }

    /// Atomic compare and swap of the u64 at offset `off`; returns the old value.
    pub fn compare_swap(&self, off: u64, cmp: u64, swap: u64) -> Result<u64, AccessError> {
        KernelMem::new().compare_swap(self.atomic_addr(off)?, cmp, swap)
    }

    /// Atomic fetch and add on the u64 at offset `off`; returns the old value.
    pub fn fetch_add(&self, off: u64, add: u64) -> Result<u64, AccessError> {
        KernelMem::new().fetch_add(self.atomic_addr(off)?, add)
    }
}
