// SPDX-License-Identifier: GPL-2.0
//! The verbs objects ib_core allocates for the driver (CQ, QP, SRQ) or the driver allocates
//! (MR), their attributes as safe Rust values, and the `ib_device_ops` glue that calls
//! [`Driver`].
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_cq`, `ib_qp`, `ib_srq`, `ib_mr`, their attribute
//! structures and the create/modify/destroy ops).
//!
//! # Lifetimes
//!
//! Each object is `struct ib_xx` followed by a [`Tail`] holding the driver's data, the mmap
//! registrations of its rings and its event target. The tail is initialised when the driver's
//! create succeeds and dropped in the destroy callback, in this order: the driver's destroy
//! hook, the event target is revoked (so events the driver raises later go nowhere), the
//! driver's data is dropped, the mmap entries are removed. uverbs destroys every object before
//! the user context, and refuses to destroy a CQ or SRQ that a QP still uses, so a QP's
//! `&T::Cq` stays valid for the QP's life.

use super::super::bindings;
use super::super::sync::SpinLockIrq;
use super::device::{Device, Driver, Udata};
use super::kmem::{FastRegPages, KernelMem};
use super::mmap::{MmapReg, RingBuf};
use super::umem::UserMem;
use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox},
    ffi::c_int,
    prelude::*,
    sync::Arc,
};

// ---- values ----------------------------------------------------------------------------------

/// Queue pair types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1).
    Gsi,
    /// Anything else (XRC, raw packet, ...).
    Other(u32),
}

impl QpType {
    fn from_raw(t: u32) -> Self {
        match t {
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            o => Self::Other(o),
        }
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            Self::Other(o) => o,
        }
    }
}

/// QP states (IBA 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// RESET.
    Reset,
    /// INIT.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain.
    Sqd,
    /// Send queue error.
    Sqe,
    /// Error.
    Err,
}

impl QpState {
    fn from_raw(s: u32) -> Option<Self> {
        Some(match s {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// Whether the IBA allows moving a QP of type `t` from `cur` to `next` with the attributes
/// in `mask` (required and optional ones: ib_core's table, `ib_modify_qp_is_ok`).
pub fn modify_is_ok(cur: QpState, next: QpState, t: QpType, mask: u32) -> bool {
    // SAFETY: pure table lookup.
    unsafe { bindings::ib_modify_qp_is_ok(cur.to_raw(), next.to_raw(), t.to_raw(), mask) }
}

/// `IB_QP_*` attribute mask bits.
pub mod qp_mask {
    use super::bindings;
    /// `qp_state`.
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    /// `cur_qp_state`.
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    /// `pkey_index`.
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    /// `port_num`.
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    /// `qkey`.
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    /// `ah_attr`.
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    /// `path_mtu`.
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    /// `timeout`.
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    /// `dest_qp_num`.
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
}

/// `IB_ACCESS_*` bits.
pub mod access {
    use super::bindings;
    /// Local write.
    pub const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    /// Remote write.
    pub const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    /// Remote read.
    pub const REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
    /// Remote atomic.
    pub const REMOTE_ATOMIC: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
}

/// Queue capacities (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send WRs.
    pub max_send_wr: u32,
    /// Receive WRs.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// A RoCE path: the address vector of a connected QP (`ah_attr` with its GRH and source
/// GID attribute).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Path {
    /// The source GID is a RoCE v2 GID (UDP/IP); otherwise RoCE v1 (GRH on Ethernet).
    pub roce_v2: bool,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Its index in the GID table.
    pub sgid_index: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Destination MAC (resolved by ib_core).
    pub dmac: [u8; 6],
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / DSCP+ECN.
    pub traffic_class: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
}

/// QP attributes: what `modify_qp` sets (`None`: not in the mask) and `query_qp` reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttrs {
    /// The raw `IB_QP_*` mask of a modify (see [`qp_mask`]).
    pub mask: u32,
    /// New state.
    pub state: Option<QpState>,
    /// The state the caller believes the QP is in.
    pub cur_state: Option<QpState>,
    /// Path MTU, bytes (256..4096).
    pub path_mtu: Option<u32>,
    /// Remote QP number.
    pub dest_qpn: Option<u32>,
    /// Expected receive PSN.
    pub rq_psn: Option<u32>,
    /// Next send PSN.
    pub sq_psn: Option<u32>,
    /// `IB_ACCESS_*` remote rights.
    pub access: Option<u32>,
    /// Local ACK timeout (4.096 us * 2^timeout; 0 = infinite).
    pub timeout: Option<u8>,
    /// Retries on timeout or sequence errors.
    pub retry_cnt: Option<u8>,
    /// Retries on RNR NAK (7 = infinite).
    pub rnr_retry: Option<u8>,
    /// The RNR NAK timer this QP asks for, encoded.
    pub min_rnr_timer: Option<u8>,
    /// Outstanding RDMA reads/atomics as requester.
    pub max_rd_atomic: Option<u8>,
    /// Outstanding RDMA reads/atomics as responder.
    pub max_dest_rd_atomic: Option<u8>,
    /// Q_Key (UD).
    pub qkey: Option<u32>,
    /// P_Key index.
    pub pkey_index: Option<u16>,
    /// Port.
    pub port: Option<u32>,
    /// Primary path.
    pub path: Option<Path>,
    /// Capacities (query only).
    pub caps: QpCaps,
    /// Every send WR completes (query only).
    pub sig_all: bool,
    /// Moving to SQD: raise `IB_EVENT_SQ_DRAINED` once the send queue has drained.
    pub sqd_notify: bool,
}

/// SRQ attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttrs {
    /// WRs.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit: below this many WRs, the SRQ raises `SRQ_LIMIT_REACHED` (0: disarmed).
    pub limit: u32,
}

/// `IB_SRQ_*` modify mask bits.
pub mod srq_mask {
    use super::bindings;
    /// Resize.
    pub const MAX_WR: u32 = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    /// Arm the limit.
    pub const LIMIT: u32 = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
}

// ---- the user context of a create call ------------------------------------------------------

/// The user side of a create call: the response buffer and the process's mmap space.
pub struct UserCtx<'a> {
    udata: Udata<'a>,
    uctx: NonNull<bindings::ib_ucontext>,
    maps: [Option<MmapReg>; 2],
}

impl<'a> UserCtx<'a> {
    /// # Safety
    ///
    /// `udata` is the driver udata of a user verbs call, valid for `'a`.
    unsafe fn new(udata: NonNull<bindings::ib_udata>) -> Result<Self> {
        // SAFETY: a user call's udata is embedded in its attribute bundle, which names the
        // caller's live ucontext.
        let uctx = NonNull::new(unsafe { bindings::oxrdma_udata_ucontext(udata.as_ptr()) })
            .ok_or(EINVAL)?;
        Ok(Self {
            // SAFETY: valid for `'a` (function contract).
            udata: unsafe { Udata::from_raw(udata) },
            uctx,
            maps: [None, None],
        })
    }

    /// # Safety
    ///
    /// `udata` is `None` (a kernel caller) or the driver udata of a user verbs call, valid
    /// for `'a`.
    unsafe fn for_call(udata: Option<NonNull<bindings::ib_udata>>) -> Result<Option<Self>> {
        match udata {
            // SAFETY: function contract.
            Some(u) => Ok(Some(unsafe { Self::new(u)? })),
            None => Ok(None),
        }
    }

    /// The mmap registrations made during the call (none for a kernel caller).
    fn take_maps(ctx: &mut Option<Self>) -> [Option<MmapReg>; 2] {
        ctx.as_mut()
            .map_or([None, None], |c| core::mem::take(&mut c.maps))
    }

    /// Copies the driver's response to the process (see [`Udata::respond`]).
    pub fn respond(&mut self, resp: &[u8]) -> Result {
        self.udata.respond(resp)
    }

    /// A ring of at least `len` bytes the process may map (at most two per object). Returns
    /// the ring and the mmap offset to give the process; the mapping is withdrawn when the
    /// object is destroyed (or if the create fails).
    pub fn new_ring(&mut self, len: usize) -> Result<(Arc<RingBuf>, u64)> {
        let slot = self.maps.iter_mut().find(|m| m.is_none()).ok_or(EINVAL)?;
        // SAFETY: the ucontext is live during the call and the registration ends up in the
        // object, which uverbs destroys before the context (or is dropped on failure).
        let (ring, reg, off) = unsafe { MmapReg::new(self.uctx.as_ptr(), len)? };
        *slot = Some(reg);
        Ok((ring, off))
    }
}

// ---- event targets ------------------------------------------------------------------------

/// A raw object pointer that destroy clears.
struct Target(*mut c_void);
// SAFETY: the pointer is only dereferenced under the lock while non-NULL, which destroy
// guarantees means the object is live.
unsafe impl Send for Target {}

/// A revocable reference to an ib_core object for raising its events.
///
/// The lock disables interrupts: kernel verbs users poll CQs (which reads a QP's pointer
/// through this) from softirq context.
#[derive(Clone)]
struct Revocable {
    t: Arc<SpinLockIrq<Target>>,
}

impl Revocable {
    fn new(p: *mut c_void) -> Result<Self> {
        Ok(Self {
            t: Arc::pin_init(
                crate::new_spinlock_irq!(Target(p), "oxrdma_event_target"),
                GFP_KERNEL,
            )?,
        })
    }

    /// The object's pointer, NULL once revoked.
    fn ptr(&self) -> *mut c_void {
        self.t.lock().0
    }

    fn revoke(&self) {
        self.t.lock().0 = core::ptr::null_mut();
    }

    /// Runs `f` on the live object, if it still is.
    fn with(&self, f: impl FnOnce(*mut c_void)) {
        let g = self.t.lock();
        if !g.0.is_null() {
            f(g.0)
        }
    }
}

/// Raises a CQ's completion and error events; does nothing once the CQ is destroyed.
#[derive(Clone)]
pub struct CqEvents(Revocable);

impl CqEvents {
    /// Calls the CQ's completion handler (the completion channel's event).
    pub fn completion(&self) {
        self.0.with(|p| {
            let cq = p.cast::<bindings::ib_cq>();
            // SAFETY: live CQ (`Revocable`); ib_core set the handler and context at creation.
            unsafe {
                if let Some(h) = (*cq).comp_handler {
                    h(cq, (*cq).cq_context)
                }
            }
        })
    }

    /// Raises `IB_EVENT_CQ_ERR` (a completion was lost: the CQ overflowed).
    pub fn error(&self) {
        self.0.with(|p| {
            let cq = p.cast::<bindings::ib_cq>();
            // SAFETY: live CQ; the event is copied by the handler.
            unsafe {
                let mut ev = bindings::ib_event {
                    device: (*cq).device,
                    event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                ev.element.cq = cq;
                if let Some(h) = (*cq).event_handler {
                    h(&mut ev, (*cq).cq_context)
                }
            }
        })
    }
}

/// QP asynchronous events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP went to the error state on its own (`IB_EVENT_QP_FATAL`).
    Fatal,
    /// A request could not be executed (`IB_EVENT_QP_REQ_ERR`).
    RequestError,
    /// Remote access violation (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
    /// Last WQE reached on an SRQ-attached QP in error (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
    /// The send queue drained (`IB_EVENT_SQ_DRAINED`).
    SqDrained,
    /// The first packet arrived in RTR (`IB_EVENT_COMM_EST`).
    CommEstablished,
}

/// Raises a QP's asynchronous events; does nothing once the QP is destroyed.
#[derive(Clone)]
pub struct QpEvents(Revocable);

impl QpEvents {
    /// The `ib_qp`, NULL once destroyed (for a work completion: `ib_wc.qp`).
    pub(super) fn raw_qp(&self) -> *mut bindings::ib_qp {
        self.0.ptr().cast()
    }

    /// Raises `ev`.
    pub fn raise(&self, ev: QpEvent) {
        let kind = match ev {
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
        };
        self.0.with(|p| {
            let qp = p.cast::<bindings::ib_qp>();
            // SAFETY: live QP; the event is copied by the handler.
            unsafe {
                let mut ev = bindings::ib_event {
                    device: (*qp).device,
                    event: kind,
                    ..Default::default()
                };
                ev.element.qp = qp;
                if let Some(h) = (*qp).event_handler {
                    h(&mut ev, (*qp).qp_context)
                }
            }
        })
    }
}

/// Raises an SRQ's limit event; does nothing once the SRQ is destroyed.
#[derive(Clone)]
pub struct SrqEvents(Revocable);

impl SrqEvents {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`.
    pub fn limit_reached(&self) {
        self.0.with(|p| {
            let srq = p.cast::<bindings::ib_srq>();
            // SAFETY: live SRQ; the event is copied by the handler.
            unsafe {
                let mut ev = bindings::ib_event {
                    device: (*srq).device,
                    event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                    ..Default::default()
                };
                ev.element.srq = srq;
                if let Some(h) = (*srq).event_handler {
                    h(&mut ev, (*srq).srq_context)
                }
            }
        })
    }
}

// ---- create parameters --------------------------------------------------------------------

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

// ---- object layouts ---------------------------------------------------------------------------

/// What follows the ib_core structure in each object.
struct Tail<D> {
    data: D,
    maps: [Option<MmapReg>; 2],
    events: Revocable,
}

impl<D> Tail<D> {
    fn destroy(self) {
        self.events.revoke();
        drop(self.data);
        drop(self.maps);
    }
}

#[repr(C)]
pub(crate) struct CqObj<T: Driver> {
    ib: bindings::ib_cq,
    tail: MaybeUninit<Tail<T::Cq>>,
}

#[repr(C)]
pub(crate) struct QpObj<T: Driver> {
    ib: bindings::ib_qp,
    tail: MaybeUninit<Tail<T::Qp>>,
}

#[repr(C)]
pub(crate) struct SrqObj<T: Driver> {
    ib: bindings::ib_srq,
    tail: MaybeUninit<Tail<T::Srq>>,
}

pub(crate) const fn object_sizes<T: Driver>() -> (usize, usize, usize) {
    assert!(core::mem::align_of::<CqObj<T>>() <= 8);
    assert!(core::mem::align_of::<QpObj<T>>() <= 8);
    assert!(core::mem::align_of::<SrqObj<T>>() <= 8);
    (
        core::mem::size_of::<CqObj<T>>(),
        core::mem::size_of::<QpObj<T>>(),
        core::mem::size_of::<SrqObj<T>>(),
    )
}

/// # Safety
///
/// `cq` is a live `CqObj<T>` whose create succeeded.
pub(super) unsafe fn cq_data<'a, T: Driver>(cq: *mut bindings::ib_cq) -> &'a T::Cq {
    // SAFETY: function contract: the tail is initialised until destroy.
    unsafe { &(*cq.cast::<CqObj<T>>()).tail.assume_init_ref().data }
}

/// # Safety
///
/// `qp` is a live `QpObj<T>` whose create succeeded.
pub(super) unsafe fn qp_data<'a, T: Driver>(qp: *mut bindings::ib_qp) -> &'a T::Qp {
    // SAFETY: function contract.
    unsafe { &(*qp.cast::<QpObj<T>>()).tail.assume_init_ref().data }
}

/// # Safety
///
/// `srq` is a live `SrqObj<T>` whose create succeeded.
pub(super) unsafe fn srq_data<'a, T: Driver>(srq: *mut bindings::ib_srq) -> &'a T::Srq {
    // SAFETY: function contract.
    unsafe { &(*srq.cast::<SrqObj<T>>()).tail.assume_init_ref().data }
}

fn errno(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

fn eopnotsupp() -> c_int {
    super::super::error::code::eopnotsupp().to_errno()
}

// ---- CQ -------------------------------------------------------------------------------------

/// # Safety
///
/// Called by ib_core with a zeroed `CqObj<T>` of a registered `Device<T>`.
pub(crate) unsafe extern "C" fn create_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: `ibcq` is valid and its `device` is our registered device.
    let dev = unsafe { Device::<T>::from_ib((*ibcq).device) };
    // SAFETY: `attrs` is NULL (a kernel caller) or a valid bundle.
    let udata = NonNull::new(unsafe { bindings::oxrdma_attrs_udata(attrs) });
    // SAFETY: the driver udata of this user call, if it is one.
    let mut ctx = match unsafe { UserCtx::for_call(udata) } {
        Ok(c) => c,
        Err(e) => return e.to_errno(),
    };
    let events = match Revocable::new(ibcq.cast()) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `attr` is valid for the call.
    let a = unsafe { &*attr };
    let init = CqInit {
        cqe: a.cqe,
        comp_vector: a.comp_vector,
        flags: a.flags,
        events: CqEvents(events.clone()),
    };
    match T::create_cq(dev, init, ctx.as_mut()) {
        Ok((data, cqe)) => {
            let tail = Tail {
                data,
                maps: UserCtx::take_maps(&mut ctx),
                events,
            };
            // SAFETY: `ibcq` is the start of a `CqObj<T>` (size from the ops table); the
            // tail was uninitialised.
            unsafe {
                (*ibcq).cqe = cqe.min(i32::MAX as u32) as c_int;
                (*ibcq.cast::<CqObj<T>>()).tail.write(tail);
            }
            0
        }
        Err(e) => {
            events.revoke();
            e.to_errno()
        }
    }
}

/// # Safety
///
/// Called by ib_core once per successfully created `CqObj<T>`, with no QP using it.
pub(crate) unsafe extern "C" fn destroy_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: created successfully, so the tail is initialised; read out once, here.
    let tail = unsafe { (*ibcq.cast::<CqObj<T>>()).tail.assume_init_read() };
    T::destroy_cq(&tail.data);
    tail.destroy();
    0
}

/// # Safety
///
/// Called by ib_core on a live `CqObj<T>`.
pub(crate) unsafe extern "C" fn req_notify_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: live CQ (function contract).
    let cq = unsafe { cq_data::<T>(ibcq) };
    let solicited = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
    match T::req_notify_cq(cq, solicited) {
        Ok(pending) => {
            if pending && flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 {
                1
            } else {
                0
            }
        }
        Err(e) => e.to_errno(),
    }
}

// ---- QP -------------------------------------------------------------------------------------

fn caps_from(c: &bindings::ib_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn caps_to(c: &QpCaps, out: &mut bindings::ib_qp_cap) {
    out.max_send_wr = c.max_send_wr;
    out.max_recv_wr = c.max_recv_wr;
    out.max_send_sge = c.max_send_sge;
    out.max_recv_sge = c.max_recv_sge;
    out.max_inline_data = c.max_inline_data;
}

/// # Safety
///
/// Called by ib_core with a zeroed-tail `QpObj<T>` of a registered `Device<T>`, a valid
/// `init` whose CQs, SRQ and PD are live objects of this device.
pub(crate) unsafe extern "C" fn create_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `ibqp` is valid and its `device` is our registered device.
    let dev = unsafe { Device::<T>::from_ib((*ibqp).device) };
    // SAFETY: `udata` is NULL (a kernel caller) or the driver udata of this user call.
    let mut ctx = match unsafe { UserCtx::for_call(NonNull::new(udata)) } {
        Ok(c) => c,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `init` is valid for the call.
    let ia = unsafe { &mut *init };
    if ia.send_cq.is_null() || ia.recv_cq.is_null() {
        return EINVAL.to_errno();
    }
    let events = match Revocable::new(ibqp.cast()) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    let qi = QpInit::<T> {
        qp_type: QpType::from_raw(ia.qp_type),
        // SAFETY: ib_core set `pd` to the live PD of the call (a `PdObj<T>`).
        pd: unsafe { super::device::pd_data::<T>((*ibqp).pd) },
        // SAFETY: live CQs of this device (function contract).
        send_cq: unsafe { cq_data::<T>(ia.send_cq) },
        // SAFETY: as above.
        recv_cq: unsafe { cq_data::<T>(ia.recv_cq) },
        // SAFETY: NULL or a live SRQ of this device.
        srq: NonNull::new(ia.srq).map(|s| unsafe { srq_data::<T>(s.as_ptr()) }),
        caps: caps_from(&ia.cap),
        sig_all: ia.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
        create_flags: ia.create_flags,
        events: QpEvents(events.clone()),
    };
    match T::create_qp(dev, qi, ctx.as_mut()) {
        Ok((data, qpn, caps)) => {
            caps_to(&caps, &mut ia.cap);
            let tail = Tail {
                data,
                maps: UserCtx::take_maps(&mut ctx),
                events,
            };
            // SAFETY: `ibqp` is the start of a `QpObj<T>`; the tail was uninitialised.
            unsafe {
                (*ibqp).qp_num = qpn;
                (*ibqp.cast::<QpObj<T>>()).tail.write(tail);
            }
            0
        }
        Err(e) => {
            events.revoke();
            e.to_errno()
        }
    }
}

/// # Safety
///
/// Called by ib_core once per successfully created `QpObj<T>`.
pub(crate) unsafe extern "C" fn destroy_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: created successfully; read out once, here.
    let tail = unsafe { (*ibqp.cast::<QpObj<T>>()).tail.assume_init_read() };
    T::destroy_qp(&tail.data);
    tail.destroy();
    0
}

fn path_from(ah: &bindings::rdma_ah_attr) -> Result<Path> {
    if ah.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
        return Err(EINVAL);
    }
    let sgid_attr = ah.grh.sgid_attr;
    if sgid_attr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: ib_core resolved and holds the source GID attribute for the call; `roce` is the
    // union member for a RoCE address.
    let (sgid, gid_type, dmac) = unsafe {
        (
            (*sgid_attr).gid.raw,
            (*sgid_attr).gid_type,
            ah.__bindgen_anon_1.roce.dmac,
        )
    };
    Ok(Path {
        roce_v2: gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
        sgid,
        sgid_index: ah.grh.sgid_index,
        // SAFETY: a GID is plain bytes.
        dgid: unsafe { ah.grh.dgid.raw },
        dmac,
        hop_limit: ah.grh.hop_limit,
        traffic_class: ah.grh.traffic_class,
        flow_label: ah.grh.flow_label,
        sl: ah.sl,
    })
}

/// # Safety
///
/// Called by ib_core on a live `QpObj<T>` with a valid `attr`.
pub(crate) unsafe extern "C" fn modify_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: live QP (function contract).
    let qp = unsafe { qp_data::<T>(ibqp) };
    // SAFETY: valid for the call.
    let a = unsafe { &*attr };
    let m = mask as u32;
    let has = |bit: u32| m & bit != 0;
    let path = if has(qp_mask::AV) {
        match path_from(&a.ah_attr) {
            Ok(p) => Some(p),
            Err(e) => return e.to_errno(),
        }
    } else {
        None
    };
    let state = if has(qp_mask::STATE) {
        match QpState::from_raw(a.qp_state) {
            Some(s) => Some(s),
            None => return EINVAL.to_errno(),
        }
    } else {
        None
    };
    let cur_state = if has(qp_mask::CUR_STATE) {
        match QpState::from_raw(a.cur_qp_state) {
            Some(s) => Some(s),
            None => return EINVAL.to_errno(),
        }
    } else {
        None
    };
    let path_mtu = if has(qp_mask::PATH_MTU) {
        match a.path_mtu {
            1..=5 => Some(128u32 << a.path_mtu),
            _ => return EINVAL.to_errno(),
        }
    } else {
        None
    };
    let attrs = QpAttrs {
        mask: m,
        state,
        cur_state,
        path_mtu,
        dest_qpn: has(qp_mask::DEST_QPN).then_some(a.dest_qp_num),
        rq_psn: has(qp_mask::RQ_PSN).then_some(a.rq_psn),
        sq_psn: has(qp_mask::SQ_PSN).then_some(a.sq_psn),
        access: has(qp_mask::ACCESS_FLAGS).then_some(a.qp_access_flags as u32),
        timeout: has(qp_mask::TIMEOUT).then_some(a.timeout),
        retry_cnt: has(qp_mask::RETRY_CNT).then_some(a.retry_cnt),
        rnr_retry: has(qp_mask::RNR_RETRY).then_some(a.rnr_retry),
        min_rnr_timer: has(qp_mask::MIN_RNR_TIMER).then_some(a.min_rnr_timer),
        max_rd_atomic: has(qp_mask::MAX_QP_RD_ATOMIC).then_some(a.max_rd_atomic),
        max_dest_rd_atomic: has(qp_mask::MAX_DEST_RD_ATOMIC).then_some(a.max_dest_rd_atomic),
        qkey: has(qp_mask::QKEY).then_some(a.qkey),
        pkey_index: has(qp_mask::PKEY_INDEX).then_some(a.pkey_index),
        port: has(qp_mask::PORT).then_some(a.port_num),
        path,
        caps: QpCaps::default(),
        sig_all: false,
        sqd_notify: has(qp_mask::EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify != 0,
    };
    errno(T::modify_qp(qp, &attrs))
}

/// # Safety
///
/// Called by ib_core on a live `QpObj<T>` with valid, zeroed `attr` and `init`.
pub(crate) unsafe extern "C" fn query_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    // SAFETY: live QP (function contract).
    let qp = unsafe { qp_data::<T>(ibqp) };
    let q = match T::query_qp(qp) {
        Ok(q) => q,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: valid for writes (function contract).
    let (a, ia) = unsafe { (&mut *attr, &mut *init) };
    let st = q.state.unwrap_or(QpState::Reset).to_raw();
    a.qp_state = st;
    a.cur_qp_state = st;
    a.path_mtu = match q.path_mtu.unwrap_or(1024) {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    };
    a.dest_qp_num = q.dest_qpn.unwrap_or(0);
    a.rq_psn = q.rq_psn.unwrap_or(0);
    a.sq_psn = q.sq_psn.unwrap_or(0);
    a.qp_access_flags = q.access.unwrap_or(0) as c_int;
    a.timeout = q.timeout.unwrap_or(0);
    a.retry_cnt = q.retry_cnt.unwrap_or(0);
    a.rnr_retry = q.rnr_retry.unwrap_or(0);
    a.min_rnr_timer = q.min_rnr_timer.unwrap_or(0);
    a.max_rd_atomic = q.max_rd_atomic.unwrap_or(0);
    a.max_dest_rd_atomic = q.max_dest_rd_atomic.unwrap_or(0);
    a.qkey = q.qkey.unwrap_or(0);
    a.pkey_index = q.pkey_index.unwrap_or(0);
    a.port_num = q.port.unwrap_or(1);
    caps_to(&q.caps, &mut a.cap);
    if let Some(p) = q.path {
        a.ah_attr.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_attr.port_num = a.port_num;
        a.ah_attr.sl = p.sl;
        a.ah_attr.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.ah_attr.grh.dgid.raw = p.dgid;
        a.ah_attr.grh.sgid_index = p.sgid_index;
        a.ah_attr.grh.hop_limit = p.hop_limit;
        a.ah_attr.grh.traffic_class = p.traffic_class;
        a.ah_attr.grh.flow_label = p.flow_label;
        a.ah_attr.__bindgen_anon_1.roce.dmac = p.dmac;
    }
    caps_to(&q.caps, &mut ia.cap);
    // SAFETY: live QP.
    ia.qp_type = unsafe { (*ibqp).qp_type };
    ia.sq_sig_type = if q.sig_all {
        bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        bindings::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    0
}

/// # Safety
///
/// Called by ib_core on a live `QpObj<T>`.
pub(crate) unsafe extern "C" fn post_send<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: live QP.
    let user = unsafe { !(*ibqp).uobject.is_null() };
    if !user {
        // SAFETY: a kernel QP (function contract), `wr` and `bad` as ib_core passes them.
        return unsafe { super::kverbs::post_send::<T>(ibqp, wr, bad) };
    }
    if !wr.is_null() {
        // User QPs post through their ring: a WR list here is a provider bug.
        if !bad.is_null() {
            // SAFETY: `bad` is valid for writes when non-NULL.
            unsafe { *bad = wr };
        }
        return EINVAL.to_errno();
    }
    // SAFETY: live QP (function contract).
    errno(T::doorbell(unsafe { qp_data::<T>(ibqp) }))
}

// ---- SRQ ------------------------------------------------------------------------------------

/// # Safety
///
/// Called by ib_core with a zeroed-tail `SrqObj<T>` of a registered `Device<T>`.
pub(crate) unsafe extern "C" fn create_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `ibsrq` is valid and its `device` is our registered device.
    let dev = unsafe { Device::<T>::from_ib((*ibsrq).device) };
    // SAFETY: valid for the call.
    let ia = unsafe { &mut *init };
    if ia.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
        return eopnotsupp();
    }
    // SAFETY: `udata` is NULL (a kernel caller) or the driver udata of this user call.
    let mut ctx = match unsafe { UserCtx::for_call(NonNull::new(udata)) } {
        Ok(c) => c,
        Err(e) => return e.to_errno(),
    };
    let events = match Revocable::new(ibsrq.cast()) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    let si = SrqInit::<T> {
        // SAFETY: ib_core set `pd` to the live PD of the call.
        pd: unsafe { super::device::pd_data::<T>((*ibsrq).pd) },
        attrs: SrqAttrs {
            max_wr: ia.attr.max_wr,
            max_sge: ia.attr.max_sge,
            limit: ia.attr.srq_limit,
        },
        events: SrqEvents(events.clone()),
    };
    match T::create_srq(dev, si, ctx.as_mut()) {
        Ok((data, granted)) => {
            ia.attr.max_wr = granted.max_wr;
            ia.attr.max_sge = granted.max_sge;
            let tail = Tail {
                data,
                maps: UserCtx::take_maps(&mut ctx),
                events,
            };
            // SAFETY: `ibsrq` is the start of an `SrqObj<T>`; the tail was uninitialised.
            unsafe { (*ibsrq.cast::<SrqObj<T>>()).tail.write(tail) };
            0
        }
        Err(e) => {
            events.revoke();
            e.to_errno()
        }
    }
}

/// # Safety
///
/// Called by ib_core on a live `SrqObj<T>`.
pub(crate) unsafe extern "C" fn modify_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: live SRQ; `attr` valid for the call.
    let (srq, a) = unsafe { (srq_data::<T>(ibsrq), &*attr) };
    let attrs = SrqAttrs {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        limit: a.srq_limit,
    };
    errno(T::modify_srq(srq, &attrs, mask))
}

/// # Safety
///
/// Called by ib_core on a live `SrqObj<T>`.
pub(crate) unsafe extern "C" fn query_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    // SAFETY: live SRQ; `attr` valid for writes.
    let (srq, a) = unsafe { (srq_data::<T>(ibsrq), &mut *attr) };
    let q = T::query_srq(srq);
    a.max_wr = q.max_wr;
    a.max_sge = q.max_sge;
    a.srq_limit = q.limit;
    0
}

/// # Safety
///
/// Called by ib_core once per successfully created `SrqObj<T>`, with no QP using it.
pub(crate) unsafe extern "C" fn destroy_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: created successfully; read out once, here.
    let tail = unsafe { (*ibsrq.cast::<SrqObj<T>>()).tail.assume_init_read() };
    T::destroy_srq(&tail.data);
    tail.destroy();
    0
}

// ---- MR -------------------------------------------------------------------------------------

fn err_mr(e: Error) -> *mut bindings::ib_mr {
    // SAFETY: builds an error pointer; no memory is accessed.
    unsafe { bindings::oxrdma_err_ptr(e.to_errno() as kernel::ffi::c_long) }.cast()
}

/// The part of an MR that does not depend on the driver: `ib_mr`, then the page list of a
/// fast-registration MR (so `ib_sg_to_pages`' callback, which has only the `ib_mr`, finds it).
#[repr(C)]
struct MrHead {
    ib: bindings::ib_mr,
    fast: Option<Arc<FastRegPages>>,
}

/// An MR: allocated by the driver (ib_core does not for MRs in 6.12).
#[repr(C)]
struct MrObj<T: Driver> {
    head: MrHead,
    data: T::Mr,
}

/// Boxes a new MR for ib_core, which fills in the rest (device, pd, uobject, type).
fn new_mr<T: Driver>(
    data: T::Mr,
    lkey: u32,
    rkey: u32,
    iova: u64,
    length: u64,
    fast: Option<Arc<FastRegPages>>,
) -> *mut bindings::ib_mr {
    let obj = KBox::new(
        MrObj::<T> {
            head: MrHead {
                ib: Default::default(),
                fast,
            },
            data,
        },
        GFP_KERNEL,
    );
    let mut obj = match obj {
        Ok(o) => o,
        Err(_) => return err_mr(ENOMEM),
    };
    obj.head.ib.lkey = lkey;
    obj.head.ib.rkey = rkey;
    obj.head.ib.iova = iova;
    obj.head.ib.length = length;
    KBox::into_raw(obj).cast()
}

/// # Safety
///
/// Called by ib_core on a live `PdObj<T>` of a registered `Device<T>`, in a user call.
pub(crate) unsafe extern "C" fn reg_user_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access_flags: c_int,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: live PD of our device.
    let (ib, pd) = unsafe { ((*ibpd).device, super::device::pd_data::<T>(ibpd)) };
    // SAFETY: registered device.
    let dev = unsafe { Device::<T>::from_ib(ib) };
    // SAFETY: a user verbs call on a registered device.
    let mem = match unsafe { UserMem::get(ib, start, length, access_flags) } {
        Ok(m) => m,
        Err(e) => return err_mr(e),
    };
    match T::reg_user_mr(dev, pd, mem, iova, access_flags as u32) {
        Ok((data, lkey, rkey)) => new_mr::<T>(data, lkey, rkey, iova, length, None),
        Err(e) => err_mr(e),
    }
}

/// A DMA MR for a kernel user: all of memory by DMA address (`ib_get_dma_mr`; ib_alloc_pd
/// makes one for the PD's `local_dma_lkey`).
///
/// # Safety
///
/// Called by ib_core on a live `PdObj<T>` of a registered `Device<T>`.
pub(crate) unsafe extern "C" fn get_dma_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    access_flags: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: live PD of our device.
    let (ib, pd) = unsafe { ((*ibpd).device, super::device::pd_data::<T>(ibpd)) };
    // SAFETY: registered device.
    let dev = unsafe { Device::<T>::from_ib(ib) };
    // INVARIANT: a DMA MR of a kernel user.
    match T::get_dma_mr(dev, pd, access_flags as u32, KernelMem::new()) {
        Ok((data, lkey, rkey)) => new_mr::<T>(data, lkey, rkey, 0, u64::MAX, None),
        Err(e) => err_mr(e),
    }
}

/// A fast-registration MR for a kernel user (`ib_alloc_mr`), invalid until an
/// `IB_WR_REG_MR`.
///
/// # Safety
///
/// Called by ib_core on a live `PdObj<T>` of a registered `Device<T>`.
pub(crate) unsafe extern "C" fn alloc_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return err_mr(EINVAL);
    }
    // SAFETY: live PD of our device.
    let (ib, pd) = unsafe { ((*ibpd).device, super::device::pd_data::<T>(ibpd)) };
    // SAFETY: registered device.
    let dev = unsafe { Device::<T>::from_ib(ib) };
    let pages = match FastRegPages::new(max_num_sg as usize) {
        Ok(p) => p,
        Err(e) => return err_mr(e),
    };
    match T::alloc_mr(dev, pd, max_num_sg, pages.clone()) {
        Ok((data, lkey, rkey)) => new_mr::<T>(data, lkey, rkey, 0, 0, Some(pages)),
        Err(e) => err_mr(e),
    }
}

/// The `set_page` callback of `ib_sg_to_pages` (called from `oxrdma_sg_to_pages`).
///
/// # Safety
///
/// `ibmr` is a live MR of this driver (an `MrHead` at offset 0).
#[no_mangle]
pub unsafe extern "C" fn oxrdma_mr_set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: function contract; the head's layout does not depend on the driver type.
    match unsafe { &(*ibmr.cast::<MrHead>()).fast } {
        Some(p) => errno(p.push(addr)),
        None => EINVAL.to_errno(),
    }
}

/// Maps a kernel user's DMA-mapped scatterlist into a fast-registration MR's page list.
///
/// # Safety
///
/// Called by ib_core (`ib_map_mr_sg`) on a live MR of this driver with a DMA-mapped
/// scatterlist of `sg_nents` entries and `page_size` set.
pub(crate) unsafe extern "C" fn map_mr_sg(
    ibmr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut kernel::ffi::c_uint,
) -> c_int {
    // SAFETY: a live MR of this driver (function contract).
    let (fast, page_size) = unsafe { (&(*ibmr.cast::<MrHead>()).fast, (*ibmr).page_size) };
    let Some(pages) = fast else {
        return EINVAL.to_errno();
    };
    pages.begin(u64::from(page_size));
    // SAFETY: function contract; the callback finds the page list through `ibmr`.
    let n = unsafe { bindings::oxrdma_sg_to_pages(ibmr, sg, sg_nents, sg_offset) };
    // SAFETY: `ib_sg_to_pages` set the MR's iova.
    pages.finish(unsafe { (*ibmr).iova });
    n
}

/// # Safety
///
/// Called by ib_core once per MR this driver returned.
pub(crate) unsafe extern "C" fn dereg_mr<T: Driver>(
    ibmr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: made by `KBox::into_raw` in `new_mr` (`ib` at offset 0), freed only here.
    let obj = unsafe { KBox::from_raw(ibmr.cast::<MrObj<T>>()) };
    T::dereg_mr(&obj.data);
    drop(obj);
    0
}
