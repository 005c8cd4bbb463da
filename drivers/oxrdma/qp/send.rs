// SPDX-License-Identifier: GPL-2.0
//! The send side of an RC QP: taking WQEs from the SQ ring into the requester, building and
//! transmitting request packets, timers, and send completions.

use super::*;
use crate::stats::Counter;

/// Most passes of one [`QpInner::service`] call over the SQ ring.
const SERVICE_PASSES: u32 = 4;

impl QpInner {
    // ---- the send side ---------------------------------------------------------------------

    /// Runs the send side: sends the responder's pending responses, takes new WQEs, handles
    /// timers, transmits, completes; sends at most `budget` packets (and takes them off it).
    /// Returns the next deadline (us) for the QP's timer.
    pub(crate) fn service(self: &Arc<Self>, now: u64, budget: &mut u32) -> Option<u64> {
        let mut exhausted = false;
        let deadline = self.service_locked(now, budget, &mut exhausted);
        if exhausted {
            self.report_retries_exhausted();
        }
        deadline
    }

    /// Says in the log where a connection stopped making progress: this QP's send window and,
    /// when the peer QP is on this device (loopback), its responder's view (outside this QP's
    /// lock: two QP locks are never held together).
    fn report_retries_exhausted(&self) {
        let (una, sent_end, next, dest) = {
            let st = self.st.lock();
            let Some(r) = st.req.as_ref() else { return };
            (r.una(), r.sent_end(), r.next_psn(), st.attrs.dest_qpn)
        };
        pr_info!(
            "QP {:#x}: transport retries exhausted: unacknowledged from PSN {:#x}, sent up to {:#x}, posted up to {:#x}\n",
            self.qpn,
            una.get(),
            sent_end.get(),
            next.get()
        );
        // (Not this QP itself: its peer on another device may have its number.)
        let Some(peer) = self.dev.qp(dest).filter(|p| !core::ptr::eq(&**p, self)) else {
            return;
        };
        let st = peer.st.lock();
        if st.attrs.dest_qpn != self.qpn {
            return; // a QP of this device with the same number as the remote one
        }
        if let Some(r) = st.resp.as_ref() {
            pr_info!(
                "QP {:#x} (its peer, on this device): state {:?}, expects PSN {:#x}, gap NAKed {}, message open {:?}\n",
                dest,
                st.state,
                r.epsn().get(),
                r.nak_sent(),
                st.msg.open()
            );
        }
    }

    fn service_locked(
        self: &Arc<Self>,
        now: u64,
        budget: &mut u32,
        exhausted: &mut bool,
    ) -> Option<u64> {
        let mut st = self.st.lock();
        if st.dead {
            return None;
        }
        if matches!(st.state, St::Rtr | St::Rts | St::Sqd | St::Sqe) {
            self.respond(&mut st, budget);
        }
        match st.state {
            St::Err => {
                self.flush_queues(&mut st);
                return None;
            }
            St::Rts | St::Sqd => {}
            _ => return None,
        }
        if self.is_datagram() {
            self.service_datagrams(&mut st);
            return None;
        }
        if let Some(req) = st.req.as_mut() {
            match req.on_timer(now) {
                TimerAction::Retransmit => self.dev.tx.stats.inc(Counter::Retransmits),
                TimerAction::Error(RcError::RetryExceeded | RcError::RnrRetryExceeded) => {
                    self.dev.tx.stats.inc(Counter::RetryExceeded);
                    *exhausted = true;
                }
                TimerAction::Error(_) | TimerAction::Nothing | TimerAction::Resume => {}
            }
        }
        // Takes WQEs, transmits, completes; then takes again what the process published
        // meanwhile, until the ring is empty (the busy mark then clear) or the requester can
        // take nothing more (full, or a fence waiting: the completions that free it run the
        // QP again). More than a few passes and the rest waits for the QP's work item.
        if st.state == St::Rts {
            self.sq.set_busy();
            if let Err(f) = self.take_send_wqes(&mut st) {
                self.ring_fault(&mut st, f);
                if st.state != St::Rts {
                    return None;
                }
            }
        }
        let mut passes = 0;
        loop {
            self.transmit(&mut st, now, budget);
            self.complete_sends(&mut st);
            if st.state != St::Rts || *budget == 0 || self.sq_idle(&mut st) {
                break;
            }
            passes += 1;
            if passes == SERVICE_PASSES {
                self.kick();
                break;
            }
            let before = st.next_seq;
            if let Err(f) = self.take_send_wqes(&mut st) {
                self.ring_fault(&mut st, f);
                break;
            }
            if st.next_seq == before {
                break;
            }
        }
        if st.state == St::Sqd && st.sqd_notify && st.req.as_ref().map_or(true, |r| r.is_idle()) {
            st.sqd_notify = false;
            self.events.raise(QpEvent::SqDrained);
        }
        st.req.as_ref().and_then(|r| r.deadline())
    }

    /// The send queue could not be taken from: the process's fault (the QP goes to the error
    /// state), or, for [`RingFault::NoMemory`], the kernel's (the WQE stays in the ring and
    /// the QP's timer takes it again, [`QpInner::retry_later`]).
    pub(super) fn ring_fault(&self, st: &mut QpState, f: RingFault) {
        if f == RingFault::NoMemory {
            self.retry.store(true, Ordering::Relaxed);
            return;
        }
        self.ring_corrupt(st, "send queue", f, Some(wc_status::LOC_QP_OP_ERR));
    }

    /// Whether the SQ ring is empty; if so, the busy mark is cleared (and the ring checked
    /// once more, setting the mark again if the process posted in between).
    pub(super) fn sq_idle(&self, st: &mut QpState) -> bool {
        if self.sq.refresh(&mut st.sq_view).is_err() || !st.sq_view.is_empty() {
            return false;
        }
        self.sq.clear_busy();
        if self.sq.refresh(&mut st.sq_view).is_ok() && st.sq_view.is_empty() {
            return true;
        }
        self.sq.set_busy();
        false
    }

    /// Takes the SQ ring's WQEs, in order and copied out of the ring, while the requester
    /// has a free slot (a datagram QP's always has): each one leaves the ring (its slot is
    /// the process's again at once), then goes to `take` with its operation slot (`take`
    /// returns whether to go on), unless `wait` keeps it in the ring (and stops the taking).
    /// A WQE malformed beyond validation (lengths past its slot) completes as a local QP
    /// operation error and ends the taking with its fault (the QP then goes to the error
    /// state); one that cannot be copied for want of memory stays in the ring
    /// ([`RingFault::NoMemory`]).
    pub(super) fn take_sq(
        &self,
        st: &mut QpState,
        wait: impl Fn(&mut QpState, &SendEntry) -> bool,
        mut take: impl FnMut(&mut QpState, usize, &mut SendEntry) -> bool,
    ) -> Result<(), RingFault> {
        self.sq.refresh(&mut st.sq_view)?;
        let mut done = Ok(());
        while let Some(slot) = st.sq_view.peek() {
            let idx = (st.next_seq % REQ_WQES as u64) as usize;
            if st.ops[idx].is_some() {
                break; // the requester is full
            }
            let mut entry = match self.sq.read(slot) {
                Ok(e) => e,
                Err(f) => {
                    if f != RingFault::NoMemory {
                        st.sq_view.consume();
                        self.sq.publish_consumer(st.sq_view.consumer());
                        let cqe = Cqe {
                            wr_id: self.sq.wr_id_at(slot),
                            status: wc_status::LOC_QP_OP_ERR,
                            qp_num: self.qpn,
                            ..Default::default()
                        };
                        self.send_cq.push(&cqe, false, &self.events);
                    }
                    done = Err(f);
                    break;
                }
            };
            if wait(st, &entry) {
                break;
            }
            st.sq_view.consume();
            self.sq.publish_consumer(st.sq_view.consumer());
            if !take(st, idx, &mut entry) {
                break;
            }
        }
        done
    }

    /// Takes the SQ's new WQEs into the requester.
    pub(super) fn take_send_wqes(&self, st: &mut QpState) -> Result<(), RingFault> {
        // A fenced WQE waits until everything before it (in particular RDMA READs and
        // ATOMICs, IBA 10.8.3.3) has completed, and a long one until the PSNs it needs are
        // free (see `Requester::must_wait`); it stays in the ring meanwhile and the
        // completions that free the requester run the QP again.
        let wait = |st: &mut QpState, e: &SendEntry| {
            let kind = WrOpcode::from_u8(e.wqe.opcode).and_then(kind_of);
            if let (Some(kind), Some(req)) = (kind, st.req.as_ref()) {
                if message_len(kind, e).is_some_and(|len| req.must_wait(kind, len)) {
                    return true;
                }
            }
            let idle = |st: &QpState| st.req.as_ref().map_or(true, |r| r.is_idle());
            if e.wqe.flags & WQE_FLAG_FENCE == 0 || idle(st) {
                return false;
            }
            // Completions already acknowledged may be all that is in the way.
            self.complete_sends(st);
            st.state != St::Rts || !idle(st)
        };
        // A local operation (REG_MR, LOCAL_INV) is executed when it is taken, in order, like
        // rxe and hardware do (work before it that still uses the MR it changes is the ULP's
        // to fence), and completes after the work before it.
        self.take_sq(st, wait, |st, idx, entry| {
            if WrOpcode::from_u8(entry.wqe.opcode).is_some_and(|o| o.is_local()) {
                self.local_op(st, idx, entry);
            } else {
                self.post_one(st, idx, entry);
            }
            st.state == St::Rts
        })
    }

    /// Posts a kernel user's send WR into the SQ ring (any context: no sleeping) and kicks
    /// the QP. Errors are immediate (`EINVAL` for a WR the QP cannot take, `ENOMEM` when
    /// the SQ is full), like hardware's.
    pub(crate) fn post_send(self: &Arc<Self>, wr: &SendWr<'_, Ah>) -> Result {
        if !self.kernel {
            return Err(EINVAL);
        }
        // A datagram QP's WR names its destination; a connected QP's must not.
        let (ah, remote_qpn, remote_qkey) = match (&wr.ud, self.is_datagram()) {
            (Some(u), true) => (u.ah.inner.num, u.remote_qpn, u.remote_qkey),
            (None, false) => (0, 0, 0),
            _ => return Err(EINVAL),
        };
        let (opcode, imm_or_inv, remote_addr, rkey, compare_add, swap) = match wr.op {
            KOp::Send => (WrOpcode::Send, 0, 0, 0, 0, 0),
            KOp::SendWithImm(imm) => (WrOpcode::SendWithImm, imm, 0, 0, 0, 0),
            KOp::SendWithInv(key) => (WrOpcode::SendWithInv, key, 0, 0, 0, 0),
            KOp::Write { remote_addr, rkey } => (WrOpcode::RdmaWrite, 0, remote_addr, rkey, 0, 0),
            KOp::WriteWithImm {
                remote_addr,
                rkey,
                imm,
            } => (WrOpcode::RdmaWriteWithImm, imm, remote_addr, rkey, 0, 0),
            KOp::Read { remote_addr, rkey } => (WrOpcode::RdmaRead, 0, remote_addr, rkey, 0, 0),
            KOp::ReadWithInv {
                remote_addr,
                rkey,
                inv,
            } => (WrOpcode::RdmaReadWithInv, inv, remote_addr, rkey, 0, 0),
            KOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => (
                WrOpcode::AtomicCmpAndSwp,
                0,
                remote_addr,
                rkey,
                compare,
                swap,
            ),
            KOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => (WrOpcode::AtomicFetchAndAdd, 0, remote_addr, rkey, add, 0),
            KOp::LocalInv(key) => (WrOpcode::LocalInv, 0, 0, key, 0, 0),
            KOp::RegMr {
                key,
                access,
                iova,
                length,
            } => (WrOpcode::RegMr, access, iova, key, length, 0),
        };
        let mut flags = 0;
        if wr.signaled {
            flags |= WQE_FLAG_SIGNALED;
        }
        if wr.solicited {
            flags |= WQE_FLAG_SOLICITED;
        }
        if wr.fence {
            flags |= WQE_FLAG_FENCE;
        }
        let inline = wr.inline && opcode.may_be_inline();
        let mut wqe = SendWqe {
            wr_id: wr.wr_id,
            opcode: opcode as u8,
            flags,
            num_sge: u8::try_from(wr.sges.len()).map_err(|_| EINVAL)?,
            imm_or_inv,
            remote_addr,
            rkey,
            compare_add,
            swap,
            ah,
            remote_qpn,
            remote_qkey,
            ..Default::default()
        };
        let mut data = [0u8; MAX_INLINE as usize];
        if inline {
            let len = usize::try_from(wr.len()).map_err(|_| EINVAL)?;
            if len > self.caps.max_inline_data as usize {
                return Err(EINVAL);
            }
            wr.copy_inline(&mut data[..len])?;
            wqe.flags |= WQE_FLAG_INLINE;
            wqe.num_sge = 0;
            wqe.inline_len = len as u32;
        }
        if !opcode.has_data() {
            wqe.num_sge = 0;
        }
        wqe.validate_for(
            self.caps.max_send_sge as u8,
            self.caps.max_inline_data,
            true,
        )
        .map_err(|_| EINVAL)?;
        let ring = &self.sq.ring;
        post_entry(&self.sq_post, ring, &self.sq.geo, |at| {
            ring.write(at, &wqe.to_bytes())?;
            if inline {
                ring.write(at + SEND_WQE_SIZE, &data[..wqe.inline_len as usize])
            } else {
                write_sges(ring, at + SEND_WQE_SIZE, &wr.sges[..wqe.num_sge as usize])
            }
        })?;
        self.kick();
        Ok(())
    }

    /// Executes a local operation, REG_MR or LOCAL_INV, and queues its completion behind the
    /// work before it (in slot `idx` of the requester's operations). A failure is a local QP
    /// operation error and moves the QP to the error state.
    fn local_op(&self, st: &mut QpState, idx: usize, e: &mut SendEntry) {
        let w = e.wqe;
        let v = w.validate_for(
            self.caps.max_send_sge as u8,
            self.caps.max_inline_data,
            self.kernel,
        );
        let mr = self.dev.mr_slot(w.rkey).ok_or(MrError::Key);
        let (opcode, done) = match v.map(|v| v.opcode) {
            Ok(o @ WrOpcode::LocalInv) => (o, mr.and_then(|m| m.invalidate(self.pdn, w.rkey))),
            Ok(o @ WrOpcode::RegMr) => (
                o,
                mr.and_then(|m| {
                    m.register(self.pdn, w.rkey, w.imm_or_inv, w.remote_addr, w.compare_add)
                }),
            ),
            _ => (WrOpcode::LocalInv, Err(MrError::State)),
        };
        let queued = st
            .req
            .as_mut()
            .is_some_and(|r| r.post_local(st.next_seq).is_ok());
        if !queued {
            // No requester, or it refused (QP error): complete it here.
            self.send_cq.push(
                &Cqe {
                    wr_id: w.wr_id,
                    status: wc_status::LOC_QP_OP_ERR,
                    opcode: wc_opcode_of(opcode),
                    qp_num: self.qpn,
                    ..Default::default()
                },
                false,
                &self.events,
            );
            self.to_error(st, None);
            return;
        }
        st.next_seq += 1;
        st.ops[idx] = Some(SendOp {
            wr_id: w.wr_id,
            opcode,
            flags: w.flags,
            imm_or_inv: 0,
            remote_addr: 0,
            rkey: w.rkey,
            compare_add: 0,
            swap: 0,
            len: 0,
            sges: e.sges.take(),
            inline: e.inline.take(),
            local_error: done.is_err().then_some(wc_status::LOC_QP_OP_ERR),
        });
        if done.is_err() {
            self.to_error(st, None);
        }
    }

    pub(super) fn post_one(&self, st: &mut QpState, idx: usize, e: &mut SendEntry) {
        let fail = |this: &Self, st: &mut QpState, wr_id: u64, status: u8| {
            this.send_cq.push(
                &Cqe {
                    wr_id,
                    status,
                    qp_num: this.qpn,
                    ..Default::default()
                },
                false,
                &this.events,
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
        // UC carries SENDs and RDMA WRITEs (with immediate data or not), nothing else.
        if self.qp_type == QpType::Uc
            && !matches!(
                v.opcode,
                WrOpcode::Send
                    | WrOpcode::SendWithImm
                    | WrOpcode::RdmaWrite
                    | WrOpcode::RdmaWriteWithImm
            )
        {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR);
        }
        let Some(len) = message_len(kind, e) else {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_LEN_ERR);
        };
        let seq = st.next_seq;
        let Some(req) = st.req.as_mut() else {
            return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR);
        };
        match req.post(seq, kind, len) {
            Ok(_) => {}
            // Longer than this path MTU's PSNs can carry (the take waited for room).
            Err(PostError::TooLong) => {
                return fail(self, st, e.wqe.wr_id, wc_status::LOC_LEN_ERR);
            }
            Err(_) => return fail(self, st, e.wqe.wr_id, wc_status::LOC_QP_OP_ERR),
        }
        st.next_seq += 1;
        st.unwaited = if self.sig_all || e.wqe.flags & WQE_FLAG_SIGNALED != 0 {
            0
        } else {
            st.unwaited.saturating_add(1)
        };
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
            sges: e.sges.take(),
            inline: e.inline.take(),
            local_error: None,
        });
    }

    pub(super) fn tx_path(&self, st: &QpState) -> Option<TxPath> {
        let p = st.attrs.path?;
        Some(TxPath {
            src: IpAddr::from_gid(p.sgid),
            dst: IpAddr::from_gid(p.dgid),
            traffic_class: p.traffic_class,
            flow_label: p.flow_label,
            hop_limit: if p.hop_limit == 0 { 64 } else { p.hop_limit },
            sport: flow_sport(self.qpn, st.attrs.dest_qpn),
            v1_dmac: (!p.roce_v2).then_some(p.dmac),
        })
    }

    pub(super) fn bth(&self, st: &QpState, op: Opcode, psn: Psn) -> Bth {
        Bth {
            opcode: op.value(),
            pkey: 0xffff,
            dest_qp: st.attrs.dest_qpn,
            psn,
            ..Default::default()
        }
    }

    pub(super) fn transmit(&self, st: &mut QpState, now: u64, budget: &mut u32) {
        let Some(path) = self.tx_path(st) else { return };
        // Runs of a message's middle packets leave as one segmentation offload; the batch
        // sends what it holds when it goes out of scope, before this returns.
        let mut batch = self.dev.tx.batch(&path);
        while *budget > 0 {
            let Some(req) = st.req.as_mut() else { return };
            let Some(tx) = req.next_packet(now) else {
                return;
            };
            let idx = (tx.wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].as_ref() else {
                return;
            };
            let uc = self.qp_type == QpType::Uc;
            let mut opc = request_opcode(op.opcode, tx.first, tx.last);
            if uc {
                // post_one let only SENDs and WRITEs in.
                opc = uc_opcode(opc).unwrap_or(opc);
            }
            let mut h = Headers::new(self.bth(st, opc, tx.psn));
            h.bth.ack_req = tx.ack_req && !uc;
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
            *budget -= 1;
            let mut local_err = None;
            let dev = &self.dev;
            let pdn = self.pdn;
            // Packets of the same length likely follow: a message's middle packets, or a
            // single-packet message with more of the queue's packets behind it (a stream of
            // equally long messages).
            let more = (!tx.first && !tx.last) || (tx.first && tx.last && has_unsent(st));
            let r = batch.send(&h, payload as usize, more, |buf| {
                if let Err(s) = gather(dev, pdn, op, tx.offset as usize, buf) {
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
            if uc {
                // Nothing acknowledges UC: a packet counts as delivered once sent (or lost),
                // and a work request completes with its last packet.
                let ack = Response {
                    psn: tx.psn,
                    kind: ResponseKind::Ack {
                        syndrome: Syndrome::Ack { credit_code: 31 },
                        msn: 0,
                    },
                };
                if let Some(req) = st.req.as_mut() {
                    req.on_response(now, &ack);
                }
                continue;
            }
            if r.is_err() {
                // Lost like on the wire: the retransmission timer recovers.
                continue;
            }
        }
    }

    pub(super) fn complete_sends(&self, st: &mut QpState) {
        let mut error = None;
        while let Some(c) = st.req.as_mut().and_then(|r| r.poll_completion()) {
            let idx = (c.wr_id % REQ_WQES as u64) as usize;
            let Some(op) = st.ops[idx].take() else {
                continue;
            };
            let mut status = match (op.local_error, c.status) {
                (Some(s), _) => s,
                (None, Status::Success) => wc_status::SUCCESS,
                (None, Status::Error(e)) => status_of(e),
            };
            if status == wc_status::SUCCESS && !self.invalidate_after(&op) {
                status = wc_status::LOC_PROT_ERR;
            }
            if status != wc_status::SUCCESS
                && error.is_none()
                && !matches!(c.status, Status::Error(RcError::Flushed))
            {
                error = Some(status);
            }
            self.complete_op(&op, status);
        }
        if error.is_some() && st.state != St::Err {
            self.to_error(st, None);
        }
    }

    /// The invalidation an RDMA READ with invalidate does once its data is in: the key of the
    /// MR the data went to, its first SGE's (a fast-registration MR of the QP's PD), as siw
    /// does. The WR's own `invalidate_rkey` is not used: rdma_rw, the one user of the opcode,
    /// sets it before it moves the MR to its next key for the post, so it names the key the
    /// MR no longer has. `false` if the invalidation fails.
    pub(super) fn invalidate_after(&self, op: &SendOp) -> bool {
        if op.opcode != WrOpcode::RdmaReadWithInv {
            return true;
        }
        let Some(key) = op.sges.first().map(|s| s.lkey) else {
            return false;
        };
        self.dev
            .mr_slot(key)
            .is_some_and(|m| m.invalidate(self.pdn, key).is_ok())
    }

    /// Reports the completion of send operation `op` with `status`, if it is signaled or
    /// failed.
    pub(super) fn complete_op(&self, op: &SendOp, status: u8) {
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
                &self.events,
            );
        }
    }
}

/// The bytes a send WQE moves (8 for an ATOMIC), or `None` beyond the largest message.
fn message_len(kind: OpKind, e: &SendEntry) -> Option<u32> {
    match (kind, u32::try_from(e.data_len())) {
        (OpKind::Atomic, _) => Some(8),
        (_, Ok(l)) if l <= crate::device::limits::MAX_MSG_SZ => Some(l),
        _ => None,
    }
}
