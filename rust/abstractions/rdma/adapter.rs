// SPDX-License-Identifier: GPL-2.0
//! Every callback ib_core makes into a [`Driver`], and the layouts of the objects it
//! allocates for one.
//!
//! [`Adapter<T>`] builds the `struct ib_device_ops` of driver `T`: each op `T` implements (or
//! that ib_core requires) points to one `extern "C"` function here, which turns the C
//! arguments into the safe values of [`super::attrs`], [`super::verbs`], [`super::wr`] and
//! [`super::driver`], calls `T` and writes the result back; the ops `T` leaves out stay NULL.
//!
//! # Object layouts and lifetimes
//!
//! ib_core allocates the user context, PD, CQ, QP, SRQ and AH with the size the ops table gives:
//! the `struct ib_*` first (its `container_of` contract), then the driver's part, here an
//! [`Obj`]. The driver's part is initialised when the driver's create succeeds and dropped in
//! the matching destroy callback, which ib_core calls exactly once per successful create;
//! uverbs destroys every object before the user context, and refuses to destroy a CQ or SRQ a
//! QP still uses (so a QP's `&T::Cq` stays valid for the QP's life). For a CQ, QP or SRQ the
//! part is a [`Tail`]: the driver's data, the mmap entries made during the create call and the
//! event sink, dropped in this order: the driver's destroy hook, the sink is revoked (events
//! the driver raises later go nowhere), the data, the mmap entries. MRs are allocated here
//! (ib_core does not for MRs in 6.12) and freed in `dereg_mr`.

use super::super::bindings;
use super::attrs::{mtu_enum, NodeType};
use super::device::{Device, DeviceHandle, NewDevice};
use super::driver::{AhInit, CqInit, Driver, QpInit, SrqInit};
use super::events::{CqEvents, EventObject, QpEvents, Revocable, SrqEvents};
use super::iwcm::{CmId, ConnParams};
use super::kmem::{FastRegPages, KernelMem};
use super::mmap::{self, MmapEntry};
use super::udata::{Udata, UserCall};
use super::umem::UserMem;
use super::verbs::{qp_mask, Path, QpAttrs, QpCaps, QpState, QpType, SrqAttrs};
use super::wr::{AhOf, RecvWrs, SendWrs, WcSink};
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{addr_of_mut, NonNull};
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox, KVec},
    error::from_result,
    ffi::{c_int, c_uint},
    init::PinInit,
    prelude::*,
    sync::Arc,
    types::{ARef, Opaque},
    ThisModule,
};

// ---- object layouts ---------------------------------------------------------------------------

/// An object ib_core allocates: the C structure `I`, then the driver's part `D`.
///
/// # Invariants
///
/// `part` is initialised from the object's successful create until its destroy.
#[repr(C)]
struct Obj<I, D> {
    ib: Opaque<I>,
    part: MaybeUninit<D>,
}

impl<I, D> Obj<I, D> {
    /// The driver's part of a live object.
    ///
    /// # Safety
    ///
    /// `ib` is the C structure of an `Obj<I, D>` whose create succeeded and whose destroy has
    /// not run, and stays so for `'a`.
    unsafe fn part<'a>(ib: *mut I) -> &'a D {
        // SAFETY: `ib` is at offset 0 of an `Obj<I, D>` with `part` initialised (contract).
        unsafe { (*ib.cast::<Self>()).part.assume_init_ref() }
    }

    /// Initialises the driver's part of a new object.
    ///
    /// # Safety
    ///
    /// `ib` is the C structure of an `Obj<I, D>` ib_core allocated for a create call, whose
    /// part is not initialised.
    unsafe fn init(ib: *mut I, part: D) {
        // SAFETY: function contract; ib_core allocated `size_of::<Self>()` bytes (ops table).
        unsafe { (*ib.cast::<Self>()).part.write(part) };
    }

    /// Takes the driver's part out of an object being destroyed.
    ///
    /// # Safety
    ///
    /// As for [`Obj::part`]; called once, by the destroy callback.
    unsafe fn take(ib: *mut I) -> D {
        // SAFETY: function contract: initialised, and read out only here.
        unsafe { (*ib.cast::<Self>()).part.assume_init_read() }
    }
}

/// The driver's part of a CQ, QP or SRQ.
struct Tail<D, O: EventObject> {
    data: D,
    maps: KVec<MmapEntry>,
    events: Revocable<O>,
}

impl<D, O: EventObject> Tail<D, O> {
    fn destroy(self) {
        self.events.revoke();
        drop(self.data);
        drop(self.maps);
    }
}

impl<I: EventObject, D> Obj<I, Tail<D, I>> {
    /// Runs the create of a CQ, QP or SRQ: `make` gets the object's event sink and the
    /// process's call, if any; the tail is made of what it returns (the sink is revoked if it
    /// fails), with the mmap entries of the call.
    ///
    /// # Safety
    ///
    /// `ib` is the C object being created, freed only after its destroy callback (or the
    /// create's failure); `udata` is NULL (a kernel caller) or the driver udata of a user call,
    /// valid for the call.
    unsafe fn create<R>(
        ib: *mut I,
        udata: *mut bindings::ib_udata,
        make: impl FnOnce(Revocable<I>, Option<&mut UserCall<'_>>) -> Result<(D, R)>,
    ) -> Result<(Tail<D, I>, R)> {
        let mut user = match NonNull::new(udata) {
            // SAFETY: the driver udata of this user call (function contract).
            Some(u) => Some(unsafe { UserCall::new(u)? }),
            None => None,
        };
        // SAFETY: the sink is revoked by `Tail::destroy` in the destroy callback, or below if
        // the create fails: before the object is freed (function contract).
        let events = unsafe { Revocable::new(NonNull::new(ib).ok_or(EINVAL)?)? };
        let (data, r) = make(events.clone(), user.as_mut()).inspect_err(|_| events.revoke())?;
        let tail = Tail {
            data,
            maps: user.map_or_else(KVec::new, UserCall::into_maps),
            events,
        };
        Ok((tail, r))
    }

    /// Destroys a CQ, QP or SRQ: `hook` (the driver's), then the tail.
    ///
    /// # Safety
    ///
    /// `ib` is an object whose create succeeded, destroyed once (ib_core's destroy callback).
    unsafe fn destroy(ib: *mut I, hook: impl FnOnce(&D)) -> c_int {
        // SAFETY: function contract: initialised, read out once, here.
        let tail = unsafe { Self::take(ib) };
        hook(&tail.data);
        tail.destroy();
        0
    }
}

/// The result of a post: on an error, `cur` (the request the driver was at) is reported in
/// `bad`.
///
/// # Safety
///
/// `bad` is NULL or valid for writes.
unsafe fn posted<W>(r: Result, bad: *mut *const W, cur: *const W) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            if !bad.is_null() {
                // SAFETY: non-NULL, so writable (function contract).
                unsafe { *bad = cur };
            }
            e.to_errno()
        }
    }
}

type UcontextObj<T> = Obj<bindings::ib_ucontext, <T as Driver>::Ucontext>;
type PdObj<T> = Obj<bindings::ib_pd, <T as Driver>::Pd>;
type CqObj<T> = Obj<bindings::ib_cq, Tail<<T as Driver>::Cq, bindings::ib_cq>>;
type QpBase<T> = Obj<bindings::ib_qp, Tail<<T as Driver>::Qp, bindings::ib_qp>>;

/// A QP: the object and its tail, then the iw_cm's references on it (`iw_add_ref`), which
/// `destroy_qp` waits for; initialised once the create succeeded.
#[repr(C)]
struct QpObj<T: Driver> {
    obj: QpBase<T>,
    refs: Opaque<bindings::oxrdma_qp_refs>,
}

impl<T: Driver> QpObj<T> {
    /// # Safety
    ///
    /// `ib` is the C structure of a `QpObj<T>` allocation.
    unsafe fn refs(ib: *mut bindings::ib_qp) -> *mut bindings::oxrdma_qp_refs {
        // SAFETY: a field of the allocation (function contract).
        Opaque::raw_get(unsafe { core::ptr::addr_of!((*ib.cast::<Self>()).refs) })
    }
}
type SrqObj<T> = Obj<bindings::ib_srq, Tail<<T as Driver>::Srq, bindings::ib_srq>>;
type AhObj<T> = Obj<bindings::ib_ah, <T as Driver>::Ah>;

/// An MR: allocated here, `ib` at offset 0 (ib_core's `container_of`), then the page list of
/// a fast-registration MR (which `map_mr_sg` fills) and the driver's data.
#[repr(C)]
struct MrObj<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    fast: Option<Arc<FastRegPages>>,
    data: T::Mr,
}

// ---- the ops table ----------------------------------------------------------------------------

/// The callbacks of driver `T`.
pub(super) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    /// Installs `T`'s ops on an unregistered device and the `hca_type` attribute if `T` has it.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` allocation, not yet registered.
    pub(super) unsafe fn install(ib: *mut bindings::ib_device, module: &'static ThisModule) {
        const {
            // ib_core allocates driver objects with kzalloc, which aligns to 8 bytes.
            assert!(core::mem::align_of::<UcontextObj<T>>() <= 8);
            assert!(core::mem::align_of::<PdObj<T>>() <= 8);
            assert!(core::mem::align_of::<CqObj<T>>() <= 8);
            assert!(core::mem::align_of::<QpObj<T>>() <= 8);
            assert!(core::mem::align_of::<SrqObj<T>>() <= 8);
            assert!(core::mem::align_of::<AhObj<T>>() <= 8);
            assert!(core::mem::align_of::<Device<T>>() <= 8);
        }
        let mut ops = Self::ops(module);
        if T::HAS_HCA_TYPE {
            // SAFETY: the attribute lives in the device's allocation (function contract),
            // which outlives the registration that exposes it.
            ops.device_group = unsafe { Self::init_sysfs(ib) };
        }
        // SAFETY: unregistered device (function contract); `ib_set_device_ops` copies the table.
        unsafe { bindings::ib_set_device_ops(ib, &ops) };
    }

    fn ops(module: &'static ThisModule) -> bindings::ib_device_ops {
        let user = T::HAS_ALLOC_UCONTEXT;
        bindings::ib_device_ops {
            owner: module.as_ptr().cast(),
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            dealloc_driver: Some(Self::dealloc_driver),
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: Some(Self::get_link_layer),
            query_pkey: T::HAS_QUERY_PKEY.then_some(Self::query_pkey as _),
            query_gid: T::HAS_QUERY_GID.then_some(Self::query_gid as _),
            alloc_ucontext: user.then_some(Self::alloc_ucontext as _),
            dealloc_ucontext: user.then_some(Self::dealloc_ucontext as _),
            disassociate_ucontext: (user && T::HAS_DISASSOCIATE_UCONTEXT)
                .then_some(Self::disassociate_ucontext as _),
            mmap: user.then_some(Self::mmap as _),
            mmap_free: user.then_some(Self::mmap_free as _),
            alloc_pd: Some(Self::alloc_pd),
            dealloc_pd: Some(Self::dealloc_pd),
            create_cq: Some(Self::create_cq),
            destroy_cq: Some(Self::destroy_cq),
            req_notify_cq: Some(Self::req_notify_cq),
            poll_cq: Some(Self::poll_cq),
            create_qp: Some(Self::create_qp),
            modify_qp: Some(Self::modify_qp),
            query_qp: T::HAS_QUERY_QP.then_some(Self::query_qp as _),
            destroy_qp: Some(Self::destroy_qp),
            post_send: Some(Self::post_send),
            post_recv: Some(Self::post_recv),
            create_srq: T::HAS_CREATE_SRQ.then_some(Self::create_srq as _),
            modify_srq: T::HAS_MODIFY_SRQ.then_some(Self::modify_srq as _),
            query_srq: T::HAS_QUERY_SRQ.then_some(Self::query_srq as _),
            destroy_srq: T::HAS_CREATE_SRQ.then_some(Self::destroy_srq as _),
            post_srq_recv: T::HAS_POST_SRQ_RECV.then_some(Self::post_srq_recv as _),
            get_dma_mr: Some(Self::get_dma_mr),
            reg_user_mr: Some(Self::reg_user_mr),
            alloc_mr: T::HAS_ALLOC_MR.then_some(Self::alloc_mr as _),
            create_ah: T::HAS_CREATE_AH.then_some(Self::create_ah as _),
            create_user_ah: (T::HAS_CREATE_AH && user).then_some(Self::create_ah as _),
            destroy_ah: T::HAS_CREATE_AH.then_some(Self::destroy_ah as _),
            query_ah: T::HAS_QUERY_AH.then_some(Self::query_ah as _),
            attach_mcast: T::HAS_ATTACH_MCAST.then_some(Self::attach_mcast as _),
            detach_mcast: T::HAS_ATTACH_MCAST.then_some(Self::detach_mcast as _),
            alloc_hw_port_stats: T::HAS_HW_STATS.then_some(Self::alloc_hw_port_stats as _),
            get_hw_stats: T::HAS_HW_STATS.then_some(Self::get_hw_stats as _),
            map_mr_sg: T::HAS_ALLOC_MR.then_some(Self::map_mr_sg as _),
            iw_connect: T::HAS_IW_CONNECT.then_some(Self::iw_connect as _),
            iw_accept: T::HAS_IW_CONNECT.then_some(Self::iw_accept as _),
            iw_reject: T::HAS_IW_CONNECT.then_some(Self::iw_reject as _),
            iw_create_listen: T::HAS_IW_CONNECT.then_some(Self::iw_create_listen as _),
            iw_destroy_listen: T::HAS_IW_CONNECT.then_some(Self::iw_destroy_listen as _),
            iw_add_ref: T::HAS_IW_CONNECT.then_some(Self::iw_add_ref as _),
            iw_rem_ref: T::HAS_IW_CONNECT.then_some(Self::iw_rem_ref as _),
            iw_get_qp: T::HAS_IW_CONNECT.then_some(Self::iw_get_qp as _),
            dereg_mr: Some(Self::dereg_mr),
            size_ib_ucontext: size_of::<UcontextObj<T>>(),
            size_ib_pd: size_of::<PdObj<T>>(),
            size_ib_cq: size_of::<CqObj<T>>(),
            size_ib_qp: size_of::<QpObj<T>>(),
            size_ib_srq: size_of::<SrqObj<T>>(),
            size_ib_ah: size_of::<AhObj<T>>(),
            ..Default::default()
        }
    }

    // ---- device -------------------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core once, at the end of unregistration (or of a failed registration),
    /// with no other callback running or to come.
    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        // SAFETY: the data is still initialised: this is the one place that drops it.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        T::unregistered(dev);
        // SAFETY: no callback can run any more (function contract) and nothing else drops the
        // data; the memory itself is freed by ib_core afterwards.
        unsafe { Device::<T>::drop_data(ib) };
        // SAFETY: initialised at allocation; every QP left it when destroyed, before this.
        unsafe { bindings::oxrdma_qp_index_destroy(Device::<T>::qp_index(ib)) };
    }

    /// # Safety
    ///
    /// Called by ib_core on a registered (or registering) `Device<T>`, with a valid `attr`.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: callbacks run while the data is initialised (function contract).
        let a = T::query_device(unsafe { Device::<T>::from_ib(ib) });
        // SAFETY: `attr` is valid for writes (function contract); the node GUID was set
        // before registration.
        unsafe {
            let out = &mut *attr;
            *out = Default::default();
            out.fw_ver = a.fw_ver;
            out.sys_image_guid = (*ib).node_guid;
            out.max_mr_size = a.max_mr_size;
            out.page_size_cap = a.page_size_cap;
            out.vendor_id = a.vendor_id;
            out.vendor_part_id = a.vendor_part_id;
            out.hw_ver = a.hw_ver;
            out.max_qp = a.max_qp;
            out.max_qp_wr = a.max_qp_wr;
            out.device_cap_flags = a.device_cap_flags;
            out.kernel_cap_flags = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
            out.max_send_sge = a.max_send_sge;
            out.max_recv_sge = a.max_recv_sge;
            out.max_sge_rd = a.max_sge_rd;
            out.max_cq = a.max_cq;
            out.max_cqe = a.max_cqe;
            out.max_mr = a.max_mr;
            out.max_pd = a.max_pd;
            out.max_qp_rd_atom = a.max_qp_rd_atom;
            out.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
            out.max_res_rd_atom = a.max_res_rd_atom;
            out.max_srq = a.max_srq;
            out.max_srq_wr = a.max_srq_wr;
            out.max_srq_sge = a.max_srq_sge;
            out.max_fast_reg_page_list_len = a.max_fast_reg_page_list_len;
            out.atomic_cap = if a.atomic_glob {
                bindings::ib_atomic_cap_IB_ATOMIC_GLOB
            } else {
                bindings::ib_atomic_cap_IB_ATOMIC_NONE
            };
            out.max_pkeys = a.max_pkeys;
            out.max_ah = a.max_ah;
            out.max_mcast_grp = a.max_mcast_grp;
            out.max_mcast_qp_attach = a.max_mcast_qp_attach;
            out.max_total_mcast_qp_attach = a.max_total_mcast_qp_attach;
            out.local_ca_ack_delay = a.local_ca_ack_delay;
        }
        0
    }

    /// # Safety
    ///
    /// Called by ib_core on a registered `Device<T>`, with a valid, zeroed `attr`.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: callbacks run while the data is initialised (function contract).
            let p = T::query_port(unsafe { Device::<T>::from_ib(ib) }, port)?;
            // SAFETY: `attr` is valid for writes (function contract).
            let out = unsafe { &mut *attr };
            out.state = if p.active {
                bindings::ib_port_state_IB_PORT_ACTIVE
            } else {
                bindings::ib_port_state_IB_PORT_DOWN
            };
            out.phys_state = if p.active {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
            } else {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
            } as u8;
            out.max_mtu = mtu_enum(p.max_mtu);
            out.active_mtu = mtu_enum(p.active_mtu);
            out.phys_mtu = p.phys_mtu;
            out.gid_tbl_len = p.gid_tbl_len;
            out.set_ip_gids(p.ip_gids.into());
            out.port_cap_flags = p.port_cap_flags;
            out.max_msg_sz = p.max_msg_sz;
            out.pkey_tbl_len = p.pkey_tbl_len;
            out.max_vl_num = 1;
            let mut speed: u16 = 0;
            let mut width: u8 = 0;
            // SAFETY: registered device, valid out pointers; reads the netdev's link speed.
            if unsafe { bindings::ib_get_eth_speed(ib, port, &mut speed, &mut width) } == 0 {
                out.active_speed = speed;
                out.active_width = width;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core during registration of a `Device<T>`, with a valid `imm`.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: callbacks run while the data is initialised (function contract).
            let p = T::port_immutable(unsafe { Device::<T>::from_ib(ib) }, port)?;
            // SAFETY: `imm` is valid for writes (function contract).
            unsafe {
                (*imm).pkey_tbl_len = p.pkey_tbl_len;
                (*imm).gid_tbl_len = p.gid_tbl_len;
                (*imm).core_cap_flags = p.core_cap_flags;
                (*imm).max_mad_size = p.max_mad_size;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live device.
    unsafe extern "C" fn get_link_layer(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        T::LINK_LAYER.to_raw()
    }

    /// # Safety
    ///
    /// Called by ib_core on a registered `Device<T>` with a valid `pkey`.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: callbacks run while the data is initialised (function contract).
            let v = T::query_pkey(unsafe { Device::<T>::from_ib(ib) }, port, index)?;
            // SAFETY: `pkey` is valid for writes (function contract).
            unsafe { *pkey = v };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a registered `Device<T>` with a valid `gid`.
    unsafe extern "C" fn query_gid(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            let index = u32::try_from(index).map_err(|_| EINVAL)?;
            // SAFETY: callbacks run while the data is initialised (function contract).
            let raw = T::query_gid(unsafe { Device::<T>::from_ib(ib) }, port, index)?;
            // SAFETY: `gid` is valid for writes (function contract).
            unsafe { (*gid).raw = raw };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core for a port of a registered `Device<T>`.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let n = T::HW_STATS.len().min(i32::MAX as usize) as c_int;
        // SAFETY: `HwStat` is a transparent wrapper of `rdma_stat_desc`; the descriptors are
        // static, as ib_core keeps the pointer for the device's life. Returns NULL on failure.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                T::HW_STATS.as_ptr().cast(),
                n,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as _,
            )
        }
    }

    /// # Safety
    ///
    /// Called by ib_core on a registered `Device<T>` with a `stats` from
    /// `alloc_hw_port_stats`.
    unsafe extern "C" fn get_hw_stats(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: callbacks run while the data is initialised (function contract).
            let dev = unsafe { Device::<T>::from_ib(ib) };
            // SAFETY: `stats` was made by `alloc_hw_port_stats` with `num_counters` values
            // after the header, which ib_core serialises access to (its mutex).
            let values = unsafe {
                let n = usize::try_from((*stats).num_counters).unwrap_or(0);
                core::slice::from_raw_parts_mut(addr_of_mut!((*stats).value).cast::<u64>(), n)
            };
            T::hw_stats(dev, port, values)?;
            Ok(values.len().min(i32::MAX as usize) as c_int)
        })
    }

    // ---- user context and PD ------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core with a zeroed `UcontextObj<T>` of a registered `Device<T>`.
    unsafe extern "C" fn alloc_ucontext(
        uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `uctx` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*uctx).device) };
            // SAFETY: ib_core's udata is valid for the call.
            let mut udata = unsafe { Udata::from_raw(NonNull::new(udata).ok_or(EINVAL)?) };
            let data = T::alloc_ucontext(dev, &mut udata)?;
            // SAFETY: a new `UcontextObj<T>` (size from the ops table).
            unsafe { UcontextObj::<T>::init(uctx, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully allocated `UcontextObj<T>`.
    unsafe extern "C" fn dealloc_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: `alloc_ucontext` succeeded for this object; released once, here.
        drop(unsafe { UcontextObj::<T>::take(uctx) });
    }

    /// # Safety
    ///
    /// Called by ib_core once, for a successfully allocated `UcontextObj<T>` whose objects it
    /// destroyed, before `dealloc_ucontext`.
    unsafe extern "C" fn disassociate_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: a live context (function contract).
        T::disassociate_ucontext(unsafe { UcontextObj::<T>::part(uctx) });
    }

    /// # Safety
    ///
    /// Called by ib_core with a live user context of this driver and the VMA being set up.
    unsafe extern "C" fn mmap(
        uctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: the context's entries are all made by `UserCall::map_ring` (the only way
        // this driver's objects make them); arguments valid (function contract).
        from_result(|| unsafe { mmap::map(uctx, vma) }.map(|()| 0))
    }

    /// # Safety
    ///
    /// Called by ib_core once per entry made by `UserCall::map_ring`, when its last
    /// reference is gone.
    unsafe extern "C" fn mmap_free(e: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: function contract.
        unsafe { mmap::free(e) };
    }

    /// # Safety
    ///
    /// Called by ib_core with a zeroed `PdObj<T>` of a registered `Device<T>`.
    unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `pd` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*pd).device) };
            // SAFETY: a non-NULL udata from ib_core is valid for the call.
            let mut udata = NonNull::new(udata).map(|raw| unsafe { Udata::from_raw(raw) });
            let data = T::alloc_pd(dev, udata.as_mut())?;
            // SAFETY: a new `PdObj<T>` (size from the ops table).
            unsafe { PdObj::<T>::init(pd, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully allocated `PdObj<T>`, with nothing using it.
    unsafe extern "C" fn dealloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `alloc_pd` succeeded for this object; released once, here.
        drop(unsafe { PdObj::<T>::take(pd) });
        0
    }

    // ---- CQ -------------------------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core with a zeroed-tail `CqObj<T>` of a registered `Device<T>`, a valid
    /// `attr`, and `attrs` NULL (a kernel caller) or the bundle of a user call.
    unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibcq` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*ibcq).device) };
            // SAFETY: `attr` is valid for the call.
            let a = unsafe { &*attr };
            // SAFETY: `attrs` is NULL or a valid bundle (function contract).
            let udata = unsafe { bindings::oxrdma_attrs_udata(attrs) };
            // SAFETY: ib_core frees the CQ after `destroy_cq` or the failed create; `udata` is
            // NULL or this user call's driver udata.
            let (tail, cqe) = unsafe {
                CqObj::<T>::create(ibcq, udata, |events, user| {
                    let init = CqInit {
                        cqe: a.cqe,
                        comp_vector: a.comp_vector,
                        flags: a.flags,
                        events: CqEvents(events),
                    };
                    T::create_cq(dev, init, user).map(|c| (c.data, c.cqe))
                })?
            };
            // SAFETY: a new `CqObj<T>`; `cqe` is ib_core's to read back.
            unsafe {
                (*ibcq).cqe = cqe.min(i32::MAX as u32) as c_int;
                CqObj::<T>::init(ibcq, tail);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully created `CqObj<T>`, with no QP using it.
    unsafe extern "C" fn destroy_cq(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: ib_core's one destroy of a created CQ (function contract).
        unsafe { CqObj::<T>::destroy(ibcq, T::destroy_cq) }
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `CqObj<T>`.
    unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live CQ (function contract).
            let cq = unsafe { &CqObj::<T>::part(ibcq).data };
            let solicited = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
                == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
            let pending = T::req_notify_cq(cq, solicited)?;
            let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
            Ok(c_int::from(pending && report))
        })
    }

    /// # Safety
    ///
    /// Called by ib_core (a kernel user's `ib_poll_cq`) on a live `CqObj<T>` with room for
    /// `num` entries at `wc`.
    unsafe extern "C" fn poll_cq(
        ibcq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        let cap = usize::try_from(num).unwrap_or(0);
        if cap == 0 || wc.is_null() {
            return 0;
        }
        // SAFETY: live CQ (function contract).
        let cq = unsafe { &CqObj::<T>::part(ibcq).data };
        // SAFETY: `wc` has room for `cap` entries during the call (function contract).
        let mut sink = unsafe { WcSink::new(wc, cap) };
        T::poll_cq(cq, &mut sink);
        sink.written() as c_int
    }

    // ---- QP -------------------------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core with a zeroed-tail `QpObj<T>` of a registered `Device<T>`, a valid
    /// `init` whose CQs, SRQ and PD are live objects of this device, and `udata` NULL (a
    /// kernel caller) or the driver udata of a user call.
    unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*ibqp).device) };
            // SAFETY: `init` is valid for the call.
            let ia = unsafe { &mut *init };
            if ia.send_cq.is_null() || ia.recv_cq.is_null() {
                return Err(EINVAL);
            }
            let caps = caps_from(&ia.cap);
            let make = |events: Revocable<bindings::ib_qp>, user: Option<&mut UserCall<'_>>| {
                let qi = QpInit::<T> {
                    qp_type: QpType::from_raw(ia.qp_type),
                    // SAFETY: ib_core set `pd` to the live PD of the call (a `PdObj<T>`).
                    pd: unsafe { PdObj::<T>::part((*ibqp).pd) },
                    // SAFETY: live CQs of this device (function contract).
                    send_cq: unsafe { &CqObj::<T>::part(ia.send_cq).data },
                    // SAFETY: live CQs of this device (function contract).
                    recv_cq: unsafe { &CqObj::<T>::part(ia.recv_cq).data },
                    srq: NonNull::new(ia.srq).map(|s| {
                        // SAFETY: a live SRQ of this device (function contract).
                        unsafe { &SrqObj::<T>::part(s.as_ptr()).data }
                    }),
                    caps,
                    sig_all: ia.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                    create_flags: ia.create_flags,
                    events: QpEvents(events),
                };
                T::create_qp(dev, qi, user).map(|c| (c.data, (c.qpn, c.caps)))
            };
            // SAFETY: ib_core frees the QP after `destroy_qp` or the failed create; `udata` is
            // NULL or this user call's driver udata.
            let (tail, (qpn, granted)) = unsafe { QpBase::<T>::create(ibqp, udata, make)? };
            caps_to(&granted, &mut ia.cap);
            // SAFETY: a new `QpObj<T>`; `qp_num` is ib_core's to read back. Indexed only once
            // whole: a lookup may follow at once (QP numbers can be guessed).
            let indexed = unsafe {
                (*ibqp).qp_num = qpn;
                QpBase::<T>::init(ibqp, tail);
                bindings::oxrdma_qp_refs_init(QpObj::<T>::refs(ibqp));
                bindings::oxrdma_qp_index_add(Device::<T>::qp_index((*ibqp).device), ibqp)
            };
            if indexed != 0 {
                // SAFETY: the QP was never indexed, so nothing holds iw_cm references on it;
                // ib_core frees it after this failed create.
                unsafe { QpBase::<T>::destroy(ibqp, |d| T::destroy_qp(d)) };
                return Err(Error::from_errno(indexed));
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully created `QpObj<T>`.
    unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // Out of the index first (no new iw_cm reference after that); then the driver's hook
        // ends the QP's connection, if any; the iw_cm drops its references once told the
        // connection closed, and only then may the QP go.
        // SAFETY: ib_core's one destroy of a created (so indexed, if its device indexes) QP of
        // our device (function contract).
        unsafe {
            QpBase::<T>::destroy(ibqp, |d| {
                bindings::oxrdma_qp_index_del(Device::<T>::qp_index((*ibqp).device), ibqp);
                T::destroy_qp(d);
                bindings::oxrdma_qp_refs_drain(QpObj::<T>::refs(ibqp));
            })
        }
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` with a valid `attr`.
    unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live QP (function contract).
            let qp = unsafe { &QpBase::<T>::part(ibqp).data };
            // SAFETY: valid for the call.
            let attrs = qp_attrs_from(unsafe { &*attr }, mask as u32)?;
            T::modify_qp(qp, &attrs)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` with valid, zeroed `attr` and `init`.
    unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live QP (function contract).
            let q = T::query_qp(unsafe { &QpBase::<T>::part(ibqp).data })?;
            // SAFETY: valid for writes (function contract); the QP is live.
            unsafe { qp_attrs_to(&q, &mut *attr, &mut *init, (*ibqp).qp_type) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` with a valid WR chain; `bad` NULL or writable.
    unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: live QP (function contract).
        let qp = unsafe { &QpBase::<T>::part(ibqp).data };
        // SAFETY: live QP; ib_core set its type before creating it.
        let qp_type = unsafe { (*ibqp).qp_type };
        let ud =
            qp_type == bindings::ib_qp_type_IB_QPT_UD || qp_type == bindings::ib_qp_type_IB_QPT_GSI;
        let ah: Option<AhOf<T::Ah>> = ud.then_some(Self::ah_of as _);
        // SAFETY: a valid chain for the call (function contract): the WRs of a UD or GSI QP
        // are `ib_ud_wr`s naming live AHs of this device, which `ah_of` resolves.
        let mut wrs = unsafe { SendWrs::new(wr, ah) };
        let r = T::post_send(qp, &mut wrs);
        // SAFETY: `bad` is NULL or writable (function contract).
        unsafe { posted(r, bad, wrs.current()) }
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` with a valid WR chain; `bad` NULL or writable.
    unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: live QP (function contract).
        let qp = unsafe { &QpBase::<T>::part(ibqp).data };
        // SAFETY: a valid chain for the call (function contract).
        let mut wrs = unsafe { RecvWrs::new(wr) };
        let r = T::post_recv(qp, &mut wrs);
        // SAFETY: `bad` is NULL or writable (function contract).
        unsafe { posted(r, bad, wrs.current()) }
    }

    // ---- AH -------------------------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core with a zeroed `AhObj<T>` of a registered `Device<T>` whose `pd` is a
    /// live PD of it, a valid `init`, and `udata` NULL (a kernel caller) or the driver udata
    /// of a user call (`create_user_ah`). Without `RDMA_CREATE_AH_SLEEPABLE`, atomic context.
    unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibah` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*ibah).device) };
            // SAFETY: `init` and its `ah_attr` are valid for the call.
            let (attr, flags) = unsafe { (&*(*init).ah_attr, (*init).flags) };
            let ai = AhInit::<T> {
                // SAFETY: ib_core set `pd` to the live PD of the call (a `PdObj<T>`).
                pd: unsafe { PdObj::<T>::part((*ibah).pd) },
                path: path_from(attr)?,
                sleepable: flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0,
            };
            // SAFETY: a non-NULL udata from ib_core is valid for the call.
            let mut udata = NonNull::new(udata).map(|raw| unsafe { Udata::from_raw(raw) });
            let data = T::create_ah(dev, ai, udata.as_mut())?;
            // SAFETY: a new `AhObj<T>` (size from the ops table).
            unsafe { AhObj::<T>::init(ibah, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully created `AhObj<T>`.
    unsafe extern "C" fn destroy_ah(ibah: *mut bindings::ib_ah, flags: u32) -> c_int {
        // SAFETY: ib_core's one destroy of a created AH (function contract).
        let data = unsafe { AhObj::<T>::take(ibah) };
        T::destroy_ah(
            &data,
            flags & bindings::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0,
        );
        drop(data);
        0
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `AhObj<T>` with a valid `attr`.
    unsafe extern "C" fn query_ah(
        ibah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live AH (function contract).
            let p = T::query_ah(unsafe { AhObj::<T>::part(ibah) })?;
            // SAFETY: valid for writes (function contract).
            let a = unsafe { &mut *attr };
            *a = Default::default();
            path_to(&p, 1, a);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` (a UD QP) with a valid, multicast `gid`.
    unsafe extern "C" fn attach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        lid: u16,
    ) -> c_int {
        // SAFETY: function contract.
        unsafe { Self::mcast(ibqp, gid, lid, T::attach_mcast) }
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `QpObj<T>` (a UD QP) with a valid, multicast `gid`.
    unsafe extern "C" fn detach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        lid: u16,
    ) -> c_int {
        // SAFETY: function contract.
        unsafe { Self::mcast(ibqp, gid, lid, T::detach_mcast) }
    }

    /// Runs `op` (attach or detach) on the QP's data and the GID's bytes.
    ///
    /// # Safety
    ///
    /// `ibqp` is a live `QpObj<T>` and `gid` valid for reads.
    unsafe fn mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        lid: u16,
        op: fn(&T::Qp, &[u8; 16], u16) -> Result,
    ) -> c_int {
        // SAFETY: `gid` is valid for reads (function contract); every bit pattern of the
        // union is a valid `raw` array.
        let g = unsafe { (*gid).raw };
        // SAFETY: live QP (function contract).
        let qp = unsafe { &QpBase::<T>::part(ibqp).data };
        from_result(|| op(qp, &g, lid).map(|()| 0))
    }

    /// The driver data of a live AH of the device (a UD WR's).
    ///
    /// # Safety
    ///
    /// `ibah` is a live `AhObj<T>`.
    unsafe fn ah_of(ibah: *mut bindings::ib_ah) -> *const T::Ah {
        // SAFETY: function contract.
        unsafe { AhObj::<T>::part(ibah) }
    }

    // ---- SRQ ------------------------------------------------------------------------------------

    /// # Safety
    ///
    /// Called by ib_core with a zeroed-tail `SrqObj<T>` of a registered `Device<T>`, a valid
    /// `init`, and `udata` NULL (a kernel caller) or the driver udata of a user call.
    unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibsrq` is valid and its `device` is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*ibsrq).device) };
            // SAFETY: valid for the call.
            let ia = unsafe { &mut *init };
            if ia.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(super::super::error::code::eopnotsupp());
            }
            let attrs = SrqAttrs {
                max_wr: ia.attr.max_wr,
                max_sge: ia.attr.max_sge,
                limit: ia.attr.srq_limit,
            };
            let make = |events: Revocable<bindings::ib_srq>, user: Option<&mut UserCall<'_>>| {
                let si = SrqInit::<T> {
                    // SAFETY: ib_core set `pd` to the live PD of the call.
                    pd: unsafe { PdObj::<T>::part((*ibsrq).pd) },
                    attrs,
                    events: SrqEvents(events),
                };
                T::create_srq(dev, si, user).map(|c| (c.data, c.attrs))
            };
            // SAFETY: ib_core frees the SRQ after `destroy_srq` or the failed create; `udata`
            // is NULL or this user call's driver udata.
            let (tail, granted) = unsafe { SrqObj::<T>::create(ibsrq, udata, make)? };
            ia.attr.max_wr = granted.max_wr;
            ia.attr.max_sge = granted.max_sge;
            // SAFETY: a new `SrqObj<T>`.
            unsafe { SrqObj::<T>::init(ibsrq, tail) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `SrqObj<T>` with a valid `attr`.
    unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live SRQ; `attr` valid for the call (function contract).
            let (srq, a) = unsafe { (&SrqObj::<T>::part(ibsrq).data, &*attr) };
            let attrs = SrqAttrs {
                max_wr: a.max_wr,
                max_sge: a.max_sge,
                limit: a.srq_limit,
            };
            T::modify_srq(srq, &attrs, mask)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `SrqObj<T>` with a valid `attr`.
    unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live SRQ; `attr` valid for writes (function contract).
            let (srq, a) = unsafe { (&SrqObj::<T>::part(ibsrq).data, &mut *attr) };
            let q = T::query_srq(srq)?;
            a.max_wr = q.max_wr;
            a.max_sge = q.max_sge;
            a.srq_limit = q.limit;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core once per successfully created `SrqObj<T>`, with no QP using it.
    unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: ib_core's one destroy of a created SRQ (function contract).
        unsafe { SrqObj::<T>::destroy(ibsrq, T::destroy_srq) }
    }

    /// # Safety
    ///
    /// Called by ib_core on a live `SrqObj<T>` with a valid WR chain; `bad` NULL or writable.
    unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: live SRQ (function contract).
        let srq = unsafe { &SrqObj::<T>::part(ibsrq).data };
        // SAFETY: a valid chain for the call (function contract).
        let mut wrs = unsafe { RecvWrs::new(wr) };
        let r = T::post_srq_recv(srq, &mut wrs);
        // SAFETY: `bad` is NULL or writable (function contract).
        unsafe { posted(r, bad, wrs.current()) }
    }

    // ---- MR -------------------------------------------------------------------------------------

    /// Boxes a new MR for ib_core, which fills in the rest (device, pd, uobject, type).
    fn new_mr(
        created: Result<super::driver::MrCreated<T::Mr>>,
        iova: u64,
        length: u64,
        fast: Option<Arc<FastRegPages>>,
    ) -> *mut bindings::ib_mr {
        let obj = created.and_then(|c| {
            let ib = bindings::ib_mr {
                lkey: c.lkey,
                rkey: c.rkey,
                iova,
                length,
                ..Default::default()
            };
            Ok(KBox::new(
                MrObj::<T> {
                    ib: Opaque::new(ib),
                    fast,
                    data: c.data,
                },
                GFP_KERNEL,
            )?)
        });
        match obj {
            // `ib` is at offset 0 (`#[repr(C)]`), as ib_core's `container_of` expects.
            Ok(o) => KBox::into_raw(o).cast(),
            Err(e) => {
                // SAFETY: builds an error pointer; no memory is accessed.
                unsafe { bindings::oxrdma_err_ptr(e.to_errno() as kernel::ffi::c_long) }.cast()
            }
        }
    }

    /// # Safety
    ///
    /// Called by ib_core in a user call, on a live `PdObj<T>` of a registered `Device<T>`.
    unsafe extern "C" fn reg_user_mr(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access_flags: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: live PD of our registered device (function contract).
        let (ib, pd) = unsafe { ((*ibpd).device, PdObj::<T>::part(ibpd)) };
        // SAFETY: `ib` is the device of a live PD, registered during the call.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        // SAFETY: a user verbs call on a registered device.
        let created = unsafe { UserMem::get(ib, start, length, access_flags) }
            .and_then(|mem| T::reg_user_mr(dev, pd, mem, iova, access_flags as u32));
        Self::new_mr(created, iova, length, None)
    }

    /// A DMA MR for a kernel user: all of memory by DMA address (`ib_get_dma_mr`; ib_alloc_pd
    /// makes one for the PD's `local_dma_lkey`).
    ///
    /// # Safety
    ///
    /// Called by ib_core for a kernel user, on a live `PdObj<T>` of a registered `Device<T>`.
    unsafe extern "C" fn get_dma_mr(
        ibpd: *mut bindings::ib_pd,
        access_flags: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: live PD of our registered device (function contract).
        let (ib, pd) = unsafe { ((*ibpd).device, PdObj::<T>::part(ibpd)) };
        // SAFETY: `ib` is the device of a live PD, registered during the call.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        // INVARIANT (of `KernelMem`): a DMA MR of a kernel user.
        let created = T::get_dma_mr(dev, pd, access_flags as u32, KernelMem::new());
        Self::new_mr(created, 0, u64::MAX, None)
    }

    /// A fast-registration MR for a kernel user (`ib_alloc_mr`).
    ///
    /// # Safety
    ///
    /// Called by ib_core for a kernel user, on a live `PdObj<T>` of a registered `Device<T>`.
    unsafe extern "C" fn alloc_mr(
        ibpd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // SAFETY: live PD of our registered device (function contract).
        let (ib, pd) = unsafe { ((*ibpd).device, PdObj::<T>::part(ibpd)) };
        // SAFETY: `ib` is the device of a live PD, registered during the call.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return Self::new_mr(Err(EINVAL), 0, 0, None);
        }
        let pages = FastRegPages::new(max_num_sg as usize);
        let created = pages
            .as_ref()
            .map_err(|e| *e)
            .and_then(|p| T::alloc_mr(dev, pd, max_num_sg, p.clone()));
        Self::new_mr(created, 0, 0, pages.ok())
    }

    /// `ib_sg_to_pages`' callback: one more page of a fast-registration MR.
    ///
    /// # Safety
    ///
    /// `ibmr` is a live `MrObj<T>` (`map_mr_sg` passes its own MR).
    unsafe extern "C" fn set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: function contract; `ib` is at offset 0 of the `MrObj<T>`.
        match unsafe { &(*ibmr.cast::<MrObj<T>>()).fast } {
            Some(p) => from_result(|| p.push(addr).map(|()| 0)),
            None => EINVAL.to_errno(),
        }
    }

    /// Maps a kernel user's DMA-mapped scatterlist into a fast-registration MR's page list.
    ///
    /// # Safety
    ///
    /// Called by ib_core (`ib_map_mr_sg`) on a live `MrObj<T>` with a DMA-mapped scatterlist
    /// of `sg_nents` entries and `page_size` set.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: a live `MrObj<T>` (function contract).
        let (fast, page_size) = unsafe { (&(*ibmr.cast::<MrObj<T>>()).fast, (*ibmr).page_size) };
        let Some(pages) = fast else {
            return EINVAL.to_errno();
        };
        pages.begin(u64::from(page_size));
        // SAFETY: function contract; `set_page` finds the page list through `ibmr`.
        let n = unsafe {
            bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page))
        };
        // SAFETY: `ib_sg_to_pages` set the MR's iova.
        pages.finish(unsafe { (*ibmr).iova });
        n
    }

    /// # Safety
    ///
    /// Called by ib_core once per MR this adapter returned.
    unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: made by `KBox::into_raw` in `new_mr` (`ib` at offset 0), freed only here.
        let obj = unsafe { KBox::from_raw(ibmr.cast::<MrObj<T>>()) };
        T::dereg_mr(&obj.data);
        drop(obj);
        0
    }

    // ---- sysfs ----------------------------------------------------------------------------------

    // ---- iWARP connection management --------------------------------------------------------

    /// # Safety
    ///
    /// Called by the iw_cm with a live identifier of our device and valid parameters.
    unsafe extern "C" fn iw_connect(
        id: *mut bindings::iw_cm_id,
        params: *mut bindings::iw_cm_conn_param,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live identifier and parameters for the call (function contract).
            let (id, params) = unsafe { (CmId::from_raw(id), ConnParams::from_raw(params)) };
            // SAFETY: the identifier's device is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*id.as_raw()).device) };
            T::iw_connect(dev, id, &params)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `iw_connect`.
    unsafe extern "C" fn iw_accept(
        id: *mut bindings::iw_cm_id,
        params: *mut bindings::iw_cm_conn_param,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live identifier and parameters for the call (function contract).
            let (id, params) = unsafe { (CmId::from_raw(id), ConnParams::from_raw(params)) };
            // SAFETY: the identifier's device is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*id.as_raw()).device) };
            T::iw_accept(dev, id, &params)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the iw_cm with a live identifier of our device; `pdata` valid for `len`
    /// bytes (or NULL).
    unsafe extern "C" fn iw_reject(
        id: *mut bindings::iw_cm_id,
        pdata: *const core::ffi::c_void,
        len: u8,
    ) -> c_int {
        from_result(|| {
            // SAFETY: live identifier for the call (function contract).
            let id = unsafe { CmId::from_raw(id) };
            let pd = if pdata.is_null() || len == 0 {
                &[][..]
            } else {
                // SAFETY: valid for `len` bytes (function contract).
                unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), len.into()) }
            };
            // SAFETY: the identifier's device is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*id.as_raw()).device) };
            T::iw_reject(dev, id, pd)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the iw_cm with a live identifier of our device.
    unsafe extern "C" fn iw_create_listen(id: *mut bindings::iw_cm_id, backlog: c_int) -> c_int {
        from_result(|| {
            // SAFETY: live identifier for the call (function contract).
            let id = unsafe { CmId::from_raw(id) };
            // SAFETY: the identifier's device is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*id.as_raw()).device) };
            T::iw_create_listen(dev, id, backlog)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the iw_cm with a live identifier of our device.
    unsafe extern "C" fn iw_destroy_listen(id: *mut bindings::iw_cm_id) -> c_int {
        from_result(|| {
            // SAFETY: live identifier for the call (function contract).
            let id = unsafe { CmId::from_raw(id) };
            // SAFETY: the identifier's device is our registered device.
            let dev = unsafe { Device::<T>::from_ib((*id.as_raw()).device) };
            T::iw_destroy_listen(dev, id)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the iw_cm with a live `QpObj<T>` (from `iw_get_qp`).
    unsafe extern "C" fn iw_add_ref(ibqp: *mut bindings::ib_qp) {
        // SAFETY: live QP whose refs were initialised at create (function contract).
        unsafe { bindings::oxrdma_qp_refs_get(QpObj::<T>::refs(ibqp)) };
    }

    /// # Safety
    ///
    /// Called by the iw_cm for a reference it took with `iw_add_ref`.
    unsafe extern "C" fn iw_rem_ref(ibqp: *mut bindings::ib_qp) {
        // SAFETY: the QP is not freed while this reference is held (destroy waits for it).
        unsafe { bindings::oxrdma_qp_refs_put(QpObj::<T>::refs(ibqp)) };
    }

    /// # Safety
    ///
    /// Called by the iw_cm with our registered device.
    unsafe extern "C" fn iw_get_qp(
        ib: *mut bindings::ib_device,
        qpn: c_int,
    ) -> *mut bindings::ib_qp {
        // The iw_cm takes its reference (`iw_add_ref`) on what this returns before it enables
        // interrupts again: an RCU read side, which the QP's destroy waits out
        // (`oxrdma_qp_index_del`) before it drains those references.
        // SAFETY: a registered device (function contract): its index lives until dealloc.
        unsafe { bindings::oxrdma_qp_index_find(Device::<T>::qp_index(ib), qpn as u32) }
    }

    /// Sets up the `hca_type` attribute group in the device's allocation; returns it.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of an unregistered `Device<T>`.
    unsafe fn init_sysfs(ib: *mut bindings::ib_device) -> *const bindings::attribute_group {
        // SAFETY: the attributes are part of the device's allocation (function contract),
        // not yet visible to sysfs; zero is valid for every field not set here.
        unsafe {
            let s = Device::<T>::sysfs(ib);
            s.write(core::mem::zeroed());
            let attr = addr_of_mut!((*s).attr);
            (*attr).attr.name = kernel::c_str!("hca_type").as_char_ptr();
            (*attr).attr.mode = 0o444;
            bindings::oxrdma_sysfs_attr_init(addr_of_mut!((*attr).attr));
            (*attr).show = Some(Self::hca_type_show);
            (*s).list = [addr_of_mut!((*attr).attr), core::ptr::null_mut()];
            (*s).group.attrs = addr_of_mut!((*s).list).cast();
            addr_of_mut!((*s).group)
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for the `hca_type` attribute of a registered `Device<T>`, with a
    /// page-sized `buf`.
    unsafe extern "C" fn hca_type_show(
        dev: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        buf: *mut kernel::ffi::c_char,
    ) -> isize {
        // SAFETY: `dev` is the `struct device` inside the `ib_device` of a `Device<T>`, whose
        // attribute exists only while it is registered, when the data is initialised.
        let d = unsafe { Device::<T>::from_ib(bindings::oxrdma_device_to_ibdev(dev)) };
        let s = T::hca_type(d);
        // SAFETY: `buf` is a sysfs page; the format string and argument are NUL-terminated.
        unsafe {
            bindings::sysfs_emit(buf, kernel::c_str!("%s\n").as_char_ptr(), s.as_char_ptr())
                as isize
        }
    }
}

impl<T: Driver> DeviceHandle<T> {
    /// Allocates a device, initialises its driver data from `init` and registers it.
    pub fn register(
        module: &'static ThisModule,
        params: NewDevice<'_>,
        init: impl PinInit<T, Error>,
    ) -> Result<ARef<Self>> {
        // SAFETY: plain allocation of at least `sizeof(struct ib_device)` bytes, zeroed and
        // initialised by ib_core.
        let ib = unsafe { bindings::_ib_alloc_device(size_of::<Device<T>>()) };
        let ib = NonNull::new(ib).ok_or(ENOMEM)?;
        // SAFETY: the index lives in the allocation; initialising allocates nothing, so the
        // unwind below need not destroy it.
        unsafe { bindings::oxrdma_qp_index_init(Device::<T>::qp_index(ib.as_ptr())) };

        // SAFETY: `data` is uninitialised memory inside the allocation, which is never moved.
        if let Err(e) = unsafe { init.__pinned_init(Device::<T>::data_slot(ib.as_ptr())) } {
            // SAFETY: not registered and no ops installed: the unwind is `ib_dealloc_device`.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            return Err(e);
        }

        // SAFETY: `ib` is live and not registered; the ops table is copied; the fields written are
        // the driver's to set before registration.
        unsafe {
            Adapter::<T>::install(ib.as_ptr(), module);
            let d = ib.as_ptr();
            (*d).node_type = params.node_type.to_raw();
            (*d).phys_port_cnt = 1;
            (*d).num_comp_vectors = 1;
            (*d).uverbs_cmd_mask |= T::UVERBS_CMD_MASK;
            (*d).node_guid = u64::from_ne_bytes(params.node_guid);
            if params.node_type == NodeType::Rnic {
                // The iw_cm asks the port mapper nothing of a device without port mapping.
                bindings::oxrdma_iw_device_init(d, params.netdev.name().as_char_ptr());
            }
            let desc = T::NODE_DESC.as_bytes();
            let node_desc = &mut (*d).node_desc;
            let n = desc.len().min(node_desc.len() - 1);
            for (dst, &b) in node_desc.iter_mut().zip(&desc[..n]) {
                *dst = b as kernel::ffi::c_char;
            }
        }

        // The handle's reference is taken before registration: once registered, an asynchronous
        // unregistration may free the device as soon as nothing else holds it.
        // SAFETY: `DeviceHandle<T>` is a transparent wrapper of the live `ib_device`.
        let handle = ARef::from(unsafe { &*ib.as_ptr().cast::<DeviceHandle<T>>() });

        let (dev, nd) = (ib.as_ptr(), params.netdev.as_raw());
        // SAFETY: live device and a netdev the caller holds; ib_core takes its own reference.
        let mut ret = unsafe { bindings::ib_device_set_netdev(dev, nd, 1) };
        if ret == 0 {
            // SAFETY: fully set up device; `name` is NUL-terminated; no DMA device (software).
            ret = unsafe {
                bindings::ib_register_device(
                    ib.as_ptr(),
                    params.name.as_char_ptr(),
                    core::ptr::null_mut(),
                )
            };
        }
        if ret != 0 {
            // Registration failed: ib_core's unwind is `ib_dealloc_device`, which calls the ops
            // table's `dealloc_driver` (dropping the data exactly once, as after a registration)
            // and frees the device once the handle's reference, dropped on return, goes too.
            // SAFETY: nothing else can reach the data or the unregistered device any more.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            drop(handle);
            return Err(Error::from_errno(ret));
        }
        Ok(handle)
    }
}

// ---- attribute conversions ----------------------------------------------------------------------

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

fn path_from(ah: &bindings::rdma_ah_attr) -> Result<Path> {
    if ah.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
        return Err(EINVAL);
    }
    let sgid_attr = ah.grh.sgid_attr;
    if sgid_attr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: ib_core resolved and holds the source GID attribute for the call; `roce` is the
    // union member of a RoCE address.
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

/// Writes a RoCE address (without a source GID attribute reference) into `ah`.
fn path_to(p: &Path, port: u32, ah: &mut bindings::rdma_ah_attr) {
    ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    ah.port_num = port;
    ah.sl = p.sl;
    ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
    ah.grh.dgid.raw = p.dgid;
    ah.grh.sgid_index = p.sgid_index;
    ah.grh.hop_limit = p.hop_limit;
    ah.grh.traffic_class = p.traffic_class;
    ah.grh.flow_label = p.flow_label;
    ah.__bindgen_anon_1.roce.dmac = p.dmac;
}

fn qp_attrs_from(a: &bindings::ib_qp_attr, m: u32) -> Result<QpAttrs> {
    let has = |bit: u32| m & bit != 0;
    let foreign =
        has(qp_mask::AV) && a.ah_attr.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    let state = |raw| QpState::from_raw(raw).ok_or(EINVAL);
    Ok(QpAttrs {
        mask: m,
        state: has(qp_mask::STATE).then(|| state(a.qp_state)).transpose()?,
        cur_state: has(qp_mask::CUR_STATE)
            .then(|| state(a.cur_qp_state))
            .transpose()?,
        path_mtu: has(qp_mask::PATH_MTU)
            .then(|| match a.path_mtu {
                1..=5 => Ok(128u32 << a.path_mtu),
                _ => Err(EINVAL),
            })
            .transpose()?,
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
        path: (has(qp_mask::AV) && !foreign)
            .then(|| path_from(&a.ah_attr))
            .transpose()?,
        foreign_av: foreign,
        caps: QpCaps::default(),
        sig_all: false,
        sqd_notify: has(qp_mask::EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify != 0,
    })
}

fn qp_attrs_to(
    q: &QpAttrs,
    a: &mut bindings::ib_qp_attr,
    ia: &mut bindings::ib_qp_init_attr,
    qp_type: bindings::ib_qp_type,
) {
    let st = q.state.unwrap_or(QpState::Reset).to_raw();
    a.qp_state = st;
    a.cur_qp_state = st;
    a.path_mtu = mtu_enum(q.path_mtu.unwrap_or(1024));
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
        path_to(&p, a.port_num, &mut a.ah_attr);
    }
    caps_to(&q.caps, &mut ia.cap);
    ia.qp_type = qp_type;
    ia.sq_sig_type = if q.sig_all {
        bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        bindings::ib_sig_type_IB_SIGNAL_REQ_WR
    };
}
