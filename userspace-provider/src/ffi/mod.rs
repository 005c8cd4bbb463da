// SPDX-License-Identifier: GPL-2.0
//! The entry points: everything libibverbs calls, and nothing else. The rest of the crate
//! never imports from here; the C types come from [`crate::sys`] and the ring memory from
//! [`crate::mapping`], the two other modules with `unsafe` code.
//!
//! * The registration: an ELF constructor (what rdma-core's `PROVIDER_DRIVER` macro emits) that
//!   hands [`DEVICE_OPS`] to `verbs_register_driver_34` when libibverbs dlopens the library.
//! * The `extern "C"` entry points of `verbs_device_ops` and `verbs_context_ops`. Each one
//!   turns libibverbs' raw pointers into references, calls the safe modules, and runs inside
//!   [`guard`] so that no panic unwinds into C.
//!
//! Macros and inline functions of driver.h (`verbs_init_and_alloc_context`,
//! `verbs_get_ctx`, `PROVIDER_DRIVER`, ...) are re-implemented here; only functions that
//! libibverbs.so.1 exports are called.
#![allow(unsafe_code)]

/// `Option<&Inner>`: the provider part (`inner`) of an `OxCq`, `OxQp` or `OxSrq`, from
/// libibverbs' pointer to its first member.
macro_rules! inner_of {
    ($ptr:expr, $ty:ty) => {{
        let p = $ptr.cast::<$ty>();
        // SAFETY: libibverbs only passes objects this provider created, each the first
        // member of a live Box<$ty>; only the `inner` member is borrowed, which nothing but
        // this provider touches, and it is not changed after creation.
        unsafe { (*core::ptr::addr_of!((*p).inner)).as_ref() }
    }};
}

mod ex;
mod queues;

/// The QP state libibverbs recorded at the last successful `ibv_modify_qp` (a transition the
/// kernel made on its own, to the error state, is not in it).
///
/// # Safety
///
/// `qp` is a live QP of this provider (an `ibv_qp`, or the `ibv_qp_ex` that starts with one).
unsafe fn recorded_state(qp: *const sys::ibv_qp) -> sys::ibv_qp_state {
    // SAFETY: per the contract the field is readable; libibverbs may write it concurrently
    // (ibv_modify_qp on another thread), hence the volatile read of the plain integer.
    unsafe { ptr::read_volatile(ptr::addr_of!((*qp).state)) }
}

/// Posting sends needs RTS or SQD (or the error state, where they are flushed): IBA 10.8.2
/// makes a post in RESET, INIT or RTR an immediate error.
///
/// # Safety
///
/// As for [`recorded_state`].
unsafe fn can_post_send(qp: *const sys::ibv_qp) -> bool {
    // SAFETY: per the contract.
    let s = unsafe { recorded_state(qp) };
    match s {
        sys::ibv_qp_state_IBV_QPS_RESET => false,
        // rdma_cm moves an iWARP QP to RTR in the kernel, and oxrdma's iWARP connection
        // manager to RTS once the connection is up: libibverbs still records INIT. Work
        // posted before the connection is up waits in the ring.
        // SAFETY: per the contract.
        sys::ibv_qp_state_IBV_QPS_INIT | sys::ibv_qp_state_IBV_QPS_RTR => unsafe {
            qp_is_iwarp(qp)
        },
        _ => true,
    }
}

/// Whether `qp` is a QP of an iWARP device.
///
/// # Safety
///
/// As for [`recorded_state`].
unsafe fn qp_is_iwarp(qp: *const sys::ibv_qp) -> bool {
    // SAFETY: a live QP's `context` is the `context` member of the live verbs_context it
    // was created in, the first member of an OxContext of this provider (alloc_context),
    // whose fields are set before any QP exists.
    let ctx = unsafe { verbs_ctx((*qp).context).cast::<OxContext>().as_ref() };
    ctx.and_then(OxContext::info)
        .is_some_and(|i| i.kind == crate::device::DeviceKind::Iwarp)
}

/// Posting receives is an immediate error only in RESET.
///
/// # Safety
///
/// As for [`recorded_state`].
unsafe fn can_post_recv(qp: *const sys::ibv_qp) -> bool {
    // SAFETY: per the contract.
    unsafe { recorded_state(qp) != sys::ibv_qp_state_IBV_QPS_RESET }
}

use core::ffi::{c_char, c_int, c_void, CStr};
use core::mem::{offset_of, size_of};
use core::ptr;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use oxrdma_uapi::abi::OXRDMA_ABI_VERSION;

use crate::ah::{CreateAhRespBuf, OxAh};
use crate::context::{self, GetContextResp, OxContext};
use crate::device::{self, OxDevice};
use crate::pd::{AllocPdRespBuf, OxPd};
use crate::sys;

/// A `static` holding C data with raw pointers, which Rust does not consider `Sync`.
#[repr(transparent)]
struct CStatic<T>(T);

// SAFETY: the wrapped values are immutable after compile-time initialisation and only point
// to other immutable statics; sharing them between threads is what C does with the same
// `const` tables.
unsafe impl<T> Sync for CStatic<T> {}

/// libibverbs' device match table: only the sentinel. The provider matches in
/// `match_device`, but the table must not be NULL: libibverbs' `match_driver_id()` walks
/// `match_table` without a NULL check for every device that reports a driver id (rxe, siw,
/// hardware), which would crash the process.
static MATCH_TABLE: CStatic<[sys::verbs_match_ent; 1]> = CStatic([sys::verbs_match_ent {
    driver_data: ptr::null_mut(),
    u: sys::verbs_match_ent__bindgen_ty_1 { driver_id: 0 },
    vendor: 0,
    device: 0,
    kind: sys::VERBS_MATCH_SENTINEL as u8,
}]);

/// The provider's `verbs_device_ops`, registered by the constructor.
static DEVICE_OPS: CStatic<sys::verbs_device_ops> = CStatic(sys::verbs_device_ops {
    name: c"oxrdma".as_ptr(),
    // libibverbs compares these with the device's uverbs ABI version, which oxrdma.ko sets to
    // its OXRDMA_ABI_VERSION, and refuses the device (with a warning) outside the range.
    match_min_abi_version: OXRDMA_ABI_VERSION,
    match_max_abi_version: OXRDMA_ABI_VERSION,
    match_table: &MATCH_TABLE.0 as *const [sys::verbs_match_ent; 1] as *const sys::verbs_match_ent,
    static_providers: ptr::null_mut(),
    match_device: Some(match_device),
    alloc_context: Some(alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

/// All-`None` context ops: libibverbs keeps its default (EOPNOTSUPP) for every op left unset.
// SAFETY: verbs_context_ops holds only `Option<fn>` fields, for which all-zero is `None`.
const NO_CONTEXT_OPS: sys::verbs_context_ops = unsafe { core::mem::zeroed() };

/// The provider's context ops, copied into each new context by `verbs_set_ops`.
static CONTEXT_OPS: CStatic<sys::verbs_context_ops> = CStatic(sys::verbs_context_ops {
    alloc_pd: Some(alloc_pd),
    dealloc_pd: Some(dealloc_pd),
    create_ah: Some(create_ah),
    destroy_ah: Some(destroy_ah),
    // Multicast attachments are the kernel's business alone (its delivery list).
    attach_mcast: Some(sys::ibv_cmd_attach_mcast),
    detach_mcast: Some(sys::ibv_cmd_detach_mcast),
    free_context: Some(free_context),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    create_cq: Some(queues::create_cq),
    create_cq_ex: Some(ex::create_cq_ex),
    destroy_cq: Some(queues::destroy_cq),
    poll_cq: Some(queues::poll_cq),
    req_notify_cq: Some(queues::req_notify_cq),
    reg_mr: Some(queues::reg_mr),
    dereg_mr: Some(queues::dereg_mr),
    create_qp: Some(queues::create_qp),
    create_qp_ex: Some(ex::create_qp_ex),
    query_qp: Some(queues::query_qp),
    modify_qp: Some(queues::modify_qp),
    destroy_qp: Some(queues::destroy_qp),
    post_send: Some(queues::post_send),
    post_recv: Some(queues::post_recv),
    create_srq: Some(queues::create_srq),
    modify_srq: Some(queues::modify_srq),
    query_srq: Some(queues::query_srq),
    destroy_srq: Some(queues::destroy_srq),
    post_srq_recv: Some(queues::post_srq_recv),
    ..NO_CONTEXT_OPS
});

/// The ELF constructor: `PROVIDER_DRIVER(oxrdma, ...)`.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register;

#[cfg_attr(test, allow(dead_code))]
extern "C" fn register() {
    // SAFETY: DEVICE_OPS is a 'static, fully initialised verbs_device_ops whose pointers are
    // 'static; libibverbs keeps the pointer for the life of the process.
    unsafe { sys::verbs_register_driver_34(&DEVICE_OPS.0) }
}

/// Runs an entry point's body, turning a panic into `on_panic` (with errno EIO) instead of
/// unwinding into libibverbs.
fn guard<R>(on_panic: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        on_panic
    })
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = e }
}

/// A libibverbs command's return value (0, or the errno) as a `Result`.
fn cmd_result(ret: c_int) -> Result<(), c_int> {
    if ret == 0 {
        Ok(())
    } else {
        Err(ret)
    }
}

/// Logs through libibverbs' `__verbs_log` (shown when `VERBS_LOG_LEVEL` and `VERBS_LOG_FILE`
/// ask for it), like driver.h's `verbs_err`.
fn log_err(ctx: *mut sys::verbs_context, msg: &str) {
    let Ok(msg) = std::ffi::CString::new(format!("oxrdma: {msg}\n")) else {
        return;
    };
    // SAFETY: the format is a literal "%s" consuming exactly one NUL-terminated string, which
    // lives across the call; __verbs_log uses `ctx` for nothing but its caller's identity.
    unsafe { sys::__verbs_log(ctx, sys::VERBS_LOG_ERR, c"%s".as_ptr(), msg.as_ptr()) }
}

/// A NUL-terminated C char array (a `verbs_sysfs_dev` path) as a Path; `None` if unterminated.
fn path_of(chars: &[c_char]) -> Option<&Path> {
    // SAFETY: c_char and u8 have the same size and alignment; the slice covers the same memory.
    let bytes = unsafe { core::slice::from_raw_parts(chars.as_ptr().cast::<u8>(), chars.len()) };
    let s = CStr::from_bytes_until_nul(bytes).ok()?;
    Some(Path::new(OsStr::from_bytes(s.to_bytes())))
}

/// The body of every destroy verb (`ibv_dealloc_pd`, `ibv_dereg_mr`, `ibv_destroy_cq`,
/// `ibv_destroy_qp`, `ibv_destroy_srq`): the kernel command `destroy`, then, once the kernel
/// object is gone, frees the provider's `Box<T>` (which unmaps its rings). If the command
/// fails, the object is still alive and still the caller's: only the errno is returned.
///
/// # Safety
/// `obj` is a live object of this provider: the first member of a `Box<T>` that one of its
/// create verbs handed to libibverbs, which neither libibverbs nor the application uses
/// after a successful destroy. `destroy` is libibverbs' destroy command for that object.
unsafe fn destroy_boxed<T, C>(
    obj: *mut C,
    destroy: unsafe extern "C" fn(*mut C) -> c_int,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: per the contract, obj is a live object of the kind `destroy` takes.
        let ret = unsafe { destroy(obj) };
        if ret != 0 {
            return ret; // still alive, still the caller's
        }
        // SAFETY: per the contract obj is the first member (same address) of a Box<T> from a
        // create verb; the kernel object is gone and nobody uses obj again, so the Box is
        // reclaimed exactly once.
        drop(unsafe { Box::from_raw(obj.cast::<T>()) });
        0
    })
}

/// `verbs_get_ctx()`: the verbs_context around an ibv_context.
///
/// # Safety
/// `ctx` must be the `context` member of a live `verbs_context`.
unsafe fn verbs_ctx(ctx: *mut sys::ibv_context) -> *mut sys::verbs_context {
    // SAFETY: per the contract, stepping back by the member's offset stays inside the
    // verbs_context allocation.
    unsafe {
        ctx.byte_sub(offset_of!(sys::verbs_context, context))
            .cast::<sys::verbs_context>()
    }
}

// ---- verbs_device_ops -------------------------------------------------------------------

/// Claims a sysfs device iff it is an oxrdma device ([`device::match_sysfs_device`]).
unsafe extern "C" fn match_device(sysfs_dev: *mut sys::verbs_sysfs_dev) -> bool {
    guard(false, || {
        // SAFETY: libibverbs passes a valid, initialised verbs_sysfs_dev it owns for the call.
        let dev = unsafe { &*sysfs_dev };
        path_of(&dev.ibdev_path)
            .and_then(|p| device::match_sysfs_device(dev.driver_id, p))
            .is_some()
    })
}

/// Allocates the provider's device for a matched sysfs device.
unsafe extern "C" fn alloc_device(sysfs_dev: *mut sys::verbs_sysfs_dev) -> *mut sys::verbs_device {
    guard(ptr::null_mut(), || {
        // SAFETY: as in match_device.
        let dev = unsafe { &*sysfs_dev };
        // Matched a moment ago; read again rather than carry state in provider_data.
        let Some(kind) =
            path_of(&dev.ibdev_path).and_then(|p| device::match_sysfs_device(dev.driver_id, p))
        else {
            set_errno(libc::ENODEV);
            return ptr::null_mut();
        };
        // `vdev` is OxDevice's first field (repr(C)): the pointers share an address.
        Box::into_raw(OxDevice::new(kind, dev.driver_id)).cast::<sys::verbs_device>()
    })
}

/// Frees a device from [`alloc_device`] (libibverbs drops its last reference).
unsafe extern "C" fn uninit_device(vdev: *mut sys::verbs_device) {
    guard((), || {
        // SAFETY: every verbs_device libibverbs hands this provider came from alloc_device's
        // Box<OxDevice>, and libibverbs calls this once, after its last use.
        drop(unsafe { Box::from_raw(vdev.cast::<OxDevice>()) });
    })
}

/// `ibv_open_device`: allocates the context (`verbs_init_and_alloc_context`), runs
/// `ALLOC_UCONTEXT`, checks oxrdma's response and installs the context ops.
unsafe extern "C" fn alloc_context(
    ibdev: *mut sys::ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut sys::verbs_context {
    guard(ptr::null_mut(), || {
        // SAFETY: libibverbs only passes devices this provider allocated (alloc_device), and
        // ibv_device is the first member of verbs_device, itself the first of OxDevice.
        let dev = unsafe { &*ibdev.cast::<OxDevice>() };

        // verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx, driver_id): the offset
        // argument is `&((OxContext *)NULL)->ibv_ctx`, an address equal to the offset.
        let offset =
            ptr::without_provenance_mut::<sys::verbs_context>(offset_of!(OxContext, ibv_ctx));
        // SAFETY: plain FFI call; it callocs size_of::<OxContext>() bytes, initialises the
        // verbs_context at `offset` and takes ownership of cmd_fd (closed on failure).
        let raw = unsafe {
            sys::_verbs_init_and_alloc_context(
                ibdev,
                cmd_fd,
                size_of::<OxContext>(),
                offset,
                dev.driver_id,
            )
        }
        .cast::<OxContext>();
        if raw.is_null() {
            return ptr::null_mut(); // errno set by libibverbs
        }
        // SAFETY: `raw` is a live allocation of size_of::<OxContext>() bytes; no reference is
        // created, only the field's address is taken.
        let vctx = unsafe { ptr::addr_of_mut!((*raw).ibv_ctx) };

        let fail = |e: c_int| {
            // SAFETY: undoes _verbs_init_and_alloc_context: uninit (closes cmd_fd), then free
            // the calloc'd block, to which no reference is live.
            unsafe {
                sys::verbs_uninit_context(vctx);
                libc::free(raw.cast());
            }
            set_errno(e);
            ptr::null_mut()
        };

        let mut cmd = sys::ibv_get_context::default();
        let mut resp = GetContextResp::default();
        // SAFETY: cmd and resp are live buffers of the sizes given; the response pointer is
        // the whole buffer's (core part first, then oxrdma's), as with DECLARE_DRV_CMD.
        let ret = unsafe {
            sys::ibv_cmd_get_context(
                vctx,
                &mut cmd,
                size_of::<sys::ibv_get_context>(),
                ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_get_context_resp>(),
                size_of::<GetContextResp>(),
            )
        };
        if ret != 0 {
            return fail(ret);
        }
        match context::check_ucontext_resp(&resp.drv, dev.kind) {
            // SAFETY: `raw` is a live, zero-initialised OxContext (valid when all-zero), not
            // yet published: this is the only reference, and it ends here.
            Ok(info) => unsafe { &mut *raw }.set_info(info),
            Err(e) => {
                log_err(vctx, &e.to_string());
                return fail(e.errno());
            }
        }
        // SAFETY: vctx is initialised; verbs_set_ops copies the (static) ops into it.
        unsafe { sys::verbs_set_ops(vctx, &CONTEXT_OPS.0) };
        vctx
    })
}

// ---- verbs_context_ops ------------------------------------------------------------------

/// `ibv_close_device`: the reverse of [`alloc_context`].
unsafe extern "C" fn free_context(ibctx: *mut sys::ibv_context) {
    guard((), || {
        // SAFETY: every context of this provider is an OxContext from alloc_context, whose
        // verbs_context (at offset 0) contains `ibctx`; libibverbs calls this once, last.
        unsafe {
            let vctx = verbs_ctx(ibctx);
            sys::verbs_uninit_context(vctx);
            libc::free(vctx.cast());
        }
    })
}

/// `ibv_query_device(_ex)`: the kernel's answer, plus `fw_ver` formatted from it.
unsafe extern "C" fn query_device_ex(
    ibctx: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        let mut resp = sys::ib_uverbs_ex_query_device_resp::default();
        let mut resp_size = size_of::<sys::ib_uverbs_ex_query_device_resp>();
        // SAFETY: arguments as libibverbs passed them (attr is attr_size bytes, the caller's
        // struct size); resp/resp_size are live locals of the size given.
        let ret = unsafe {
            sys::ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &mut resp, &mut resp_size)
        };
        if ret != 0 {
            return ret;
        }
        let fw = context::fw_ver(resp.base.fw_ver);
        // SAFETY: the call succeeded, so attr_size >= size_of::<ibv_device_attr>()
        // (orig_attr, at offset 0, holds fw_ver); only that field is written.
        unsafe {
            let dst = ptr::addr_of_mut!((*attr).orig_attr.fw_ver).cast::<u8>();
            ptr::copy_nonoverlapping(fw.as_ptr(), dst, context::FW_VER_LEN);
        }
        0
    })
}

/// `ibv_query_port`: the kernel's answer. `port_attr` is the caller's struct, whose size
/// depends on the verbs.h it was compiled with (v55 appended `active_speed_ex`): it is only
/// passed through, never read, written or copied here.
unsafe extern "C" fn query_port(
    ibctx: *mut sys::ibv_context,
    port_num: u8,
    port_attr: *mut sys::ibv_port_attr,
) -> c_int {
    guard(libc::EIO, || {
        let mut cmd = sys::ibv_query_port::default();
        // SAFETY: arguments as libibverbs passed them; cmd is a live local of the size given.
        unsafe {
            sys::ibv_cmd_query_port(
                ibctx,
                port_num,
                port_attr,
                &mut cmd,
                size_of::<sys::ibv_query_port>(),
            )
        }
    })
}

/// `ibv_alloc_pd`.
unsafe extern "C" fn alloc_pd(ibctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    guard(ptr::null_mut(), || {
        let mut pd = OxPd::new();
        let mut cmd = sys::ibv_alloc_pd::default();
        let mut resp = AllocPdRespBuf::default();
        // SAFETY: ibctx is a live context of this provider; pd, cmd and resp are live buffers
        // of the sizes given.
        let ret = unsafe {
            sys::ibv_cmd_alloc_pd(
                ibctx,
                &mut pd.ibv_pd,
                &mut cmd,
                size_of::<sys::ibv_alloc_pd>(),
                ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_alloc_pd_resp>(),
                size_of::<AllocPdRespBuf>(),
            )
        };
        if ret != 0 {
            set_errno(ret);
            return ptr::null_mut();
        }
        pd.set_from_resp(&resp.drv);
        // `ibv_pd` is OxPd's first field (repr(C)): the pointers share an address.
        Box::into_raw(pd).cast::<sys::ibv_pd>()
    })
}

/// `ibv_dealloc_pd`: frees the PD once the kernel has destroyed it.
unsafe extern "C" fn dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    // SAFETY: libibverbs passes a live PD from alloc_pd, the first member of its Box<OxPd>;
    // neither it nor the application uses the PD after a successful dealloc.
    unsafe { destroy_boxed::<OxPd, _>(pd, sys::ibv_cmd_dealloc_pd) }
}

/// `ibv_create_ah`: the kernel resolves the destination and numbers the AH.
unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    guard(ptr::null_mut(), || {
        let mut ah = OxAh::new();
        let mut resp = CreateAhRespBuf::default();
        // SAFETY: pd is a live PD of this provider and attr the caller's attributes (verbs
        // contract); ah and resp are live buffers of the sizes given.
        let ret = unsafe {
            sys::ibv_cmd_create_ah(
                pd,
                &mut ah.ibv_ah,
                attr,
                ptr::addr_of_mut!(resp).cast::<sys::ib_uverbs_create_ah_resp>(),
                size_of::<CreateAhRespBuf>(),
            )
        };
        if ret != 0 {
            set_errno(ret);
            return ptr::null_mut();
        }
        ah.ah_num = resp.drv.ah_num;
        // `ibv_ah` is OxAh's first field (repr(C)): the pointers share an address.
        Box::into_raw(ah).cast::<sys::ibv_ah>()
    })
}

/// `ibv_destroy_ah`: frees the AH once the kernel has destroyed it.
unsafe extern "C" fn destroy_ah(ah: *mut sys::ibv_ah) -> c_int {
    // SAFETY: libibverbs passes a live AH from create_ah, the first member of its Box<OxAh>;
    // neither it nor the application uses the AH after a successful destroy.
    unsafe { destroy_boxed::<OxAh, _>(ah, sys::ibv_cmd_destroy_ah) }
}

/// The kernel's number of an AH a work request names; `None` for NULL.
///
/// # Safety
/// `ah` is NULL or a live AH of this provider (the first member of a `Box<OxAh>`).
pub(super) unsafe fn ah_number(ah: *mut sys::ibv_ah) -> Option<u32> {
    // SAFETY: per the contract, a non-NULL `ah` is the address of a live OxAh.
    (!ah.is_null()).then(|| unsafe { (*ah.cast::<OxAh>()).ah_num })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::align_of;

    /// Opaque (size and alignment only) copies of the installed verbs.h's structures.
    #[allow(
        non_camel_case_types,
        dead_code,
        unreachable_pub,
        missing_docs,
        clippy::all
    )]
    mod installed {
        include!(concat!(env!("OUT_DIR"), "/sys_installed.rs"));
    }

    macro_rules! same_layout {
        ($($t:ident),* $(,)?) => {$(
            assert_eq!(
                (size_of::<sys::$t>(), align_of::<sys::$t>()),
                (size_of::<installed::$t>(), align_of::<installed::$t>()),
                concat!("struct ", stringify!($t), ": rdma-core v55 vs the installed verbs.h")
            );
        )*};
    }

    /// The structures the provider shares with libibverbs must be laid out identically in
    /// rdma-core v55's headers (bound) and the installed libibverbs' (Debian 12: 44.0).
    #[test]
    fn v55_headers_match_installed_libibverbs() {
        same_layout!(
            ibv_device,
            ibv_context,
            ibv_context_ops,
            verbs_context,
            ibv_pd,
            ibv_device_attr,
            ibv_device_attr_ex,
            ibv_query_device_ex_input,
            ibv_cq,
            ibv_qp,
            ibv_srq,
            ibv_mr,
            ibv_wc,
            ibv_send_wr,
            ibv_recv_wr,
            ibv_sge,
            ibv_qp_init_attr,
            ibv_qp_attr,
            ibv_ah_attr,
            ibv_cq_ex,
            ibv_cq_init_attr_ex,
            ibv_poll_cq_attr,
            ibv_qp_init_attr_ex,
            ibv_data_buf,
        );
        // Known difference: v55 appended `wr_flush` to ibv_qp_ex, and so moved the members
        // of verbs_qp after it; the provider lays verbs_qp out as rdma-core 44 does.
        assert_eq!(
            size_of::<installed::ibv_qp_ex>(),
            crate::qp::QP_EX_SIZE,
            "ibv_qp_ex of the installed verbs.h"
        );
        // Known difference: v55 appended `active_speed_ex` to ibv_port_attr. The provider
        // only passes the caller's pointer through (query_port), so either size works.
        assert!(size_of::<installed::ibv_port_attr>() <= size_of::<sys::ibv_port_attr>());
    }

    #[test]
    fn ops_tables() {
        let ops = &DEVICE_OPS.0;
        // SAFETY: name points to a 'static C string literal.
        assert_eq!(unsafe { CStr::from_ptr(ops.name) }, c"oxrdma");
        assert_eq!(ops.match_min_abi_version, OXRDMA_ABI_VERSION);
        assert_eq!(ops.match_max_abi_version, OXRDMA_ABI_VERSION);
        assert!(!ops.match_table.is_null());
        // SAFETY: match_table points to MATCH_TABLE, a 'static one-entry array.
        let first = unsafe { &*ops.match_table };
        assert_eq!(first.kind, sys::VERBS_MATCH_SENTINEL as u8);
        assert!(ops.match_device.is_some() && ops.alloc_device.is_some());
        assert!(ops.uninit_device.is_some() && ops.alloc_context.is_some());
        let c = &CONTEXT_OPS.0;
        assert!(c.alloc_pd.is_some() && c.dealloc_pd.is_some() && c.free_context.is_some());
        assert!(c.query_device_ex.is_some() && c.query_port.is_some());
        assert!(c.create_cq.is_some() && c.destroy_cq.is_some() && c.poll_cq.is_some());
        assert!(c.req_notify_cq.is_some() && c.reg_mr.is_some() && c.dereg_mr.is_some());
        assert!(c.create_qp.is_some() && c.query_qp.is_some() && c.modify_qp.is_some());
        assert!(c.destroy_qp.is_some() && c.post_send.is_some() && c.post_recv.is_some());
        assert!(c.create_srq.is_some() && c.modify_srq.is_some() && c.query_srq.is_some());
        assert!(c.destroy_srq.is_some() && c.post_srq_recv.is_some());
        assert!(c.create_cq_ex.is_some() && c.create_qp_ex.is_some());
        assert!(c.create_ah.is_some() && c.destroy_ah.is_some());
        assert!(c.attach_mcast.is_some() && c.detach_mcast.is_some());
        // Not provided: libibverbs keeps its defaults (EOPNOTSUPP, or a no-op cq_event).
        assert!(c.query_qp_data_in_order.is_none());
    }

    #[test]
    fn container_offsets() {
        assert_eq!(offset_of!(OxDevice, vdev), 0);
        assert_eq!(offset_of!(sys::verbs_device, device), 0);
        assert_eq!(offset_of!(OxContext, ibv_ctx), 0);
        assert_eq!(offset_of!(OxPd, ibv_pd), 0);
        assert_eq!(offset_of!(crate::cq::OxCq, vcq), 0);
        assert_eq!(offset_of!(crate::qp::OxQp, vqp), 0);
        assert_eq!(offset_of!(crate::srq::OxSrq, ibv_srq), 0);
        assert_eq!(offset_of!(crate::mr::OxMr, vmr), 0);
    }

    #[test]
    fn sysfs_path_from_c_array() {
        let mut a = [0 as c_char; 16];
        for (d, s) in a.iter_mut().zip(b"/sys/x") {
            *d = *s as c_char;
        }
        assert_eq!(path_of(&a), Some(Path::new("/sys/x")));
        assert_eq!(path_of(&[1 as c_char; 4]), None);
    }

    #[test]
    fn guard_contains_panics() {
        assert_eq!(guard(7, || 1), 1);
        assert_eq!(guard(7, || panic!("contained")), 7);
    }
}
