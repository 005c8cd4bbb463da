// SPDX-License-Identifier: GPL-2.0
//! The extended verbs: `ibv_create_cq_ex` (the `ibv_cq_ex` poll and `ibv_wc_read_*`
//! callbacks) and `ibv_create_qp_ex` (the `ibv_qp_ex` `ibv_wr_*` callbacks).
//!
//! Both create the same kernel objects and rings as `ibv_create_cq` / `ibv_create_qp`; the
//! callbacks work on the same [`CqInner`](crate::cq::CqInner) and
//! [`SendQueue`](crate::send::SendQueue). The sequences (`start_poll` .. `end_poll`,
//! `wr_start` .. `wr_complete`/`wr_abort`) hold the object's [`HeldLock`](crate::hold).

use core::ffi::{c_int, c_uint, c_void};
use core::mem::size_of;
use core::ptr;

use oxrdma_uapi::queue::Sge;

use super::queues::{create_cq_common, create_qp_common, sge_list};
use super::{cmd_result, guard, log_err, set_errno, verbs_ctx};
use crate::cq::{check_cq_init_ex, CqInner, CreateCqExRespBuf, OxCq};
use crate::mapping::doorbell;
use crate::qp::{check_qp_init_ex, CreateQpRespBuf, OxQp};
use crate::ring::PostError;
use crate::send::UdFields;
use crate::send::{AtomicFields, RdmaFields, SendQueue, Target, WrHeader};
use crate::sys;

// ---- extended completion queues ---------------------------------------------------------

/// `ibv_create_cq_ex` (libibverbs has refused `wc_flags` it does not know, and runs
/// `verbs_init_cq` afterwards): the checks of [`check_cq_init_ex`], then the body of
/// `ibv_create_cq` with the extended `CREATE_CQ`, then the callbacks for the requested fields.
pub(super) unsafe extern "C" fn create_cq_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's attributes, valid for the call.
        let a = unsafe { &*attr };
        if let Err(e) = check_cq_init_ex(a.wc_flags, a.comp_mask, a.flags) {
            set_errno(e);
            return ptr::null_mut();
        }
        let wc_flags = a.wc_flags;
        let command = |cq: &mut OxCq| {
            let mut cmd = sys::ibv_create_cq_ex::default();
            let mut resp = CreateCqExRespBuf::default();
            // SAFETY: ibctx is a live context of this provider, attr the caller's (channel
            // NULL or live); vcq, cmd and resp are live buffers of the sizes given, the
            // response being the core extended part then oxrdma's. The kernel keeps vcq's
            // address (in a Box, which does not move) as the user handle.
            let ret = unsafe {
                sys::ibv_cmd_create_cq_ex(
                    ibctx,
                    attr,
                    ptr::addr_of_mut!(cq.vcq),
                    &mut cmd,
                    size_of::<sys::ibv_create_cq_ex>(),
                    ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_ex_create_cq_resp>(),
                    size_of::<CreateCqExRespBuf>(),
                    0,
                )
            };
            cmd_result(ret).map(|()| resp.drv)
        };
        // SAFETY: ibctx is the live context libibverbs called the verb on.
        let cq =
            unsafe { create_cq_common(ibctx, "create_cq_ex", command) }.cast::<sys::ibv_cq_ex>();
        if !cq.is_null() {
            // SAFETY: cq is the ibv_cq_ex of the CQ just created (verbs_cq's union), not yet
            // returned, so known to no one else.
            unsafe { install_poll_ops(cq, wc_flags) };
        }
        cq
    })
}

/// Sets the `ibv_cq_ex` callbacks: the poll ones, and a `read_*` one for each field that
/// `wc_flags` asks for.
///
/// # Safety
/// `x` is the `ibv_cq_ex` of a CQ being created, which no one else uses yet.
unsafe fn install_poll_ops(x: *mut sys::ibv_cq_ex, wc_flags: u64) {
    let want = |f: sys::ibv_create_cq_wc_flags| wc_flags & u64::from(f) != 0;
    // SAFETY: per the contract; only its callback fields are written.
    unsafe {
        (*x).start_poll = Some(start_poll);
        (*x).next_poll = Some(next_poll);
        (*x).end_poll = Some(end_poll);
        (*x).read_opcode = Some(read_opcode);
        (*x).read_vendor_err = Some(read_vendor_err);
        (*x).read_wc_flags = Some(read_wc_flags);
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_BYTE_LEN) {
            (*x).read_byte_len = Some(read_byte_len);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_IMM) {
            (*x).read_imm_data = Some(read_imm_data);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_QP_NUM) {
            (*x).read_qp_num = Some(read_qp_num);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SRC_QP) {
            (*x).read_src_qp = Some(read_src_qp);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SLID) {
            (*x).read_slid = Some(read_slid);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_SL) {
            (*x).read_sl = Some(read_sl);
        }
        if want(sys::ibv_create_cq_wc_flags_IBV_WC_EX_WITH_DLID_PATH_BITS) {
            (*x).read_dlid_path_bits = Some(read_dlid_path_bits);
        }
    }
}

/// Sets `status` and `wr_id` of the `ibv_cq_ex` from a poll's result; the return value of
/// `start_poll`/`next_poll`.
///
/// # Safety
/// `cq` is a live `ibv_cq_ex` of this provider.
unsafe fn poll_result(
    cq: *mut sys::ibv_cq_ex,
    r: Result<Option<(u32, u64)>, crate::cq::Overrun>,
) -> c_int {
    match r {
        Ok(Some((status, wr_id))) => {
            // SAFETY: per the contract; the application reads these two fields after the
            // call, in the same thread.
            unsafe {
                ptr::addr_of_mut!((*cq).status).write(status);
                ptr::addr_of_mut!((*cq).wr_id).write(wr_id);
            }
            0
        }
        Ok(None) => libc::ENOENT,
        Err(e) => {
            // SAFETY: cq is live; its context pointer is set at creation and constant, and is
            // the context member of a live verbs_context.
            let ctx = unsafe { verbs_ctx(ptr::addr_of!((*cq).context).read()) };
            log_err(ctx, &e.to_string());
            libc::EIO
        }
    }
}

/// `ibv_start_poll`: locks the CQ and makes its oldest completion current; `ENOENT` (and
/// unlocked) if there is none.
unsafe extern "C" fn start_poll(
    cq: *mut sys::ibv_cq_ex,
    attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: attr is NULL or the caller's, valid for the call.
        if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
            return libc::EINVAL;
        }
        let Some(inner) = inner_of!(cq, OxCq) else {
            return libc::EINVAL;
        };
        // SAFETY: cq is a live ibv_cq_ex of this provider.
        unsafe { poll_result(cq, inner.start_poll()) }
    })
}

/// `ibv_next_poll`: the next completion, or `ENOENT` (the poll goes on until `end_poll`).
unsafe extern "C" fn next_poll(cq: *mut sys::ibv_cq_ex) -> c_int {
    guard(libc::EIO, || {
        let Some(inner) = inner_of!(cq, OxCq) else {
            return libc::EINVAL;
        };
        // SAFETY: cq is a live ibv_cq_ex of this provider.
        unsafe { poll_result(cq, inner.next_poll()) }
    })
}

/// `ibv_end_poll`: consumes the current completion and unlocks the CQ.
unsafe extern "C" fn end_poll(cq: *mut sys::ibv_cq_ex) {
    guard((), || {
        if let Some(inner) = inner_of!(cq, OxCq) {
            inner.end_poll();
        }
    })
}

/// The current completion of the poll on `cq` (zeroed if there is none).
fn current(cq: *mut sys::ibv_cq_ex) -> sys::ibv_wc {
    inner_of!(cq, OxCq)
        .map(CqInner::current)
        .unwrap_or_default()
}

unsafe extern "C" fn read_opcode(cq: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode {
    guard(0, || current(cq).opcode)
}

unsafe extern "C" fn read_vendor_err(cq: *mut sys::ibv_cq_ex) -> u32 {
    guard(0, || current(cq).vendor_err)
}

unsafe extern "C" fn read_byte_len(cq: *mut sys::ibv_cq_ex) -> u32 {
    guard(0, || current(cq).byte_len)
}

unsafe extern "C" fn read_imm_data(cq: *mut sys::ibv_cq_ex) -> sys::__be32 {
    // The union's bits unchanged: the network-order immediate, or the invalidated R_Key.
    guard(0, || sys::wc_imm(&current(cq)))
}

unsafe extern "C" fn read_qp_num(cq: *mut sys::ibv_cq_ex) -> u32 {
    guard(0, || current(cq).qp_num)
}

unsafe extern "C" fn read_src_qp(cq: *mut sys::ibv_cq_ex) -> u32 {
    guard(0, || current(cq).src_qp)
}

unsafe extern "C" fn read_wc_flags(cq: *mut sys::ibv_cq_ex) -> c_uint {
    guard(0, || current(cq).wc_flags)
}

unsafe extern "C" fn read_slid(cq: *mut sys::ibv_cq_ex) -> u32 {
    guard(0, || u32::from(current(cq).slid))
}

unsafe extern "C" fn read_sl(cq: *mut sys::ibv_cq_ex) -> u8 {
    guard(0, || current(cq).sl)
}

unsafe extern "C" fn read_dlid_path_bits(cq: *mut sys::ibv_cq_ex) -> u8 {
    guard(0, || current(cq).dlid_path_bits)
}

// ---- extended queue pairs ---------------------------------------------------------------

/// `ibv_create_qp_ex` (libibverbs sends a mask of just `IBV_QP_INIT_ATTR_PD` to `create_qp`
/// instead): the checks of [`check_qp_init_ex`], the `CREATE_QP` command through
/// `ibv_cmd_create_qp_ex` (same driver response as `ibv_create_qp`), the rings, and, with
/// `send_ops_flags`, the `ibv_qp_ex` callbacks.
pub(super) unsafe extern "C" fn create_qp_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    guard(ptr::null_mut(), || {
        // SAFETY: the caller's attributes, valid for the call; a plain copy (the size is the
        // same in rdma-core 44 and 55, checked by the layout tests).
        let mut a = unsafe { attr.read() };
        let init = match check_qp_init_ex(a.comp_mask, a.create_flags, a.send_ops_flags) {
            Ok(i) => i,
            Err(e) => {
                set_errno(e);
                return ptr::null_mut();
            }
        };
        a.comp_mask = init.comp_mask;
        let command = |qp: &mut OxQp,
                       a: &mut sys::ibv_qp_init_attr_ex,
                       cmd: &mut sys::ibv_create_qp,
                       resp: &mut CreateQpRespBuf| {
            // SAFETY: ibctx is a live context of this provider, `a` a copy of the caller's
            // attributes (PD, CQs, SRQ live); the verbs_qp pointer is to one laid out as
            // libibverbs 44 has it (crate::qp::VerbsQp; the command only touches its ibv_qp
            // and comp_mask); cmd and resp are live buffers of the sizes given. A Box does not
            // move (user handle). The command writes the granted capabilities into a.cap.
            unsafe {
                sys::ibv_cmd_create_qp_ex(
                    ibctx,
                    qp.ibv_qp_ptr().cast::<sys::verbs_qp>(),
                    a,
                    cmd,
                    size_of::<sys::ibv_create_qp>(),
                    ptr::from_mut(resp).cast::<sys::ib_uverbs_create_qp_resp>(),
                    size_of::<CreateQpRespBuf>(),
                )
            }
        };
        // SAFETY: ibctx is the live context libibverbs called the verb on.
        let Some(mut qp) = (unsafe { create_qp_common(ibctx, &mut a, "create_qp_ex", command) })
        else {
            return ptr::null_mut();
        };
        // SAFETY: attr is the caller's, writable: the granted capabilities.
        unsafe { (*attr).cap = a.cap };
        if let Some(ops) = init.send_ops {
            qp.vqp.comp_mask |= sys::verbs_qp_mask_VERBS_QP_EX;
            // SAFETY: the new QP, known to nobody else yet; its VerbsQp holds rdma-core 44's
            // ibv_qp_ex, whose fields up to wr_atomic_write (all that is written) it covers.
            unsafe { install_wr_ops(qp.ibv_qp_ptr().cast::<sys::ibv_qp_ex>(), ops) };
        }
        Box::into_raw(qp).cast::<sys::ibv_qp>()
    })
}

/// Sets the `ibv_qp_ex` callbacks: the opcodes asked for in `ops`, and the data, batch and
/// addressing ones.
///
/// # Safety
/// `x` is the `ibv_qp_ex` of a QP being created, which no one else uses yet.
unsafe fn install_wr_ops(x: *mut sys::ibv_qp_ex, ops: u64) {
    let want = |f: sys::ibv_qp_create_send_ops_flags| ops & u64::from(f) != 0;
    // SAFETY: per the contract; only callback fields before wr_flush are written.
    unsafe {
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND) {
            (*x).wr_send = Some(wr_send);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM) {
            (*x).wr_send_imm = Some(wr_send_imm);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV) {
            (*x).wr_send_inv = Some(wr_send_inv);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE) {
            (*x).wr_rdma_write = Some(wr_rdma_write);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) {
            (*x).wr_rdma_write_imm = Some(wr_rdma_write_imm);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ) {
            (*x).wr_rdma_read = Some(wr_rdma_read);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) {
            (*x).wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) {
            (*x).wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
        }
        if want(sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV) {
            (*x).wr_local_inv = Some(wr_local_inv);
        }
        (*x).wr_set_sge = Some(wr_set_sge);
        (*x).wr_set_sge_list = Some(wr_set_sge_list);
        (*x).wr_set_inline_data = Some(wr_set_inline_data);
        (*x).wr_set_inline_data_list = Some(wr_set_inline_data_list);
        (*x).wr_set_ud_addr = Some(wr_set_ud_addr);
        (*x).wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
        (*x).wr_start = Some(wr_start);
        (*x).wr_complete = Some(wr_complete);
        (*x).wr_abort = Some(wr_abort);
    }
}

/// Runs `f` on the send queue of `qp` inside the caller's `wr_start` .. `wr_complete`.
fn in_batch(qp: *mut sys::ibv_qp_ex, f: impl FnOnce(&mut SendQueue)) {
    guard((), || {
        if let Some(inner) = inner_of!(qp, OxQp) {
            inner.sq().step(f);
        }
    })
}

/// An opcode call: `wr_id` and `wr_flags` as the application set them in the `ibv_qp_ex`.
fn begin(qp: *mut sys::ibv_qp_ex, opcode: u32, imm_or_inv: u32, target: Target) {
    // SAFETY: qp is a live ibv_qp_ex of this provider; the application wrote these two plain
    // fields before the call, in this thread.
    let (wr_id, send_flags) = unsafe {
        (
            ptr::addr_of!((*qp).wr_id).read(),
            ptr::addr_of!((*qp).wr_flags).read(),
        )
    };
    in_batch(qp, |sq| {
        sq.wr_begin(WrHeader {
            wr_id,
            opcode,
            send_flags,
            imm_or_inv,
            target,
        })
    });
}

fn rdma(remote_addr: u64, rkey: u32) -> Target {
    Target::Rdma(RdmaFields { remote_addr, rkey })
}

unsafe extern "C" fn wr_send(qp: *mut sys::ibv_qp_ex) {
    begin(qp, sys::ibv_wr_opcode_IBV_WR_SEND, 0, Target::None);
}

unsafe extern "C" fn wr_send_imm(qp: *mut sys::ibv_qp_ex, imm_data: sys::__be32) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
        imm_data,
        Target::None,
    );
}

unsafe extern "C" fn wr_send_inv(qp: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV,
        invalidate_rkey,
        Target::None,
    );
}

unsafe extern "C" fn wr_local_inv(qp: *mut sys::ibv_qp_ex, invalidate_rkey: u32) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_LOCAL_INV,
        invalidate_rkey,
        Target::None,
    );
}

unsafe extern "C" fn wr_rdma_write(qp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE,
        0,
        rdma(remote_addr, rkey),
    );
}

unsafe extern "C" fn wr_rdma_write_imm(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: sys::__be32,
) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
        imm_data,
        rdma(remote_addr, rkey),
    );
}

unsafe extern "C" fn wr_rdma_read(qp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    begin(
        qp,
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ,
        0,
        rdma(remote_addr, rkey),
    );
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let t = Target::Atomic(AtomicFields {
        remote_addr,
        compare_add: compare,
        swap,
        rkey,
    });
    begin(qp, sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP, 0, t);
}

unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let t = Target::Atomic(AtomicFields {
        remote_addr,
        compare_add: add,
        swap: 0,
        rkey,
    });
    begin(qp, sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD, 0, t);
}

unsafe extern "C" fn wr_set_sge(qp: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    in_batch(qp, |sq| sq.wr_set_sges(&[Sge { addr, length, lkey }]));
}

unsafe extern "C" fn wr_set_sge_list(
    qp: *mut sys::ibv_qp_ex,
    num_sge: usize,
    sg_list: *const sys::ibv_sge,
) {
    // SAFETY: the caller's list of num_sge entries, valid for the call (a count that is not
    // a c_int is refused before anything is read).
    let sges = c_int::try_from(num_sge)
        .ok()
        .and_then(|n| unsafe { sge_list(sg_list, n) });
    in_batch(qp, |sq| match sges {
        Some(s) => sq.wr_set_sges(s),
        None => sq.wr_fail(PostError::Invalid),
    });
}

/// `length` bytes at `addr` as a slice; `None` for NULL with a length.
///
/// # Safety
/// `addr` points to `length` readable bytes, valid for `'a` (the verbs contract: inline data
/// is copied during the call).
unsafe fn bytes<'a>(addr: *const c_void, length: usize) -> Option<&'a [u8]> {
    if length == 0 {
        return Some(&[]);
    }
    if addr.is_null() || isize::try_from(length).is_err() {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), length) })
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut sys::ibv_qp_ex, addr: *mut c_void, length: usize) {
    // SAFETY: the caller's buffer, read during the call.
    let data = unsafe { bytes(addr, length) };
    in_batch(qp, |sq| match data {
        Some(d) => sq.wr_set_inline([d]),
        None => sq.wr_fail(PostError::Invalid),
    });
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut sys::ibv_qp_ex,
    num_buf: usize,
    buf_list: *const sys::ibv_data_buf,
) {
    let list: Option<Vec<&[u8]>> = if num_buf == 0 {
        Some(Vec::new())
    } else if buf_list.is_null() {
        None
    } else {
        // SAFETY: the caller's list of num_buf buffers, each readable, valid for the call.
        unsafe { core::slice::from_raw_parts(buf_list, num_buf) }
            .iter()
            // SAFETY: as above, for each buffer.
            .map(|b| unsafe { bytes(b.addr, b.length) })
            .collect()
    };
    in_batch(qp, |sq| match list {
        Some(l) => sq.wr_set_inline(l),
        None => sq.wr_fail(PostError::Invalid),
    });
}

/// `ibv_wr_set_ud_addr`: the destination of a UD QP's work request.
unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut sys::ibv_qp_ex,
    ah: *mut sys::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: `ah` is NULL or an AH of this provider's (verbs contract), live for the call.
    let num = unsafe { super::ah_number(ah) };
    in_batch(qp, |sq| match num {
        Some(ah_num) => sq.wr_set_ud(UdFields {
            ah_num,
            remote_qpn,
            remote_qkey,
        }),
        None => sq.wr_fail(PostError::Invalid),
    });
}

/// XRC is not supported: an error for the batch.
unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut sys::ibv_qp_ex, _remote_srqn: u32) {
    in_batch(qp, |sq| sq.wr_fail(PostError::Invalid));
}

/// `ibv_wr_start`: locks the send queue for a batch.
unsafe extern "C" fn wr_start(qp: *mut sys::ibv_qp_ex) {
    guard((), || {
        if let Some(inner) = inner_of!(qp, OxQp) {
            inner.sq().begin(|sq| {
                sq.wr_start();
                ((), true)
            });
        }
    })
}

/// `ibv_wr_complete`: posts the batch (or none of it, with the errno of its first error),
/// unlocks, and rings the doorbell by the same rule as `ibv_post_send`.
unsafe extern "C" fn wr_complete(qp: *mut sys::ibv_qp_ex) -> c_int {
    guard(libc::EIO, || {
        let Some(inner) = inner_of!(qp, OxQp) else {
            return libc::EINVAL;
        };
        // SAFETY: libibverbs passes a live QP of this provider, whose ibv_qp_ex starts with
        // its ibv_qp.
        if !unsafe { super::can_post_send(qp.cast()) } {
            inner.sq().end(SendQueue::wr_abort);
            return libc::EINVAL;
        }
        match inner.sq().end(SendQueue::wr_complete) {
            Ok(true) => doorbell(inner.cmd_fd, inner.handle).err().unwrap_or(0),
            Ok(false) => 0,
            Err(e) => e.errno(),
        }
    })
}

/// `ibv_wr_abort`: discards the batch and unlocks.
unsafe extern "C" fn wr_abort(qp: *mut sys::ibv_qp_ex) {
    guard((), || {
        if let Some(inner) = inner_of!(qp, OxQp) {
            inner.sq().end(SendQueue::wr_abort);
        }
    })
}
