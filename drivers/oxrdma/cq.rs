// SPDX-License-Identifier: GPL-2.0
//! Completion queues: the kernel produces CQEs into a ring the process polls.
//!
//! The kernel keeps its own producer index and reads the process's consumer index only
//! through [`RingView::accept_consumer`], so a process that scribbles over the ring header can
//! at worst lose its own completions (the CQ then reports an overflow: `IB_EVENT_CQ_ERR`).

use crate::ox::rdma::mmap::RingBuf;
use crate::ox::rdma::verbs::CqEvents;
use crate::uapi::queue::{Cqe, CQE_SIZE};
use crate::uapi::ring::{
    ring_slots, RingView, RING_CONSUMER_OFFSET, RING_HEADER_SIZE, RING_PRODUCER_OFFSET,
};
use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

/// Arm state of the completion event.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arm {
    Off,
    Next,
    Solicited,
}

struct CqState {
    view: RingView,
    arm: Arm,
    overflowed: bool,
}

/// A CQ, shared by the QPs that complete into it.
#[pin_data]
pub(crate) struct CqInner {
    ring: Arc<RingBuf>,
    events: CqEvents,
    #[pin]
    st: Mutex<CqState>,
}

/// The driver data of a CQ object.
pub(crate) struct Cq(pub(crate) Arc<CqInner>);

impl CqInner {
    /// A CQ for at least `cqe` completions in `ring`-sized memory made by `alloc`.
    pub(crate) fn new(
        cqe: u32,
        events: CqEvents,
        alloc: impl FnOnce(usize) -> Result<(Arc<RingBuf>, u64)>,
    ) -> Result<(Arc<Self>, u32, u64, usize)> {
        let slots = ring_slots(cqe.max(1)).ok_or(EINVAL)?;
        let bytes = RING_HEADER_SIZE + slots as usize * CQE_SIZE;
        let (ring, offset) = alloc(bytes)?;
        let len = ring.len();
        let cq = Arc::pin_init(
            pin_init!(Self {
                ring,
                events,
                st <- new_mutex!(CqState {
                    view: RingView::new(slots),
                    arm: Arm::Off,
                    overflowed: false,
                }),
            }),
            GFP_KERNEL,
        )?;
        Ok((cq, slots, offset, len))
    }

    /// Writes a completion. `solicited`: it completes a receive of a solicited message.
    pub(crate) fn push(&self, cqe: &Cqe, solicited: bool) {
        let mut notify = false;
        let mut error = false;
        {
            let mut st = self.st.lock();
            let consumer = self.ring.load_acquire(RING_CONSUMER_OFFSET);
            let slot = match st.view.accept_consumer(consumer) {
                Ok(_) if !st.overflowed => st.view.produce(),
                _ => None,
            };
            match slot {
                Some(slot) => {
                    let at = RING_HEADER_SIZE + slot as usize * CQE_SIZE;
                    if self.ring.write(at, &cqe.to_bytes()).is_ok() {
                        self.ring
                            .store_release(RING_PRODUCER_OFFSET, st.view.producer());
                    }
                    notify = match st.arm {
                        Arm::Next => true,
                        Arm::Solicited => solicited || cqe.status != 0,
                        Arm::Off => false,
                    };
                    if notify {
                        st.arm = Arm::Off;
                    }
                }
                None => {
                    // Full, or the process published an impossible consumer index.
                    error = !st.overflowed;
                    st.overflowed = true;
                }
            }
        }
        if error {
            pr_warn!("oxrdma: CQ overflow, completion lost\n");
            self.events.error();
        }
        if notify {
            self.events.completion();
        }
    }

    /// Arms the completion event; returns whether completions are waiting.
    pub(crate) fn arm(&self, solicited_only: bool) -> bool {
        let mut st = self.st.lock();
        st.arm = if solicited_only {
            Arm::Solicited
        } else {
            Arm::Next
        };
        let consumer = self.ring.load_acquire(RING_CONSUMER_OFFSET);
        let _ = st.view.accept_consumer(consumer);
        !st.view.is_empty()
    }
}
