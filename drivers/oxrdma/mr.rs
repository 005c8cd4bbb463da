// SPDX-License-Identifier: GPL-2.0
//! Memory regions: the key table and the checks every access goes through.
//!
//! A key is `index << 8 | tag`: `index` is the MR's slot in the device's table, `tag` a
//! per-slot generation, so a stale key (of a deregistered MR whose slot was reused) does not
//! match. L_Key and R_Key are the same value; R_Key access additionally needs the remote
//! access right the MR was registered with.
//!
//! Three kinds of memory: pinned process memory (user MRs), all of kernel memory by DMA
//! address (a kernel user's DMA MR, e.g. the PD's `local_dma_lkey`), and fast-registration
//! page lists (a kernel user's `ib_alloc_mr`). A fast-registration MR is invalid until a
//! REG_MR work request binds it to a key (the table's index with the user's low byte), rights,
//! an address and a length; LOCAL_INV or a SEND with invalidate makes it invalid again.

use crate::ox::rdma::kmem::{FastRegPages, KernelMem};
use crate::ox::rdma::umem::{AccessError, UserMem};
use kernel::{
    alloc::flags::GFP_KERNEL, alloc::KVec, new_spinlock, prelude::*, sync::Arc, sync::SpinLock,
};

/// The memory behind an MR.
pub(crate) enum MrMem {
    /// Pinned process memory (`reg_user_mr`); offsets from the MR's first byte.
    User(UserMem),
    /// All of kernel memory (a kernel user's DMA MR); the offset is the DMA address.
    Dma(KernelMem),
    /// A fast-registration page list (a kernel user's `ib_alloc_mr`); offsets from the first
    /// mapped byte.
    Fast(Arc<FastRegPages>),
}

impl MrMem {
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), AccessError> {
        match self {
            Self::User(m) => m.read(off, dst),
            Self::Dma(m) => m.read(off as u64, dst),
            Self::Fast(p) => p.read(off as u64, dst),
        }
    }

    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result<(), AccessError> {
        match self {
            Self::User(m) => m.write(off, src),
            Self::Dma(m) => m.write(off as u64, src),
            Self::Fast(p) => p.write(off as u64, src),
        }
    }

    pub(crate) fn compare_swap(&self, off: usize, cmp: u64, swap: u64) -> Result<u64, AccessError> {
        match self {
            Self::User(m) => m.compare_swap(off, cmp, swap),
            Self::Dma(m) => m.compare_swap(off as u64, cmp, swap),
            Self::Fast(p) => p.compare_swap(off as u64, cmp, swap),
        }
    }

    pub(crate) fn fetch_add(&self, off: usize, add: u64) -> Result<u64, AccessError> {
        match self {
            Self::User(m) => m.fetch_add(off, add),
            Self::Dma(m) => m.fetch_add(off as u64, add),
            Self::Fast(p) => p.fetch_add(off as u64, add),
        }
    }
}

/// What a key currently gives access to. Fixed for user and DMA MRs; a fast-registration MR
/// changes it with each REG_MR and invalidation.
#[derive(Clone, Copy)]
struct Binding {
    key: u32,
    valid: bool,
    access: u32,
    iova: u64,
    len: u64,
}

/// A registered memory region.
#[pin_data]
pub(crate) struct Mr {
    /// The key the table assigned (`index << 8 | tag`); a fast-registration MR's current key
    /// has the same index and the user's low byte.
    pub(crate) base_key: u32,
    pub(crate) pdn: u32,
    pub(crate) mem: MrMem,
    #[pin]
    bind: SpinLock<Binding>,
}

/// Why an access to an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No such key (or a stale one, or an invalidated fast-registration MR).
    Key,
    /// Another protection domain.
    Pd,
    /// The MR lacks the access right.
    Rights,
    /// Outside the MR.
    Bounds,
    /// The operation does not apply to this kind of MR (or its state).
    State,
}

impl Mr {
    /// A new MR whose key `key` gives `access` to `len` bytes at `iova` (invalid until
    /// registered for a fast-registration MR).
    pub(crate) fn new(
        key: u32,
        pdn: u32,
        mem: MrMem,
        access: u32,
        iova: u64,
        len: u64,
    ) -> Result<Arc<Self>> {
        let valid = !matches!(mem, MrMem::Fast(_));
        Arc::pin_init(
            pin_init!(Self {
                base_key: key,
                pdn,
                mem,
                bind <- new_spinlock!(Binding { key, valid, access, iova, len }, "oxrdma_mr"),
            }),
            GFP_KERNEL,
        )
    }

    fn binding(&self) -> Binding {
        *self.bind.lock()
    }

    /// Checks an access through `key` (still the MR's valid key) from PD `pdn` that needs
    /// the rights `need` (`access::*`; none for a local read) to `[va, va + len)`, and returns
    /// its byte offset in the MR. One look at the binding, which REG_MR and invalidation
    /// change.
    pub(crate) fn access(
        &self,
        key: u32,
        pdn: u32,
        need: u32,
        va: u64,
        len: u64,
    ) -> Result<usize, MrError> {
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        let b = self.binding();
        if !b.valid || b.key != key {
            return Err(MrError::Key);
        }
        if b.access & need != need {
            return Err(MrError::Rights);
        }
        let off = va.checked_sub(b.iova).ok_or(MrError::Bounds)?;
        let end = off.checked_add(len).ok_or(MrError::Bounds)?;
        if end > b.len {
            return Err(MrError::Bounds);
        }
        usize::try_from(off).map_err(|_| MrError::Bounds)
    }

    /// REG_MR: makes an invalid fast-registration MR valid under `key` with `access` over
    /// `len` bytes at `iova`, which its page list must cover.
    pub(crate) fn register(
        &self,
        pdn: u32,
        key: u32,
        access: u32,
        iova: u64,
        len: u64,
    ) -> Result<(), MrError> {
        let MrMem::Fast(pages) = &self.mem else {
            return Err(MrError::State);
        };
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        if key >> 8 != self.base_key >> 8 {
            return Err(MrError::Key);
        }
        if len > pages.mapped_len() || iova.checked_add(len).is_none() {
            return Err(MrError::Bounds);
        }
        let mut b = self.bind.lock();
        if b.valid {
            return Err(MrError::State);
        }
        *b = Binding {
            key,
            valid: true,
            access,
            iova,
            len,
        };
        Ok(())
    }

    /// LOCAL_INV or SEND with invalidate: invalidates a fast-registration MR whose current key
    /// is `key` (invalidating an invalid one is allowed).
    pub(crate) fn invalidate(&self, pdn: u32, key: u32) -> Result<(), MrError> {
        if !matches!(self.mem, MrMem::Fast(_)) {
            return Err(MrError::State);
        }
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        let mut b = self.bind.lock();
        if b.key != key {
            return Err(MrError::Key);
        }
        b.valid = false;
        Ok(())
    }

    /// Whether this is a fast-registration MR.
    pub(crate) fn is_fast(&self) -> bool {
        matches!(self.mem, MrMem::Fast(_))
    }
}

struct Slot {
    tag: u8,
    mr: Option<Arc<Mr>>,
}

/// The device's MRs by key.
pub(crate) struct MrTable {
    slots: KVec<Slot>,
    live: usize,
}

impl MrTable {
    pub(crate) const fn new() -> Self {
        Self {
            slots: KVec::new(),
            live: 0,
        }
    }

    /// Reserves a key for a new MR and stores what `make(key)` builds.
    pub(crate) fn insert(
        &mut self,
        max: usize,
        make: impl FnOnce(u32) -> Result<Arc<Mr>>,
    ) -> Result<Arc<Mr>> {
        if self.live >= max {
            return Err(ENOMEM);
        }
        let idx = match self.slots.iter().position(|s| s.mr.is_none()) {
            Some(i) => i,
            None => {
                if self.slots.len() >= (1 << 24) {
                    return Err(ENOMEM);
                }
                self.slots.push(Slot { tag: 0, mr: None }, GFP_KERNEL)?;
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[idx];
        slot.tag = slot.tag.wrapping_add(1);
        let key = ((idx as u32) << 8) | u32::from(slot.tag);
        let mr = make(key)?;
        slot.mr = Some(mr.clone());
        self.live += 1;
        Ok(mr)
    }

    /// The MR in the slot `key` names, whatever its state and current key (for REG_MR and
    /// invalidation, which check those themselves).
    pub(crate) fn slot_of(&self, key: u32) -> Option<Arc<Mr>> {
        self.slots.get((key >> 8) as usize)?.mr.clone()
    }

    /// Removes the MR of `key`.
    pub(crate) fn remove(&mut self, key: u32) -> Option<Arc<Mr>> {
        let slot = self.slots.get_mut((key >> 8) as usize)?;
        if slot.mr.as_ref().is_some_and(|m| m.base_key == key) {
            self.live -= 1;
            slot.mr.take()
        } else {
            None
        }
    }
}
