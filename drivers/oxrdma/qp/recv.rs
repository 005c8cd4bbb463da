// SPDX-License-Identifier: GPL-2.0
//! The receive side of an RC QP: the completer (responses to our requests) and the responder
//! (requests from the peer): placing data, executing atomics, ACKs, NAKs and replays.

use super::*;
use crate::device::limits::MAX_MSG_SZ;
use crate::mr::Op;
use crate::stats::Counter;
use crate::tx::TxBatch;

/// Why an in-sequence request is refused: the NAK to send (at `psn`, else at the request's
/// PSN) and the status of the receive completion it ends, if one is in progress.
#[derive(Clone, Copy)]
pub(super) struct Refusal {
    code: NakCode,
    status: u8,
    psn: Option<Psn>,
    /// The process corrupted its receive queue: the QP goes to the error state
    /// ([`QpInner::ring_corrupt`]), for UC too.
    fault: Option<RingFault>,
}

impl Refusal {
    /// The receive queue had a WQE when the responder checked and none when it took it (or,
    /// for UC, none at all): a remote operational error, and a local QP error here.
    const NO_RECEIVE_WQE: Self =
        Self::new(NakCode::RemoteOperationalError, wc_status::LOC_QP_OP_ERR);

    const fn new(code: NakCode, status: u8) -> Self {
        Self {
            code,
            status,
            psn: None,
            fault: None,
        }
    }

    /// What taking a receive WQE for a new message (into the QP's slot) gave: nothing more
    /// to do, or the refusal (as [`Self::NO_RECEIVE_WQE`], and the QP fails, if the process
    /// corrupted the queue: an unreadable WQE, an impossible producer index).
    fn take(r: Result<bool, RingFault>) -> Result<(), Self> {
        Self::take_entry(r.map(|got| got.then_some(())))
    }

    /// [`Self::take`] of a WQE taken into storage of its own.
    fn take_entry<T>(r: Result<Option<T>, RingFault>) -> Result<T, Self> {
        match r {
            Ok(Some(e)) => Ok(e),
            Ok(None) => Err(Self::NO_RECEIVE_WQE),
            Err(f) => Err(Self {
                fault: Some(f),
                ..Self::NO_RECEIVE_WQE
            }),
        }
    }
}

impl QpInner {
    // ---- the receive side ------------------------------------------------------------------

    /// Handles a packet for this QP (ICRC already verified). Softirq context.
    pub(crate) fn receive(
        self: &Arc<Self>,
        pkt: &Packet,
        bytes: &[u8],
        net: &NetHeader<'_>,
        now: u64,
    ) {
        use crate::wire::opcode::Transport;
        let mut st = self.st.lock();
        if st.dead || !matches!(st.state, St::Rtr | St::Rts | St::Sqd | St::Sqe) {
            return;
        }
        // A connected QP takes packets only from its peer's address to its own (the UDP source
        // port is free: flow entropy), like rxe; anything else is a spoofing attempt or stray.
        if matches!(self.qp_type, QpType::Rc | QpType::Uc)
            && !st
                .attrs
                .path
                .is_some_and(|p| p.sgid == net.dgid && p.dgid == net.sgid)
        {
            self.dev.tx.stats.inc(Counter::RxDrop);
            return;
        }
        if !pkt.opcode.operation().is_response() {
            st.unwaited = 0;
        }
        match (self.qp_type, pkt.opcode.transport()) {
            (QpType::Rc, Transport::Rc) => {}
            (QpType::Uc, Transport::Uc) => return self.on_uc_request(&mut st, pkt, bytes),
            (QpType::Ud | QpType::Gsi, Transport::Ud) => {
                return self.receive_datagram(&mut st, pkt, bytes, net);
            }
            _ => return,
        }
        let op = pkt.opcode.operation();
        if op.is_response() {
            self.on_response(&mut st, pkt, bytes, now);
            let unsent = has_unsent(&st);
            drop(st);
            // The requester may have room again: take more WQEs, transmit, complete, here.
            self.run_softirq_after(unsent);
        } else {
            self.on_request(&mut st, pkt, bytes);
            // READ responses and atomic acknowledges: a burst here, the rest from the work item.
            let mut budget = softirq_burst();
            self.respond(&mut st, &mut budget);
            if st.outgoing.any() {
                drop(st);
                self.kick();
            }
        }
    }

    pub(super) fn on_response(&self, st: &mut QpState, pkt: &Packet, bytes: &[u8], now: u64) {
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
        match kind {
            ResponseKind::Ack {
                syndrome: Syndrome::RnrNak { .. },
                ..
            } => self.dev.tx.stats.inc(Counter::RcvdRnrNak),
            ResponseKind::Ack {
                syndrome: Syndrome::Nak(_),
                ..
            } => self.dev.tx.stats.inc(Counter::RcvdNak),
            _ => {}
        }
        let Some(req) = st.req.as_mut() else { return };
        let action = req.on_response(
            now,
            &Response {
                psn: pkt.headers.bth.psn,
                kind,
            },
        );
        if let ResponseAction::Place { wr_id, offset, len } = action {
            let idx = (wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].as_ref() else {
                return;
            };
            let r = match pkt.opcode.operation() {
                Operation::AtomicAcknowledge => match pkt.headers.atomic_ack_eth {
                    Some(AtomicAckEth { orig }) => {
                        scatter(&self.dev, self.pdn, &op.sges, 0, &orig.to_ne_bytes())
                    }
                    None => Err(wc_status::BAD_RESP_ERR),
                },
                _ => {
                    // Exactly the bytes the completer expects at this PSN (a path MTU,
                    // the rest for the last), so that a READ completes with its whole
                    // buffer written.
                    let data = pkt.payload(bytes);
                    if data.len() != len as usize
                        || u64::from(offset) + data.len() as u64 > u64::from(op.len)
                    {
                        Err(wc_status::BAD_RESP_ERR)
                    } else {
                        scatter(&self.dev, self.pdn, &op.sges, offset as u64, data)
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

    pub(super) fn send_ack(&self, st: &QpState, a: &Ack) {
        self.dev.tx.stats.inc(match a.syndrome {
            Syndrome::Ack { .. } => Counter::AckSent,
            Syndrome::RnrNak { .. } => Counter::RnrNakSent,
            Syndrome::Nak(_) => Counter::NakSent,
        });
        let Some(path) = self.tx_path(st) else { return };
        let mut h = Headers::new(self.bth(st, Opcode::RcAcknowledge, a.psn));
        h.aeth = Some(Aeth::new(a.syndrome, a.msn));
        let _ = self.dev.tx.send(&path, &h, 0, |_| true);
    }

    pub(super) fn on_request(&self, st: &mut QpState, pkt: &Packet, bytes: &[u8]) {
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
        // A receive queue the process corrupted (an impossible producer index) counts as
        // having a WQE: taking it then fails, and the QP goes to the error state
        // (`Refusal::take`) instead of answering RNR NAKs for ever.
        let rwqe_available = if needs_rwqe {
            if op == Operation::Send {
                self.rq.available().unwrap_or(true)
            } else {
                st.recv.is_some() || self.rq.available().unwrap_or(true)
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
            ResponderAction::Execute { ack, slot } => {
                match self.execute_in_order(st, pkt, bytes, slot) {
                    Ok(()) => {
                        if let Some(a) = ack {
                            self.ack_in_order(st, a);
                        }
                        if st.state == St::Rtr {
                            self.events.raise(QpEvent::CommEstablished);
                        }
                    }
                    Err(Refusal {
                        code,
                        status,
                        psn,
                        fault,
                    }) => {
                        let Some(resp) = st.resp.as_mut() else { return };
                        let a = resp.reject(psn.unwrap_or(req.psn), code);
                        self.send_ack(st, &a);
                        self.fail_recv(st, status);
                        if let Some(f) = fault {
                            return self.ring_corrupt(st, "receive queue", f, None);
                        }
                        self.events.raise(if code == NakCode::RemoteAccessError {
                            QpEvent::AccessError
                        } else {
                            QpEvent::RequestError
                        });
                        self.to_error(st, None);
                    }
                }
            }
            ResponderAction::ReAck(a) | ResponderAction::Nak(a) | ResponderAction::RnrNak(a) => {
                if matches!(a.syndrome, Syndrome::Ack { .. }) {
                    self.dev.tx.stats.inc(Counter::DuplicateRequest);
                } else if matches!(a.syndrome, Syndrome::Nak(NakCode::PsnSequenceError)) {
                    self.dev.tx.stats.inc(Counter::OutOfSeqRequest);
                }
                self.ack_in_order(st, a)
            }
            ResponderAction::Replay { slot, from, .. } => {
                self.dev.tx.stats.inc(Counter::DuplicateRequest);
                // Sent again from `from` on (a response still to send is restarted there).
                let Some(res) = st.resp.as_ref().and_then(|r| r.resource(slot)).copied() else {
                    return;
                };
                let next = from.diff(res.first_psn).max(0) as u32;
                // A duplicate READ asks again for the rest of the original from its PSN on:
                // the same R_Key, address and end (see `same_read`). Any other RETH is not a
                // retransmission and gets no data.
                if res.kind == OpKind::Read && !self.same_read(st, slot, next, pkt.headers.reth) {
                    self.dev.tx.stats.inc(Counter::RxDrop);
                    return;
                }
                st.outgoing.set(slot, Outgoing { next, replay: true });
            }
            ResponderAction::Drop => {}
        }
    }

    /// A UC request packet: executed in sequence, no acknowledgement; a lost packet loses its
    /// message (see `wire::uc`), and so does one that cannot be executed (no receive WQE, a
    /// refused memory access): its receive WQE, if it had one, completes with the error.
    fn on_uc_request(&self, st: &mut QpState, pkt: &Packet, bytes: &[u8]) {
        let opc = pkt.opcode;
        let pos = opc.position();
        if !matches!(opc.operation(), Operation::Send | Operation::RdmaWrite) {
            self.dev.tx.stats.inc(Counter::RxDrop);
            return;
        }
        let first = matches!(pos, Position::First | Position::Only);
        let last = matches!(pos, Position::Last | Position::Only);
        match st.uc.on_packet(pkt.headers.bth.psn, first, last) {
            UcAction::Drop => {
                self.dev.tx.stats.inc(Counter::OutOfSeqRequest);
                // A WRITE in progress is over; a SEND's receive WQE waits for the next one.
                st.write = None;
            }
            UcAction::Execute { .. } => match self.execute(st, pkt, bytes, None) {
                Ok(()) => {
                    if st.state == St::Rtr {
                        self.events.raise(QpEvent::CommEstablished);
                    }
                }
                Err(Refusal { status, fault, .. }) => {
                    self.dev.tx.stats.inc(Counter::RxDrop);
                    st.uc.abandon();
                    st.write = None;
                    self.fail_recv(st, status);
                    if let Some(f) = fault {
                        self.ring_corrupt(st, "receive queue", f, None);
                    }
                }
            },
        }
    }

    /// Completes the receive WQE a message was filling, if any, with error `status`.
    fn fail_recv(&self, st: &mut QpState, status: u8) {
        if let Some(p) = st.recv.take() {
            self.recv_cq.push(
                &Cqe {
                    wr_id: p.wr_id,
                    status,
                    opcode: wc_opcode::RECV,
                    qp_num: self.qpn,
                    ..Default::default()
                },
                false,
                &self.events,
            );
        }
    }

    /// Executes an in-sequence RC request if it continues the message stream (FIRST, MIDDLE,
    /// LAST of one operation, or ONLY); one that does not is an invalid request, and none of
    /// it is executed.
    fn execute_in_order(
        &self,
        st: &mut QpState,
        pkt: &Packet,
        bytes: &[u8],
        slot: Option<usize>,
    ) -> Result<(), Refusal> {
        let (op, pos) = (pkt.opcode.operation(), pkt.opcode.position());
        if !st.msg.allows(op, pos) {
            return Err(Refusal::new(
                NakCode::InvalidRequest,
                wc_status::REM_INV_REQ_ERR,
            ));
        }
        self.execute(st, pkt, bytes, slot)?;
        st.msg.advance(op, pos);
        Ok(())
    }

    /// Executes an in-sequence request.
    pub(super) fn execute(
        &self,
        st: &mut QpState,
        pkt: &Packet,
        bytes: &[u8],
        slot: Option<usize>,
    ) -> Result<(), Refusal> {
        let opc = pkt.opcode;
        let pos = opc.position();
        let first = matches!(pos, Position::First | Position::Only);
        let last = matches!(pos, Position::Last | Position::Only);
        let payload = pkt.payload(bytes);
        let inval = Refusal::new(NakCode::InvalidRequest, wc_status::REM_INV_REQ_ERR);
        let access_err = Refusal::new(NakCode::RemoteAccessError, wc_status::REM_ACCESS_ERR);
        match opc.operation() {
            Operation::Send => {
                if first && self.qp_type == QpType::Uc && st.recv.is_some() {
                    // UC: the receive WQE of a message that was lost is filled again.
                    if let Some(p) = st.recv.as_mut() {
                        p.offset = 0;
                    }
                } else if first {
                    if st.recv.is_some() {
                        return Err(inval);
                    }
                    Refusal::take(st.recv.fill(&self.rq))?;
                }
                let Some(p) = st.recv.as_mut() else {
                    return Err(inval);
                };
                if p.offset + payload.len() as u64 > p.entry.capacity() {
                    return Err(Refusal::new(
                        NakCode::InvalidRequest,
                        wc_status::LOC_LEN_ERR,
                    ));
                }
                if let Err(s) = scatter(&self.dev, self.pdn, p.entry.sges(), p.offset, payload) {
                    return Err(Refusal::new(NakCode::RemoteOperationalError, s));
                }
                p.offset += payload.len() as u64;
                if last {
                    if let Some(i) = pkt.headers.ieth {
                        // SEND with invalidate: a fast-registration MR of this PD becomes
                        // invalid. Keys of other MRs are only reported (a process has no
                        // invalidatable MRs yet).
                        if let Some(mr) = self.dev.mr_slot(i.rkey).filter(|m| m.is_fast()) {
                            mr.invalidate(self.pdn, i.rkey).map_err(|_| inval)?;
                        }
                    }
                    let Some(p) = st.recv.take() else {
                        return Err(inval);
                    };
                    let mut cqe = Cqe {
                        wr_id: p.wr_id,
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
                    self.recv_cq
                        .push(&cqe, pkt.headers.bth.solicited, &self.events);
                }
                Ok(())
            }
            Operation::RdmaWrite => {
                if first {
                    let Some(reth) = pkt.headers.reth else {
                        return Err(inval);
                    };
                    if reth.dma_len > MAX_MSG_SZ {
                        return Err(inval);
                    }
                    let (mr, access) = self
                        .remote_mr(st, Op::Write, reth.rkey, reth.va, reth.dma_len.into())
                        .map_err(|_| access_err)?;
                    st.write = Some(WriteProgress {
                        mr,
                        access,
                        done: 0,
                    });
                }
                let Some(w) = st.write.as_mut() else {
                    return Err(inval);
                };
                if w.done + payload.len() as u64 > w.access.len {
                    return Err(inval);
                }
                // Checked again per packet: the MR may have been invalidated or
                // deregistered since the first. (A zero-length WRITE has no MR and,
                // as checked above, no payload.)
                if let Some(mr) = &w.mr {
                    mr.write(&w.access, w.done, payload)
                        .map_err(|_| access_err)?;
                }
                w.done += payload.len() as u64;
                if last {
                    let w = st.write.take();
                    if w.as_ref().is_some_and(|w| w.done != w.access.len) {
                        return Err(inval);
                    }
                    if let Some(i) = pkt.headers.imm_dt {
                        let entry = Refusal::take_entry(self.rq.take())?;
                        // The RETH came with the first packet; this is the last.
                        let len = w.as_ref().map_or(0, |w| w.access.len as u32);
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
                            &self.events,
                        );
                    }
                }
                Ok(())
            }
            Operation::RdmaReadRequest => {
                let (Some(reth), Some(slot)) = (pkt.headers.reth, slot) else {
                    return Err(inval);
                };
                if reth.dma_len > MAX_MSG_SZ || self.overrun(st, slot) {
                    return Err(inval);
                }
                let (mr, access) = self
                    .remote_mr(st, Op::Read, reth.rkey, reth.va, reth.dma_len.into())
                    .map_err(|_| access_err)?;
                if let Some(r) = st.reads.get_mut(slot) {
                    *r = Some(ReadCtx { mr, access });
                }
                st.outgoing.set(slot, Outgoing::default());
                Ok(())
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let (Some(a), Some(slot)) = (pkt.headers.atomic_eth, slot) else {
                    return Err(inval);
                };
                if self.overrun(st, slot) {
                    return Err(inval);
                }
                let Ok((Some(mr), acc)) = self.remote_mr(st, Op::Atomic, a.rkey, a.va, 8) else {
                    return Err(access_err);
                };
                let orig = if opc.operation() == Operation::CompareSwap {
                    mr.compare_swap(&acc, a.compare, a.swap_add)
                } else {
                    mr.fetch_add(&acc, a.swap_add)
                };
                let orig = orig.map_err(|e| match e {
                    // Misaligned: an invalid request (IBA 9.4.5).
                    MrError::Fault => inval,
                    _ => access_err,
                })?;
                if let Some(r) = st.resp.as_mut().and_then(|r| r.resource_mut(slot)) {
                    r.data = orig;
                }
                st.outgoing.set(slot, Outgoing::default());
                Ok(())
            }
            _ => Err(inval),
        }
    }

    /// Whether a new READ or ATOMIC in `slot` is one more than the `max_dest_rd_atomic` the
    /// requester was granted: the slot's request still has responses to send for the first
    /// time, so the requester cannot have completed it. (Responses sent again for a
    /// duplicate do not count: the originals may have arrived after all.)
    fn overrun(&self, st: &QpState, slot: usize) -> bool {
        st.outgoing.get(slot).is_some_and(|o| !o.replay)
    }

    /// The MR a remote `op` on `len` bytes at `va` with `rkey` may use, and that access:
    /// the QP allows it, the key is live, same PD, the MR grants it, in bounds. A zero-length
    /// access uses no memory: only the QP's right is checked, and there is no MR (the R_Key
    /// and address are not looked at, IBA 9.4.1.1 / 9.4.4).
    pub(super) fn remote_mr(
        &self,
        st: &QpState,
        op: Op,
        rkey: u32,
        va: u64,
        len: u64,
    ) -> Result<(Option<Arc<Mr>>, Access), MrError> {
        let right = match op {
            Op::Read => access::REMOTE_READ,
            Op::Write => access::REMOTE_WRITE,
            Op::Atomic => access::REMOTE_ATOMIC,
        };
        if st.attrs.access & right == 0 {
            return Err(MrError::Rights);
        }
        let a = Access {
            key: rkey,
            pdn: self.pdn,
            remote: true,
            va,
            len,
        };
        if len == 0 {
            return Ok((None, a));
        }
        let mr = self.dev.mr_slot(rkey).ok_or(MrError::Key)?;
        mr.check(&a, op)?;
        Ok((Some(mr), a))
    }

    /// Whether `reth`, of a duplicate of the READ in `slot` sent again from the response
    /// `skip` on, asks for exactly the rest of that READ from there: the same key, the
    /// original's address plus the bytes of the `skip` responses before, and its end.
    /// (The responses are sent from the original's access: what they carry must be what
    /// the requester places at their PSNs.)
    fn same_read(&self, st: &QpState, slot: usize, skip: u32, reth: Option<Reth>) -> bool {
        let (Some(reth), Some(Some(rd))) = (reth, st.reads.get(slot)) else {
            return false;
        };
        let before = (u64::from(skip) * u64::from(st.attrs.pmtu.max(256))).min(rd.access.len);
        reth.rkey == rd.access.key
            && Some(reth.va) == rd.access.va.checked_add(before)
            && u64::from(reth.dma_len) == rd.access.len - before
    }

    /// Sends an ACK or NAK now, or after the responses still to send (it acknowledges their
    /// PSNs too, so it must not overtake them).
    fn ack_in_order(&self, st: &mut QpState, a: Ack) {
        if st.outgoing.any() {
            st.held_ack = Some(a);
        } else {
            self.send_ack(st, &a);
        }
    }

    /// Sends pending READ responses and atomic acknowledges, oldest request first, at most
    /// `budget` packets (taken off it); then an acknowledge that waited for them. A response
    /// whose memory is no longer accessible ends its request: a new one with a remote access
    /// NAK (the QP goes to the error state), a replayed one silently (a duplicate can be
    /// stale, overtaken on the way by the requester's later messages: an NVMe-oF target
    /// completes its READ, then invalidates the host's MR with its SEND; a requester that
    /// really still waits ends with its retries).
    pub(super) fn respond(&self, st: &mut QpState, budget: &mut u32) {
        if st.resp.is_none() {
            return;
        }
        let Some(path) = self.tx_path(st) else {
            return;
        };
        // Runs of READ response middle packets leave as one segmentation offload; what the
        // batch holds goes out before any acknowledgement below.
        let mut batch = self.dev.tx.batch(&path);
        while *budget > 0 {
            let Some(slot) = self.oldest_outgoing(st) else {
                break;
            };
            *budget -= 1;
            // Read before sending: the send moves the resource on (or ends it).
            let replay = st.outgoing.get(slot).is_some_and(|o| o.replay);
            match self.send_response(st, slot, &mut batch) {
                Ok(()) => {}
                Err(psn) => {
                    st.outgoing.clear(slot);
                    if replay {
                        self.dev.tx.stats.inc(Counter::RxDrop);
                        continue;
                    }
                    let Some(resp) = st.resp.as_mut() else { return };
                    let a = resp.reject(psn, NakCode::RemoteAccessError);
                    batch.flush();
                    self.send_ack(st, &a);
                    self.events.raise(QpEvent::AccessError);
                    self.to_error(st, None);
                    return;
                }
            }
        }
        batch.flush();
        if !st.outgoing.any() {
            if let Some(a) = st.held_ack.take() {
                self.send_ack(st, &a);
            }
        }
    }

    /// The resource slot with responses to send whose request is the oldest.
    fn oldest_outgoing(&self, st: &QpState) -> Option<usize> {
        let resp = st.resp.as_ref()?;
        let mut best: Option<(usize, Psn)> = None;
        for slot in st.outgoing.slots() {
            let Some(res) = resp.resource(slot) else {
                return Some(slot); // nothing to send: `send_response` forgets it
            };
            if best.map_or(true, |(_, p)| res.first_psn.is_before(p)) {
                best = Some((slot, res.first_psn));
            }
        }
        best.map(|(slot, _)| slot)
    }

    /// Sends the next response of the resource in `slot` and advances it (it is done after its
    /// last). A READ's data is read through its access, checked again now: if the MR no longer
    /// allows it, nothing is sent and the PSN of the refused response is returned.
    fn send_response(
        &self,
        st: &mut QpState,
        slot: usize,
        batch: &mut TxBatch<'_>,
    ) -> Result<(), Psn> {
        let res = st.resp.as_ref().and_then(|r| r.resource(slot)).copied();
        let (Some(res), Some(o)) = (res, st.outgoing.get(slot)) else {
            st.outgoing.clear(slot);
            return Ok(());
        };
        let i = o.next;
        let done = i + 1 >= res.npsn;
        if done {
            st.outgoing.clear(slot);
        } else {
            st.outgoing.set(slot, Outgoing { next: i + 1, ..o });
        }
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
            let _ = batch.send(&h, 0, false, |_| true);
            return Ok(());
        }
        let Some(Some(rd)) = st.reads.get(slot) else {
            return Ok(());
        };
        if i >= res.npsn {
            return Ok(());
        }
        let pmtu = st.attrs.pmtu.max(256);
        let total = rd.access.len;
        let off = u64::from(i) * u64::from(pmtu);
        let len = (total - off.min(total)).min(u64::from(pmtu)) as usize;
        let opc = read_response_opcode(i, res.npsn);
        let psn = res.first_psn.add(i as i32);
        let mut h = Headers::new(self.bth(st, opc, psn));
        if !matches!(opc, Opcode::RcRdmaReadResponseMiddle) {
            h.aeth = Some(ack);
        }
        let mut refused = false;
        let more = matches!(opc, Opcode::RcRdmaReadResponseMiddle);
        let _ = batch.send(&h, len, more, |buf| {
            // A zero-length READ has no MR and one empty response.
            refused = rd
                .mr
                .as_ref()
                .is_some_and(|mr| mr.read(&rd.access, off, buf).is_err());
            !refused
        });
        if refused {
            return Err(psn);
        }
        Ok(())
    }
}
