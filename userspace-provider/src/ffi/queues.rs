// SPDX-License-Identifier: GPL-2.0
//! The `verbs_context_ops` entry points of the data path: CQs, MRs, QPs, SRQs and posting.
//!
//! Each object is a `#[repr(C)]` Rust structure whose first member is libibverbs' structure
//! (`ibv_cq`, `verbs_mr`, `ibv_qp`, `ibv_srq`), allocated by `Box` and handed to libibverbs
//! as a pointer to that member. libibverbs and the application write the first member
//! (states, event counters, the pthread mutex) whenever they like, so Rust references are
//! only ever formed to the provider's own `inner` member ([`inner_of`]).

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr;

use oxrdma_uapi::queue::Sge;
use oxrdma_uapi::verbs::CreateCqResp;

use super::{cmd_result, destroy_boxed, guard, log_err, set_errno, verbs_ctx};
use crate::cq::{CqInner, CreateCqRespBuf, OxCq};
use crate::mapping::{doorbell, gather_inline};
use crate::mr::OxMr;
use crate::qp::{CreateQpRespBuf, OxQp, QpGrant, QpInner};
use crate::recv::{RecvQueue, RecvWr};
use crate::ring::{PostError, SetupError};
use crate::send::{self, AtomicFields, RdmaFields, SendWr, Target, TargetKind, UdFields};
use crate::srq::{CreateSrqRespBuf, OxSrq, SrqInner, MODIFY_SRQ_SUPPORTED};
use crate::sys;

// `ibv_sge` and the uapi `Sge` are the same 16 bytes: SGE lists are read in place.
const _: () = {
    assert!(size_of::<sys::ibv_sge>() == size_of::<Sge>());
    assert!(core::mem::align_of::<sys::ibv_sge>() == core::mem::align_of::<Sge>());
    assert!(core::mem::offset_of!(sys::ibv_sge, addr) == core::mem::offset_of!(Sge, addr));
    assert!(core::mem::offset_of!(sys::ibv_sge, length) == core::mem::offset_of!(Sge, length));
    assert!(core::mem::offset_of!(sys::ibv_sge, lkey) == core::mem::offset_of!(Sge, lkey));
};

/// The SGE list of a work request as a slice; `None` if `num_sge` is negative or the list
/// pointer is NULL with entries.
///
/// # Safety
/// `sg_list` must point to `num_sge` readable `ibv_sge`s that live for `'a` (the verbs
/// contract for the duration of a post call).
pub(super) unsafe fn sge_list<'a>(
    sg_list: *const sys::ibv_sge,
    num_sge: c_int,
) -> Option<&'a [Sge]> {
    let n = usize::try_from(num_sge).ok()?;
    if n == 0 {
        return Some(&[]);
    }
    if sg_list.is_null() {
        return None;
    }
    // SAFETY: per the contract; ibv_sge and Sge have the same layout (asserted above).
    Some(unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), n) })
}

/// One `ibv_send_wr` as a [`SendWr`], reading only the union members its opcode uses.
///
/// # Safety
/// `w` is a work request passed to `ibv_post_send` (its SGE list valid for the call).
unsafe fn send_wr(w: &sys::ibv_send_wr, ud: bool) -> Option<SendWr<'_>> {
    // SAFETY: per the contract.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge) }?;
    let imm_or_inv = if send::uses_imm_or_inv(w.opcode) {
        // SAFETY: both members of this union are u32s; the opcode says the caller set one.
        unsafe { w.__bindgen_anon_1.imm_data }
    } else {
        0
    };
    // The opcode and QP type say which member the caller set; only that one is read.
    let target = match send::target_kind(w.opcode, ud) {
        TargetKind::None => Target::None,
        TargetKind::Rdma => {
            // SAFETY: the member the caller set for this opcode; plain integers.
            let r = unsafe { w.wr.rdma };
            Target::Rdma(RdmaFields {
                remote_addr: r.remote_addr,
                rkey: r.rkey,
            })
        }
        TargetKind::Atomic => {
            // SAFETY: the member the caller set for this opcode; plain integers.
            let a = unsafe { w.wr.atomic };
            Target::Atomic(AtomicFields {
                remote_addr: a.remote_addr,
                compare_add: a.compare_add,
                swap: a.swap,
                rkey: a.rkey,
            })
        }
        TargetKind::Ud => {
            // SAFETY: the member the caller set on a UD QP.
            let u = unsafe { w.wr.ud };
            Target::Ud(UdFields {
                // SAFETY: a UD work request's `ah` is NULL or an AH of this provider's
                // (verbs contract), live for the call.
                ah_num: unsafe { super::ah_number(u.ah) }?,
                remote_qpn: u.remote_qpn,
                remote_qkey: u.remote_qkey,
            })
        }
    };
    Some(SendWr {
        wr_id: w.wr_id,
        opcode: w.opcode,
        send_flags: w.send_flags,
        imm_or_inv,
        target,
        sges,
    })
}

/// A node of a work request list as libibverbs passes it to the post verbs.
trait WrList {
    /// The next work request, NULL at the end.
    fn next(&self) -> *mut Self;
}

impl WrList for sys::ibv_send_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl WrList for sys::ibv_recv_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// `*bad_wr = wr`, unless the caller passed no `bad_wr`.
///
/// # Safety
/// `bad_wr` is NULL or writable.
unsafe fn set_bad_wr<W>(bad_wr: *mut *mut W, wr: *mut W) {
    if !bad_wr.is_null() {
        // SAFETY: per the contract, writable.
        unsafe { *bad_wr = wr };
    }
}

/// The loop of every post verb (`ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`):
/// hands each work request of the list `wr` to `post`, in order, and stops at the first one
/// `post` refuses: 0, or that one's errno with `*bad_wr` pointing to it.
///
/// # Safety
/// `wr` is NULL or a list of valid work requests; `bad_wr` is NULL or writable (the verbs
/// contract, for the duration of the post call).
unsafe fn post_list<W: WrList>(
    mut wr: *mut W,
    bad_wr: *mut *mut W,
    mut post: impl FnMut(&W) -> Result<(), PostError>,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: per the contract, a valid work request for the call's duration.
        let w = unsafe { &*wr };
        if let Err(e) = post(w) {
            // SAFETY: per the contract.
            unsafe { set_bad_wr(bad_wr, wr) };
            return e.errno();
        }
        wr = w.next();
    }
    0
}

/// What [`post_recv_list`] did.
struct RecvPosted {
    /// The errno (0 if every work request was posted).
    err: c_int,
    /// The QP's doorbell must be rung (see [`RecvQueue::finish`]).
    doorbell: bool,
}

/// Posts the receive list `wr` into `rq`, with `*bad_wr` set on failure.
///
/// # Safety
/// `wr` is NULL or a list of valid `ibv_recv_wr`s; `bad_wr` is NULL or writable.
unsafe fn post_recv_list(
    rq: &mut RecvQueue,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> RecvPosted {
    let post = |w: &sys::ibv_recv_wr| {
        // SAFETY: post_list hands over work requests of the caller's list (valid per the
        // contract), whose SGE lists are valid for the call.
        match unsafe { sge_list(w.sg_list, w.num_sge) } {
            Some(sges) => rq.post(&RecvWr {
                wr_id: w.wr_id,
                sges,
            }),
            None => Err(PostError::Invalid),
        }
    };
    // SAFETY: per the contract.
    let err = unsafe { post_list(wr, bad_wr, post) };
    RecvPosted {
        err,
        doorbell: rq.finish(),
    }
}

/// The end of a create verb whose kernel object exists but whose rings could not be set up:
/// logs, destroys the kernel object (`destroy`), sets errno and returns NULL.
///
/// # Safety
///
/// `ctx` is the context member of a live `verbs_context` of this provider.
pub(super) unsafe fn setup_failed<T>(
    ctx: *mut sys::ibv_context,
    verb: &str,
    e: SetupError,
    destroy: impl FnOnce(),
) -> *mut T {
    // SAFETY: ctx is the context member of a live verbs_context (function contract).
    log_err(unsafe { verbs_ctx(ctx) }, &format!("{verb}: {e}"));
    destroy();
    set_errno(e.errno());
    ptr::null_mut()
}

// ---- completion queues ------------------------------------------------------------------

/// `ibv_create_cq`: `CREATE_CQ`, then map the CQ ring. libibverbs runs `verbs_init_cq`.
pub(super) unsafe extern "C" fn create_cq(
    ibctx: *mut sys::ibv_context,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    guard(ptr::null_mut(), || {
        let command = |cq: &mut OxCq| {
            let mut cmd = sys::ibv_create_cq::default();
            let mut resp = CreateCqRespBuf::default();
            // SAFETY: ibctx is a live context of this provider (channel NULL or live, as the
            // caller passed it); cq, cmd and resp are live buffers of the sizes given, the
            // response buffer being core part then oxrdma's. The kernel keeps cq's address as
            // the CQ's user handle: it is in a Box, which does not move.
            let ret = unsafe {
                sys::ibv_cmd_create_cq(
                    ibctx,
                    cqe,
                    channel,
                    comp_vector,
                    cq.ibv_cq_ptr(),
                    &mut cmd,
                    size_of::<sys::ibv_create_cq>(),
                    ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_create_cq_resp>(),
                    size_of::<CreateCqRespBuf>(),
                )
            };
            cmd_result(ret).map(|()| resp.drv)
        };
        // SAFETY: ibctx is the live context libibverbs called the verb on.
        unsafe { create_cq_common(ibctx, "create_cq", command) }
    })
}

/// The body of `create_cq` and `create_cq_ex`: a new CQ, the kernel's create command
/// (`command`: the legacy or the extended one, run on the new CQ, returning oxrdma's part of
/// the response or the errno), then the ring (on failure the kernel object is destroyed
/// again), and the CQ handed to libibverbs. NULL, with errno set, on failure.
///
/// # Safety
///
/// `ibctx` is the live context (of this provider) the verb was called on.
pub(super) unsafe fn create_cq_common(
    ibctx: *mut sys::ibv_context,
    verb: &str,
    command: impl FnOnce(&mut OxCq) -> Result<CreateCqResp, c_int>,
) -> *mut sys::ibv_cq {
    let mut cq = OxCq::new();
    let drv = match command(&mut cq) {
        Ok(drv) => drv,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    // SAFETY: ibctx is the live context the verb was called on (function contract); cmd_fd
    // does not change during its life.
    let cmd_fd = unsafe { (*ibctx).cmd_fd };
    match CqInner::setup(cmd_fd, &drv) {
        Ok(inner) => cq.inner = Some(inner),
        Err(e) => {
            let ibv_cq = cq.ibv_cq_ptr();
            // SAFETY: ibctx is a live context of this provider (function contract).
            return unsafe {
                setup_failed(ibctx, verb, e, || {
                    // SAFETY: the CQ was created just before and is known to nobody else.
                    sys::ibv_cmd_destroy_cq(ibv_cq);
                })
            };
        }
    }
    // `vcq` (whose first member is the `ibv_cq`) is OxCq's first field (repr(C)): the
    // pointers share an address.
    Box::into_raw(cq).cast::<sys::ibv_cq>()
}

/// `ibv_destroy_cq`: `DESTROY_CQ`, then unmap the ring and free.
pub(super) unsafe extern "C" fn destroy_cq(cq: *mut sys::ibv_cq) -> c_int {
    // SAFETY: libibverbs passes a live CQ from create_cq or create_cq_ex, the first member of
    // its Box<OxCq>; neither it nor the application uses the CQ after a successful destroy.
    unsafe { destroy_boxed::<OxCq, _>(cq, sys::ibv_cmd_destroy_cq) }
}

/// `ibv_poll_cq`: up to `ne` completions from the CQ ring, no system call.
pub(super) unsafe extern "C" fn poll_cq(
    cq: *mut sys::ibv_cq,
    ne: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    guard(-1, || {
        let Some(inner) = inner_of!(cq, OxCq) else {
            return -1;
        };
        let max = usize::try_from(ne).unwrap_or(0);
        if max == 0 {
            return 0;
        }
        let mut i = 0usize;
        let r = inner.poll(max, |w| {
            assert!(i < max);
            // SAFETY: the caller gave room for `ne` entries at wc; i < ne (checked).
            unsafe { wc.add(i).write(w) };
            i += 1;
        });
        match r {
            Ok(n) => n as c_int,
            Err(e) => {
                // SAFETY: cq is live; its context pointer is set at creation and constant,
                // and is the context member of a live verbs_context.
                let ctx = unsafe { verbs_ctx(ptr::addr_of!((*cq).context).read()) };
                log_err(ctx, &e.to_string());
                -1
            }
        }
    })
}

/// `ibv_req_notify_cq`: through the kernel (`REQ_NOTIFY_CQ`).
pub(super) unsafe extern "C" fn req_notify_cq(
    cq: *mut sys::ibv_cq,
    solicited_only: c_int,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: cq is a live CQ from create_cq.
        unsafe { sys::ibv_cmd_req_notify_cq(cq, solicited_only) }
    })
}

// ---- memory regions ---------------------------------------------------------------------

/// `ibv_reg_mr`: `REG_MR`; libibverbs then fills `context`, `pd`, `addr`, `length`.
pub(super) unsafe extern "C" fn reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    guard(ptr::null_mut(), || {
        let mut mr = OxMr::new();
        let mut cmd = sys::ibv_reg_mr::default();
        let mut resp = sys::ib_uverbs_reg_mr_resp::default();
        // SAFETY: pd is a live PD of this provider; the range is the caller's (checked and
        // pinned by the kernel); mr, cmd and resp are live buffers of the sizes given.
        let ret = unsafe {
            sys::ibv_cmd_reg_mr(
                pd,
                addr,
                length,
                hca_va,
                access,
                &mut mr.vmr,
                &mut cmd,
                size_of::<sys::ibv_reg_mr>(),
                &mut resp,
                size_of::<sys::ib_uverbs_reg_mr_resp>(),
            )
        };
        if ret != 0 {
            set_errno(ret);
            return ptr::null_mut();
        }
        // `vmr.ibv_mr` is at offset 0 of OxMr.
        Box::into_raw(mr).cast::<sys::ibv_mr>()
    })
}

/// `ibv_dereg_mr`.
pub(super) unsafe extern "C" fn dereg_mr(vmr: *mut sys::verbs_mr) -> c_int {
    // SAFETY: libibverbs passes a live MR from reg_mr, the first member of its Box<OxMr>; it
    // is not used after a successful deregistration.
    unsafe { destroy_boxed::<OxMr, _>(vmr, sys::ibv_cmd_dereg_mr) }
}

// ---- queue pairs ------------------------------------------------------------------------

/// `ibv_create_qp`: `CREATE_QP`, then map the SQ ring and (without an SRQ) the RQ ring. The
/// granted capabilities end up in `attr->cap`.
pub(super) unsafe extern "C" fn create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's attributes, valid for the call; a plain copy.
        let plain = unsafe { attr.read() };
        // The extended attributes libibverbs' ibv_cmd_create_qp builds from the plain ones.
        let mut a = sys::ibv_qp_init_attr_ex {
            qp_context: plain.qp_context,
            send_cq: plain.send_cq,
            recv_cq: plain.recv_cq,
            srq: plain.srq,
            cap: plain.cap,
            qp_type: plain.qp_type,
            sq_sig_all: plain.sq_sig_all,
            comp_mask: sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD,
            pd,
            ..Default::default()
        };
        // SAFETY: pd and its context are live.
        let ctx = unsafe { (*pd).context };
        let command = |qp: &mut OxQp,
                       a: &mut sys::ibv_qp_init_attr_ex,
                       cmd: &mut sys::ibv_create_qp,
                       resp: &mut CreateQpRespBuf| {
            // SAFETY: pd is a live PD of this provider, attr the caller's init attributes
            // (CQs, SRQ live); qp, cmd and resp are live buffers of the sizes given. The
            // kernel keeps qp's address as the user handle: it is in a Box, which does not
            // move.
            let ret = unsafe {
                sys::ibv_cmd_create_qp(
                    pd,
                    qp.ibv_qp_ptr(),
                    attr,
                    cmd,
                    size_of::<sys::ibv_create_qp>(),
                    ptr::from_mut(resp).cast::<sys::ib_uverbs_create_qp_resp>(),
                    size_of::<CreateQpRespBuf>(),
                )
            };
            // SAFETY: attr is the caller's, valid for the call; on success
            // ibv_cmd_create_qp has written the granted capabilities into attr->cap on both
            // the ioctl and the write path.
            a.cap = unsafe { (*attr).cap };
            ret
        };
        // SAFETY: ctx is the live context of pd, of this provider.
        let qp = unsafe { create_qp_common(ctx, &mut a, "create_qp", command) };
        qp.map_or(ptr::null_mut(), |qp| {
            Box::into_raw(qp).cast::<sys::ibv_qp>()
        })
    })
}

/// The body of `create_qp` and `create_qp_ex`, on extended attributes `a` (`create_qp` builds
/// them from its plain ones): a new QP, the kernel's create command (`command`: the legacy or
/// the extended one, run on the new QP, `a` and zeroed command and response buffers; it
/// leaves the granted capabilities in `a.cap` and returns 0 or the errno), then oxrdma's
/// response checked against what was granted and the rings mapped (on failure the kernel
/// object is destroyed again). `None`, with errno set, on failure.
///
/// # Safety
///
/// `ctx` is the live context (of this provider) the QP is created in.
pub(super) unsafe fn create_qp_common(
    ctx: *mut sys::ibv_context,
    a: &mut sys::ibv_qp_init_attr_ex,
    verb: &str,
    command: impl FnOnce(
        &mut OxQp,
        &mut sys::ibv_qp_init_attr_ex,
        &mut sys::ibv_create_qp,
        &mut CreateQpRespBuf,
    ) -> c_int,
) -> Option<Box<OxQp>> {
    let mut qp = OxQp::new();
    let mut cmd = sys::ibv_create_qp::default();
    let mut resp = CreateQpRespBuf::default();
    if let Err(e) = cmd_result(command(&mut qp, a, &mut cmd, &mut resp)) {
        set_errno(e);
        return None;
    }
    let ibv_qp = qp.ibv_qp_ptr();
    // SAFETY: the create command succeeded and filled in qp_num and handle; nothing else
    // writes the new QP yet.
    let (qp_num, handle) = unsafe { ((*ibv_qp).qp_num, (*ibv_qp).handle) };
    let grant = QpGrant {
        cap: a.cap,
        has_srq: !a.srq.is_null(),
        sig_all: a.sq_sig_all != 0,
        ud: a.qp_type == sys::ibv_qp_type_IBV_QPT_UD,
        qp_num,
        handle,
    };
    // SAFETY: ctx is the live context the QP was created in (both callers pass the one
    // libibverbs gave the verb).
    let cmd_fd = unsafe { (*ctx).cmd_fd };
    match QpInner::setup(cmd_fd, &resp.drv, &grant) {
        Ok(inner) => {
            qp.inner = Some(inner);
            Some(qp)
        }
        Err(e) => {
            // SAFETY: ctx is a live context of this provider (function contract).
            unsafe {
                setup_failed::<()>(ctx, verb, e, || {
                    // SAFETY: the QP was created just before and is known to nobody else.
                    sys::ibv_cmd_destroy_qp(ibv_qp);
                })
            };
            None
        }
    }
}

/// `ibv_query_qp`.
pub(super) unsafe extern "C" fn query_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    guard(libc::EIO, || {
        let mut cmd = sys::ibv_query_qp::default();
        // SAFETY: arguments as libibverbs passed them; cmd is a live local of the size given.
        unsafe {
            sys::ibv_cmd_query_qp(
                qp,
                attr,
                attr_mask,
                init_attr,
                &mut cmd,
                size_of::<sys::ibv_query_qp>(),
            )
        }
    })
}

/// `ibv_modify_qp`.
pub(super) unsafe extern "C" fn modify_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        let mut cmd = sys::ibv_modify_qp::default();
        // SAFETY: arguments as libibverbs passed them; cmd is a live local of the size given.
        unsafe {
            sys::ibv_cmd_modify_qp(
                qp,
                attr,
                attr_mask,
                &mut cmd,
                size_of::<sys::ibv_modify_qp>(),
            )
        }
    })
}

/// `ibv_destroy_qp`: `DESTROY_QP`, then unmap the rings and free.
pub(super) unsafe extern "C" fn destroy_qp(qp: *mut sys::ibv_qp) -> c_int {
    // SAFETY: libibverbs passes a live QP from create_qp or create_qp_ex, the first member of
    // its Box<OxQp>; it is not used after a successful destroy.
    unsafe { destroy_boxed::<OxQp, _>(qp, sys::ibv_cmd_destroy_qp) }
}

/// `ibv_post_send`: the work requests into the SQ ring, then the doorbell if the kernel is
/// not busy with the queue.
pub(super) unsafe extern "C" fn post_send(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    guard(libc::EIO, || {
        let Some(inner) = inner_of!(qp, OxQp) else {
            return libc::EINVAL;
        };
        // SAFETY: libibverbs passes a live QP of this provider.
        if !unsafe { super::can_post_send(qp) } {
            // SAFETY: the caller's out-pointer, NULL or writable.
            unsafe { set_bad_wr(bad_wr, wr) };
            return libc::EINVAL;
        }
        let mut err = 0;
        let ring = inner.sq().with(|sq| {
            let ud = sq.caps().ud;
            let post = |w: &sys::ibv_send_wr| {
                // SAFETY: post_list hands over work requests of the caller's list, valid
                // (with their SGE lists) for the call.
                match unsafe { send_wr(w, ud) } {
                    Some(s) => sq.post(&s, |out| {
                        // SAFETY: an inline work request's SGEs describe readable bytes
                        // of the caller's, read during ibv_post_send.
                        unsafe { gather_inline(s.sges, out) }
                    }),
                    None => Err(PostError::Invalid),
                }
            };
            // SAFETY: the caller's list and out-pointer, as ibv_post_send requires.
            err = unsafe { post_list(wr, bad_wr, post) };
            sq.finish()
        });
        if ring {
            if let Err(e) = doorbell(inner.cmd_fd, inner.handle) {
                if err == 0 {
                    err = e;
                }
            }
        }
        err
    })
}

/// `ibv_post_recv`: the work requests into the RQ ring (EINVAL for a QP with an SRQ), then
/// the doorbell if the QP is in the error state (the kernel flushes them).
pub(super) unsafe extern "C" fn post_recv(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: libibverbs passes a live QP of this provider.
        let ok = unsafe { super::can_post_recv(qp) };
        let inner = inner_of!(qp, OxQp).filter(|_| ok);
        let Some(mut rq) = inner.and_then(QpInner::lock_rq) else {
            // SAFETY: the caller's out-pointer, NULL or writable.
            unsafe { set_bad_wr(bad_wr, wr) };
            return libc::EINVAL;
        };
        // SAFETY: the caller's list and out-pointer, as ibv_post_recv requires.
        let mut posted = unsafe { post_recv_list(&mut rq, wr, bad_wr) };
        drop(rq);
        if let (true, Some(inner)) = (posted.doorbell, inner) {
            if let Err(e) = doorbell(inner.cmd_fd, inner.handle) {
                if posted.err == 0 {
                    posted.err = e;
                }
            }
        }
        posted.err
    })
}

// ---- shared receive queues --------------------------------------------------------------

/// `ibv_create_srq`: `CREATE_SRQ`, then map the ring. libibverbs fills the `ibv_srq` fields.
pub(super) unsafe extern "C" fn create_srq(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    guard(ptr::null_mut(), || {
        let mut srq = OxSrq::new();
        let mut cmd = sys::ibv_create_srq::default();
        let mut resp = CreateSrqRespBuf::default();
        // SAFETY: pd is a live PD of this provider, attr the caller's; srq, cmd and resp are
        // live buffers of the sizes given. A Box does not move (the kernel's user handle).
        let ret = unsafe {
            sys::ibv_cmd_create_srq(
                pd,
                &mut srq.ibv_srq,
                attr,
                &mut cmd,
                size_of::<sys::ibv_create_srq>(),
                ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_create_srq_resp>(),
                size_of::<CreateSrqRespBuf>(),
            )
        };
        if ret != 0 {
            set_errno(ret);
            return ptr::null_mut();
        }
        // SAFETY: attr is valid for the call; ibv_cmd_create_srq wrote the granted max_wr
        // and max_sge into it.
        let granted = unsafe { (*attr).attr };
        // SAFETY: pd and its context are live.
        let (ctx, cmd_fd) = unsafe { ((*pd).context, (*(*pd).context).cmd_fd) };
        match SrqInner::setup(cmd_fd, &resp.drv, granted.max_wr, granted.max_sge) {
            Ok(inner) => srq.inner = Some(inner),
            Err(e) => {
                // SAFETY: ctx is the live context of pd, of this provider.
                return unsafe {
                    setup_failed(ctx, "create_srq", e, || {
                        // SAFETY: the SRQ was created above and is known to nobody else.
                        sys::ibv_cmd_destroy_srq(&mut srq.ibv_srq);
                    })
                };
            }
        }
        Box::into_raw(srq).cast::<sys::ibv_srq>()
    })
}

/// `ibv_modify_srq`: the limit only (EOPNOTSUPP for resizing).
pub(super) unsafe extern "C" fn modify_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    guard(libc::EIO, || {
        if attr_mask as u32 & !MODIFY_SRQ_SUPPORTED != 0 {
            return libc::EOPNOTSUPP;
        }
        let mut cmd = sys::ibv_modify_srq::default();
        // SAFETY: arguments as libibverbs passed them; cmd is a live local of the size given.
        unsafe {
            sys::ibv_cmd_modify_srq(
                srq,
                attr,
                attr_mask,
                &mut cmd,
                size_of::<sys::ibv_modify_srq>(),
            )
        }
    })
}

/// `ibv_query_srq`.
pub(super) unsafe extern "C" fn query_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    guard(libc::EIO, || {
        let mut cmd = sys::ibv_query_srq::default();
        // SAFETY: arguments as libibverbs passed them; cmd is a live local of the size given.
        unsafe { sys::ibv_cmd_query_srq(srq, attr, &mut cmd, size_of::<sys::ibv_query_srq>()) }
    })
}

/// `ibv_destroy_srq`: `DESTROY_SRQ`, then unmap the ring and free.
pub(super) unsafe extern "C" fn destroy_srq(srq: *mut sys::ibv_srq) -> c_int {
    // SAFETY: libibverbs passes a live SRQ from create_srq, the first member of its
    // Box<OxSrq>; it is not used after a successful destroy.
    unsafe { destroy_boxed::<OxSrq, _>(srq, sys::ibv_cmd_destroy_srq) }
}

/// `ibv_post_srq_recv`: the work requests into the SRQ ring.
pub(super) unsafe extern "C" fn post_srq_recv(
    srq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        let Some(inner) = inner_of!(srq, OxSrq) else {
            return libc::EINVAL;
        };
        // SAFETY: the caller's list and out-pointer, as ibv_post_srq_recv requires.
        // (The kernel never asks for an SRQ's doorbell: an SRQ has no error state.)
        unsafe { post_recv_list(&mut inner.lock(), wr, bad_wr) }.err
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sge_lists() {
        let sges = [sys::ibv_sge {
            addr: 1,
            length: 2,
            lkey: 3,
        }; 2];
        // SAFETY: a live two-entry array (and NULL/negative cases that read nothing).
        unsafe {
            assert_eq!(
                sge_list(sges.as_ptr(), 2),
                Some(
                    &[Sge {
                        addr: 1,
                        length: 2,
                        lkey: 3
                    }; 2][..]
                )
            );
            assert_eq!(sge_list(ptr::null(), 0), Some(&[][..]));
            assert_eq!(sge_list(ptr::null(), 1), None);
            assert_eq!(sge_list(sges.as_ptr(), -1), None);
        }
    }

    #[test]
    fn post_list_stops_at_the_first_refused_work_request() {
        let mut wrs = [sys::ibv_recv_wr::default(); 3];
        for (i, w) in wrs.iter_mut().enumerate() {
            w.wr_id = i as u64;
        }
        let base = wrs.as_mut_ptr();
        // SAFETY: links the entries of the local array into a NULL-terminated list.
        unsafe {
            (*base).next = base.add(1);
            (*base.add(1)).next = base.add(2);
        }
        let mut seen = Vec::new();
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: a valid three-entry list and a writable bad_wr.
        let err = unsafe {
            post_list(base, &mut bad, |w| {
                seen.push(w.wr_id);
                if w.wr_id == 1 {
                    Err(PostError::Full)
                } else {
                    Ok(())
                }
            })
        };
        assert_eq!(
            (err, seen, bad),
            (libc::ENOMEM, vec![0, 1], base.wrapping_add(1))
        );

        let mut n = 0;
        // SAFETY: as above; a NULL bad_wr is not written.
        let err = unsafe {
            post_list(base, ptr::null_mut(), |_| {
                n += 1;
                Ok(())
            })
        };
        assert_eq!((err, n), (0, 3));
        // SAFETY: an empty list reads nothing.
        let err = unsafe { post_list::<sys::ibv_recv_wr>(ptr::null_mut(), &mut bad, |_| Ok(())) };
        assert_eq!(err, 0);
    }

    #[test]
    fn send_wr_reads_the_used_member_only() {
        let sges = [sys::ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = sys::ibv_send_wr {
            wr_id: 5,
            sg_list: sges.as_ptr().cast_mut(),
            num_sge: 1,
            opcode: sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD,
            ..Default::default()
        };
        w.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x8000,
            compare_add: 3,
            swap: 0,
            rkey: 0x42,
        };
        // SAFETY: a valid work request with a live SGE list.
        let s = unsafe { send_wr(&w, false) }.unwrap();
        assert_eq!(
            s.target,
            Target::Atomic(AtomicFields {
                remote_addr: 0x8000,
                compare_add: 3,
                swap: 0,
                rkey: 0x42
            })
        );
        assert_eq!(s.imm_or_inv, 0);
        w.opcode = sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM;
        w.__bindgen_anon_1.imm_data = 0x0102_0304;
        // SAFETY: as above.
        let s = unsafe { send_wr(&w, false) }.unwrap();
        assert_eq!((s.target, s.imm_or_inv), (Target::None, 0x0102_0304));
        w.num_sge = -1;
        // SAFETY: as above (a negative count reads nothing).
        assert!(unsafe { send_wr(&w, false) }.is_none());
    }
}
