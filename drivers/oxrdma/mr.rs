// SPDX-License-Identifier: GPL-2.0
//! Memory regions: the key table and the checks every access goes through.
//!
//! A key is `index << 8 | tag`: `index` is the MR's slot in the device's table, `tag` a
//! per-slot generation, so a stale key (of a deregistered MR whose slot was reused) does not
//! match. L_Key and R_Key are the same value; R_Key access additionally needs the remote
//! access right the MR was registered with.

use crate::ox::rdma::umem::UserMem;
use crate::ox::rdma::verbs::access;
use kernel::{alloc::flags::GFP_KERNEL, alloc::KVec, prelude::*, sync::Arc};

/// A registered memory region.
pub(crate) struct Mr {
    pub(crate) key: u32,
    pub(crate) pdn: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) mem: UserMem,
}

/// Why an access to an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No such key (or a stale one).
    Key,
    /// Another protection domain.
    Pd,
    /// The MR lacks the access right.
    Rights,
    /// Outside the MR.
    Bounds,
}

impl Mr {
    /// The byte offset of `[va, va + len)` in the MR, if inside it.
    pub(crate) fn offset_of(&self, va: u64, len: u64) -> Result<usize, MrError> {
        let off = va.checked_sub(self.iova).ok_or(MrError::Bounds)?;
        let end = off.checked_add(len).ok_or(MrError::Bounds)?;
        if end > self.mem.len() as u64 {
            return Err(MrError::Bounds);
        }
        usize::try_from(off).map_err(|_| MrError::Bounds)
    }

    /// Checks a local access: same PD, and local write if the access writes.
    pub(crate) fn check_local(&self, pdn: u32, write: bool) -> Result<(), MrError> {
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        if write && self.access & access::LOCAL_WRITE == 0 {
            return Err(MrError::Rights);
        }
        Ok(())
    }

    /// Checks a remote access against the R_Key's rights (`access::REMOTE_*`).
    pub(crate) fn check_remote(&self, pdn: u32, right: u32) -> Result<(), MrError> {
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        if self.access & right == 0 {
            return Err(MrError::Rights);
        }
        Ok(())
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

    /// The MR of `key`, if it is live.
    pub(crate) fn get(&self, key: u32) -> Result<Arc<Mr>, MrError> {
        let slot = self.slots.get((key >> 8) as usize).ok_or(MrError::Key)?;
        match &slot.mr {
            Some(mr) if mr.key == key => Ok(mr.clone()),
            _ => Err(MrError::Key),
        }
    }

    /// Removes the MR of `key`.
    pub(crate) fn remove(&mut self, key: u32) -> Option<Arc<Mr>> {
        let slot = self.slots.get_mut((key >> 8) as usize)?;
        if slot.mr.as_ref().is_some_and(|m| m.key == key) {
            self.live -= 1;
            slot.mr.take()
        } else {
            None
        }
    }
}
