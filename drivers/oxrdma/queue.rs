// SPDX-License-Identifier: GPL-2.0
//! The rings the process produces into: the send queue (SQ) and receive queues (a QP's RQ,
//! an SRQ). The kernel copies each slot out once, validates the copy and only then acts.
//!
//! A kernel user's queues are the same rings in kernel memory; its post calls produce into
//! them through [`post_entry`] and the engine consumes them exactly as a process's.

use crate::ox::rdma::events::{SrqEvent, SrqEvents};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::rdma::wr::{RecvWr, Sge as KSge};
use crate::ox::sync::SpinLockBh;
use crate::ox::sync::SpinLockIrq;
use crate::uapi::queue::{RecvWqe, SendWqe, Sge, RECV_WQE_SIZE, SEND_WQE_SIZE, SGE_SIZE};
use crate::uapi::ring::{
    RingView, RING_CONSUMER_OFFSET, RING_FLAGS_OFFSET, RING_FLAG_KERNEL_BUSY, RING_FLAG_QP_ERROR,
    RING_HEADER_SIZE, RING_PRODUCER_OFFSET,
};
use kernel::{alloc::flags::GFP_KERNEL, alloc::KVec, prelude::*, sync::Arc};

/// Most SGEs per WQE oxrdma grants.
pub(crate) const MAX_SGE: u32 = 16;
/// Most inline bytes per send WQE oxrdma grants.
pub(crate) const MAX_INLINE: u32 = 512;

/// Geometry of a ring.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) slots: u32,
    pub(crate) slot_size: u32,
}

impl Geometry {
    fn slot_offset(&self, slot: u32) -> usize {
        RING_HEADER_SIZE + slot as usize * self.slot_size as usize
    }
}

/// The producer's view of a ring a kernel user posts into. Posting may happen in any
/// context, concurrently: hence the interrupt-safe lock.
pub(crate) type PostView = SpinLockIrq<RingView>;

/// A [`PostView`] initialiser for a ring of `slots` slots.
pub(crate) fn post_view(slots: u32) -> impl PinInit<PostView> {
    crate::new_spinlock_irq!(RingView::new(slots), "oxrdma_post")
}

/// Produces one entry into a kernel user's ring: `fill(offset of the slot)` writes it, then it
/// is published. `ENOMEM` when the ring is full (what verbs users expect).
pub(crate) fn post_entry(
    view: &PostView,
    ring: &RingBuf,
    geo: &Geometry,
    fill: impl FnOnce(usize) -> Result,
) -> Result {
    let mut v = view.lock();
    // The consumer is the engine (this kernel), which only moves it forward.
    let _ = v.accept_consumer(ring.load_acquire(RING_CONSUMER_OFFSET));
    if v.room() == 0 {
        return Err(ENOMEM);
    }
    fill(geo.slot_offset(v.slot(v.producer())))?;
    v.produce();
    ring.store_release(RING_PRODUCER_OFFSET, v.producer());
    Ok(())
}

/// Writes a kernel user's SGEs as ring SGEs from `at` on.
pub(crate) fn write_sges(ring: &RingBuf, at: usize, sges: &[KSge]) -> Result {
    for (i, s) in sges.iter().enumerate() {
        let sge = Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
        ring.write(at + i * SGE_SIZE, &sge.to_bytes())?;
    }
    Ok(())
}

fn sge_from(b: &[u8]) -> Sge {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[0..8]);
    let mut l = [0u8; 4];
    l.copy_from_slice(&b[8..12]);
    let mut k = [0u8; 4];
    k.copy_from_slice(&b[12..16]);
    Sge {
        addr: u64::from_ne_bytes(a),
        length: u32::from_ne_bytes(l),
        lkey: u32::from_ne_bytes(k),
    }
}

/// Why a ring entry could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RingFault {
    /// The process published an impossible producer index.
    Index,
    /// The entry is malformed.
    Entry,
    /// Not the process's doing: the kernel could not allocate the entry's copy. The entry
    /// stays in the ring, to be taken again later.
    NoMemory,
}

/// A receive WQE copied out of a ring (taken in the receive softirq: no allocation).
pub(crate) struct RecvEntry {
    pub(crate) wr_id: u64,
    sges: [Sge; MAX_SGE as usize],
    num_sge: usize,
}

impl RecvEntry {
    /// No WQE yet: storage that [`RecvQueue::take_into`] fills.
    pub(crate) const fn empty() -> Self {
        Self {
            wr_id: 0,
            sges: [Sge {
                addr: 0,
                length: 0,
                lkey: 0,
            }; MAX_SGE as usize],
            num_sge: 0,
        }
    }

    /// Where the data goes.
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..self.num_sge]
    }

    /// Total bytes the SGEs can take.
    pub(crate) fn capacity(&self) -> u64 {
        self.sges().iter().map(|s| u64::from(s.length)).sum()
    }
}

/// A receive ring (a QP's RQ or an SRQ).
#[pin_data]
pub(crate) struct RecvQueue {
    ring: Arc<RingBuf>,
    geo: Geometry,
    max_sge: u32,
    events: Option<SrqEvents>,
    /// Taken by packet reception (softirq) and by the verbs calls.
    #[pin]
    st: SpinLockBh<RecvState>,
    #[pin]
    post: PostView,
}

struct RecvState {
    view: RingView,
    limit: u32,
    /// An SRQ found corrupt: in the error state for good (it raised its error event).
    failed: bool,
}

impl RecvQueue {
    pub(crate) fn new(
        ring: Arc<RingBuf>,
        geo: Geometry,
        max_sge: u32,
        events: Option<SrqEvents>,
        limit: u32,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ring,
                geo,
                max_sge,
                events,
                st <- crate::new_spinlock_bh!(
                    RecvState { view: RingView::new(geo.slots), limit, failed: false },
                    "oxrdma_rq"
                ),
                post <- post_view(geo.slots),
            }),
            GFP_KERNEL,
        )
    }

    fn refresh(&self, st: &mut RecvState) -> Result<(), RingFault> {
        let p = self.ring.load_acquire(RING_PRODUCER_OFFSET);
        st.view
            .accept_producer(p)
            .map(|_| ())
            .map_err(|_| RingFault::Index)
    }

    /// Whether a receive WQE is waiting.
    pub(crate) fn available(&self) -> Result<bool, RingFault> {
        let r = {
            let mut st = self.st.lock();
            self.usable(&st)
                .and_then(|()| self.refresh(&mut st))
                .map(|()| !st.view.is_empty())
        };
        r.map_err(|f| self.failed(f))
    }

    /// An SRQ found corrupt stays in the error state (IBA: only destroying it ends that),
    /// whatever the process writes into its ring afterwards.
    fn usable(&self, st: &RecvState) -> Result<(), RingFault> {
        if st.failed {
            Err(RingFault::Index)
        } else {
            Ok(())
        }
    }

    /// The process corrupted the ring (`f`). Each QP that takes from it fails; an SRQ goes to
    /// the error state for good and raises `IB_EVENT_SRQ_ERR`, once.
    fn failed(&self, f: RingFault) -> RingFault {
        if let Some(ev) = &self.events {
            let first = !core::mem::replace(&mut self.st.lock().failed, true);
            if first {
                ev.raise(SrqEvent::Error);
            }
        }
        f
    }

    /// Takes the next receive WQE into `out`, in place (of its SGEs, only the WQE's are
    /// written); whether there was one. On an error `out` holds nothing of use.
    pub(crate) fn take_into(&self, out: &mut RecvEntry) -> Result<bool, RingFault> {
        self.take_next(true, out)
    }

    /// Takes the next receive WQE, into storage of its own.
    pub(crate) fn take(&self) -> Result<Option<RecvEntry>, RingFault> {
        let mut e = RecvEntry::empty();
        Ok(self.take_into(&mut e)?.then_some(e))
    }

    /// Takes the next receive WQE into `out`; with `refresh`, after accepting the process's
    /// latest producer index, else only among the WQEs already accepted.
    fn take_next(&self, refresh: bool, out: &mut RecvEntry) -> Result<bool, RingFault> {
        let mut limit_hit = false;
        let r = self.take_locked(&mut self.st.lock(), refresh, &mut limit_hit, out);
        if limit_hit {
            if let Some(ev) = &self.events {
                ev.raise(SrqEvent::LimitReached);
            }
        }
        r.map_err(|f| self.failed(f))
    }

    /// [`RecvQueue::take_next`] under the lock; sets `limit_hit` when the take crossed the
    /// armed limit (which it disarms).
    fn take_locked(
        &self,
        st: &mut RecvState,
        refresh: bool,
        limit_hit: &mut bool,
        out: &mut RecvEntry,
    ) -> Result<bool, RingFault> {
        self.usable(st)?;
        if refresh {
            self.refresh(st)?;
        }
        let Some(slot) = st.view.peek() else {
            return Ok(false);
        };
        let at = self.geo.slot_offset(slot);
        let mut hdr = [0u8; RECV_WQE_SIZE];
        self.ring.read(at, &mut hdr).map_err(|_| RingFault::Entry)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(&hdr[0..8]);
        let mut n = [0u8; 4];
        n.copy_from_slice(&hdr[8..12]);
        let wqe = RecvWqe {
            wr_id: u64::from_ne_bytes(w),
            num_sge: u32::from_ne_bytes(n),
            reserved: 0,
        };
        if wqe.num_sge > self.max_sge || wqe.num_sge > MAX_SGE {
            return Err(RingFault::Entry);
        }
        let mut raw = [0u8; SGE_SIZE];
        for (i, sge) in out.sges.iter_mut().enumerate().take(wqe.num_sge as usize) {
            self.ring
                .read(at + RECV_WQE_SIZE + i * SGE_SIZE, &mut raw)
                .map_err(|_| RingFault::Entry)?;
            *sge = sge_from(&raw);
        }
        st.view.consume();
        self.ring
            .store_release(RING_CONSUMER_OFFSET, st.view.consumer());
        if st.limit != 0 && st.view.len() < st.limit {
            st.limit = 0;
            *limit_hit = true;
        }
        out.wr_id = wqe.wr_id;
        out.num_sge = wqe.num_sge as usize;
        Ok(true)
    }

    /// Posts a kernel user's receive WR.
    pub(crate) fn post(&self, wr: &RecvWr<'_>) -> Result {
        let n = u32::try_from(wr.sges.len()).map_err(|_| EINVAL)?;
        if n > self.max_sge {
            return Err(EINVAL);
        }
        post_entry(&self.post, &self.ring, &self.geo, |at| {
            let hdr = RecvWqe {
                wr_id: wr.wr_id,
                num_sge: n,
                reserved: 0,
            };
            self.ring.write(at, &hdr.to_bytes())?;
            write_sges(&self.ring, at + RECV_WQE_SIZE, wr.sges)
        })
    }

    /// Slots and SGEs per WQE.
    pub(crate) fn geometry(&self) -> (u32, u32) {
        (self.geo.slots, self.max_sge)
    }

    /// Whether this is an SRQ (shared by QPs), not a QP's own RQ.
    pub(crate) fn is_shared(&self) -> bool {
        self.events.is_some()
    }

    /// Arms the SRQ limit (0 disarms).
    pub(crate) fn set_limit(&self, limit: u32) {
        self.st.lock().limit = limit;
    }

    pub(crate) fn limit(&self) -> u32 {
        self.st.lock().limit
    }

    /// Tells the process whether the QP is in the error state (`RING_FLAG_QP_ERROR`: it then
    /// rings the doorbell after posting, so that what it posts is flushed too). Setting it is
    /// a full barrier: a [`RecvQueue::drain`] after it sees every receive posted before the
    /// process could see the flag.
    pub(crate) fn mark_error(&self, error: bool) {
        if error {
            self.ring.fetch_or(RING_FLAGS_OFFSET, RING_FLAG_QP_ERROR);
        } else {
            self.ring.fetch_clear(RING_FLAGS_OFFSET, RING_FLAG_QP_ERROR);
        }
    }

    /// Takes every WQE waiting now (flush on error): the producer index is read once, so a
    /// process that keeps posting cannot hold the caller here (at most one ring's worth per
    /// call; what it posts meanwhile is flushed by the next call).
    pub(crate) fn drain(&self, mut f: impl FnMut(u64)) {
        let waiting = {
            let mut st = self.st.lock();
            if self.refresh(&mut st).is_err() {
                return;
            }
            st.view.len()
        };
        let mut e = RecvEntry::empty();
        for _ in 0..waiting {
            match self.take_next(false, &mut e) {
                Ok(true) => f(e.wr_id),
                _ => break,
            }
        }
    }
}

/// Up to `N` values held in place, more in an allocation: a WQE's SGEs or inline bytes,
/// copied out of the ring without allocating for the common small WQE.
///
/// # Invariants
///
/// In `Here`, `len <= N` and the values are `head[..len]`.
pub(crate) enum Small<T, const N: usize> {
    /// At most `N` values, in place.
    Here { head: [T; N], len: u8 },
    /// More, allocated.
    Heap(KVec<T>),
}

impl<T: Copy + Default, const N: usize> Small<T, N> {
    /// Empty (no allocation).
    fn new() -> Self {
        Small::Here {
            head: [T::default(); N],
            len: 0,
        }
    }

    /// The values, leaving this empty (no allocation): to move them out of a borrowed WQE.
    pub(crate) fn take(&mut self) -> Self {
        core::mem::replace(self, Self::new())
    }

    /// `n` values that `fill` writes (default values before it), in place if they fit, else
    /// in an atomic allocation (the send side may run in softirq).
    fn filled(
        n: usize,
        fill: impl FnOnce(&mut [T]) -> Result<(), RingFault>,
    ) -> Result<Self, RingFault> {
        match u8::try_from(n) {
            Ok(len) if n <= N => {
                let mut head = [T::default(); N];
                fill(&mut head[..n])?;
                // INVARIANT: `len <= N`, the values in `head[..len]`.
                Ok(Small::Here { head, len })
            }
            _ => {
                let mut heap = KVec::from_elem(T::default(), n, GFP_ATOMIC)
                    .map_err(|_| RingFault::NoMemory)?;
                fill(&mut heap)?;
                Ok(Small::Heap(heap))
            }
        }
    }
}

impl<T, const N: usize> core::ops::Deref for Small<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Small::Here { head, len } => &head[..usize::from(*len)],
            Small::Heap(v) => v,
        }
    }
}

/// A send WQE's SGEs: two without an allocation.
pub(crate) type SendSges = Small<Sge, 2>;
/// A send WQE's inline bytes: 32 without an allocation.
pub(crate) type SendInline = Small<u8, 32>;

/// A send WQE copied out of the SQ ring, with its SGEs or inline data.
pub(crate) struct SendEntry {
    pub(crate) wqe: SendWqe,
    pub(crate) sges: SendSges,
    pub(crate) inline: SendInline,
}

impl SendEntry {
    /// The bytes the WQE's data covers: its inline bytes, or the sum of its SGEs' lengths.
    pub(crate) fn data_len(&self) -> u64 {
        if self.wqe.flags & crate::uapi::queue::WQE_FLAG_INLINE != 0 {
            self.inline.len() as u64
        } else {
            self.sges.iter().map(|s| u64::from(s.length)).sum()
        }
    }
}

/// The SQ ring (consumer side). The kernel's indices live in the QP's locked state.
pub(crate) struct SendRing {
    pub(crate) ring: Arc<RingBuf>,
    pub(crate) geo: Geometry,
}

impl SendRing {
    /// Accepts the process's producer index into `view`.
    pub(crate) fn refresh(&self, view: &mut RingView) -> Result<(), RingFault> {
        let p = self.ring.load_acquire(RING_PRODUCER_OFFSET);
        view.accept_producer(p)
            .map(|_| ())
            .map_err(|_| RingFault::Index)
    }

    /// Copies the entry at `slot`: its header, then `num_sge` SGEs or `inline_len` bytes,
    /// bounded by the slot size (in place when few, [`Small`], else in an atomic allocation:
    /// the send side may run in softirq).
    pub(crate) fn read(&self, slot: u32) -> Result<SendEntry, RingFault> {
        let at = self.geo.slot_offset(slot);
        let mut hdr = [0u8; SEND_WQE_SIZE];
        self.ring.read(at, &mut hdr).map_err(|_| RingFault::Entry)?;
        let wqe = SendWqe::from_bytes(&hdr);
        let body = self.geo.slot_size as usize - SEND_WQE_SIZE;
        let mut sges = Small::new();
        let mut inline = Small::new();
        // No allocation for a small entry, one at most for a large one.
        if wqe.flags & crate::uapi::queue::WQE_FLAG_INLINE != 0 {
            let n = wqe.inline_len as usize;
            if n > body {
                return Err(RingFault::Entry);
            }
            inline = Small::filled(n, |b| {
                self.ring
                    .read(at + SEND_WQE_SIZE, b)
                    .map_err(|_| RingFault::Entry)
            })?;
        } else {
            let n = wqe.num_sge as usize;
            if n * SGE_SIZE > body {
                return Err(RingFault::Entry);
            }
            sges = Small::filled(n, |out| {
                let mut raw = [0u8; SGE_SIZE];
                for (i, sge) in out.iter_mut().enumerate() {
                    self.ring
                        .read(at + SEND_WQE_SIZE + i * SGE_SIZE, &mut raw)
                        .map_err(|_| RingFault::Entry)?;
                    *sge = sge_from(&raw);
                }
                Ok(())
            })?;
        }
        Ok(SendEntry { wqe, sges, inline })
    }

    /// The `wr_id` of the entry at `slot` (0 if unreadable), for an error completion.
    pub(crate) fn wr_id_at(&self, slot: u32) -> u64 {
        let mut b = [0u8; 8];
        match self.ring.read(self.geo.slot_offset(slot), &mut b) {
            Ok(()) => u64::from_ne_bytes(b),
            Err(_) => 0,
        }
    }

    /// Publishes the kernel's consumer index: the process may reuse the slots before it.
    pub(crate) fn publish_consumer(&self, consumer: u32) {
        self.ring.store_release(RING_CONSUMER_OFFSET, consumer);
    }

    /// Marks the kernel busy with this queue (no doorbell needed).
    pub(crate) fn set_busy(&self) {
        self.ring.fetch_or(RING_FLAGS_OFFSET, RING_FLAG_KERNEL_BUSY);
    }

    /// Clears the busy mark (with a full barrier); the caller re-checks the producer after.
    pub(crate) fn clear_busy(&self) {
        self.ring
            .fetch_clear(RING_FLAGS_OFFSET, RING_FLAG_KERNEL_BUSY);
    }
}
