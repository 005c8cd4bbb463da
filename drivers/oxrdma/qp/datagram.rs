// SPDX-License-Identifier: GPL-2.0
//! Datagram QPs (UD, and the GSI QP that carries management datagrams): each send is one
//! packet to the address handle its WQE names, completed as soon as it is sent; each received
//! packet fills one receive WQE, behind the 40-byte network header area. No connection, no
//! acknowledgement, no retransmission: a lost datagram is lost.

use super::*;
use crate::ox::rdma::verbs::QpType;
use crate::stats::Counter;
use crate::uapi::queue::{network_hdr, GRH_AREA, WC_FLAG_GRH};
use crate::wire::headers::Deth;
use core::cell::Cell;

/// A Q_Key with this bit set in a send WQE means "the QP's own Q_Key" (IBA 10.2.4: controlled
/// Q_Keys); only the QP's attribute, which ib_core lets only privileged users set, can carry
/// such a key onto the wire.
const QKEY_CONTROLLED: u32 = 0x8000_0000;

impl QpInner {
    /// Sends the datagrams posted to the SQ ring (at most one ring's worth per call; the rest
    /// waits for the QP's work item).
    pub(super) fn service_datagrams(self: &Arc<Self>, st: &mut QpState) {
        let budget = self.sq.geo.slots.max(1);
        let sent = Cell::new(0);
        while st.state == St::Rts {
            self.sq.set_busy();
            let taken = self.take_sq(
                st,
                |_, _| sent.get() == budget,
                |st, _, entry| {
                    sent.set(sent.get() + 1);
                    self.send_datagram(st, entry);
                    st.state == St::Rts
                },
            );
            if let Err(f) = taken {
                return self.ring_fault(st, f);
            }
            if st.state != St::Rts {
                return;
            }
            if sent.get() == budget {
                self.kick();
                return;
            }
            // Stop being busy only with the ring empty (see the doorbell rule in rust/uapi).
            if self.sq_idle(st) {
                break;
            }
        }
        if st.state == St::Sqd && st.sqd_notify {
            st.sqd_notify = false;
            self.events.raise(QpEvent::SqDrained);
        }
    }

    fn complete_datagram(&self, wr_id: u64, status: u8, len: u32, signaled: bool) {
        if status == wc_status::SUCCESS && !signaled && !self.sig_all {
            return;
        }
        self.send_cq.push(
            &Cqe {
                wr_id,
                status,
                opcode: wc_opcode::SEND,
                byte_len: len,
                qp_num: self.qpn,
                ..Default::default()
            },
            false,
            &self.events,
        );
    }

    /// Sends one datagram WQE, completes it, and moves the QP to the error state if the WQE
    /// was bad.
    fn send_datagram(&self, st: &mut QpState, e: &mut SendEntry) {
        let w = e.wqe;
        let signaled = w.flags & WQE_FLAG_SIGNALED != 0;
        match self.datagram(st, e) {
            Ok(len) => self.complete_datagram(w.wr_id, wc_status::SUCCESS, len, signaled),
            Err(status) => {
                self.complete_datagram(w.wr_id, status, 0, signaled);
                self.to_error(st, None);
            }
        }
    }

    /// Builds and transmits the datagram of `e`; its length, or the completion status of
    /// what is wrong with it.
    fn datagram(&self, st: &mut QpState, e: &SendEntry) -> Result<u32, u8> {
        let w = &e.wqe;
        let v = w
            .validate_for(
                self.caps.max_send_sge as u8,
                self.caps.max_inline_data,
                self.kernel,
            )
            .map_err(|_| wc_status::LOC_QP_OP_ERR)?;
        let opcode = match v.opcode {
            WrOpcode::Send => Opcode::UdSendOnly,
            WrOpcode::SendWithImm => Opcode::UdSendOnlyImm,
            _ => return Err(wc_status::LOC_QP_OP_ERR),
        };
        // The AH must be live and of the QP's PD.
        let ah = self
            .dev
            .ah(w.ah)
            .filter(|a| a.pdn == self.pdn)
            .ok_or(wc_status::LOC_QP_OP_ERR)?;
        let len: u64 = if w.flags & WQE_FLAG_INLINE != 0 {
            e.inline.len() as u64
        } else {
            e.sges.iter().map(|s| u64::from(s.length)).sum()
        };
        if len > u64::from(self.dev.tx.active_mtu()) {
            return Err(wc_status::LOC_LEN_ERR);
        }
        let len = len as u32;
        let remote_qpn = w.remote_qpn & 0xff_ffff;
        let qkey = if w.remote_qkey & QKEY_CONTROLLED != 0 {
            st.attrs.qkey
        } else {
            w.remote_qkey
        };
        let psn = st.ud_psn;
        st.ud_psn = psn.add(1);
        let mut h = Headers::new(Bth {
            opcode: opcode.value(),
            pkey: 0xffff,
            dest_qp: remote_qpn,
            psn,
            solicited: w.flags & WQE_FLAG_SOLICITED != 0,
            ..Default::default()
        });
        h.deth = Some(Deth {
            qkey,
            src_qp: self.qpn,
        });
        if v.opcode == WrOpcode::SendWithImm {
            h.imm_dt = Some(ImmDt {
                data: u32::from_be_bytes(w.imm_or_inv.to_ne_bytes()),
            });
        }
        let p = ah.path;
        let path = TxPath {
            src: IpAddr::from_gid(p.sgid),
            dst: IpAddr::from_gid(p.dgid),
            traffic_class: p.traffic_class,
            flow_label: p.flow_label,
            hop_limit: if p.hop_limit == 0 { 64 } else { p.hop_limit },
            sport: flow_sport(self.qpn, remote_qpn),
            v1_dmac: (!p.roce_v2).then_some(p.dmac),
        };
        let mut local_err = None;
        let dev = &self.dev;
        let pdn = self.pdn;
        // A send the stack drops is lost like on the wire; the WQE still completes.
        let _ = dev.tx.send(&path, &h, len as usize, |buf| {
            let r = if e.inline.is_empty() {
                walk_sges(dev, pdn, &e.sges, 0, buf.len(), |mr, a, at, r| {
                    mr.read(a, at, &mut buf[r])
                })
            } else {
                e.inline
                    .get(..buf.len())
                    .map(|src| buf.copy_from_slice(src))
                    .ok_or(wc_status::LOC_LEN_ERR)
            };
            local_err = r.err();
            local_err.is_none()
        });
        match local_err {
            Some(s) => Err(s),
            None => Ok(len),
        }
    }

    /// A datagram for this QP (ICRC verified, state checked): into the next receive WQE,
    /// behind the network header. Datagrams that are not for the QP's Q_Key, or find no
    /// receive WQE, are dropped; one that does not fit completes its WQE with a length error.
    /// A receive queue that cannot be taken from (the process corrupted it) puts the QP in
    /// the error state.
    pub(super) fn receive_datagram(
        &self,
        st: &mut QpState,
        pkt: &Packet,
        bytes: &[u8],
        net: &NetHeader<'_>,
    ) {
        let Some(deth) = pkt.headers.deth else { return };
        let drop = |this: &Self| this.dev.tx.stats.inc(Counter::RxDrop);
        if !matches!(pkt.opcode, Opcode::UdSendOnly | Opcode::UdSendOnlyImm)
            || deth.qkey != st.attrs.qkey
            || (self.qp_type == QpType::Gsi) != (pkt.headers.bth.dest_qp == crate::dev::GSI_QPN)
        {
            return drop(self);
        }
        let mut grh = [0u8; GRH_AREA];
        let kind = net.kind;
        match kind {
            network_hdr::IPV6 | network_hdr::ROCE_V1 if net.bytes.len() >= GRH_AREA => {
                grh.copy_from_slice(&net.bytes[..GRH_AREA])
            }
            network_hdr::IPV4 if net.bytes.len() >= 20 => {
                grh[GRH_AREA - 20..].copy_from_slice(&net.bytes[..20])
            }
            _ => return drop(self),
        }
        let entry = match self.rq.take() {
            Ok(Some(e)) => e,
            Ok(None) => return drop(self),
            Err(f) => {
                drop(self);
                return self.ring_corrupt(st, "receive queue", f, None);
            }
        };
        let payload = pkt.payload(bytes);
        let total = (GRH_AREA + payload.len()) as u64;
        let mut cqe = Cqe {
            wr_id: entry.wr_id,
            opcode: wc_opcode::RECV,
            qp_num: self.qpn,
            ..Default::default()
        };
        if total > entry.capacity() {
            cqe.status = wc_status::LOC_LEN_ERR;
            self.recv_cq.push(&cqe, false, &self.events);
            return;
        }
        let placed = scatter(&self.dev, self.pdn, entry.sges(), 0, &grh)
            .and_then(|()| scatter(&self.dev, self.pdn, entry.sges(), GRH_AREA as u64, payload));
        if let Err(s) = placed {
            cqe.status = s;
            self.recv_cq.push(&cqe, false, &self.events);
            return self.to_error(st, None);
        }
        cqe.byte_len = total as u32;
        cqe.src_qp = deth.src_qp;
        cqe.wc_flags = WC_FLAG_GRH;
        cqe.network_hdr_type = kind;
        cqe.vlan_id = 0xffff;
        if let Some(i) = pkt.headers.imm_dt {
            cqe.wc_flags |= WC_FLAG_WITH_IMM;
            cqe.imm_or_inv = u32::from_ne_bytes(i.data.to_be_bytes());
        }
        self.recv_cq
            .push(&cqe, pkt.headers.bth.solicited, &self.events);
    }
}
