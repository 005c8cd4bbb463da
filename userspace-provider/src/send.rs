// SPDX-License-Identifier: GPL-2.0
//! The send queue: `ibv_send_wr` to send slots, and the doorbell decision.
//!
//! A send slot is a [`SendWqe`] header followed by the SGEs or the inline bytes
//! (`oxrdma_uapi::queue`). The provider builds each slot in a scratch buffer
//! ([`encode_send`]), refuses what the kernel's own [`SendWqe::validate`] would refuse (so a
//! bad work request fails `ibv_post_send` instead of breaking the QP), copies the slot into
//! the ring, and after the whole list publishes the producer index; the kernel is woken only
//! when it is not already busy with the queue ([`SendQueue::finish`]).
//!
//! The `ibv_wr_*` API (`ibv_qp_ex`) builds the same slots: an opcode call
//! ([`SendQueue::wr_begin`]) starts a work request, `ibv_wr_set_sge*` /
//! `ibv_wr_set_inline_data*` give its data, and the next opcode call or `ibv_wr_complete`
//! ([`SendQueue::wr_complete`]) writes it. Nothing is published before `ibv_wr_complete`, which
//! then follows the same doorbell rule; an invalid work request anywhere in the batch discards
//! the whole batch, as does `ibv_wr_abort`.

use oxrdma_uapi::queue::{
    SendWqe, Sge, WrOpcode, SEND_WQE_SIZE, SGE_SIZE, WQE_FLAG_FENCE, WQE_FLAG_INLINE,
    WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED,
};
use oxrdma_uapi::ring::RING_FLAG_KERNEL_BUSY;

use crate::ring::{GeometryError, MappedRing, PostError, ProducerRing};
use crate::sys;

/// The RDMA member of `ibv_send_wr::wr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RdmaFields {
    /// `wr.rdma.remote_addr`.
    pub(crate) remote_addr: u64,
    /// `wr.rdma.rkey`.
    pub(crate) rkey: u32,
}

/// The atomic member of `ibv_send_wr::wr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AtomicFields {
    /// `wr.atomic.remote_addr`.
    pub(crate) remote_addr: u64,
    /// `wr.atomic.compare_add`.
    pub(crate) compare_add: u64,
    /// `wr.atomic.swap`.
    pub(crate) swap: u64,
    /// `wr.atomic.rkey`.
    pub(crate) rkey: u32,
}

/// The UD member of `ibv_send_wr::wr`, with the address handle as the kernel's AH number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UdFields {
    /// The AH's number (`CreateAhResp::ah_num`).
    pub(crate) ah_num: u32,
    /// `wr.ud.remote_qpn`.
    pub(crate) remote_qpn: u32,
    /// `wr.ud.remote_qkey`.
    pub(crate) remote_qkey: u32,
}

/// Which reading of the `ibv_send_wr::wr` union a work request uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// None (SEND on a connected QP, LOCAL_INV, unknown opcodes).
    None,
    /// `wr.rdma`.
    Rdma,
    /// `wr.atomic`.
    Atomic,
    /// `wr.ud`.
    Ud,
}

/// The union member that work requests of `opcode` on a (UD or connected) QP fill in; the
/// FFI layer reads only that one (the others may be uninitialised).
pub(crate) fn target_kind(opcode: u32, ud: bool) -> TargetKind {
    let Some(op) = u8::try_from(opcode).ok().and_then(WrOpcode::from_u8) else {
        return TargetKind::None;
    };
    if ud {
        TargetKind::Ud
    } else if op.is_atomic() {
        TargetKind::Atomic
    } else if op.is_remote() {
        TargetKind::Rdma
    } else {
        TargetKind::None
    }
}

/// Whether work requests of `opcode` fill in `imm_data` / `invalidate_rkey`.
pub(crate) fn uses_imm_or_inv(opcode: u32) -> bool {
    matches!(
        u8::try_from(opcode).ok().and_then(WrOpcode::from_u8),
        Some(
            WrOpcode::SendWithImm
                | WrOpcode::RdmaWriteWithImm
                | WrOpcode::SendWithInv
                | WrOpcode::LocalInv
        )
    )
}

/// The `ibv_send_wr::wr` member a work request uses ([`target_kind`]), read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// No remote address.
    None,
    /// `wr.rdma`.
    Rdma(RdmaFields),
    /// `wr.atomic`.
    Atomic(AtomicFields),
    /// `wr.ud`.
    Ud(UdFields),
}

/// One `ibv_send_wr`, as plain values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendWr<'a> {
    /// `wr_id`.
    pub(crate) wr_id: u64,
    /// `opcode` (`IBV_WR_*`).
    pub(crate) opcode: u32,
    /// `send_flags` (`IBV_SEND_*`).
    pub(crate) send_flags: u32,
    /// `imm_data` / `invalidate_rkey` (the union's bits, unchanged) where
    /// [`uses_imm_or_inv`], else 0.
    pub(crate) imm_or_inv: u32,
    /// The `wr` member [`target_kind`] names.
    pub(crate) target: Target,
    /// `sg_list[..num_sge]`.
    pub(crate) sges: &'a [Sge],
}

/// What a send queue was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendCaps {
    /// `cap.max_send_sge`.
    pub(crate) max_sge: u32,
    /// `cap.max_inline_data`.
    pub(crate) max_inline: u32,
    /// `sq_sig_all`: every WQE is signaled.
    pub(crate) sig_all: bool,
    /// A UD QP: `wr.ud` addresses the destination.
    pub(crate) ud: bool,
}

impl SendCaps {
    /// The least slot size these capabilities need.
    pub(crate) fn min_slot_size(&self) -> u64 {
        let sges = u64::from(self.max_sge) * SGE_SIZE as u64;
        SEND_WQE_SIZE as u64 + sges.max(u64::from(self.max_inline))
    }
}

/// Whether the opcode sends local data to the peer (and so may carry it inline).
fn data_out(op: WrOpcode) -> bool {
    matches!(
        op,
        WrOpcode::Send
            | WrOpcode::SendWithImm
            | WrOpcode::SendWithInv
            | WrOpcode::RdmaWrite
            | WrOpcode::RdmaWriteWithImm
    )
}

/// Writes the send slot for `wr` into `slot` (at least the header's size); returns the bytes
/// used. `gather` copies the work request's SGE data into the buffer it is given (exactly the
/// SGEs' total length); it is called only for inline work requests.
pub(crate) fn encode_send(
    wr: &SendWr<'_>,
    caps: &SendCaps,
    slot: &mut [u8],
    gather: impl FnOnce(&mut [u8]),
) -> Result<usize, PostError> {
    let opcode = u8::try_from(wr.opcode)
        .ok()
        .and_then(WrOpcode::from_u8)
        .ok_or(PostError::Invalid)?;
    let mut w = SendWqe {
        wr_id: wr.wr_id,
        opcode: opcode as u8,
        ..Default::default()
    };
    let f = wr.send_flags;
    if f & sys::ibv_send_flags_IBV_SEND_SIGNALED != 0 || caps.sig_all {
        w.flags |= WQE_FLAG_SIGNALED;
    }
    if f & sys::ibv_send_flags_IBV_SEND_SOLICITED != 0 {
        w.flags |= WQE_FLAG_SOLICITED;
    }
    if f & sys::ibv_send_flags_IBV_SEND_FENCE != 0 {
        w.flags |= WQE_FLAG_FENCE;
    }
    // Like other providers, IBV_SEND_INLINE is ignored where no local data goes out
    // (reads, atomics, invalidate): their SGEs describe where results land.
    let inline = f & sys::ibv_send_flags_IBV_SEND_INLINE != 0 && data_out(opcode);
    if matches!(
        opcode,
        WrOpcode::SendWithImm
            | WrOpcode::RdmaWriteWithImm
            | WrOpcode::SendWithInv
            | WrOpcode::LocalInv
    ) {
        w.imm_or_inv = wr.imm_or_inv;
    }
    if opcode == WrOpcode::LocalInv {
        w.rkey = wr.imm_or_inv;
    }
    match wr.target {
        Target::None => {}
        Target::Rdma(r) => {
            w.remote_addr = r.remote_addr;
            w.rkey = r.rkey;
        }
        Target::Atomic(a) => {
            w.remote_addr = a.remote_addr;
            w.rkey = a.rkey;
            w.compare_add = a.compare_add;
            w.swap = a.swap;
        }
        Target::Ud(u) => {
            w.ah = u.ah_num;
            w.remote_qpn = u.remote_qpn;
            w.remote_qkey = u.remote_qkey;
        }
    }

    let body = &mut slot[SEND_WQE_SIZE..];
    let used = if inline {
        let total: u64 = wr.sges.iter().map(|s| u64::from(s.length)).sum();
        if total > u64::from(caps.max_inline) || total > body.len() as u64 {
            return Err(PostError::Invalid);
        }
        w.flags |= WQE_FLAG_INLINE;
        w.inline_len = total as u32;
        gather(&mut body[..total as usize]);
        total as usize
    } else if opcode.has_data() {
        let n = wr.sges.len();
        if n > caps.max_sge as usize || n * SGE_SIZE > body.len() {
            return Err(PostError::Invalid);
        }
        // Fits in u8: at most max_sge, and validate() below checks against that as a u8.
        w.num_sge = u8::try_from(n).map_err(|_| PostError::Invalid)?;
        for (dst, s) in body.chunks_exact_mut(SGE_SIZE).zip(wr.sges) {
            dst.copy_from_slice(&s.to_bytes());
        }
        n * SGE_SIZE
    } else {
        if wr.sges.len() > caps.max_sge as usize {
            return Err(PostError::Invalid);
        }
        0
    };
    // Exactly the kernel's check: never publish a WQE it would refuse.
    let max_sge = u8::try_from(caps.max_sge).unwrap_or(u8::MAX);
    w.validate(max_sge, caps.max_inline)
        .map_err(|_| PostError::Invalid)?;
    slot[..SEND_WQE_SIZE].copy_from_slice(&w.to_bytes());
    Ok(SEND_WQE_SIZE + used)
}

/// The `ibv_qp_create_send_ops_flags` (`IBV_QP_EX_WITH_*`) the provider implements: the
/// opcodes of [`WrOpcode`]. Memory windows, TSO, atomic write and flush are not available.
pub(crate) const SUPPORTED_SEND_OPS: u64 =
    (sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV) as u64;

/// An `ibv_wr_*` opcode call: everything of a work request but its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WrHeader {
    /// `ibv_qp_ex::wr_id` at the call.
    pub(crate) wr_id: u64,
    /// The opcode (`IBV_WR_*`) the call stands for.
    pub(crate) opcode: u32,
    /// `ibv_qp_ex::wr_flags` at the call (`IBV_SEND_INLINE` there is ignored: inline data comes
    /// from `ibv_wr_set_inline_data*`).
    pub(crate) send_flags: u32,
    /// The immediate (network-order bits) or the R_Key to invalidate, else 0.
    pub(crate) imm_or_inv: u32,
    /// Remote address and key, or atomic operands.
    pub(crate) target: Target,
}

/// Where the data of the work request being built comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WrData {
    /// None given (yet).
    None,
    /// `ex_sges`.
    Sges,
    /// `ex_inline`.
    Inline,
}

/// The `ibv_wr_*` batch in progress.
#[derive(Debug, Default)]
struct Batch {
    /// The work request being built (its data in `ex_sges`/`ex_inline`).
    pending: Option<(WrHeader, WrData)>,
    /// The first error of the batch.
    err: Option<PostError>,
}

/// A QP's send queue: the producer side of the SQ ring and a slot-sized scratch buffer.
#[derive(Debug)]
pub(crate) struct SendQueue {
    ring: ProducerRing,
    caps: SendCaps,
    scratch: Vec<u8>,
    batch: Batch,
    ex_sges: Vec<Sge>,
    ex_inline: Vec<u8>,
}

impl SendQueue {
    /// The queue over its mapped ring, whose slots must hold what `caps` allows.
    pub(crate) fn new(ring: MappedRing, caps: SendCaps) -> Result<Self, GeometryError> {
        ring.require_slot_size(caps.min_slot_size())?;
        let scratch = vec![0; ring.slot_size()];
        Ok(Self {
            ring: ProducerRing::new(ring),
            caps,
            scratch,
            batch: Batch::default(),
            ex_sges: Vec::new(),
            ex_inline: Vec::new(),
        })
    }

    /// The granted capabilities.
    pub(crate) fn caps(&self) -> SendCaps {
        self.caps
    }

    /// Writes one work request into the next free slot (not yet published).
    pub(crate) fn post(
        &mut self,
        wr: &SendWr<'_>,
        gather: impl FnOnce(&mut [u8]),
    ) -> Result<(), PostError> {
        let used = encode_send(wr, &self.caps, &mut self.scratch, gather)?;
        let index = self.ring.reserve()?;
        self.ring.ring().write_slot(index, &self.scratch[..used]);
        self.ring.commit();
        Ok(())
    }

    /// Publishes what [`Self::post`] wrote; `true` if the doorbell must be rung: there was
    /// something new, and after a sequentially consistent fence the kernel does not say it
    /// is busy with the queue.
    pub(crate) fn finish(&mut self) -> bool {
        self.ring.publish() && self.ring.ring().flags_after_fence() & RING_FLAG_KERNEL_BUSY == 0
    }

    /// `ibv_wr_start`: a new, empty batch.
    pub(crate) fn wr_start(&mut self) {
        self.ring.rollback();
        self.batch = Batch::default();
    }

    /// Records the batch's first error.
    pub(crate) fn wr_fail(&mut self, e: PostError) {
        self.batch.err.get_or_insert(e);
    }

    /// Writes the work request being built, if any, into the ring (unpublished).
    fn wr_flush(&mut self) {
        let Some((hdr, data)) = self.batch.pending.take() else {
            return;
        };
        if self.batch.err.is_some() {
            return;
        }
        let sges = core::mem::take(&mut self.ex_sges);
        let inline = core::mem::take(&mut self.ex_inline);
        let mut send_flags = hdr.send_flags & !sys::ibv_send_flags_IBV_SEND_INLINE;
        let one_len;
        let list: &[Sge] = match data {
            WrData::None => &[],
            WrData::Sges => &sges,
            WrData::Inline => {
                // encode_send takes inline data as SGE lengths plus a gather of the bytes.
                send_flags |= sys::ibv_send_flags_IBV_SEND_INLINE;
                one_len = [Sge {
                    addr: 0,
                    length: u32::try_from(inline.len()).unwrap_or(u32::MAX),
                    lkey: 0,
                }];
                &one_len
            }
        };
        let inline_ok = data != WrData::Inline
            || u8::try_from(hdr.opcode)
                .ok()
                .and_then(WrOpcode::from_u8)
                .is_some_and(data_out);
        let r = if inline_ok {
            let wr = SendWr {
                wr_id: hdr.wr_id,
                opcode: hdr.opcode,
                send_flags,
                imm_or_inv: hdr.imm_or_inv,
                target: hdr.target,
                sges: list,
            };
            self.post(&wr, |out| out.copy_from_slice(&inline))
        } else {
            Err(PostError::Invalid)
        };
        self.ex_sges = sges;
        self.ex_inline = inline;
        if let Err(e) = r {
            self.wr_fail(e);
        }
    }

    /// `ibv_wr_set_ud_addr`: the destination of the (UD) work request being built.
    pub(crate) fn wr_set_ud(&mut self, ud: UdFields) {
        match self.batch.pending.as_mut() {
            Some((hdr, _)) if self.caps.ud => hdr.target = Target::Ud(ud),
            _ => self.wr_fail(PostError::Invalid),
        }
    }

    /// An opcode call (`ibv_wr_send`, `ibv_wr_rdma_write`, ...): writes the previous work
    /// request and starts this one, without data until `ibv_wr_set_*`.
    pub(crate) fn wr_begin(&mut self, hdr: WrHeader) {
        self.wr_flush();
        self.ex_sges.clear();
        self.ex_inline.clear();
        self.batch.pending = Some((hdr, WrData::None));
    }

    /// `ibv_wr_set_sge` / `ibv_wr_set_sge_list`: the SGEs of the work request being built.
    pub(crate) fn wr_set_sges(&mut self, sges: &[Sge]) {
        let Some((_, data)) = self.batch.pending.as_mut() else {
            return self.wr_fail(PostError::Invalid);
        };
        *data = WrData::Sges;
        self.ex_sges.clear();
        self.ex_sges.extend_from_slice(sges);
    }

    /// `ibv_wr_set_inline_data` / `_list`: the inline data of the work request being built,
    /// in pieces (each copied now, as the verbs require). Refused beyond `max_inline_data`.
    pub(crate) fn wr_set_inline<'a>(&mut self, parts: impl IntoIterator<Item = &'a [u8]>) {
        let Some((_, data)) = self.batch.pending.as_mut() else {
            return self.wr_fail(PostError::Invalid);
        };
        *data = WrData::Inline;
        self.ex_inline.clear();
        let max = self.caps.max_inline as usize;
        for p in parts {
            if p.len() > max - self.ex_inline.len() {
                return self.wr_fail(PostError::Invalid);
            }
            self.ex_inline.extend_from_slice(p);
        }
    }

    /// `ibv_wr_complete`: writes the last work request and publishes the batch; `Ok(true)` if
    /// the doorbell must be rung ([`Self::finish`]). On an error in the batch, nothing of it
    /// is published.
    pub(crate) fn wr_complete(&mut self) -> Result<bool, PostError> {
        self.wr_flush();
        if let Some(e) = core::mem::take(&mut self.batch).err {
            self.ring.rollback();
            return Err(e);
        }
        Ok(self.finish())
    }

    /// `ibv_wr_abort`: discards the batch.
    pub(crate) fn wr_abort(&mut self) {
        self.wr_start();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::ring::{RING_CONSUMER_OFFSET, RING_FLAGS_OFFSET};

    const CAPS: SendCaps = SendCaps {
        max_sge: 4,
        max_inline: 64,
        sig_all: false,
        ud: false,
    };

    fn sge(addr: u64, length: u32) -> Sge {
        Sge {
            addr,
            length,
            lkey: 0x77,
        }
    }

    fn wr<'a>(opcode: u32, sges: &'a [Sge]) -> SendWr<'a> {
        SendWr {
            wr_id: 42,
            opcode,
            send_flags: 0,
            imm_or_inv: 0,
            target: Target::None,
            sges,
        }
    }

    fn no_gather(_: &mut [u8]) {
        panic!("gather called for a non-inline WR");
    }

    fn encode(w: &SendWr<'_>, caps: &SendCaps) -> Result<(SendWqe, Vec<u8>), PostError> {
        let mut slot = vec![0u8; 256];
        let n = encode_send(w, caps, &mut slot, |b| b.fill(0xab))?;
        let hdr = SendWqe::from_bytes(slot[..SEND_WQE_SIZE].try_into().unwrap());
        Ok((hdr, slot[SEND_WQE_SIZE..n].to_vec()))
    }

    #[test]
    fn opcode_numbers_are_libibverbs() {
        for (ours, theirs) in [
            (WrOpcode::RdmaWrite, sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE),
            (
                WrOpcode::RdmaWriteWithImm,
                sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
            ),
            (WrOpcode::Send, sys::ibv_wr_opcode_IBV_WR_SEND),
            (
                WrOpcode::SendWithImm,
                sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
            ),
            (WrOpcode::RdmaRead, sys::ibv_wr_opcode_IBV_WR_RDMA_READ),
            (
                WrOpcode::AtomicCmpAndSwp,
                sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP,
            ),
            (
                WrOpcode::AtomicFetchAndAdd,
                sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
            ),
            (WrOpcode::LocalInv, sys::ibv_wr_opcode_IBV_WR_LOCAL_INV),
            (
                WrOpcode::SendWithInv,
                sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV,
            ),
        ] {
            assert_eq!(u32::from(ours as u8), theirs);
        }
    }

    #[test]
    fn union_member_by_opcode_and_qp_type() {
        use sys::*;
        let k = target_kind;
        assert_eq!(k(ibv_wr_opcode_IBV_WR_SEND, false), TargetKind::None);
        assert_eq!(
            k(ibv_wr_opcode_IBV_WR_SEND_WITH_INV, false),
            TargetKind::None
        );
        assert_eq!(k(ibv_wr_opcode_IBV_WR_LOCAL_INV, false), TargetKind::None);
        assert_eq!(k(ibv_wr_opcode_IBV_WR_RDMA_WRITE, false), TargetKind::Rdma);
        assert_eq!(
            k(ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM, false),
            TargetKind::Rdma
        );
        assert_eq!(k(ibv_wr_opcode_IBV_WR_RDMA_READ, false), TargetKind::Rdma);
        assert_eq!(
            k(ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP, false),
            TargetKind::Atomic
        );
        assert_eq!(
            k(ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD, false),
            TargetKind::Atomic
        );
        assert_eq!(k(ibv_wr_opcode_IBV_WR_SEND, true), TargetKind::Ud);
        assert_eq!(k(ibv_wr_opcode_IBV_WR_BIND_MW, false), TargetKind::None);
        assert_eq!(k(u32::MAX, true), TargetKind::None);
        assert!(uses_imm_or_inv(ibv_wr_opcode_IBV_WR_SEND_WITH_IMM));
        assert!(uses_imm_or_inv(ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM));
        assert!(uses_imm_or_inv(ibv_wr_opcode_IBV_WR_SEND_WITH_INV));
        assert!(uses_imm_or_inv(ibv_wr_opcode_IBV_WR_LOCAL_INV));
        assert!(!uses_imm_or_inv(ibv_wr_opcode_IBV_WR_SEND));
        assert!(!uses_imm_or_inv(ibv_wr_opcode_IBV_WR_RDMA_READ));
    }

    #[test]
    fn send_with_sges() {
        let sges = [sge(0x1000, 10), sge(0x2000, 20)];
        let mut w = wr(sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM, &sges);
        w.send_flags =
            sys::ibv_send_flags_IBV_SEND_SIGNALED | sys::ibv_send_flags_IBV_SEND_SOLICITED;
        w.imm_or_inv = u32::from_ne_bytes([1, 2, 3, 4]);
        let mut slot = vec![0u8; 128];
        let n = encode_send(&w, &CAPS, &mut slot, no_gather).unwrap();
        assert_eq!(n, 64 + 32);
        let h = SendWqe::from_bytes(slot[..64].try_into().unwrap());
        assert_eq!(
            h,
            SendWqe {
                wr_id: 42,
                opcode: WrOpcode::SendWithImm as u8,
                flags: WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED,
                num_sge: 2,
                imm_or_inv: u32::from_ne_bytes([1, 2, 3, 4]),
                ..Default::default()
            }
        );
        assert_eq!(&slot[64..80], &sges[0].to_bytes());
        assert_eq!(&slot[80..96], &sges[1].to_bytes());
    }

    #[test]
    fn rdma_atomic_and_ud_fields() {
        let one = [sge(0x1000, 8)];
        let mut w = wr(sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE, &one);
        w.send_flags = sys::ibv_send_flags_IBV_SEND_FENCE;
        w.target = Target::Rdma(RdmaFields {
            remote_addr: 0xaaaa_0000,
            rkey: 0x1234,
        });
        w.imm_or_inv = 0xffff;
        let (h, _) = encode(&w, &CAPS).unwrap();
        assert_eq!(
            (h.remote_addr, h.rkey, h.flags),
            (0xaaaa_0000, 0x1234, WQE_FLAG_FENCE)
        );
        assert_eq!(h.imm_or_inv, 0, "no immediate for a plain write");

        let mut a = wr(sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP, &one);
        let at = AtomicFields {
            remote_addr: 0x8000,
            compare_add: 1,
            swap: 2,
            rkey: 0x99,
        };
        a.target = Target::Atomic(at);
        let (h, _) = encode(&a, &CAPS).unwrap();
        assert_eq!(
            (h.remote_addr, h.rkey, h.compare_add, h.swap, h.num_sge),
            (0x8000, 0x99, 1, 2, 1)
        );
        // Misaligned atomics and atomics without exactly one SGE: refused like the kernel.
        a.target = Target::Atomic(AtomicFields {
            remote_addr: 0x8004,
            ..at
        });
        assert_eq!(encode(&a, &CAPS).unwrap_err(), PostError::Invalid);
        a.target = Target::Atomic(at);
        a.sges = &[];
        assert_eq!(encode(&a, &CAPS).unwrap_err(), PostError::Invalid);

        let mut u = wr(sys::ibv_wr_opcode_IBV_WR_SEND, &one);
        u.target = Target::Ud(UdFields {
            ah_num: 0x1203,
            remote_qpn: 0x11,
            remote_qkey: 0x1111_0000,
        });
        let (h, _) = encode(&u, &CAPS).unwrap();
        assert_eq!(
            (h.remote_qpn, h.remote_qkey, h.ah),
            (0x11, 0x1111_0000, 0x1203)
        );

        let mut inv = wr(sys::ibv_wr_opcode_IBV_WR_LOCAL_INV, &one);
        inv.imm_or_inv = 0x4455;
        let (h, body) = encode(&inv, &CAPS).unwrap();
        assert_eq!((h.rkey, h.imm_or_inv, h.num_sge), (0x4455, 0x4455, 0));
        assert!(body.is_empty());

        let mut si = wr(sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV, &one);
        si.imm_or_inv = 0x66;
        let (h, _) = encode(&si, &CAPS).unwrap();
        assert_eq!((h.imm_or_inv, h.rkey), (0x66, 0));
    }

    #[test]
    fn sig_all_signals_everything() {
        let caps = SendCaps {
            sig_all: true,
            ..CAPS
        };
        let (h, _) = encode(&wr(sys::ibv_wr_opcode_IBV_WR_SEND, &[]), &caps).unwrap();
        assert_eq!(h.flags, WQE_FLAG_SIGNALED);
        let (h, _) = encode(&wr(sys::ibv_wr_opcode_IBV_WR_SEND, &[]), &CAPS).unwrap();
        assert_eq!(h.flags, 0);
    }

    #[test]
    fn inline_data() {
        let sges = [sge(1, 10), sge(2, 6)];
        let mut w = wr(sys::ibv_wr_opcode_IBV_WR_SEND, &sges);
        w.send_flags = sys::ibv_send_flags_IBV_SEND_INLINE;
        let (h, body) = encode(&w, &CAPS).unwrap();
        assert_eq!((h.flags, h.inline_len, h.num_sge), (WQE_FLAG_INLINE, 16, 0));
        assert_eq!(body, vec![0xab; 16]);
        // Over max_inline_data.
        let big = [sge(1, 40), sge(2, 25)];
        w.sges = &big;
        assert_eq!(encode(&w, &CAPS).unwrap_err(), PostError::Invalid);
        // Huge lengths do not overflow.
        let huge = [sge(1, u32::MAX), sge(2, u32::MAX)];
        w.sges = &huge;
        assert_eq!(encode(&w, &CAPS).unwrap_err(), PostError::Invalid);
        // Ignored for a read: SGEs instead.
        let mut r = wr(sys::ibv_wr_opcode_IBV_WR_RDMA_READ, &sges);
        r.send_flags = sys::ibv_send_flags_IBV_SEND_INLINE;
        let mut slot = vec![0u8; 128];
        let n = encode_send(&r, &CAPS, &mut slot, no_gather).unwrap();
        let h = SendWqe::from_bytes(slot[..64].try_into().unwrap());
        assert_eq!((h.flags, h.num_sge, n), (0, 2, 96));
    }

    #[test]
    fn refuses_unknown_opcodes_and_too_many_sges() {
        for op in [
            sys::ibv_wr_opcode_IBV_WR_BIND_MW,
            sys::ibv_wr_opcode_IBV_WR_TSO,
            sys::ibv_wr_opcode_IBV_WR_DRIVER1,
            sys::ibv_wr_opcode_IBV_WR_ATOMIC_WRITE,
            256 + 2,
            u32::MAX,
        ] {
            assert_eq!(encode(&wr(op, &[]), &CAPS).unwrap_err(), PostError::Invalid);
        }
        let five = [sge(0, 1); 5];
        assert_eq!(
            encode(&wr(sys::ibv_wr_opcode_IBV_WR_SEND, &five), &CAPS).unwrap_err(),
            PostError::Invalid
        );
        // A slot too small for the SGEs (caps larger than the slot): refused, no panic.
        let mut small = vec![0u8; 64 + 16];
        assert_eq!(
            encode_send(
                &wr(sys::ibv_wr_opcode_IBV_WR_SEND, &five[..2]),
                &CAPS,
                &mut small,
                no_gather
            ),
            Err(PostError::Invalid)
        );
    }

    #[test]
    fn queue_posts_publishes_and_decides_the_doorbell() {
        let ring = MappedRing::for_test(2, 128);
        let mut q = SendQueue::new(ring, CAPS).unwrap();
        let sges = [sge(0x1000, 4)];
        let w = wr(sys::ibv_wr_opcode_IBV_WR_SEND, &sges);
        assert!(!q.finish(), "nothing posted, no doorbell");
        q.post(&w, no_gather).unwrap();
        q.post(&w, no_gather).unwrap();
        assert_eq!(q.post(&w, no_gather), Err(PostError::Full));
        // Not published before finish.
        assert_eq!(q.ring.ring().producer(), 0);
        assert!(q.finish());
        assert_eq!(q.ring.ring().producer(), 2);
        let mut b = [0u8; 64];
        q.ring.ring().read_slot(1, &mut b);
        assert_eq!(SendWqe::from_bytes(&b).wr_id, 42);
        // The kernel is busy: publish without a doorbell.
        q.ring.ring().kernel_store(RING_CONSUMER_OFFSET, 1);
        q.ring
            .ring()
            .kernel_store(RING_FLAGS_OFFSET, RING_FLAG_KERNEL_BUSY);
        q.post(&w, no_gather).unwrap();
        assert!(!q.finish());
        assert_eq!(q.ring.ring().producer(), 3);
        // The ring is full again; an invalid WR is still reported as invalid.
        assert_eq!(q.post(&w, no_gather), Err(PostError::Full));
        assert_eq!(
            q.post(&wr(u32::MAX, &[]), no_gather),
            Err(PostError::Invalid)
        );
    }

    fn hdr(opcode: u32) -> WrHeader {
        WrHeader {
            wr_id: 7,
            opcode,
            send_flags: sys::ibv_send_flags_IBV_SEND_SIGNALED,
            imm_or_inv: 0,
            target: Target::None,
        }
    }

    fn slot(q: &SendQueue, index: u32) -> (SendWqe, Vec<u8>) {
        let mut b = vec![0u8; q.ring.ring().slot_size()];
        q.ring.ring().read_slot(index, &mut b);
        (
            SendWqe::from_bytes(b[..64].try_into().unwrap()),
            b[64..].to_vec(),
        )
    }

    #[test]
    fn wr_batches_build_the_same_slots() {
        let ring = MappedRing::for_test(4, 128);
        let mut q = SendQueue::new(ring, CAPS).unwrap();
        q.wr_start();
        q.wr_begin(hdr(sys::ibv_wr_opcode_IBV_WR_SEND));
        q.wr_set_sges(&[sge(0x1000, 4), sge(0x2000, 8)]);
        let mut w = hdr(sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM);
        w.wr_id = 8;
        w.imm_or_inv = 0x0102_0304;
        // IBV_SEND_INLINE in wr_flags is ignored; inline data comes from wr_set_inline.
        w.send_flags |= sys::ibv_send_flags_IBV_SEND_INLINE;
        w.target = Target::Rdma(RdmaFields {
            remote_addr: 0x9000,
            rkey: 0x55,
        });
        q.wr_begin(w);
        q.wr_set_inline([&b"abc"[..], &b"de"[..]]);
        q.wr_begin(hdr(sys::ibv_wr_opcode_IBV_WR_RDMA_READ));
        q.wr_set_sges(&[sge(0x3000, 16)]);
        // Written but not published before wr_complete.
        assert_eq!(q.ring.ring().producer(), 0);
        assert_eq!(q.wr_complete(), Ok(true));
        assert_eq!(q.ring.ring().producer(), 3);

        let (h, body) = slot(&q, 0);
        assert_eq!(
            (h.wr_id, h.opcode, h.flags, h.num_sge),
            (7, WrOpcode::Send as u8, WQE_FLAG_SIGNALED, 2)
        );
        assert_eq!(&body[..16], &sge(0x1000, 4).to_bytes());
        let (h, body) = slot(&q, 1);
        assert_eq!(
            (h.wr_id, h.opcode, h.flags, h.inline_len, h.num_sge),
            (
                8,
                WrOpcode::RdmaWriteWithImm as u8,
                WQE_FLAG_SIGNALED | WQE_FLAG_INLINE,
                5,
                0
            )
        );
        assert_eq!(
            (h.remote_addr, h.rkey, h.imm_or_inv),
            (0x9000, 0x55, 0x0102_0304)
        );
        assert_eq!(&body[..5], b"abcde");
        let (h, _) = slot(&q, 2);
        assert_eq!((h.opcode, h.num_sge), (WrOpcode::RdmaRead as u8, 1));
    }

    #[test]
    fn wr_errors_and_abort_discard_the_batch() {
        let ring = MappedRing::for_test(4, 128);
        let mut q = SendQueue::new(ring, CAPS).unwrap();
        let send = hdr(sys::ibv_wr_opcode_IBV_WR_SEND);
        // Abort.
        q.wr_start();
        q.wr_begin(send);
        q.wr_set_sges(&[sge(1, 1)]);
        q.wr_abort();
        assert_eq!(q.wr_complete(), Ok(false), "nothing left to post");
        // Too many SGEs in the second WR: the first is not posted either.
        q.wr_start();
        q.wr_begin(send);
        q.wr_begin(send);
        q.wr_set_sges(&[sge(1, 1); 5]);
        assert_eq!(q.wr_complete(), Err(PostError::Invalid));
        assert_eq!(q.ring.ring().producer(), 0);
        // Inline data beyond max_inline_data, and inline data for a read.
        q.wr_start();
        q.wr_begin(send);
        q.wr_set_inline([&[0u8; 60][..], &[0u8; 5][..]]);
        assert_eq!(q.wr_complete(), Err(PostError::Invalid));
        q.wr_start();
        q.wr_begin(hdr(sys::ibv_wr_opcode_IBV_WR_RDMA_READ));
        q.wr_set_inline([&b"x"[..]]);
        assert_eq!(q.wr_complete(), Err(PostError::Invalid));
        // Data without an opcode call; an explicit failure.
        q.wr_start();
        q.wr_set_sges(&[sge(1, 1)]);
        assert_eq!(q.wr_complete(), Err(PostError::Invalid));
        q.wr_start();
        q.wr_begin(send);
        q.wr_fail(PostError::Invalid);
        assert_eq!(q.wr_complete(), Err(PostError::Invalid));
        // A full ring.
        q.wr_start();
        for _ in 0..5 {
            q.wr_begin(send);
        }
        assert_eq!(q.wr_complete(), Err(PostError::Full));
        assert_eq!(q.ring.ring().producer(), 0);
        // And a good batch after all that: zero-length SGE, no data at all.
        q.wr_start();
        q.wr_begin(send);
        q.wr_set_sges(&[sge(1, 0)]);
        q.wr_begin(send);
        assert_eq!(q.wr_complete(), Ok(true));
        assert_eq!(q.ring.ring().producer(), 2);
        assert_eq!(slot(&q, 1).0.num_sge, 0);
    }

    #[test]
    fn inline_needs_no_sges() {
        let caps = SendCaps { max_sge: 0, ..CAPS };
        let sges = [sge(1, 10)];
        let mut w = wr(sys::ibv_wr_opcode_IBV_WR_SEND, &sges);
        w.send_flags = sys::ibv_send_flags_IBV_SEND_INLINE;
        assert!(encode(&w, &caps).is_ok());
        w.send_flags = 0;
        assert_eq!(encode(&w, &caps).unwrap_err(), PostError::Invalid);
    }

    #[test]
    fn supported_send_ops() {
        use sys::*;
        for op in [
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW,
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_TSO,
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_FLUSH,
            ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE,
        ] {
            assert_eq!(SUPPORTED_SEND_OPS & u64::from(op), 0);
        }
        assert_eq!(SUPPORTED_SEND_OPS, 0x2ff);
    }

    #[test]
    fn queue_needs_slots_for_its_caps() {
        let ring = MappedRing::for_test(2, 64);
        assert!(matches!(
            SendQueue::new(ring, CAPS),
            Err(GeometryError::SlotSize { min: 128, .. })
        ));
    }
}
