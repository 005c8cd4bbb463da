// SPDX-License-Identifier: GPL-2.0
//! Completion queues: the kernel produces CQEs into a ring the process polls.
//!
//! The kernel keeps its own producer index and reads the process's consumer index only
//! through [`RingView::accept_consumer`], so a process that scribbles over the ring header can
//! at worst lose its own completions (the CQ then reports an overflow: `IB_EVENT_CQ_ERR`).
//!
//! A kernel user's CQ is the same ring in kernel memory, polled by `ib_poll_cq` (any context,
//! hence the interrupt-safe lock); beside each slot it keeps the QP the completion belongs
//! to, which `ib_wc.qp` names.

use crate::ox::ida::IdaId;
use crate::ox::rdma::events::{CqEvents, QpEvents};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::rdma::wr::{NetworkType, Wc, WcOpcode, WcSink};
use crate::ox::sync::SpinLockIrq;
use crate::uapi::queue::{
    network_hdr, wc_opcode, Cqe, CQE_SIZE, WC_FLAG_GRH, WC_FLAG_WITH_IMM, WC_FLAG_WITH_INV,
};
use crate::uapi::ring::{
    ring_slots, RingView, RING_CONSUMER_OFFSET, RING_HEADER_SIZE, RING_PRODUCER_OFFSET,
};
use kernel::{alloc::flags::GFP_KERNEL, alloc::KVec, prelude::*, sync::Arc};

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
    /// Kernel CQs: the QP of the completion in each slot.
    qps: Option<KVec<Option<QpEvents>>>,
}

/// A CQ, shared by the QPs that complete into it.
#[pin_data]
pub(crate) struct CqInner {
    ring: Arc<RingBuf>,
    events: CqEvents,
    #[pin]
    st: SpinLockIrq<CqState>,
}

/// The driver data of a CQ object.
pub(crate) struct Cq {
    pub(crate) inner: Arc<CqInner>,
    /// Its number among the device's live CQs, which bounds how many there are.
    pub(crate) _id: IdaId,
}

impl CqInner {
    /// A CQ for at least `cqe` completions in `ring`-sized memory made by `alloc`; `kernel`:
    /// for a kernel user.
    pub(crate) fn new(
        cqe: u32,
        events: CqEvents,
        kernel: bool,
        alloc: impl FnOnce(usize) -> Result<(Arc<RingBuf>, u64)>,
    ) -> Result<(Arc<Self>, u32, u64, usize)> {
        let slots = ring_slots(cqe.max(1)).ok_or(EINVAL)?;
        let bytes = RING_HEADER_SIZE + slots as usize * CQE_SIZE;
        let qps = if kernel {
            let mut v = KVec::with_capacity(slots as usize, GFP_KERNEL)?;
            for _ in 0..slots {
                v.push(None, GFP_KERNEL)?;
            }
            Some(v)
        } else {
            None
        };
        let (ring, offset) = alloc(bytes)?;
        let len = ring.len();
        let cq = Arc::pin_init(
            pin_init!(Self {
                ring,
                events,
                st <- crate::new_spinlock_irq!(CqState {
                    view: RingView::new(slots),
                    arm: Arm::Off,
                    overflowed: false,
                    qps,
                }, "oxrdma_cq"),
            }),
            GFP_KERNEL,
        )?;
        Ok((cq, slots, offset, len))
    }

    /// Writes a completion of work of `qp`. `solicited`: it completes a receive of a
    /// solicited message.
    pub(crate) fn push(&self, cqe: &Cqe, solicited: bool, qp: &QpEvents) {
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
                    if let Some(t) = st.qps.as_mut() {
                        // Replaces a consumed slot's entry (the QP may be gone by now).
                        t[slot as usize] = Some(qp.clone());
                    }
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
            pr_warn!("CQ overflow, completion lost\n");
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

    /// Kernel CQs: moves completions into `out` while it has room.
    pub(crate) fn poll(&self, out: &mut WcSink<'_>) {
        let mut st = self.st.lock();
        let st = &mut *st;
        let Some(qps) = st.qps.as_mut() else {
            return; // a process's CQ: polled from its ring
        };
        while out.has_room() {
            let Some(slot) = st.view.peek() else { break };
            let mut b = [0u8; CQE_SIZE];
            let read = self
                .ring
                .read(RING_HEADER_SIZE + slot as usize * CQE_SIZE, &mut b);
            let qp = qps[slot as usize].take();
            st.view.consume();
            self.ring
                .store_release(RING_CONSUMER_OFFSET, st.view.consumer());
            let (Ok(()), Some(qp)) = (read, qp) else {
                continue;
            };
            let c = Cqe::from_bytes(&b);
            out.push(&Wc {
                wr_id: c.wr_id,
                status: c.status,
                opcode: wc_opcode_of(c.opcode),
                vendor_err: c.vendor_err,
                byte_len: c.byte_len,
                imm: (c.wc_flags & WC_FLAG_WITH_IMM != 0).then_some(c.imm_or_inv),
                invalidated: (c.wc_flags & WC_FLAG_WITH_INV != 0).then_some(c.imm_or_inv),
                qp: &qp,
                src_qp: c.src_qp,
                grh: c.wc_flags & WC_FLAG_GRH != 0,
                network: match c.network_hdr_type {
                    _ if c.wc_flags & WC_FLAG_GRH == 0 => None,
                    network_hdr::ROCE_V1 => Some(NetworkType::RoceV1),
                    network_hdr::IPV4 => Some(NetworkType::Ipv4),
                    network_hdr::IPV6 => Some(NetworkType::Ipv6),
                    _ => None,
                },
                smac: (c.smac != [0; 6]).then_some(c.smac),
                pkey_index: c.pkey_index,
                sl: c.sl,
            });
        }
    }
}

fn wc_opcode_of(op: u8) -> WcOpcode {
    match op {
        wc_opcode::RDMA_WRITE => WcOpcode::RdmaWrite,
        wc_opcode::RDMA_READ => WcOpcode::RdmaRead,
        wc_opcode::COMP_SWAP => WcOpcode::CompSwap,
        wc_opcode::FETCH_ADD => WcOpcode::FetchAdd,
        wc_opcode::LOCAL_INV => WcOpcode::LocalInv,
        wc_opcode::REG_MR => WcOpcode::RegMr,
        wc_opcode::RECV => WcOpcode::Recv,
        wc_opcode::RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
        _ => WcOpcode::Send,
    }
}
