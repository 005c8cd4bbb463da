// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the verbs (create, modify, query, destroy), the IBA state machine, and the RC
//! data path that connects the rings, the memory regions and the wire crate's requester,
//! responder and completer.
//!
//! Everything mutable of a QP is in [`QpState`] behind one mutex; the engine (work item) and
//! the verbs calls take it. Lock order: QP state, then the engine's tables, then a CQ or a
//! receive queue.

use crate::cq::CqInner;
use crate::engine::Engine;
use crate::mr::MrError;
use crate::ox::rdma::verbs::{
    access, modify_is_ok, Path, QpAttrs, QpCaps, QpEvent, QpEvents, QpState as St, QpType,
};
use crate::queue::{RecvEntry, RecvQueue, RingFault, SendEntry, SendRing};
use crate::roce::TxPath;
use crate::uapi::queue::{
    wc_opcode, wc_status, Cqe, Sge, WrOpcode, WC_FLAG_WITH_IMM, WC_FLAG_WITH_INV, WQE_FLAG_FENCE,
    WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED,
};
use crate::uapi::ring::RingView;
use crate::wire::headers::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Ieth, ImmDt, NakCode, Reth, Syndrome, CREDITS_INVALID,
};
use crate::wire::ip::{flow_sport, IpAddr};
use crate::wire::opcode::{Opcode, Operation, Position};
use crate::wire::packet::{Headers, Packet};
use crate::wire::psn::Psn;
use crate::wire::rc::completer::{Response, ResponseAction, ResponseKind};
use crate::wire::rc::requester::{RcError, Requester, RequesterConfig, Status, TimerAction};
use crate::wire::rc::responder::{Ack, Request, Responder, ResponderAction, ResponderConfig};
use crate::wire::rc::{packets_for, OpKind};
use kernel::{
    alloc::flags::GFP_KERNEL, alloc::KBox, alloc::KVec, new_mutex, prelude::*, sync::Arc,
    sync::Mutex,
};

/// Send WQEs the requester holds at once (more wait in the SQ ring).
pub(crate) const REQ_WQES: usize = 128;
/// Responder resources (`max_dest_rd_atomic`) and requester reads/atomics in flight.
pub(crate) const RESP_RES: usize = 16;
/// RDMA READs / ATOMICs the requester may have outstanding (`max_rd_atomic`).
pub(crate) const MAX_RD_ATOMIC: usize = 128;
/// Unacknowledged PSNs the requester may have in flight.
const WINDOW: u32 = 256;
/// The responder acknowledges at least every this many packets.
const ACK_EVERY: u32 = 16;

/// A posted send WQE the requester works on.
struct SendOp {
    wr_id: u64,
    opcode: WrOpcode,
    flags: u8,
    imm_or_inv: u32,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
    len: u32,
    sges: KVec<Sge>,
    inline: KVec<u8>,
    /// A local error found while sending (reported instead of "flushed").
    local_error: Option<u8>,
}

/// A SEND being received across packets.
struct RecvProgress {
    entry: RecvEntry,
    offset: u64,
}

/// An RDMA WRITE being received across packets.
struct WriteProgress {
    mr: Arc<crate::mr::Mr>,
    offset: usize,
    remaining: u64,
}

/// A responder resource's request, to replay read responses.
#[derive(Clone)]
struct ReadCtx {
    mr: Arc<crate::mr::Mr>,
    offset: usize,
    len: u32,
}

#[derive(Clone, Copy, Default)]
struct Attrs {
    path: Option<Path>,
    dest_qpn: u32,
    pmtu: u32,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    access: u32,
    sq_psn: u32,
    rq_psn: u32,
    qkey: u32,
    pkey_index: u16,
    port: u32,
}

/// The mutable part of a QP.
pub(crate) struct QpState {
    state: St,
    attrs: Attrs,
    sq_view: RingView,
    req: Option<KBox<Requester<REQ_WQES>>>,
    resp: Option<KBox<Responder<RESP_RES>>>,
    ops: KVec<Option<SendOp>>,
    next_seq: u64,
    recv: Option<RecvProgress>,
    write: Option<WriteProgress>,
    reads: KVec<Option<ReadCtx>>,
    dead: bool,
}

/// A QP.
#[pin_data]
pub(crate) struct QpInner {
    pub(crate) qpn: u32,
    qp_type: QpType,
    pdn: u32,
    engine: Arc<Engine>,
    send_cq: Arc<CqInner>,
    recv_cq: Arc<CqInner>,
    rq: Arc<RecvQueue>,
    sq: SendRing,
    caps: QpCaps,
    sig_all: bool,
    events: QpEvents,
    #[pin]
    st: Mutex<QpState>,
}

/// The driver data of a QP object.
pub(crate) struct Qp(pub(crate) Arc<QpInner>);

/// Parameters of a new QP.
pub(crate) struct NewQp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) pdn: u32,
    pub(crate) engine: Arc<Engine>,
    pub(crate) send_cq: Arc<CqInner>,
    pub(crate) recv_cq: Arc<CqInner>,
    pub(crate) rq: Arc<RecvQueue>,
    pub(crate) sq: SendRing,
    pub(crate) caps: QpCaps,
    pub(crate) sig_all: bool,
    pub(crate) events: QpEvents,
}

fn wc_opcode_of(op: WrOpcode) -> u8 {
    match op {
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => wc_opcode::RDMA_WRITE,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => wc_opcode::SEND,
        WrOpcode::RdmaRead => wc_opcode::RDMA_READ,
        WrOpcode::AtomicCmpAndSwp => wc_opcode::COMP_SWAP,
        WrOpcode::AtomicFetchAndAdd => wc_opcode::FETCH_ADD,
        WrOpcode::LocalInv => wc_opcode::LOCAL_INV,
    }
}

fn kind_of(op: WrOpcode) -> Option<OpKind> {
    Some(match op {
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => OpKind::Write,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => OpKind::Send,
        WrOpcode::RdmaRead => OpKind::Read,
        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => OpKind::Atomic,
        WrOpcode::LocalInv => return None,
    })
}

fn status_of(e: RcError) -> u8 {
    match e {
        RcError::RetryExceeded => wc_status::RETRY_EXC_ERR,
        RcError::RnrRetryExceeded => wc_status::RNR_RETRY_EXC_ERR,
        RcError::RemoteAccess => wc_status::REM_ACCESS_ERR,
        RcError::RemoteInvalidRequest => wc_status::REM_INV_REQ_ERR,
        RcError::RemoteOperation => wc_status::REM_OP_ERR,
        RcError::Flushed => wc_status::WR_FLUSH_ERR,
    }
}

/// The RC request opcode of a packet of `op`.
fn request_opcode(op: WrOpcode, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    match (op, first, last) {
        (WrOpcode::Send, true, true) => RcSendOnly,
        (WrOpcode::SendWithImm, true, true) => RcSendOnlyImm,
        (WrOpcode::SendWithInv, true, true) => RcSendOnlyInv,
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, true, false) => {
            RcSendFirst
        }
        (WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv, false, false) => {
            RcSendMiddle
        }
        (WrOpcode::Send, false, true) => RcSendLast,
        (WrOpcode::SendWithImm, false, true) => RcSendLastImm,
        (WrOpcode::SendWithInv, false, true) => RcSendLastInv,
        (WrOpcode::RdmaWrite, true, true) => RcRdmaWriteOnly,
        (WrOpcode::RdmaWriteWithImm, true, true) => RcRdmaWriteOnlyImm,
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, true, false) => RcRdmaWriteFirst,
        (WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm, false, false) => RcRdmaWriteMiddle,
        (WrOpcode::RdmaWrite, false, true) => RcRdmaWriteLast,
        (WrOpcode::RdmaWriteWithImm, false, true) => RcRdmaWriteLastImm,
        (WrOpcode::RdmaRead, _, _) => RcRdmaReadRequest,
        (WrOpcode::AtomicCmpAndSwp, _, _) => RcCompareSwap,
        (WrOpcode::AtomicFetchAndAdd, _, _) => RcFetchAdd,
        (WrOpcode::LocalInv, _, _) => RcSendOnly,
    }
}

fn read_response_opcode(i: u32, n: u32) -> Opcode {
    match (i == 0, i + 1 == n) {
        (true, true) => Opcode::RcRdmaReadResponseOnly,
        (true, false) => Opcode::RcRdmaReadResponseFirst,
        (false, true) => Opcode::RcRdmaReadResponseLast,
        (false, false) => Opcode::RcRdmaReadResponseMiddle,
    }
}

impl QpInner {
    pub(crate) fn new(p: NewQp) -> Result<Arc<Self>> {
        let mut ops = KVec::with_capacity(REQ_WQES, GFP_KERNEL)?;
        for _ in 0..REQ_WQES {
            ops.push(None, GFP_KERNEL)?;
        }
        let mut reads = KVec::with_capacity(RESP_RES, GFP_KERNEL)?;
        for _ in 0..RESP_RES {
            reads.push(None, GFP_KERNEL)?;
        }
        let slots = p.sq.geo.slots;
        Arc::pin_init(
            pin_init!(Self {
                qpn: p.qpn,
                qp_type: p.qp_type,
                pdn: p.pdn,
                engine: p.engine,
                send_cq: p.send_cq,
                recv_cq: p.recv_cq,
                rq: p.rq,
                sq: p.sq,
                caps: p.caps,
                sig_all: p.sig_all,
                events: p.events,
                st <- new_mutex!(QpState {
                    state: St::Reset,
                    attrs: Attrs { port: 1, ..Default::default() },
                    sq_view: RingView::new(slots),
                    req: None,
                    resp: None,
                    ops,
                    next_seq: 0,
                    recv: None,
                    write: None,
                    reads,
                    dead: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// The source address of the QP's path, once it has one.
    pub(crate) fn local_ip(&self) -> Option<IpAddr> {
        self.st.lock().attrs.path.map(|p| IpAddr::from_gid(p.sgid))
    }

    /// The device's engine.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    // ---- verbs ------------------------------------------------------------------------------

    pub(crate) fn modify(self: &Arc<Self>, a: &QpAttrs) -> Result {
        let mut st = self.st.lock();
        let cur = a.cur_state.unwrap_or(st.state);
        if cur != st.state && !matches!(cur, St::Rts | St::Sqe) {
            return Err(EINVAL);
        }
        let next = a.state.unwrap_or(cur);
        if !modify_is_ok(st.state, next, self.qp_type, a.mask) {
            return Err(EINVAL);
        }
        let mut n = st.attrs;
        if let Some(p) = a.path {
            if !p.roce_v2 {
                pr_info!(
                    "oxrdma: QP {}: RoCE v1 paths are not supported yet\n",
                    self.qpn
                );
                return Err(EINVAL);
            }
            n.path = Some(p);
        }
        if let Some(m) = a.path_mtu {
            n.pmtu = m.min(self.engine.active_mtu());
        }
        if let Some(q) = a.dest_qpn {
            if q >= 1 << 24 {
                return Err(EINVAL);
            }
            n.dest_qpn = q;
        }
        if let Some(v) = a.rq_psn {
            n.rq_psn = v & 0xff_ffff;
        }
        if let Some(v) = a.sq_psn {
            n.sq_psn = v & 0xff_ffff;
        }
        if let Some(v) = a.access {
            let all = access::LOCAL_WRITE
                | access::REMOTE_WRITE
                | access::REMOTE_READ
                | access::REMOTE_ATOMIC;
            n.access = v & all;
        }
        // Each attribute within its IBA range, else the whole modify fails.
        let rd = RESP_RES as u8;
        set_max(&mut n.timeout, a.timeout, 31)?;
        set_max(&mut n.retry_cnt, a.retry_cnt, 7)?;
        set_max(&mut n.rnr_retry, a.rnr_retry, 7)?;
        set_max(&mut n.min_rnr_timer, a.min_rnr_timer, 31)?;
        set_max(&mut n.max_rd_atomic, a.max_rd_atomic, MAX_RD_ATOMIC as u8)?;
        set_max(&mut n.max_dest_rd_atomic, a.max_dest_rd_atomic, rd)?;
        set_max(&mut n.pkey_index, a.pkey_index, 0)?;
        if let Some(v) = a.qkey {
            n.qkey = v;
        }
        if let Some(v) = a.port {
            if v != 1 {
                return Err(EINVAL);
            }
            n.port = v;
        }
        if next == St::Rtr && (n.path.is_none() || n.pmtu == 0) && self.qp_type == QpType::Rc {
            return Err(EINVAL);
        }
        st.attrs = n;
        let from = st.state;
        st.state = next;
        match next {
            St::Reset => self.reset(&mut st),
            St::Rtr if from != St::Rtr => {
                let cfg = ResponderConfig {
                    pmtu: n.pmtu,
                    ack_every: ACK_EVERY,
                    rnr_timer: n.min_rnr_timer,
                    initial_psn: Psn::new(n.rq_psn),
                };
                st.resp = Some(KBox::new(Responder::new(cfg), GFP_KERNEL)?);
            }
            St::Rts if from == St::Rtr => {
                let cfg = RequesterConfig {
                    pmtu: n.pmtu,
                    initial_psn: Psn::new(n.sq_psn),
                    window: WINDOW,
                    max_rd_atomic: u32::from(n.max_rd_atomic.max(1)),
                    timeout: n.timeout,
                    retry_cnt: n.retry_cnt,
                    rnr_retry: n.rnr_retry,
                };
                st.req = Some(KBox::new(Requester::new(cfg), GFP_KERNEL)?);
            }
            St::Err if from != St::Err => self.to_error(&mut st, None),
            _ => {}
        }
        drop(st);
        self.engine.kick();
        Ok(())
    }

    pub(crate) fn query(&self) -> QpAttrs {
        let st = self.st.lock();
        let a = st.attrs;
        QpAttrs {
            mask: 0,
            state: Some(st.state),
            cur_state: Some(st.state),
            path_mtu: Some(if a.pmtu == 0 { 1024 } else { a.pmtu }),
            dest_qpn: Some(a.dest_qpn),
            rq_psn: Some(st.resp.as_ref().map_or(a.rq_psn, |r| r.epsn().get())),
            sq_psn: Some(st.req.as_ref().map_or(a.sq_psn, |r| r.next_psn().get())),
            access: Some(a.access),
            timeout: Some(a.timeout),
            retry_cnt: Some(a.retry_cnt),
            rnr_retry: Some(a.rnr_retry),
            min_rnr_timer: Some(a.min_rnr_timer),
            max_rd_atomic: Some(a.max_rd_atomic),
            max_dest_rd_atomic: Some(a.max_dest_rd_atomic),
            qkey: Some(a.qkey),
            pkey_index: Some(a.pkey_index),
            port: Some(a.port),
            path: a.path,
            caps: self.caps,
            sig_all: self.sig_all,
        }
    }

    /// Destroy: no more processing; the engine forgets the QP.
    pub(crate) fn destroy(&self) {
        let mut st = self.st.lock();
        st.dead = true;
        st.req = None;
        st.resp = None;
        st.recv = None;
        st.write = None;
        for r in st.reads.iter_mut() {
            *r = None;
        }
        for o in st.ops.iter_mut() {
            *o = None;
        }
    }

    fn reset(&self, st: &mut QpState) {
        st.req = None;
        st.resp = None;
        st.recv = None;
        st.write = None;
        for r in st.reads.iter_mut() {
            *r = None;
        }
        for o in st.ops.iter_mut() {
            *o = None;
        }
        // Discard what is queued, without completions.
        if self.sq.refresh(&mut st.sq_view).is_ok() {
            while st.sq_view.consume() {}
            self.sq.publish_consumer(st.sq_view.consumer());
        }
        self.sq.clear_busy();
    }

    /// Moves to the error state: completes the work in flight and queued with
    /// `WR_FLUSH_ERR` (the first in-flight one with `first`, if given).
    fn to_error(&self, st: &mut QpState, first: Option<u8>) {
        st.state = St::Err;
        if let Some(req) = st.req.as_mut() {
            req.flush();
        }
        if let Some(s) = first {
            if let Some(Some(op)) = st.ops.iter_mut().find(|o| o.is_some()) {
                op.local_error.get_or_insert(s);
            }
        }
        self.complete_sends(st);
        // Unfinished in-flight ops the requester never saw.
        st.recv = None;
        st.write = None;
        self.flush_queues(st);
        self.sq.clear_busy();
    }

    fn flush_queues(&self, st: &mut QpState) {
        // Send WQEs still in the ring.
        if self.sq.refresh(&mut st.sq_view).is_ok() {
            while let Some(slot) = st.sq_view.peek() {
                let wr_id = self.sq.read(slot).map(|e| e.wqe.wr_id).unwrap_or(0);
                st.sq_view.consume();
                self.send_cq.push(
                    &Cqe {
                        wr_id,
                        status: wc_status::WR_FLUSH_ERR,
                        qp_num: self.qpn,
                        ..Default::default()
                    },
                    false,
                );
            }
            self.sq.publish_consumer(st.sq_view.consumer());
        }
        // Receive WQEs (not those of a shared SRQ).
        if !self.rq.is_shared() {
            let qpn = self.qpn;
            let cq = &self.recv_cq;
            self.rq.drain(|wr_id| {
                cq.push(
                    &Cqe {
                        wr_id,
                        status: wc_status::WR_FLUSH_ERR,
                        opcode: wc_opcode::RECV,
                        qp_num: qpn,
                        ..Default::default()
                    },
                    false,
                )
            });
        }
    }

    // ---- the send side ---------------------------------------------------------------------

    /// Runs the send side: takes new WQEs, handles timers, transmits, completes. Returns the
    /// next deadline (us) for the engine's timer.
    pub(crate) fn service(&self, now: u64) -> Option<u64> {
        let mut st = self.st.lock();
        if st.dead {
            return None;
        }
        match st.state {
            St::Err => {
                self.flush_queues(&mut st);
                return None;
            }
            St::Rts | St::Sqd => {}
            _ => return None,
        }
        if let Some(req) = st.req.as_mut() {
            match req.on_timer(now) {
                TimerAction::Error(_)
                | TimerAction::Nothing
                | TimerAction::Retransmit
                | TimerAction::Resume => {}
            }
        }
        loop {
            if st.state == St::Rts {
                self.sq.set_busy();
                if let Err(f) = self.take_send_wqes(&mut st) {
                    self.ring_fault(&mut st, f);
                    return None;
                }
            }
            self.transmit(&mut st, now);
            self.complete_sends(&mut st);
            if st.state != St::Rts {
                break;
            }
            // Stop being busy only with the ring empty; re-check after clearing (see the
            // doorbell rule in rust/uapi).
            if self.sq.refresh(&mut st.sq_view).is_err() || !st.sq_view.is_empty() {
                break;
            }
            self.sq.clear_busy();
            if self.sq.refresh(&mut st.sq_view).is_err() || st.sq_view.is_empty() {
                break;
            }
        }
        st.req.as_ref().and_then(|r| r.deadline())
    }

    fn ring_fault(&self, st: &mut QpState, f: RingFault) {
        pr_info!(
            "oxrdma: QP {}: invalid send queue ({:?}); QP in error\n",
            self.qpn,
            f
        );
        self.to_error(st, Some(wc_status::LOC_QP_OP_ERR));
        self.events.raise(QpEvent::Fatal);
    }

    fn take_send_wqes(&self, st: &mut QpState) -> Result<(), RingFault> {
        self.sq.refresh(&mut st.sq_view)?;
        let mut took = false;
        while let Some(slot) = st.sq_view.peek() {
            let idx = (st.next_seq % REQ_WQES as u64) as usize;
            if st.ops[idx].is_some() {
                break; // the requester is full
            }
            let entry = match self.sq.read(slot) {
                Ok(e) => e,
                Err(f) => {
                    // Malformed beyond validation (lengths past the slot): complete it as a
                    // local QP operation error, then the QP goes to the error state.
                    let wr_id = self.sq.wr_id_at(slot);
                    st.sq_view.consume();
                    self.sq.publish_consumer(st.sq_view.consumer());
                    self.send_cq.push(
                        &Cqe {
                            wr_id,
                            status: wc_status::LOC_QP_OP_ERR,
                            qp_num: self.qpn,
                            ..Default::default()
                        },
                        false,
                    );
                    return Err(f);
                }
            };
            // A fenced WQE waits until everything before it (in particular RDMA READs and
            // ATOMICs, IBA 10.8.3.3) has completed; it stays in the ring meanwhile and the
            // completions that free the requester run the QP again.
            let idle = st.req.as_ref().map_or(true, |r| r.is_idle());
            if entry.wqe.flags & WQE_FLAG_FENCE != 0 && !idle {
                break;
            }
            st.sq_view.consume();
            took = true;
            self.post_one(st, idx, entry);
            if st.state != St::Rts {
                break;
            }
        }
        if took {
            self.sq.publish_consumer(st.sq_view.consumer());
        }
        Ok(())
    }

    fn post_one(&self, st: &mut QpState, idx: usize, e: SendEntry) {
        let fail = |this: &Self, st: &mut QpState, wr_id: u64, status: u8| {
            this.send_cq.push(
                &Cqe {
                    wr_id,
                    status,
                    qp_num: this.qpn,
                    ..Default::default()
                },
                false,
            );
            this.to_error(st, None);
        };
        let v = match e
            .wqe
            .validate(self.caps.max_send_sge as u8, self.caps.max_inline_data)
        {
            Ok(v) => v,
            Err(_) => return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR),
        };
        let Some(kind) = kind_of(v.opcode) else {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR);
        };
        let len: u64 = if !e.inline.is_empty() || e.wqe.inline_len != 0 {
            e.inline.len() as u64
        } else {
            e.sges.iter().map(|s| u64::from(s.length)).sum()
        };
        let len = match (kind, u32::try_from(len)) {
            (OpKind::Atomic, _) => 8,
            (_, Ok(l)) if l <= crate::device::limits::MAX_MSG_SZ => l,
            _ => return fail(self, st, e.wqe.wr_id, wc_status::LOC_LEN_ERR),
        };
        let seq = st.next_seq;
        let Some(req) = st.req.as_mut() else {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR);
        };
        if req.post(seq, kind, len).is_err() {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR);
        }
        st.next_seq += 1;
        st.ops[idx] = Some(SendOp {
            wr_id: e.wqe.wr_id,
            opcode: v.opcode,
            flags: e.wqe.flags,
            imm_or_inv: e.wqe.imm_or_inv,
            remote_addr: e.wqe.remote_addr,
            rkey: e.wqe.rkey,
            compare_add: e.wqe.compare_add,
            swap: e.wqe.swap,
            len,
            sges: e.sges,
            inline: e.inline,
            local_error: None,
        });
    }

    fn tx_path(&self, st: &QpState) -> Option<TxPath> {
        let p = st.attrs.path?;
        Some(TxPath {
            src: IpAddr::from_gid(p.sgid),
            dst: IpAddr::from_gid(p.dgid),
            traffic_class: p.traffic_class,
            flow_label: p.flow_label,
            hop_limit: if p.hop_limit == 0 { 64 } else { p.hop_limit },
            sport: flow_sport(self.qpn, st.attrs.dest_qpn),
        })
    }

    fn bth(&self, st: &QpState, op: Opcode, psn: Psn) -> Bth {
        Bth {
            opcode: op.value(),
            pkey: 0xffff,
            dest_qp: st.attrs.dest_qpn,
            psn,
            ..Default::default()
        }
    }

    fn transmit(&self, st: &mut QpState, now: u64) {
        let Some(path) = self.tx_path(st) else { return };
        loop {
            let Some(req) = st.req.as_mut() else { return };
            let Some(tx) = req.next_packet(now) else {
                return;
            };
            let idx = (tx.wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].as_ref() else {
                return;
            };
            let opc = request_opcode(op.opcode, tx.first, tx.last);
            let mut h = Headers::new(self.bth(st, opc, tx.psn));
            h.bth.ack_req = tx.ack_req;
            let payload = match tx.kind {
                OpKind::Send | OpKind::Write => tx.len,
                _ => 0,
            };
            if tx.last
                && op.flags & WQE_FLAG_SOLICITED != 0
                && matches!(tx.kind, OpKind::Send | OpKind::Write)
            {
                h.bth.solicited = true;
            }
            match tx.kind {
                OpKind::Write if tx.first => {
                    h.reth = Some(Reth {
                        va: op.remote_addr,
                        rkey: op.rkey,
                        dma_len: op.len,
                    })
                }
                OpKind::Read => {
                    h.reth = Some(Reth {
                        va: op.remote_addr.wrapping_add(u64::from(tx.offset)),
                        rkey: op.rkey,
                        dma_len: tx.len,
                    })
                }
                OpKind::Atomic => {
                    let (swap_add, compare) = match op.opcode {
                        WrOpcode::AtomicCmpAndSwp => (op.swap, op.compare_add),
                        _ => (op.compare_add, 0),
                    };
                    h.atomic_eth = Some(AtomicEth {
                        va: op.remote_addr,
                        rkey: op.rkey,
                        swap_add,
                        compare,
                    })
                }
                _ => {}
            }
            if tx.last {
                match op.opcode {
                    WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm => {
                        h.imm_dt = Some(ImmDt {
                            data: u32::from_be_bytes(op.imm_or_inv.to_ne_bytes()),
                        })
                    }
                    WrOpcode::SendWithInv => {
                        h.ieth = Some(Ieth {
                            rkey: op.imm_or_inv,
                        })
                    }
                    _ => {}
                }
            }
            let mut local_err = None;
            let engine = &self.engine;
            let pdn = self.pdn;
            let r = engine.send(&path, &h, payload as usize, |buf| {
                if let Err(s) = gather(engine, pdn, op, tx.offset as usize, buf) {
                    local_err = Some(s);
                    false
                } else {
                    true
                }
            });
            if let Some(s) = local_err {
                if let Some(Some(o)) = st.ops.get_mut(idx) {
                    o.local_error = Some(s);
                }
                self.to_error(st, None);
                return;
            }
            if r.is_err() {
                // Lost like on the wire: the retransmission timer recovers.
                continue;
            }
        }
    }

    fn complete_sends(&self, st: &mut QpState) {
        let mut error = None;
        while let Some(c) = st.req.as_mut().and_then(|r| r.poll_completion()) {
            let idx = (c.wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].take() else {
                continue;
            };
            let status = match (op.local_error, c.status) {
                (Some(s), _) => s,
                (None, Status::Success) => wc_status::SUCCESS,
                (None, Status::Error(e)) => status_of(e),
            };
            if status != wc_status::SUCCESS
                && error.is_none()
                && !matches!(c.status, Status::Error(RcError::Flushed))
            {
                error = Some(status);
            }
            if status != wc_status::SUCCESS || self.sig_all || op.flags & WQE_FLAG_SIGNALED != 0 {
                self.send_cq.push(
                    &Cqe {
                        wr_id: op.wr_id,
                        status,
                        opcode: wc_opcode_of(op.opcode),
                        byte_len: op.len,
                        qp_num: self.qpn,
                        ..Default::default()
                    },
                    false,
                );
            }
        }
        if error.is_some() && st.state != St::Err {
            self.to_error(st, None);
        }
    }

    // ---- the receive side ------------------------------------------------------------------

    /// Handles a packet for this QP (ICRC already verified).
    pub(crate) fn receive(&self, pkt: &Packet, bytes: &[u8], now: u64) {
        let mut st = self.st.lock();
        if st.dead || !matches!(st.state, St::Rtr | St::Rts | St::Sqd | St::Sqe) {
            return;
        }
        if pkt.opcode.transport() != crate::wire::opcode::Transport::Rc {
            return;
        }
        let op = pkt.opcode.operation();
        if op.is_response() {
            self.on_response(&mut st, pkt, bytes, now);
            self.transmit(&mut st, now);
            self.complete_sends(&mut st);
            drop(st);
            self.engine.kick();
        } else {
            self.on_request(&mut st, pkt, bytes);
        }
    }

    fn on_response(&self, st: &mut QpState, pkt: &Packet, bytes: &[u8], now: u64) {
        let kind = match pkt.opcode.operation() {
            Operation::Acknowledge => {
                let (Some(s), Some(a)) = (pkt.syndrome(), pkt.headers.aeth) else {
                    return;
                };
                ResponseKind::Ack {
                    syndrome: s,
                    msn: a.msn,
                }
            }
            Operation::RdmaReadResponse => ResponseKind::ReadResponse,
            Operation::AtomicAcknowledge => ResponseKind::AtomicAck,
            _ => return,
        };
        let Some(req) = st.req.as_mut() else { return };
        let action = req.on_response(
            now,
            &Response {
                psn: pkt.headers.bth.psn,
                kind,
            },
        );
        if let ResponseAction::Place { wr_id, offset } = action {
            let idx = (wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].as_ref() else {
                return;
            };
            let r = match pkt.opcode.operation() {
                Operation::AtomicAcknowledge => match pkt.headers.atomic_ack_eth {
                    Some(AtomicAckEth { orig }) => {
                        scatter(&self.engine, self.pdn, &op.sges, 0, &orig.to_ne_bytes())
                    }
                    None => Err(wc_status::BAD_RESP_ERR),
                },
                _ => {
                    let data = pkt.payload(bytes);
                    if u64::from(offset) + data.len() as u64 > u64::from(op.len) {
                        Err(wc_status::BAD_RESP_ERR)
                    } else {
                        scatter(&self.engine, self.pdn, &op.sges, offset as u64, data)
                    }
                }
            };
            if let Err(s) = r {
                if let Some(Some(o)) = st.ops.get_mut(idx) {
                    o.local_error = Some(s);
                }
                self.to_error(st, None);
            }
        }
    }

    fn send_ack(&self, st: &QpState, a: &Ack) {
        let Some(path) = self.tx_path(st) else { return };
        let mut h = Headers::new(self.bth(st, Opcode::RcAcknowledge, a.psn));
        h.aeth = Some(Aeth::new(a.syndrome, a.msn));
        let _ = self.engine.send(&path, &h, 0, |_| true);
    }

    fn on_request(&self, st: &mut QpState, pkt: &Packet, bytes: &[u8]) {
        let opc = pkt.opcode;
        let op = opc.operation();
        let pos = opc.position();
        let kind = match op {
            Operation::Send => OpKind::Send,
            Operation::RdmaWrite => OpKind::Write,
            Operation::RdmaReadRequest => OpKind::Read,
            Operation::CompareSwap | Operation::FetchAdd => OpKind::Atomic,
            _ => return,
        };
        let first = matches!(pos, Position::First | Position::Only);
        let last = matches!(pos, Position::Last | Position::Only);
        let needs_rwqe = (op == Operation::Send && first)
            || (op == Operation::RdmaWrite && last && pkt.headers.imm_dt.is_some());
        let rwqe_available = if needs_rwqe {
            if op == Operation::Send {
                self.rq.available().unwrap_or(false)
            } else {
                st.recv.is_some() || self.rq.available().unwrap_or(false)
            }
        } else {
            true
        };
        let req = Request {
            psn: pkt.headers.bth.psn,
            kind,
            ack_req: pkt.headers.bth.ack_req,
            last,
            needs_rwqe,
            read_len: pkt.headers.reth.map_or(0, |r| r.dma_len),
        };
        let Some(resp) = st.resp.as_mut() else { return };
        match resp.on_request(&req, rwqe_available) {
            ResponderAction::Execute { ack, slot } => match self.execute(st, pkt, bytes, slot) {
                Ok(()) => {
                    if let Some(a) = ack {
                        self.send_ack(st, &a);
                    }
                    if st.state == St::Rtr {
                        self.events.raise(QpEvent::CommEstablished);
                    }
                }
                Err((code, wc)) => {
                    let Some(resp) = st.resp.as_mut() else { return };
                    let a = resp.reject(req.psn, code);
                    self.send_ack(st, &a);
                    if let Some(p) = st.recv.take() {
                        self.recv_cq.push(
                            &Cqe {
                                wr_id: p.entry.wr_id,
                                status: wc,
                                opcode: wc_opcode::RECV,
                                qp_num: self.qpn,
                                ..Default::default()
                            },
                            false,
                        );
                    }
                    self.events.raise(if code == NakCode::RemoteAccessError {
                        QpEvent::AccessError
                    } else {
                        QpEvent::RequestError
                    });
                    self.to_error(st, None);
                }
            },
            ResponderAction::ReAck(a) | ResponderAction::Nak(a) | ResponderAction::RnrNak(a) => {
                self.send_ack(st, &a)
            }
            ResponderAction::Replay { slot, from, count } => self.replay(st, slot, from, count),
            ResponderAction::Drop => {}
        }
    }

    /// Executes an in-sequence request. Errors: the NAK code and the receive status.
    fn execute(
        &self,
        st: &mut QpState,
        pkt: &Packet,
        bytes: &[u8],
        slot: Option<usize>,
    ) -> Result<(), (NakCode, u8)> {
        let opc = pkt.opcode;
        let pos = opc.position();
        let first = matches!(pos, Position::First | Position::Only);
        let last = matches!(pos, Position::Last | Position::Only);
        let payload = pkt.payload(bytes);
        let inval = (NakCode::InvalidRequest, wc_status::REM_INV_REQ_ERR);
        let access_err = (NakCode::RemoteAccessError, wc_status::REM_ACCESS_ERR);
        match opc.operation() {
            Operation::Send => {
                if first {
                    if st.recv.is_some() {
                        return Err(inval);
                    }
                    match self.rq.take() {
                        Ok(Some(entry)) => st.recv = Some(RecvProgress { entry, offset: 0 }),
                        _ => {
                            return Err((NakCode::RemoteOperationalError, wc_status::LOC_QP_OP_ERR))
                        }
                    }
                }
                let Some(p) = st.recv.as_mut() else {
                    return Err(inval);
                };
                if p.offset + payload.len() as u64 > p.entry.capacity() {
                    return Err((NakCode::InvalidRequest, wc_status::LOC_LEN_ERR));
                }
                if let Err(s) = scatter(&self.engine, self.pdn, &p.entry.sges, p.offset, payload) {
                    return Err((NakCode::RemoteOperationalError, s));
                }
                p.offset += payload.len() as u64;
                if last {
                    let Some(p) = st.recv.take() else {
                        return Err(inval);
                    };
                    let mut cqe = Cqe {
                        wr_id: p.entry.wr_id,
                        opcode: wc_opcode::RECV,
                        byte_len: p.offset as u32,
                        qp_num: self.qpn,
                        src_qp: st.attrs.dest_qpn,
                        ..Default::default()
                    };
                    if let Some(i) = pkt.headers.imm_dt {
                        cqe.wc_flags |= WC_FLAG_WITH_IMM;
                        cqe.imm_or_inv = u32::from_ne_bytes(i.data.to_be_bytes());
                    }
                    if let Some(i) = pkt.headers.ieth {
                        cqe.wc_flags |= WC_FLAG_WITH_INV;
                        cqe.imm_or_inv = i.rkey;
                    }
                    self.recv_cq.push(&cqe, pkt.headers.bth.solicited);
                }
                Ok(())
            }
            Operation::RdmaWrite => {
                if first {
                    let Some(reth) = pkt.headers.reth else {
                        return Err(inval);
                    };
                    let (mr, offset) = self
                        .remote_mr(
                            st,
                            access::REMOTE_WRITE,
                            reth.rkey,
                            reth.va,
                            reth.dma_len.into(),
                        )
                        .map_err(|_| access_err)?;
                    st.write = Some(WriteProgress {
                        mr,
                        offset,
                        remaining: u64::from(reth.dma_len),
                    });
                }
                let Some(w) = st.write.as_mut() else {
                    return Err(inval);
                };
                if payload.len() as u64 > w.remaining {
                    return Err(inval);
                }
                w.mr.mem.write(w.offset, payload).map_err(|_| access_err)?;
                w.offset += payload.len();
                w.remaining -= payload.len() as u64;
                if last {
                    let w = st.write.take();
                    if w.as_ref().is_some_and(|w| w.remaining != 0) {
                        return Err(inval);
                    }
                    if let Some(i) = pkt.headers.imm_dt {
                        let entry = match self.rq.take() {
                            Ok(Some(e)) => e,
                            _ => {
                                return Err((
                                    NakCode::RemoteOperationalError,
                                    wc_status::LOC_QP_OP_ERR,
                                ))
                            }
                        };
                        let len = pkt.headers.reth.map_or(0, |r| r.dma_len);
                        self.recv_cq.push(
                            &Cqe {
                                wr_id: entry.wr_id,
                                opcode: wc_opcode::RECV_RDMA_WITH_IMM,
                                wc_flags: WC_FLAG_WITH_IMM,
                                imm_or_inv: u32::from_ne_bytes(i.data.to_be_bytes()),
                                byte_len: len,
                                qp_num: self.qpn,
                                src_qp: st.attrs.dest_qpn,
                                ..Default::default()
                            },
                            pkt.headers.bth.solicited,
                        );
                    }
                }
                Ok(())
            }
            Operation::RdmaReadRequest => {
                let (Some(reth), Some(slot)) = (pkt.headers.reth, slot) else {
                    return Err(inval);
                };
                let (mr, offset) = self
                    .remote_mr(
                        st,
                        access::REMOTE_READ,
                        reth.rkey,
                        reth.va,
                        reth.dma_len.into(),
                    )
                    .map_err(|_| access_err)?;
                if let Some(r) = st.reads.get_mut(slot) {
                    *r = Some(ReadCtx {
                        mr,
                        offset,
                        len: reth.dma_len,
                    });
                }
                let n = packets_for(reth.dma_len, st.attrs.pmtu);
                self.replay(st, slot, pkt.headers.bth.psn, n);
                Ok(())
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let (Some(a), Some(slot)) = (pkt.headers.atomic_eth, slot) else {
                    return Err(inval);
                };
                let (mr, off) = self
                    .remote_mr(st, access::REMOTE_ATOMIC, a.rkey, a.va, 8)
                    .map_err(|_| access_err)?;
                let orig = if opc.operation() == Operation::CompareSwap {
                    mr.mem.compare_swap(off, a.compare, a.swap_add)
                } else {
                    mr.mem.fetch_add(off, a.swap_add)
                };
                let orig =
                    orig.map_err(|_| (NakCode::InvalidRequest, wc_status::REM_INV_REQ_ERR))?;
                if let Some(r) = st.resp.as_mut().and_then(|r| r.resource_mut(slot)) {
                    r.data = orig;
                }
                self.replay(st, slot, pkt.headers.bth.psn, 1);
                Ok(())
            }
            _ => Err(inval),
        }
    }

    /// The MR and byte offset a remote access of `len` bytes at `va` with `rkey` may use:
    /// the QP allows the access, the key is live, same PD, the MR grants it, in bounds.
    fn remote_mr(
        &self,
        st: &QpState,
        right: u32,
        rkey: u32,
        va: u64,
        len: u64,
    ) -> Result<(Arc<crate::mr::Mr>, usize), MrError> {
        if st.attrs.access & right == 0 {
            return Err(MrError::Rights);
        }
        let mr = self.engine.mr(rkey)?;
        mr.check_remote(self.pdn, right)?;
        let off = mr.offset_of(va, len)?;
        Ok((mr, off))
    }

    /// Sends `count` responses of the resource in `slot` from PSN `from` on.
    fn replay(&self, st: &QpState, slot: usize, from: Psn, count: u32) {
        let Some(path) = self.tx_path(st) else { return };
        let Some(res) = st.resp.as_ref().and_then(|r| r.resource(slot)).copied() else {
            return;
        };
        let msn = st.resp.as_ref().map_or(0, |r| r.msn());
        let ack = Aeth::new(
            Syndrome::Ack {
                credit_code: CREDITS_INVALID,
            },
            msn,
        );
        if res.kind == OpKind::Atomic {
            let mut h = Headers::new(self.bth(st, Opcode::RcAtomicAcknowledge, res.first_psn));
            h.aeth = Some(ack);
            h.atomic_ack_eth = Some(AtomicAckEth { orig: res.data });
            let _ = self.engine.send(&path, &h, 0, |_| true);
            return;
        }
        let Some(Some(rd)) = st.reads.get(slot) else {
            return;
        };
        let pmtu = st.attrs.pmtu.max(256);
        let n = res.npsn;
        let start = from.diff(res.first_psn).max(0) as u32;
        for i in start..(start + count).min(n) {
            let off = i as u64 * u64::from(pmtu);
            let len =
                (u64::from(rd.len) - off.min(u64::from(rd.len))).min(u64::from(pmtu)) as usize;
            let opc = read_response_opcode(i, n);
            let mut h = Headers::new(self.bth(st, opc, res.first_psn.add(i as i32)));
            if !matches!(opc, Opcode::RcRdmaReadResponseMiddle) {
                h.aeth = Some(ack);
            }
            let mr = &rd.mr;
            let at = rd.offset + off as usize;
            let _ = self
                .engine
                .send(&path, &h, len, |buf| mr.mem.read(at, buf).is_ok());
        }
    }
}

/// Stores `v` into `field` if given and at most `max`; `EINVAL` otherwise.
fn set_max<T: PartialOrd + Copy>(field: &mut T, v: Option<T>, max: T) -> Result {
    match v {
        Some(v) if v > max => Err(EINVAL),
        Some(v) => {
            *field = v;
            Ok(())
        }
        None => Ok(()),
    }
}

/// Walks the buffer the SGEs describe from byte `offset` on for `len` bytes: checks each
/// piece's MR (L_Key live, same PD, local write if `write`, in bounds) and calls
/// `f(mr, offset in the MR, offset in the caller's buffer, length)`.
fn walk_sges(
    engine: &Engine,
    pdn: u32,
    sges: &[Sge],
    offset: u64,
    len: usize,
    write: bool,
    mut f: impl FnMut(&crate::mr::Mr, usize, usize, usize) -> bool,
) -> Result<(), u8> {
    let mut skip = offset;
    let mut done = 0usize;
    for s in sges.iter() {
        if done == len {
            break;
        }
        let sl = u64::from(s.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let n = ((sl - skip) as usize).min(len - done);
        let mr = engine.mr(s.lkey).map_err(|_| wc_status::LOC_PROT_ERR)?;
        mr.check_local(pdn, write)
            .map_err(|_| wc_status::LOC_PROT_ERR)?;
        let base = mr
            .offset_of(s.addr, sl)
            .map_err(|_| wc_status::LOC_PROT_ERR)?;
        if !f(&mr, base + skip as usize, done, n) {
            return Err(wc_status::LOC_PROT_ERR);
        }
        done += n;
        skip = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(wc_status::LOC_LEN_ERR)
    }
}

/// Copies `buf.len()` bytes of the message of `op` from byte `offset` on into `buf`.
fn gather(engine: &Engine, pdn: u32, op: &SendOp, offset: usize, buf: &mut [u8]) -> Result<(), u8> {
    if !op.inline.is_empty() {
        let src = op
            .inline
            .get(offset..offset + buf.len())
            .ok_or(wc_status::LOC_LEN_ERR)?;
        buf.copy_from_slice(src);
        return Ok(());
    }
    let len = buf.len();
    walk_sges(
        engine,
        pdn,
        &op.sges,
        offset as u64,
        len,
        false,
        |mr, at, pos, n| mr.mem.read(at, &mut buf[pos..pos + n]).is_ok(),
    )
}

/// Copies `data` into the buffer the SGEs describe, from byte `offset` on.
fn scatter(engine: &Engine, pdn: u32, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), u8> {
    walk_sges(
        engine,
        pdn,
        sges,
        offset,
        data.len(),
        true,
        |mr, at, pos, n| mr.mem.write(at, &data[pos..pos + n]).is_ok(),
    )
}
