// SPDX-License-Identifier: GPL-2.0
//! Memory regions: the checks every access goes through.
//!
//! A key is `index << 8 | tag`: `index` is the MR's slot in the device's table
//! ([`crate::dev::RoceDev::add_mr`]), `tag` a per-slot generation, so a stale key (of a
//! deregistered MR whose slot was reused) does not match. L_Key and R_Key are the same value; R_Key access additionally needs the remote
//! access right the MR was registered with.
//!
//! Three kinds of memory: pinned process memory (user MRs), all of kernel memory by DMA
//! address (a kernel user's DMA MR, e.g. the PD's `local_dma_lkey`), and fast-registration
//! page lists (a kernel user's `ib_alloc_mr`). A fast-registration MR is invalid until a
//! REG_MR work request binds it to a key (the table's index with the user's low byte), rights,
//! an address and a length; LOCAL_INV or a SEND with invalidate makes it invalid again.

use crate::ox::page_ref::PageRange;
use crate::ox::rdma::kmem::{FastRegPages, KernelMem};
use crate::ox::rdma::umem::{AccessError, UserMem};
use crate::ox::rdma::verbs::access;
use crate::ox::sync::SpinLockBh;
use kernel::{alloc::flags::GFP_KERNEL, prelude::*, sync::Arc};

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

/// What a key currently gives access to. Fixed for user and DMA MRs until deregistration; a
/// fast-registration MR changes it with each REG_MR and invalidation.
#[derive(Clone, Copy)]
struct Binding {
    key: u32,
    valid: bool,
    access: u32,
    iova: u64,
    len: u64,
}

/// An access to an MR as a work request or a packet names it: through `key`, from PD `pdn`,
/// by this host's own work requests (an L_Key) or by the peer (an R_Key, `remote`), to the
/// `len` bytes at `va` (an SGE, or a RETH's whole message). Every use is checked again
/// against the MR's current binding, with the right its operation needs, so an access stops
/// working the moment its key is invalidated or its MR deregistered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    pub(crate) key: u32,
    pub(crate) pdn: u32,
    pub(crate) remote: bool,
    pub(crate) va: u64,
    pub(crate) len: u64,
}

/// What an access does to the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Write,
    Atomic,
}

impl Access {
    /// The `access::*` right an operation through this access needs.
    fn right(&self, op: Op) -> u32 {
        match (self.remote, op) {
            (false, Op::Read) => 0,
            (false, Op::Write | Op::Atomic) => access::LOCAL_WRITE,
            (true, Op::Read) => access::REMOTE_READ,
            (true, Op::Write) => access::REMOTE_WRITE,
            (true, Op::Atomic) => access::REMOTE_ATOMIC,
        }
    }
}

/// What the MR's lock protects: the binding and the memory itself.
struct MrState {
    bind: Binding,
    /// `None` once deregistered: [`Mr::revoke`] takes the memory out, so that it is released
    /// in deregistration's process context (unpinning process pages may sleep), never by the
    /// last reference a QP drops in softirq.
    mem: Option<MrMem>,
}

/// A registered memory region.
///
/// Its memory is reached only through the checked accessors below, each of which holds the
/// MR's lock while it copies: invalidation, REG_MR and deregistration take that lock, so
/// once they return no access through an old key is in progress or can start (a kernel user
/// may then reuse the pages at once; a process gets no more writes into memory it
/// deregistered, and its pages are unpinned when deregistration returns).
#[pin_data]
pub(crate) struct Mr {
    /// The key the table assigned (`index << 8 | tag`); a fast-registration MR's current key
    /// has the same index and the user's low byte.
    pub(crate) base_key: u32,
    pub(crate) pdn: u32,
    /// A fast-registration MR (its binding changes with REG_MR and invalidation).
    fast: bool,
    /// Taken in process context (registration, invalidation) and in softirq (packets).
    #[pin]
    st: SpinLockBh<MrState>,
}

/// Why an access to an MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No such key (or a stale one, or an invalidated or deregistered MR).
    Key,
    /// Another protection domain.
    Pd,
    /// The MR lacks the access right.
    Rights,
    /// Outside the MR, or outside the access's own range.
    Bounds,
    /// The operation does not apply to this kind of MR (or its state).
    State,
    /// The memory could not be accessed (misaligned atomic, unmapped kernel address).
    Fault,
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
        let fast = matches!(mem, MrMem::Fast(_));
        let bind = Binding {
            key,
            valid: !fast,
            access,
            iova,
            len,
        };
        Arc::pin_init(
            pin_init!(Self {
                base_key: key,
                pdn,
                fast,
                st <- crate::new_spinlock_bh!(MrState { bind, mem: Some(mem) }, "oxrdma_mr"),
            }),
            GFP_KERNEL,
        )
    }

    /// The byte offset in the MR of `[a.va + at, a.va + at + n)` if `b` allows `op` through
    /// the access `a` and that piece lies inside `a`'s own range.
    fn offset(&self, s: &MrState, a: &Access, op: Op, at: u64, n: u64) -> Result<usize, MrError> {
        if self.pdn != a.pdn {
            return Err(MrError::Pd);
        }
        let b = &s.bind;
        if !b.valid || b.key != a.key || s.mem.is_none() {
            return Err(MrError::Key);
        }
        let need = a.right(op);
        if b.access & need != need {
            return Err(MrError::Rights);
        }
        let off = a.va.checked_sub(b.iova).ok_or(MrError::Bounds)?;
        let end = off.checked_add(a.len).ok_or(MrError::Bounds)?;
        if end > b.len {
            return Err(MrError::Bounds);
        }
        let piece_end = at.checked_add(n).ok_or(MrError::Bounds)?;
        if piece_end > a.len {
            return Err(MrError::Bounds);
        }
        usize::try_from(off + at).map_err(|_| MrError::Bounds)
    }

    /// Checks `op` through the access `a` as a whole without touching memory (the first
    /// packet of a message checks the whole message).
    pub(crate) fn check(&self, a: &Access, op: Op) -> Result<(), MrError> {
        let s = self.st.lock();
        self.offset(&s, a, op, 0, 0).map(|_| ())
    }

    /// Copies `dst.len()` bytes from byte `at` of the access `a`.
    pub(crate) fn read(&self, a: &Access, at: u64, dst: &mut [u8]) -> Result<(), MrError> {
        let s = self.st.lock();
        let off = self.offset(&s, a, Op::Read, at, dst.len() as u64)?;
        mem(&s)?.read(off, dst).map_err(|_| MrError::Fault)
    }

    /// Calls `f` with a reference to each page piece of the `n` bytes at byte `at` of the
    /// access `a` (checked for reading), for a socket to send from: `Ok(false)` (and no call)
    /// if the MR is not process memory, whose pages can be referenced that way.
    pub(crate) fn page_ranges(
        &self,
        a: &Access,
        at: u64,
        n: usize,
        f: impl FnMut(PageRange),
    ) -> Result<bool, MrError> {
        let s = self.st.lock();
        let off = self.offset(&s, a, Op::Read, at, n as u64)?;
        match mem(&s)? {
            MrMem::User(m) => m
                .page_ranges(off, n, f)
                .map(|()| true)
                .map_err(|_| MrError::Fault),
            _ => Ok(false),
        }
    }

    /// Copies `src` to byte `at` of the access `a`.
    pub(crate) fn write(&self, a: &Access, at: u64, src: &[u8]) -> Result<(), MrError> {
        let s = self.st.lock();
        let off = self.offset(&s, a, Op::Write, at, src.len() as u64)?;
        mem(&s)?.write(off, src).map_err(|_| MrError::Fault)
    }

    /// An 8-byte compare-and-swap at the access `a` (of 8 bytes); returns the old value.
    pub(crate) fn compare_swap(&self, a: &Access, cmp: u64, swap: u64) -> Result<u64, MrError> {
        let s = self.st.lock();
        let off = self.offset(&s, a, Op::Atomic, 0, 8)?;
        mem(&s)?
            .compare_swap(off, cmp, swap)
            .map_err(|_| MrError::Fault)
    }

    /// An 8-byte fetch-and-add at the access `a` (of 8 bytes); returns the old value.
    pub(crate) fn fetch_add(&self, a: &Access, add: u64) -> Result<u64, MrError> {
        let s = self.st.lock();
        let off = self.offset(&s, a, Op::Atomic, 0, 8)?;
        mem(&s)?.fetch_add(off, add).map_err(|_| MrError::Fault)
    }

    /// Deregistration (process context): no key gives access any more, also through references
    /// still held by work in progress (a responder's read resource, a WRITE half received),
    /// and the memory is released here and now, whoever drops the last reference later.
    pub(crate) fn revoke(&self) {
        let mem = {
            let mut s = self.st.lock();
            s.bind.valid = false;
            s.mem.take()
        };
        drop(mem);
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
        if !self.fast {
            return Err(MrError::State);
        }
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        if key >> 8 != self.base_key >> 8 {
            return Err(MrError::Key);
        }
        let mut s = self.st.lock();
        let Some(MrMem::Fast(pages)) = &s.mem else {
            return Err(MrError::State);
        };
        if len > pages.mapped_len() || iova.checked_add(len).is_none() {
            return Err(MrError::Bounds);
        }
        if s.bind.valid {
            return Err(MrError::State);
        }
        s.bind = Binding {
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
        if !self.fast {
            return Err(MrError::State);
        }
        if self.pdn != pdn {
            return Err(MrError::Pd);
        }
        let mut s = self.st.lock();
        if s.bind.key != key {
            return Err(MrError::Key);
        }
        s.bind.valid = false;
        Ok(())
    }

    /// Whether this is a fast-registration MR.
    pub(crate) fn is_fast(&self) -> bool {
        self.fast
    }
}

/// The memory of a live MR (deregistration's check is `offset`'s; this only unwraps).
fn mem(s: &MrState) -> Result<&MrMem, MrError> {
    s.mem.as_ref().ok_or(MrError::Key)
}
