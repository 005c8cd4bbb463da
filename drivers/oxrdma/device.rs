// SPDX-License-Identifier: GPL-2.0
//! An oxrdma device: what it reports to ib_core and the objects it owns.

use crate::ah::{Ah, AhInner};
use crate::cq::CqInner;
use crate::dev::RoceDev;
use crate::iwcm::IwCm;
use crate::mr::{Mr, MrMem};
use crate::ox::error::code;
use crate::ox::ida::{Ida, IdaId};
use crate::ox::net::NetDevice;
use crate::ox::rdma::attrs::{
    core_cap, device_cap, uverbs_cmd, DeviceAttrs, HwStat, LinkLayer, PortAttrs, PortImmutable,
};
use crate::ox::rdma::device::Device;
use crate::ox::rdma::driver::{
    AhInit, CqCreated, CqInit, Driver, MrCreated, QpCreated, QpInit, SrqCreated, SrqInit,
};
use crate::ox::rdma::iwcm::{CmId, ConnParams};
use crate::ox::rdma::kmem::{FastRegPages, KernelMem};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::rdma::udata::{Udata, UserCall};
use crate::ox::rdma::umem::UserMem;
use crate::ox::rdma::verbs::{srq_mask, Path, QpAttrs, QpCaps, QpState, QpType, SrqAttrs};
use crate::ox::rdma::wr::{RecvWrs, SendWrs, WcSink};
use crate::qp::{NewQp, QpInner};
use crate::queue::{Geometry, RecvQueue, SendRing, MAX_INLINE, MAX_SGE};
use crate::rx::RoceRx;
use crate::uapi::queue::{
    recv_slot_size, send_slot_size, CQE_SIZE, RECV_WQE_SIZE, SEND_WQE_SIZE, SGE_SIZE,
};
use crate::uapi::ring::{ring_slots, RING_HEADER_SIZE};
use crate::uapi::verbs::{self, Response};
use crate::wire::link::{ib_mtu_for_link, ROCE_MAX_OVERHEAD};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;
use kernel::types::ARef;

/// Device limits. Documented in `Documentation/admin-guide.rst`; keep the two in step.
pub(crate) mod limits {
    pub(crate) const MAX_QP: i32 = 1 << 16;
    pub(crate) const MAX_QP_WR: i32 = 1 << 14;
    pub(crate) const MAX_SGE: i32 = crate::queue::MAX_SGE as i32;
    pub(crate) const MAX_CQ: i32 = 1 << 16;
    pub(crate) const MAX_CQE: i32 = (1 << 16) - 1;
    pub(crate) const MAX_MR: i32 = 1 << 18;
    pub(crate) const MAX_PD: i32 = 1 << 16;
    /// RDMA READ / ATOMIC requests a QP answers at once (responder resources).
    pub(crate) const MAX_RD_ATOM: i32 = crate::qp::RESP_RES as i32;
    /// RDMA READ / ATOMIC requests a QP may have outstanding as requester.
    pub(crate) const MAX_INIT_RD_ATOM: i32 = crate::qp::MAX_RD_ATOMIC as i32;
    pub(crate) const MAX_RES_RD_ATOM: i32 = 1 << 18;
    pub(crate) const MAX_SRQ: i32 = 1 << 14;
    pub(crate) const MAX_SRQ_WR: i32 = 1 << 14;
    pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;
    pub(crate) const GID_TABLE_LEN: i32 = 128;
    pub(crate) const MAX_AH: i32 = 1 << 16;
    pub(crate) const MAX_MCAST_GRP: i32 = crate::mcast::MAX_GROUPS as i32;
    pub(crate) const MAX_MCAST_QP_ATTACH: i32 = crate::mcast::MAX_MEMBERS as i32;
    /// The largest message the IBA allows: 2^31 bytes.
    pub(crate) const MAX_MSG_SZ: u32 = 1 << 31;
}

/// RoCE v1 and v2: ib_core then keeps a v1 and a v2 GID for every address of the netdev.
/// With the MAD and CM capabilities, ib_mad creates the GSI QP (QP 1) and ib_cm and rdma_cm
/// use the port.
const ROCE_CORE_CAPS: u32 = core_cap::PROT_ROCE
    | core_cap::PROT_ROCE_UDP_ENCAP
    | core_cap::ETH_AH
    | core_cap::IB_MAD
    | core_cap::IB_CM
    | core_cap::AF_IB;
/// The largest management datagram (`IB_MGMT_MAD_SIZE`).
const MAD_SIZE: u32 = 256;
/// iWARP. `IW_CM` comes with the iw_cm ops.
const IWARP_CORE_CAPS: u32 = core_cap::PROT_IWARP | core_cap::IW_CM;

/// What kind of device: RoCE or iWARP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// RoCE (v1 and v2) over Ethernet.
    Roce,
    /// iWARP over kernel TCP.
    Iwarp,
}

/// A ring for a new object: memory a process maps (at the offset returned) or, for a kernel
/// user, plain kernel memory. Each object has at most two (oxrdma's uAPI).
fn new_ring(user: &mut Option<&mut UserCall<'_>>, len: usize) -> Result<(Arc<RingBuf>, u64)> {
    match user {
        // A process's rings count against its memory cgroup.
        Some(c) => {
            let ring = RingBuf::new_charged(len)?;
            let offset = c.map_ring(&ring)?;
            Ok((ring, offset))
        }
        None => Ok((RingBuf::new(len)?, 0)),
    }
}

/// Copies a create response to the process, if the caller is one.
fn respond(user: &mut Option<&mut UserCall<'_>>, resp: &[u8]) -> Result {
    match user {
        Some(c) => c.respond(resp),
        None => Ok(()),
    }
}

/// The driver data of one device (port 1 on one netdev).
///
/// Invariant: while it exists, its `roce` may be in `rx`'s index; it is not once dropped.
pub(crate) struct OxDevice {
    pub(crate) kind: NodeKind,
    pub(crate) roce: Arc<RoceDev>,
    /// The module's receiver, which delivers this device's packets while it is registered.
    rx: Arc<RoceRx>,
    /// Port state last reported to ib_core, to send an event only on a change.
    port_active: AtomicBool,
    /// PD numbers of the live PDs.
    pd_ids: Arc<Ida>,
    /// Numbers of the live CQs and SRQs: they bound how many there are.
    cq_ids: Arc<Ida>,
    srq_ids: Arc<Ida>,
    /// iWARP connections being set up and listeners (an iWARP device's).
    iw: Arc<IwCm>,
}

impl OxDevice {
    /// The data of a new device of `kind` on `netdev`, whose packets `rx` will deliver.
    pub(crate) fn new(
        kind: NodeKind,
        active: bool,
        netdev: ARef<NetDevice>,
        rx: Arc<RoceRx>,
    ) -> Result<Self> {
        let pd_ids = Ida::new(1, limits::MAX_PD as u32)?;
        let cq_ids = Ida::new(1, limits::MAX_CQ as u32)?;
        let srq_ids = Ida::new(1, limits::MAX_SRQ as u32)?;
        let roce = RoceDev::new(netdev.clone(), rx.crc(), rx.crc32c())?;
        let iw = IwCm::new(
            roce.clone(),
            kind == NodeKind::Iwarp && crate::ox::params::iwarp_ext(),
        )?;
        // Last: from here the receiver holds the device until `unregistered` (also when the
        // registration fails: ib_core then calls `dealloc_driver` too), or until this data is
        // dropped without having reached ib_core (see `Drop`).
        if kind == NodeKind::Roce {
            rx.add(netdev, roce.clone())?;
        }
        Ok(Self {
            kind,
            roce,
            rx,
            port_active: AtomicBool::new(active),
            pd_ids,
            cq_ids,
            srq_ids,
            iw,
        })
    }

    /// The iWARP connection manager of an iWARP device.
    fn iwarp_cm(&self) -> Result<&Arc<IwCm>> {
        match self.kind {
            NodeKind::Iwarp => Ok(&self.iw),
            NodeKind::Roce => Err(code::eopnotsupp()),
        }
    }

    /// The netdev is going away: stop using it (under the RTNL).
    pub(crate) fn detach_netdev(&self) {
        self.rx.remove(&self.roce);
        self.roce.detach_netdev();
    }

    /// Re-reads the port state from the netdev and tells ib_core if it changed.
    pub(crate) fn update_port_state(dev: &Device<Self>) {
        let Some(nd) = dev.netdev(1) else { return };
        let active = nd.is_up();
        if dev.port_active.swap(active, Ordering::AcqRel) != active {
            pr_info!(
                "{}: port 1 {}\n",
                dev.name(),
                if active { "active" } else { "down" }
            );
            dev.port_event(1, active);
        }
    }
}

impl Drop for OxDevice {
    fn drop(&mut self) {
        // A registered device left the index in `unregistered`; data whose device was never
        // allocated (ib_core's allocation failed after `new`) leaves it here, with the netdev
        // references the entry holds.
        self.rx.remove(&self.roce);
    }
}

#[vtable]
impl Driver for OxDevice {
    const NODE_DESC: &'static CStr = kernel::c_str!("oxrdma");
    const LINK_LAYER: LinkLayer = LinkLayer::Ethernet;
    const UVERBS_ABI_VERSION: u32 = crate::uapi::abi::OXRDMA_ABI_VERSION;
    // The SQ doorbell is a POST_SEND command with no work requests; REQ_NOTIFY_CQ arms the
    // completion event.
    const UVERBS_CMD_MASK: u64 = uverbs_cmd::POST_SEND | uverbs_cmd::REQ_NOTIFY_CQ;
    const HW_STATS: &'static [HwStat] = &crate::stats::NAMES;

    type Ucontext = ();
    type Pd = Pd;
    type Cq = Cq;
    type Qp = Qp;
    type Srq = Srq;
    type Mr = MrData;
    type Ah = Ah;

    fn query_device(dev: &Device<Self>) -> DeviceAttrs {
        use limits::*;
        // An iWARP device offers RC QPs only (with SRQs): no address handles or multicast.
        // Its atomics are RFC 7306's, which work only with peers that negotiate them (oxiwarp),
        // and only on a device created while the module parameter `iwarp_ext` was on; with
        // other peers they fail locally.
        let roce = dev.kind == NodeKind::Roce;
        let only_roce = |v: i32| if roce { v } else { 0 };
        DeviceAttrs {
            fw_ver: 0,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: MAX_QP,
            max_qp_wr: MAX_QP_WR,
            device_cap_flags: device_cap::MEM_MGT_EXTENSIONS,
            max_send_sge: MAX_SGE,
            max_recv_sge: MAX_SGE,
            max_sge_rd: MAX_SGE,
            max_cq: MAX_CQ,
            max_cqe: MAX_CQE,
            max_mr: MAX_MR,
            max_pd: MAX_PD,
            max_qp_rd_atom: MAX_RD_ATOM,
            max_qp_init_rd_atom: MAX_INIT_RD_ATOM,
            max_res_rd_atom: MAX_RES_RD_ATOM,
            max_srq: MAX_SRQ,
            max_srq_wr: MAX_SRQ_WR,
            max_srq_sge: MAX_SGE,
            max_fast_reg_page_list_len: MAX_FAST_REG_PAGES,
            // Atomics use the CPU's own atomic instructions on the target memory.
            atomic_glob: roce || dev.iw.rdmap_ext(),
            max_pkeys: 1,
            max_ah: only_roce(MAX_AH),
            max_mcast_grp: only_roce(MAX_MCAST_GRP),
            max_mcast_qp_attach: only_roce(MAX_MCAST_QP_ATTACH),
            max_total_mcast_qp_attach: only_roce(MAX_MCAST_GRP * MAX_MCAST_QP_ATTACH),
            local_ca_ack_delay: 15,
        }
    }

    fn query_port(dev: &Device<Self>, _port: u32) -> Result<PortAttrs> {
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let overhead = match dev.kind {
            NodeKind::Roce => ROCE_MAX_OVERHEAD,
            NodeKind::Iwarp => 0,
        };
        // Only `update_port_state` (the netdev notifier) records the state: a query in between
        // must not swallow the event that change is due.
        let active = nd.is_up();
        Ok(PortAttrs {
            active,
            enabled: nd.is_running(),
            max_mtu: 4096,
            active_mtu: ib_mtu_for_link(nd.mtu(), overhead),
            phys_mtu: nd.mtu(),
            gid_tbl_len: match dev.kind {
                NodeKind::Roce => limits::GID_TABLE_LEN,
                NodeKind::Iwarp => 1,
            },
            port_cap_flags: 0,
            max_msg_sz: limits::MAX_MSG_SZ,
            pkey_tbl_len: 1,
            ip_gids: dev.kind == NodeKind::Roce,
        })
    }

    fn port_immutable(dev: &Device<Self>, _port: u32) -> Result<PortImmutable> {
        Ok(match dev.kind {
            NodeKind::Roce => PortImmutable {
                pkey_tbl_len: 1,
                gid_tbl_len: limits::GID_TABLE_LEN,
                core_cap_flags: ROCE_CORE_CAPS,
                max_mad_size: MAD_SIZE,
            },
            NodeKind::Iwarp => PortImmutable {
                pkey_tbl_len: 1,
                gid_tbl_len: 1,
                core_cap_flags: IWARP_CORE_CAPS,
                max_mad_size: 0,
            },
        })
    }

    /// One P_Key, the default full-membership one.
    fn query_pkey(_dev: &Device<Self>, _port: u32, index: u16) -> Result<u16> {
        match index {
            0 => Ok(0xffff),
            _ => Err(EINVAL),
        }
    }

    fn hw_stats(dev: &Device<Self>, _port: u32, out: &mut [u64]) -> Result {
        dev.roce.tx.stats.read(out);
        Ok(())
    }

    fn hca_type(dev: &Device<Self>) -> &'static CStr {
        crate::link::hca_type(dev.kind)
    }

    /// iWARP has no GID table of IP addresses: its one GID is the MAC address, zero-padded.
    fn query_gid(dev: &Device<Self>, _port: u32, index: u32) -> Result<[u8; 16]> {
        if dev.kind != NodeKind::Iwarp || index != 0 {
            return Err(EINVAL);
        }
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let mut gid = [0u8; 16];
        gid[..6].copy_from_slice(&nd.mac());
        Ok(gid)
    }

    fn alloc_ucontext(dev: &Device<Self>, udata: &mut Udata<'_>) -> Result<()> {
        let resp = verbs::AllocUcontextResp {
            abi_version: crate::uapi::abi::OXRDMA_ABI_VERSION,
            device_kind: match dev.kind {
                NodeKind::Roce => verbs::OXRDMA_DEVICE_ROCE,
                NodeKind::Iwarp => verbs::OXRDMA_DEVICE_IWARP,
            },
            caps: 0,
        };
        udata.respond(resp.to_bytes().as_ref())
    }

    fn disassociate_ucontext(_ctx: &()) {
        // Nothing more to do: ib_core destroyed the context's objects (QPs ended, rings and
        // MRs released), and the rings the process still maps keep their pages until it
        // unmaps them. Having the op lets `rdma link delete` and `rmmod` go on while
        // processes hold the device open.
    }

    fn alloc_pd(dev: &Device<Self>, udata: Option<&mut Udata<'_>>) -> Result<Pd> {
        let pd = Pd {
            id: dev.pd_ids.alloc()?,
        };
        if let Some(udata) = udata {
            let resp = verbs::AllocPdResp {
                pdn: pd.pdn(),
                reserved: 0,
            };
            udata.respond(resp.to_bytes().as_ref())?;
        }
        Ok(pd)
    }

    fn unregistered(dev: &Device<Self>) {
        dev.iw.shutdown();
        dev.rx.remove(&dev.roce);
        dev.roce.shutdown();
        crate::link::forget(dev);
    }

    fn create_cq(
        dev: &Device<Self>,
        init: CqInit,
        mut ctx: Option<&mut UserCall<'_>>,
    ) -> Result<CqCreated<Cq>> {
        if init.cqe > limits::MAX_CQE as u32 || init.cqe == 0 {
            return Err(EINVAL);
        }
        // At most `max_cq` at once: ENOSPC beyond.
        let id = dev.cq_ids.alloc()?;
        let kernel = ctx.is_none();
        let (cq, slots, offset, len) =
            CqInner::new(init.cqe, init.events, kernel, |b| new_ring(&mut ctx, b))?;
        let resp = verbs::CreateCqResp {
            ring: verbs::RingMmap {
                offset,
                len: len as u64,
            },
            slots,
            slot_size: CQE_SIZE as u32,
        };
        respond(&mut ctx, resp.to_bytes().as_ref())?;
        Ok(CqCreated {
            data: Cq { inner: cq, _id: id },
            cqe: slots,
        })
    }

    fn req_notify_cq(cq: &Cq, solicited_only: bool) -> Result<bool> {
        Ok(cq.inner.arm(solicited_only))
    }

    fn create_qp(
        dev: &Device<Self>,
        init: QpInit<'_, Self>,
        mut ctx: Option<&mut UserCall<'_>>,
    ) -> Result<QpCreated<Qp>> {
        match init.qp_type {
            QpType::Rc | QpType::Uc | QpType::Ud => {}
            // QP 1 is ib_mad's, a kernel user's.
            QpType::Gsi if ctx.is_none() => {}
            _ => return Err(code::eopnotsupp()),
        }
        // iWARP is reliable connected only.
        if dev.kind == NodeKind::Iwarp && init.qp_type != QpType::Rc {
            return Err(code::eopnotsupp());
        }
        if init.create_flags != 0 {
            return Err(EINVAL);
        }
        let c = init.caps;
        let max_wr = limits::MAX_QP_WR as u32;
        if c.max_send_wr > max_wr
            || c.max_recv_wr > max_wr
            || c.max_send_sge > MAX_SGE
            || c.max_recv_sge > MAX_SGE
            || c.max_inline_data > MAX_INLINE
        {
            return Err(EINVAL);
        }
        let sq_slots = ring_slots(c.max_send_wr.max(1)).ok_or(EINVAL)?;
        let send_sge = c.max_send_sge.max(1);
        let sq_slot = send_slot_size(send_sge, c.max_inline_data);
        let inline = (sq_slot - SEND_WQE_SIZE as u32).min(MAX_INLINE);
        let (sq_ring, sq_off) =
            new_ring(&mut ctx, RING_HEADER_SIZE + (sq_slots * sq_slot) as usize)?;
        let sq_len = sq_ring.len() as u64;
        let mut resp = verbs::CreateQpResp {
            sq: verbs::RingMmap {
                offset: sq_off,
                len: sq_len,
            },
            sq_slots,
            sq_slot_size: sq_slot,
            ..Default::default()
        };
        let mut granted = QpCaps {
            max_send_wr: sq_slots,
            max_send_sge: (sq_slot - SEND_WQE_SIZE as u32) / SGE_SIZE as u32,
            max_inline_data: inline,
            ..Default::default()
        };
        granted.max_send_sge = granted.max_send_sge.min(MAX_SGE);
        let rq = match init.srq {
            Some(srq) => srq.q.clone(),
            None => {
                let slots = ring_slots(c.max_recv_wr.max(1)).ok_or(EINVAL)?;
                let sge = c.max_recv_sge.max(1);
                let slot = recv_slot_size(sge);
                let (ring, off) = new_ring(&mut ctx, RING_HEADER_SIZE + (slots * slot) as usize)?;
                resp.rq = verbs::RingMmap {
                    offset: off,
                    len: ring.len() as u64,
                };
                resp.rq_slots = slots;
                resp.rq_slot_size = slot;
                granted.max_recv_wr = slots;
                granted.max_recv_sge =
                    ((slot - RECV_WQE_SIZE as u32) / SGE_SIZE as u32).min(MAX_SGE);
                RecvQueue::new(
                    ring,
                    Geometry {
                        slots,
                        slot_size: slot,
                    },
                    granted.max_recv_sge,
                    None,
                    0,
                )?
            }
        };
        let roce = dev.roce.clone();
        let gsi = init.qp_type == QpType::Gsi;
        let make = |qpn| {
            QpInner::new(NewQp {
                qpn,
                qp_type: init.qp_type,
                pdn: init.pd.pdn(),
                dev: roce,
                send_cq: init.send_cq.inner.clone(),
                recv_cq: init.recv_cq.inner.clone(),
                rq,
                sq: SendRing {
                    ring: sq_ring,
                    geo: Geometry {
                        slots: sq_slots,
                        slot_size: sq_slot,
                    },
                },
                caps: granted,
                sig_all: init.sig_all,
                events: init.events,
                kernel: ctx.is_none(),
                iwarp: dev.kind == NodeKind::Iwarp,
            })
        };
        let qp = if gsi {
            dev.roce.add_gsi(make)?
        } else {
            dev.roce.add_qp(limits::MAX_QP as usize, make)?
        };
        resp.qpn = qp.qpn;
        if let Err(e) = respond(&mut ctx, resp.to_bytes().as_ref()) {
            dev.roce.remove_qp(qp.qpn);
            return Err(e);
        }
        let qpn = qp.qpn;
        Ok(QpCreated {
            data: Qp(qp),
            qpn,
            caps: granted,
        })
    }

    fn modify_qp(qp: &Qp, attrs: &QpAttrs) -> Result {
        if attrs.state == Some(QpState::Rtr) && !qp.0.is_iwarp() {
            let rx = crate::link::roce_rx().ok_or(ENODEV)?;
            qp.0.dev().open_tunnel(&rx)?;
        }
        qp.0.modify(attrs)
    }

    fn query_qp(qp: &Qp) -> Result<QpAttrs> {
        Ok(qp.0.query())
    }

    fn destroy_qp(qp: &Qp) {
        qp.0.destroy();
        qp.0.dev().remove_qp(qp.0.qpn);
    }

    fn create_ah(
        dev: &Device<Self>,
        init: AhInit<'_, Self>,
        user: Option<&mut Udata<'_>>,
    ) -> Result<Ah> {
        if dev.kind != NodeKind::Roce {
            return Err(code::eopnotsupp());
        }
        let gfp = if init.sleepable {
            GFP_KERNEL
        } else {
            GFP_ATOMIC
        };
        let pdn = init.pd.pdn();
        let path = init.path;
        let inner = dev.roce.add_ah(limits::MAX_AH as usize, gfp, |num| {
            Ok(Arc::new(AhInner { num, pdn, path }, gfp)?)
        })?;
        let ah = Ah::new(inner, dev.roce.clone());
        if let Some(u) = user {
            let resp = verbs::CreateAhResp {
                ah_num: ah.inner.num,
                reserved: 0,
            };
            // On an error `ah` is dropped, which takes it out of the table again.
            u.respond(resp.to_bytes().as_ref())?;
        }
        Ok(ah)
    }

    fn query_ah(ah: &Ah) -> Result<Path> {
        Ok(ah.inner.path)
    }

    fn attach_mcast(qp: &Qp, gid: &[u8; 16], _lid: u16) -> Result {
        let dev = qp.0.dev();
        dev.mcast.attach(&qp.0, gid, dev.tx.netdev())
    }

    fn detach_mcast(qp: &Qp, gid: &[u8; 16], _lid: u16) -> Result {
        qp.0.dev().mcast.detach(qp.0.qpn, gid)
    }

    fn create_srq(
        dev: &Device<Self>,
        init: SrqInit<'_, Self>,
        mut ctx: Option<&mut UserCall<'_>>,
    ) -> Result<SrqCreated<Srq>> {
        let a = init.attrs;
        if a.max_wr == 0
            || a.max_wr > limits::MAX_SRQ_WR as u32
            || a.max_sge > MAX_SGE
            || a.limit > a.max_wr
        {
            return Err(EINVAL);
        }
        // At most `max_srq` at once: ENOSPC beyond.
        let id = dev.srq_ids.alloc()?;
        let slots = ring_slots(a.max_wr).ok_or(EINVAL)?;
        let slot = recv_slot_size(a.max_sge.max(1));
        let (ring, off) = new_ring(&mut ctx, RING_HEADER_SIZE + (slots * slot) as usize)?;
        let len = ring.len() as u64;
        let max_sge = ((slot - RECV_WQE_SIZE as u32) / SGE_SIZE as u32).min(MAX_SGE);
        let q = RecvQueue::new(
            ring,
            Geometry {
                slots,
                slot_size: slot,
            },
            max_sge,
            Some(init.events),
            a.limit,
        )?;
        let resp = verbs::CreateSrqResp {
            ring: verbs::RingMmap { offset: off, len },
            slots,
            slot_size: slot,
        };
        let kernel = ctx.is_none();
        respond(&mut ctx, resp.to_bytes().as_ref())?;
        Ok(SrqCreated {
            data: Srq { q, kernel, _id: id },
            attrs: SrqAttrs {
                max_wr: slots,
                max_sge,
                limit: a.limit,
            },
        })
    }

    fn modify_srq(srq: &Srq, attrs: &SrqAttrs, mask: u32) -> Result {
        if mask & srq_mask::MAX_WR != 0 {
            return Err(EINVAL);
        }
        if mask & srq_mask::LIMIT != 0 {
            srq.q.set_limit(attrs.limit);
        }
        Ok(())
    }

    fn query_srq(srq: &Srq) -> Result<SrqAttrs> {
        let (slots, max_sge) = srq.q.geometry();
        Ok(SrqAttrs {
            max_wr: slots,
            max_sge,
            limit: srq.q.limit(),
        })
    }

    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Pd,
        mem: UserMem,
        iova: u64,
        access: u32,
    ) -> Result<MrCreated<MrData>> {
        let len = mem.len() as u64;
        new_mr(dev, pd.pdn(), MrMem::User(mem), access, iova, len)
    }

    fn get_dma_mr(
        dev: &Device<Self>,
        pd: &Pd,
        access: u32,
        mem: KernelMem,
    ) -> Result<MrCreated<MrData>> {
        new_mr(dev, pd.pdn(), MrMem::Dma(mem), access, 0, u64::MAX)
    }

    fn alloc_mr(
        dev: &Device<Self>,
        pd: &Pd,
        max_pages: u32,
        pages: Arc<FastRegPages>,
    ) -> Result<MrCreated<MrData>> {
        if max_pages > limits::MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        new_mr(dev, pd.pdn(), MrMem::Fast(pages), 0, 0, 0)
    }

    /// A process posts through its SQ ring: its POST_SEND command, with no work requests, is
    /// the doorbell. Kernel users post work requests.
    fn post_send(qp: &Qp, wrs: &mut SendWrs<'_, Ah>) -> Result {
        if !qp.0.is_kernel() {
            if !wrs.is_empty() {
                return Err(EINVAL);
            }
            qp.0.doorbell();
            return Ok(());
        }
        for wr in wrs {
            qp.0.post_send(&wr?)?;
        }
        Ok(())
    }

    fn post_recv(qp: &Qp, wrs: &mut RecvWrs<'_>) -> Result {
        for wr in wrs {
            qp.0.post_recv(&wr?)?;
        }
        Ok(())
    }

    /// Kernel SRQs only: a process posts through its SRQ ring.
    fn post_srq_recv(srq: &Srq, wrs: &mut RecvWrs<'_>) -> Result {
        if !srq.kernel {
            return Err(EINVAL);
        }
        for wr in wrs {
            srq.q.post(&wr?)?;
        }
        Ok(())
    }

    fn poll_cq(cq: &Cq, out: &mut WcSink<'_>) {
        cq.inner.poll(out)
    }

    fn dereg_mr(mr: &MrData) {
        mr.dev.remove_mr(mr.key);
    }

    fn iw_connect(dev: &Device<Self>, id: &CmId, params: &ConnParams<'_>) -> Result {
        dev.iwarp_cm()?.connect(id, params)
    }

    fn iw_accept(dev: &Device<Self>, id: &CmId, params: &ConnParams<'_>) -> Result {
        dev.iwarp_cm()?.accept(id, params)
    }

    fn iw_reject(dev: &Device<Self>, id: &CmId, private_data: &[u8]) -> Result {
        dev.iwarp_cm()?.reject(id, private_data)
    }

    fn iw_create_listen(dev: &Device<Self>, id: &CmId, backlog: i32) -> Result {
        dev.iwarp_cm()?.create_listen(id, backlog)
    }

    fn iw_destroy_listen(dev: &Device<Self>, id: &CmId) -> Result {
        dev.iwarp_cm()?.destroy_listen(id)
    }
}

/// The driver data of a PD object: its number, unique among the device's live PDs (MRs and
/// QPs carry it; an access is allowed only between the same numbers).
pub(crate) struct Pd {
    id: IdaId,
}

impl Pd {
    pub(crate) fn pdn(&self) -> u32 {
        self.id.get()
    }
}

/// The driver data of a CQ object.
pub(crate) use crate::cq::Cq;
/// The driver data of a QP object.
pub(crate) use crate::qp::Qp;

/// The driver data of an SRQ object.
pub(crate) struct Srq {
    pub(crate) q: Arc<RecvQueue>,
    /// A kernel user's (posts through `post_srq_recv`), not a process's.
    kernel: bool,
    /// Its number among the device's live SRQs, which bounds how many there are.
    _id: IdaId,
}

/// Adds an MR to the device's table; its L_Key and R_Key are the same.
fn new_mr(
    dev: &Device<OxDevice>,
    pdn: u32,
    mem: MrMem,
    access: u32,
    iova: u64,
    len: u64,
) -> Result<MrCreated<MrData>> {
    let mr = dev.roce.add_mr(limits::MAX_MR as usize, |key| {
        Mr::new(key, pdn, mem, access, iova, len)
    })?;
    let key = mr.base_key;
    Ok(MrCreated {
        data: MrData {
            key,
            dev: dev.roce.clone(),
        },
        lkey: key,
        rkey: key,
    })
}

/// The driver data of an MR object: its key in the device's table.
pub(crate) struct MrData {
    key: u32,
    dev: Arc<RoceDev>,
}
