// SPDX-License-Identifier: GPL-2.0
//! The driver side of an RDMA device: the [`Driver`] trait ib_core's callbacks reach, and the
//! values create calls take and return.
//!
//! The trait is a `#[vtable]`: an optional op a driver does not implement stays NULL in the ops
//! table, so ib_core answers for it (usually `EOPNOTSUPP`). The ops ib_core requires of every
//! device (`ib_device_check_mandatory`) have no default. The `destroy_*`/`dereg_mr` hooks run
//! just before the binding drops the object's data; most drivers need none.
//!
//! Kernel users post and poll from any context (also softirq and hard interrupt),
//! concurrently: `post_send`, `post_recv`, `post_srq_recv`, `poll_cq` and `req_notify_cq` must
//! not sleep.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_device_ops`).

use super::attrs::{driver_id, DeviceAttrs, HwStat, LinkLayer, PortAttrs, PortImmutable};
use super::device::Device;
use super::events::{CqEvents, QpEvents, SrqEvents};
use super::iwcm::{CmId, ConnParams};
use super::kmem::{FastRegPages, KernelMem};
use super::udata::{Udata, UserCall};
use super::umem::UserMem;
use super::verbs::{Path, QpAttrs, QpCaps, QpType, SrqAttrs};
use super::wr::{RecvWrs, SendWrs, WcSink};
use kernel::{prelude::*, str::CStr, sync::Arc};

/// Parameters of a new CQ.
pub struct CqInit {
    /// Requested entries.
    pub cqe: u32,
    /// Completion vector.
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub flags: u32,
    /// The CQ's events.
    pub events: CqEvents,
}

/// Parameters of a new QP.
pub struct QpInit<'a, T: Driver> {
    /// Type.
    pub qp_type: QpType,
    /// The PD.
    pub pd: &'a T::Pd,
    /// Completions of sends.
    pub send_cq: &'a T::Cq,
    /// Completions of receives.
    pub recv_cq: &'a T::Cq,
    /// Shared receive queue, if any.
    pub srq: Option<&'a T::Srq>,
    /// Requested capacities.
    pub caps: QpCaps,
    /// Every send WR completes, whether or not it asks.
    pub sig_all: bool,
    /// `IB_QP_CREATE_*` flags.
    pub create_flags: u32,
    /// The QP's events.
    pub events: QpEvents,
}

/// Parameters of a new SRQ.
pub struct SrqInit<'a, T: Driver> {
    /// The PD.
    pub pd: &'a T::Pd,
    /// Requested attributes.
    pub attrs: SrqAttrs,
    /// The SRQ's events.
    pub events: SrqEvents,
}

/// What an address handle is created from (`create_ah`, `create_user_ah`).
pub struct AhInit<'a, T: Driver> {
    /// The AH's protection domain.
    pub pd: &'a T::Pd,
    /// The destination, resolved by ib_core (destination MAC, source GID attribute).
    pub path: Path,
    /// The caller may sleep (`RDMA_CREATE_AH_SLEEPABLE`); otherwise the create must not
    /// (kernel users create AHs from atomic context).
    pub sleepable: bool,
}

/// A CQ a driver created.
pub struct CqCreated<D> {
    /// The driver's data of the CQ.
    pub data: D,
    /// The entries it holds.
    pub cqe: u32,
}

/// A QP a driver created.
pub struct QpCreated<D> {
    /// The driver's data of the QP.
    pub data: D,
    /// Its number.
    pub qpn: u32,
    /// The capacities granted.
    pub caps: QpCaps,
}

/// An SRQ a driver created.
pub struct SrqCreated<D> {
    /// The driver's data of the SRQ.
    pub data: D,
    /// The attributes granted.
    pub attrs: SrqAttrs,
}

/// An MR a driver registered.
pub struct MrCreated<D> {
    /// The driver's data of the MR.
    pub data: D,
    /// Its L_Key.
    pub lkey: u32,
    /// Its R_Key.
    pub rkey: u32,
}

/// An RDMA device driver: what ib_core calls.
#[vtable]
pub trait Driver: Send + Sync + Sized + 'static {
    /// `enum rdma_driver_id`: what userspace providers may match on.
    const DRIVER_ID: u32 = driver_id::UNKNOWN;
    /// The node description (`node_desc`, up to 63 bytes).
    const NODE_DESC: &'static CStr;
    /// The link layer of every port.
    const LINK_LAYER: LinkLayer;
    /// The driver ABI version userspace providers check (`uverbs_abi_ver`).
    const UVERBS_ABI_VERSION: u32 = 0;
    /// Legacy uverbs `write()` commands accepted besides those ib_core enables from the ops
    /// ([`uverbs_cmd`](super::attrs::uverbs_cmd) bits).
    const UVERBS_CMD_MASK: u64 = 0;
    /// The port counters [`Driver::hw_stats`] reports, in its order.
    const HW_STATS: &'static [HwStat] = &[];

    /// Per-process context data (`struct ib_ucontext`).
    type Ucontext: Send + Sync;
    /// Protection domain data (`struct ib_pd`).
    type Pd: Send + Sync;
    /// Completion queue data (`struct ib_cq`).
    type Cq: Send + Sync;
    /// Queue pair data (`struct ib_qp`).
    type Qp: Send + Sync;
    /// Shared receive queue data (`struct ib_srq`).
    type Srq: Send + Sync;
    /// Memory region data (`struct ib_mr`).
    type Mr: Send + Sync;
    /// An address handle's data.
    type Ah: Send + Sync;

    // ---- required by ib_core of every device ------------------------------------------------

    /// Device limits.
    fn query_device(dev: &Device<Self>) -> DeviceAttrs;
    /// Current attributes of port `port`.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttrs>;
    /// Immutable properties of port `port` (asked once, at registration).
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;
    /// A new protection domain; `udata` when it comes from a process.
    fn alloc_pd(dev: &Device<Self>, udata: Option<&mut Udata<'_>>) -> Result<Self::Pd>;
    /// A new CQ (`user` for a process, `None` for a kernel user).
    fn create_cq(
        dev: &Device<Self>,
        init: CqInit,
        user: Option<&mut UserCall<'_>>,
    ) -> Result<CqCreated<Self::Cq>>;
    /// Arms the CQ's completion event for the next (or next solicited) completion. Returns
    /// whether completions are already waiting.
    fn req_notify_cq(cq: &Self::Cq, solicited_only: bool) -> Result<bool>;
    /// Moves completions of a kernel CQ into `out` while it has room.
    fn poll_cq(cq: &Self::Cq, out: &mut WcSink<'_>);
    /// A new QP (`user` for a process, `None` for a kernel user).
    fn create_qp(
        dev: &Device<Self>,
        init: QpInit<'_, Self>,
        user: Option<&mut UserCall<'_>>,
    ) -> Result<QpCreated<Self::Qp>>;
    /// `modify_qp`.
    fn modify_qp(qp: &Self::Qp, attrs: &QpAttrs) -> Result;
    /// Posts send work requests; on an error, the request taken last is reported as the bad
    /// one. For a process's QP the chain comes from the uverbs `POST_SEND` command (and may be
    /// empty).
    fn post_send(qp: &Self::Qp, wrs: &mut SendWrs<'_, Self::Ah>) -> Result;
    /// Posts receive work requests to a QP's receive queue (see [`Driver::post_send`]).
    fn post_recv(qp: &Self::Qp, wrs: &mut RecvWrs<'_>) -> Result;
    /// A DMA MR of a kernel user with `IB_ACCESS_*` rights `access` over all of `mem`.
    fn get_dma_mr(
        dev: &Device<Self>,
        pd: &Self::Pd,
        access: u32,
        mem: KernelMem,
    ) -> Result<MrCreated<Self::Mr>>;
    /// Registers pinned user memory mapped at `iova` with `IB_ACCESS_*` rights `access`.
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Self::Pd,
        mem: UserMem,
        iova: u64,
        access: u32,
    ) -> Result<MrCreated<Self::Mr>>;

    // ---- hooks: called just before the binding drops the object's data ----------------------

    /// The device is unregistered (or its registration failed); its data is dropped next.
    fn unregistered(_dev: &Device<Self>) {}
    /// The CQ is being destroyed (no QP uses it).
    fn destroy_cq(_cq: &Self::Cq) {}
    /// The QP is being destroyed.
    fn destroy_qp(_qp: &Self::Qp) {}
    /// The SRQ is being destroyed (no QP uses it).
    fn destroy_srq(_srq: &Self::Srq) {}
    /// The MR is being deregistered.
    fn dereg_mr(_mr: &Self::Mr) {}
    /// An address handle is being destroyed (`sleepable`: the caller may sleep).
    fn destroy_ah(_ah: &Self::Ah, _sleepable: bool) {}

    // ---- optional ops: NULL in the ops table unless implemented ----------------------------

    /// GID `index` of `port`, for devices whose GIDs ib_core does not manage (iWARP).
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: u32) -> Result<[u8; 16]> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// P_Key `index` of `port` (required with a P_Key table).
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// A new user context (a process opened the device); without it, no process can.
    fn alloc_ucontext(_dev: &Device<Self>, _udata: &mut Udata<'_>) -> Result<Self::Ucontext> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The device is going away while a process still has it open (`rdma link delete`,
    /// `rmmod`): having this op tells ib_core not to wait for the process to close it, but to
    /// destroy its objects now, call this, then `dealloc_ucontext`; the process's later
    /// commands fail with `EIO`. What it still maps of rings stays mapped to pages of their
    /// own (see [`super::mmap`]). Without this op, the removal waits for the process.
    fn disassociate_ucontext(_ctx: &Self::Ucontext) {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `query_qp`.
    fn query_qp(_qp: &Self::Qp) -> Result<QpAttrs> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// A new SRQ (`user` for a process, `None` for a kernel user).
    fn create_srq(
        _dev: &Device<Self>,
        _init: SrqInit<'_, Self>,
        _user: Option<&mut UserCall<'_>>,
    ) -> Result<SrqCreated<Self::Srq>> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `modify_srq` with the `IB_SRQ_*` bits of `mask`.
    fn modify_srq(_srq: &Self::Srq, _attrs: &SrqAttrs, _mask: u32) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// `query_srq`.
    fn query_srq(_srq: &Self::Srq) -> Result<SrqAttrs> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Posts receive work requests to an SRQ (see [`Driver::post_send`]).
    fn post_srq_recv(_srq: &Self::Srq, _wrs: &mut RecvWrs<'_>) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// A fast-registration MR of a kernel user for up to `max_pages` pages, which
    /// `ib_map_mr_sg` writes into `pages`; invalid until an `IB_WR_REG_MR`.
    fn alloc_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _max_pages: u32,
        _pages: Arc<FastRegPages>,
    ) -> Result<MrCreated<Self::Mr>> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Creates an address handle, for a kernel user or (`user`) a process, whose response
    /// the driver writes. Both `create_ah` and `create_user_ah` of the ops table.
    fn create_ah(
        _dev: &Device<Self>,
        _init: AhInit<'_, Self>,
        _user: Option<&mut Udata<'_>>,
    ) -> Result<Self::Ah> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The destination of an address handle.
    fn query_ah(_ah: &Self::Ah) -> Result<Path> {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Attaches UD QP `qp` to the multicast group `gid` (ib_core has checked the QP type and
    /// that `gid` is a multicast GID; `lid` is the group's LID, unused on Ethernet). With
    /// this, `detach_mcast` must be implemented too: the two ops are installed together.
    fn attach_mcast(_qp: &Self::Qp, _gid: &[u8; 16], _lid: u16) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Detaches `qp` from the multicast group `gid` (`EINVAL` if it is not attached).
    fn detach_mcast(_qp: &Self::Qp, _gid: &[u8; 16], _lid: u16) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The current values of port `port`'s counters, in [`Driver::HW_STATS`] order (`out` has
    /// one element per counter).
    fn hw_stats(_dev: &Device<Self>, _port: u32, _out: &mut [u64]) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// The content of the device's `hca_type` sysfs attribute (the attribute exists only if
    /// this is implemented).
    fn hca_type(_dev: &Device<Self>) -> &'static CStr {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    // ---- iWARP connection management (the five are installed together, with the binding's
    // own `iw_add_ref`, `iw_rem_ref` and `iw_get_qp`): see [`super::iwcm`] --------------------

    /// Connects QP `params.qpn` to `id`'s remote address; the outcome is reported to `id` as
    /// a connect reply. Returns once the attempt is under way.
    fn iw_connect(_dev: &Device<Self>, _id: &CmId, _params: &ConnParams<'_>) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Accepts the connection request `id` stands for (its provider token) on QP
    /// `params.qpn`; reports `Established` to `id` once done.
    fn iw_accept(_dev: &Device<Self>, _id: &CmId, _params: &ConnParams<'_>) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Rejects the connection request `id` stands for, with `private_data` for the peer.
    fn iw_reject(_dev: &Device<Self>, _id: &CmId, _private_data: &[u8]) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Listens on `id`'s local address; each connection request is reported to `id`.
    fn iw_create_listen(_dev: &Device<Self>, _id: &CmId, _backlog: i32) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
    /// Stops listening on `id`: no request is reported to it after this returns.
    fn iw_destroy_listen(_dev: &Device<Self>, _id: &CmId) -> Result {
        kernel::build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}
