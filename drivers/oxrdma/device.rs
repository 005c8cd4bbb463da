// SPDX-License-Identifier: GPL-2.0
//! An oxrdma device: what it reports to ib_core and the objects it owns.

use crate::ox::rdma::device::{
    core_cap, Device, DeviceAttrs, Driver, NodeKind, PortAttrs, PortImmutable, Udata,
};
use crate::ox::rdma::umem::UserMem;
use crate::ox::rdma::verbs::{CqInit, QpAttrs, QpCaps, QpInit, SrqAttrs, SrqInit, UserCtx};
use crate::uapi::verbs::{self, Response};
use crate::wire::link::{ib_mtu_for_link, ROCE_MAX_OVERHEAD};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

/// Device limits. Documented in `Documentation/admin-guide.rst`; keep the two in step.
pub(crate) mod limits {
    pub(crate) const MAX_QP: i32 = 1 << 16;
    pub(crate) const MAX_QP_WR: i32 = 1 << 14;
    pub(crate) const MAX_SGE: i32 = 32;
    pub(crate) const MAX_CQ: i32 = 1 << 16;
    pub(crate) const MAX_CQE: i32 = (1 << 16) - 1;
    pub(crate) const MAX_MR: i32 = 1 << 18;
    pub(crate) const MAX_PD: i32 = 1 << 16;
    pub(crate) const MAX_RD_ATOM: i32 = 128;
    pub(crate) const MAX_RES_RD_ATOM: i32 = 1 << 18;
    pub(crate) const MAX_SRQ: i32 = 1 << 14;
    pub(crate) const MAX_SRQ_WR: i32 = 1 << 14;
    pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;
    pub(crate) const GID_TABLE_LEN: i32 = 128;
    /// The largest message the IBA allows: 2^31 bytes.
    pub(crate) const MAX_MSG_SZ: u32 = 1 << 31;
}

/// RoCE v1 and v2: ib_core then keeps a v1 and a v2 GID for every address of the netdev. No
/// MAD/CM capability until the GSI QP exists.
const ROCE_CORE_CAPS: u32 = core_cap::PROT_ROCE | core_cap::PROT_ROCE_UDP_ENCAP | core_cap::ETH_AH;
/// iWARP. `IW_CM` comes with the iw_cm ops.
const IWARP_CORE_CAPS: u32 = core_cap::PROT_IWARP;

/// The driver data of one device (port 1 on one netdev).
pub(crate) struct OxDevice {
    pub(crate) kind: NodeKind,
    /// Port state last reported to ib_core, to send an event only on a change.
    port_active: AtomicBool,
    next_pdn: AtomicU32,
}

impl OxDevice {
    pub(crate) fn new(kind: NodeKind, active: bool) -> Self {
        Self {
            kind,
            port_active: AtomicBool::new(active),
            next_pdn: AtomicU32::new(1),
        }
    }

    /// Re-reads the port state from the netdev and tells ib_core if it changed.
    pub(crate) fn update_port_state(dev: &Device<Self>) {
        let Some(nd) = dev.netdev(1) else { return };
        let active = nd.borrow().is_up();
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

impl Driver for OxDevice {
    type Ucontext = ();
    type Pd = u32;
    type Cq = ();
    type Qp = ();
    type Srq = ();
    type Mr = ();

    fn create_cq(_dev: &Device<Self>, _init: CqInit, _ctx: &mut UserCtx<'_>) -> Result<((), u32)> {
        Err(EINVAL)
    }
    fn req_notify_cq(_cq: &(), _solicited_only: bool) -> Result<bool> {
        Ok(false)
    }
    fn create_qp(_dev: &Device<Self>, _init: QpInit<'_, Self>, _ctx: &mut UserCtx<'_>) -> Result<((), u32, QpCaps)> {
        Err(EINVAL)
    }
    fn modify_qp(_qp: &(), _attrs: &QpAttrs) -> Result {
        Err(EINVAL)
    }
    fn query_qp(_qp: &()) -> Result<QpAttrs> {
        Err(EINVAL)
    }
    fn doorbell(_qp: &()) -> Result {
        Ok(())
    }
    fn create_srq(_dev: &Device<Self>, _init: SrqInit<'_, Self>, _ctx: &mut UserCtx<'_>) -> Result<((), SrqAttrs)> {
        Err(EINVAL)
    }
    fn modify_srq(_srq: &(), _attrs: &SrqAttrs, _mask: u32) -> Result {
        Err(EINVAL)
    }
    fn query_srq(_srq: &()) -> SrqAttrs {
        SrqAttrs::default()
    }
    fn reg_user_mr(_dev: &Device<Self>, _pd: &u32, _mem: UserMem, _iova: u64, _access: u32) -> Result<((), u32, u32)> {
        Err(EINVAL)
    }

    fn query_device(_dev: &Device<Self>) -> DeviceAttrs {
        use limits::*;
        DeviceAttrs {
            fw_ver: 0,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: MAX_QP,
            max_qp_wr: MAX_QP_WR,
            device_cap_flags: 0,
            max_send_sge: MAX_SGE,
            max_recv_sge: MAX_SGE,
            max_sge_rd: MAX_SGE,
            max_cq: MAX_CQ,
            max_cqe: MAX_CQE,
            max_mr: MAX_MR,
            max_pd: MAX_PD,
            max_qp_rd_atom: MAX_RD_ATOM,
            max_qp_init_rd_atom: MAX_RD_ATOM,
            max_res_rd_atom: MAX_RES_RD_ATOM,
            max_srq: MAX_SRQ,
            max_srq_wr: MAX_SRQ_WR,
            max_srq_sge: MAX_SGE,
            max_fast_reg_page_list_len: MAX_FAST_REG_PAGES,
            atomic_glob: false,
            max_pkeys: 1,
            local_ca_ack_delay: 15,
        }
    }

    fn query_port(dev: &Device<Self>, _port: u32) -> Result<PortAttrs> {
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let nd = nd.borrow();
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

    fn port_immutable(dev: &Device<Self>, _port: u32) -> PortImmutable {
        match dev.kind {
            NodeKind::Roce => PortImmutable {
                pkey_tbl_len: 1,
                gid_tbl_len: limits::GID_TABLE_LEN,
                core_cap_flags: ROCE_CORE_CAPS,
                max_mad_size: 0,
            },
            NodeKind::Iwarp => PortImmutable {
                pkey_tbl_len: 1,
                gid_tbl_len: 1,
                core_cap_flags: IWARP_CORE_CAPS,
                max_mad_size: 0,
            },
        }
    }

    /// iWARP has no GID table of IP addresses: its one GID is the MAC address, zero-padded.
    fn query_gid(dev: &Device<Self>, _port: u32, index: i32) -> Result<[u8; 16]> {
        if dev.kind != NodeKind::Iwarp || index != 0 {
            return Err(EINVAL);
        }
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let mut gid = [0u8; 16];
        gid[..6].copy_from_slice(&nd.borrow().mac());
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

    fn alloc_pd(dev: &Device<Self>, udata: Option<&mut Udata<'_>>) -> Result<u32> {
        let pdn = dev.next_pdn.fetch_add(1, Ordering::Relaxed);
        if pdn == 0 {
            // 2^32 PDs in the device's lifetime: refuse rather than reuse numbers.
            return Err(ENOSPC);
        }
        if let Some(udata) = udata {
            let resp = verbs::AllocPdResp { pdn, reserved: 0 };
            udata.respond(resp.to_bytes().as_ref())?;
        }
        Ok(pdn)
    }

    fn unregistered(dev: &Device<Self>) {
        crate::link::forget(dev);
    }
}
