// SPDX-License-Identifier: GPL-2.0
//! RDMA devices: allocation, the ops table, registration, lifetime and the verbs objects
//! ib_core allocates on the driver's behalf.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_device`, `struct ib_device_ops`).
//!
//! # Lifetime
//!
//! A device is a [`Device<T>`]: the `struct ib_device` followed by the driver's data `T`, in one
//! allocation made by ib_core (`_ib_alloc_device`), as C drivers embed it. [`register`] builds
//! and registers it. From then on ib_core owns it: whoever unregisters it (`rdma link delete`,
//! [`DeviceHandle::unregister`], a queued unregistration) ends in the `dealloc_driver` callback,
//! which calls [`Driver::unregistered`] and drops `T`; ib_core then frees the memory when the
//! last `struct device` reference goes. Callbacks into `T` only run while the device is
//! registered (ib_core disables the device and waits for its users before `dealloc_driver`).
//!
//! A [`DeviceHandle`] keeps the memory alive but not `T`: it reaches `T` only through
//! [`DeviceHandle::with_registered`], which holds a registration reference.

use super::super::bindings;
use super::super::net::{NetDevice, NetDeviceRef};
use super::kmem::{FastRegPages, KernelMem};
use super::kverbs::{self, RecvWr, SendWr, WcSink};
use super::umem::UserMem;
use super::verbs::{self, CqInit, QpAttrs, QpCaps, QpInit, SrqAttrs, SrqInit, UserCtx};
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{addr_of_mut, NonNull};
use kernel::{init::PinInit, prelude::*, str::CStr, sync::Arc, types::Opaque, ThisModule};

/// What kind of RDMA device this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// An InfiniBand channel adapter: RoCE.
    Roce,
    /// An RDMA NIC: iWARP.
    Iwarp,
}

/// Device limits and capabilities reported by `query_device` (`struct ib_device_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttrs {
    /// Firmware version, shown as `fw_ver`.
    pub fw_ver: u64,
    /// Largest memory region, bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit n set: 2^n bytes).
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub vendor_id: u32,
    /// Vendor's part number.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Maximum QPs.
    pub max_qp: i32,
    /// Maximum work requests per QP queue.
    pub max_qp_wr: i32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// Maximum scatter/gather entries per send WR.
    pub max_send_sge: i32,
    /// Maximum scatter/gather entries per receive WR.
    pub max_recv_sge: i32,
    /// Maximum scatter/gather entries per RDMA read WR.
    pub max_sge_rd: i32,
    /// Maximum CQs.
    pub max_cq: i32,
    /// Maximum entries per CQ.
    pub max_cqe: i32,
    /// Maximum MRs.
    pub max_mr: i32,
    /// Maximum PDs.
    pub max_pd: i32,
    /// Maximum outstanding RDMA reads/atomics per QP as responder.
    pub max_qp_rd_atom: i32,
    /// Maximum outstanding RDMA reads/atomics per QP as requester.
    pub max_qp_init_rd_atom: i32,
    /// Maximum responder resources for the device.
    pub max_res_rd_atom: i32,
    /// Maximum SRQs.
    pub max_srq: i32,
    /// Maximum WRs per SRQ.
    pub max_srq_wr: i32,
    /// Maximum scatter/gather entries per SRQ WR.
    pub max_srq_sge: i32,
    /// Maximum pages in a fast-registration page list.
    pub max_fast_reg_page_list_len: u32,
    /// Atomic operations are atomic with respect to the whole device.
    pub atomic_glob: bool,
    /// Maximum partition keys.
    pub max_pkeys: u16,
    /// Local CA ACK delay (4.096 us * 2^value).
    pub local_ca_ack_delay: u8,
}

/// Port attributes reported by `query_port` (`struct ib_port_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttrs {
    /// The link can carry traffic (netdev running with carrier).
    pub active: bool,
    /// Administratively enabled (netdev running).
    pub enabled: bool,
    /// Largest IB MTU, bytes (256..4096).
    pub max_mtu: u32,
    /// IB MTU in use, bytes (256..4096).
    pub active_mtu: u32,
    /// MTU of the underlying link, bytes.
    pub phys_mtu: u32,
    /// GID table size.
    pub gid_tbl_len: i32,
    /// PortInfo CapabilityMask bits (`IB_PORT_*`).
    pub port_cap_flags: u32,
    /// Largest message, bytes.
    pub max_msg_sz: u32,
    /// P_Key table size.
    pub pkey_tbl_len: u16,
    /// The GID table holds IP-based GIDs (RoCE).
    pub ip_gids: bool,
}

/// `RDMA_CORE_CAP_*` bits for [`PortImmutable::core_cap_flags`].
pub mod core_cap {
    use super::bindings;

    /// RoCE v1: IBA transport over Ethernet, ethertype 0x8915 (GID type "IB/RoCE v1").
    pub const PROT_ROCE: u32 = bindings::RDMA_CORE_CAP_PROT_ROCE;
    /// RoCE v2: IBA transport over UDP/IP, port 4791 (GID type "RoCE v2").
    pub const PROT_ROCE_UDP_ENCAP: u32 = bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP;
    /// iWARP.
    pub const PROT_IWARP: u32 = bindings::RDMA_CORE_CAP_PROT_IWARP;
    /// Address handles carry Ethernet addresses, resolved by ib_core.
    pub const ETH_AH: u32 = bindings::RDMA_CORE_CAP_ETH_AH;
    /// The iWARP connection manager (needs the `iw_*` ops).
    pub const IW_CM: u32 = bindings::RDMA_CORE_CAP_IW_CM;
}

/// `IB_DEVICE_*` bits for [`DeviceAttrs::device_cap_flags`].
pub mod device_cap {
    use super::bindings;

    /// Fast registration (`IB_WR_REG_MR`) and local invalidate: kernel ULPs check this.
    pub const MEM_MGT_EXTENSIONS: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
}

/// Immutable port properties (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortImmutable {
    /// P_Key table size.
    pub pkey_tbl_len: i32,
    /// GID table size.
    pub gid_tbl_len: i32,
    /// `RDMA_CORE_CAP_*` / `RDMA_CORE_PORT_*` flags: protocols and management the port has.
    pub core_cap_flags: u32,
    /// Largest MAD, bytes; 0 without MAD support.
    pub max_mad_size: u32,
}

/// Driver-specific data of a verbs call from userspace (`struct ib_udata`).
///
/// # Invariants
///
/// `raw` is a valid `struct ib_udata` for `'a`.
pub struct Udata<'a> {
    raw: NonNull<bindings::ib_udata>,
    _lt: PhantomData<&'a mut bindings::ib_udata>,
}

impl Udata<'_> {
    /// # Safety
    ///
    /// `raw` is a valid `struct ib_udata` for the returned value's lifetime.
    pub(crate) unsafe fn from_raw(raw: NonNull<bindings::ib_udata>) -> Self {
        // INVARIANT: per the function's contract.
        Self {
            raw,
            _lt: PhantomData,
        }
    }

    /// Copies `resp` to userspace, cut to the length the caller's buffer has (older
    /// providers with a shorter response structure keep working).
    pub fn respond(&mut self, resp: &[u8]) -> Result {
        // SAFETY: `self.raw` is valid (type invariant); `resp` is readable for its length.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_respond_udata(self.raw.as_ptr(), resp.as_ptr().cast(), resp.len())
        })
    }

    /// Length of the driver-specific command data userspace sent.
    pub fn inlen(&self) -> usize {
        // SAFETY: `self.raw` is valid (type invariant).
        unsafe { bindings::oxrdma_udata_inlen(self.raw.as_ptr()) }
    }
}

/// The driver side of an RDMA device: what ib_core calls.
pub trait Driver: Send + Sync + Sized + 'static {
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

    /// Device limits; queried once at registration.
    fn query_device(dev: &Device<Self>) -> DeviceAttrs;
    /// Current attributes of port `port` (always 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttrs>;
    /// Immutable properties of port `port`.
    fn port_immutable(dev: &Device<Self>, port: u32) -> PortImmutable;
    /// GID `index` of `port`, for devices whose GIDs ib_core does not manage (iWARP).
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: i32) -> Result<[u8; 16]> {
        Err(EINVAL)
    }
    /// A new user context.
    fn alloc_ucontext(dev: &Device<Self>, udata: &mut Udata<'_>) -> Result<Self::Ucontext>;
    /// A new protection domain; `udata` when it comes from userspace.
    fn alloc_pd(dev: &Device<Self>, udata: Option<&mut Udata<'_>>) -> Result<Self::Pd>;
    /// Called once the device is unregistered (or its registration failed), just before its
    /// data is dropped.
    fn unregistered(_dev: &Device<Self>) {}

    /// A new CQ (`ctx` for a process, `None` for a kernel user); returns its data and the
    /// number of entries it holds.
    fn create_cq(
        dev: &Device<Self>,
        init: CqInit,
        ctx: Option<&mut UserCtx<'_>>,
    ) -> Result<(Self::Cq, u32)>;
    /// The CQ is being destroyed (no QP uses it); its data is dropped next.
    fn destroy_cq(_cq: &Self::Cq) {}
    /// Arms the CQ's completion event for the next (or next solicited) completion. Returns
    /// whether completions are already waiting.
    fn req_notify_cq(cq: &Self::Cq, solicited_only: bool) -> Result<bool>;
    /// A new QP (`ctx` for a process, `None` for a kernel user); returns its data, its
    /// number and the capacities granted.
    fn create_qp(
        dev: &Device<Self>,
        init: QpInit<'_, Self>,
        ctx: Option<&mut UserCtx<'_>>,
    ) -> Result<(Self::Qp, u32, QpCaps)>;
    /// `modify_qp`.
    fn modify_qp(qp: &Self::Qp, attrs: &QpAttrs) -> Result;
    /// `query_qp`.
    fn query_qp(qp: &Self::Qp) -> Result<QpAttrs>;
    /// The QP is being destroyed; its data is dropped next.
    fn destroy_qp(_qp: &Self::Qp) {}
    /// The process published send WQEs in the QP's ring.
    fn doorbell(qp: &Self::Qp) -> Result;
    /// A new SRQ (`ctx` for a process, `None` for a kernel user); returns its data and the
    /// attributes granted.
    fn create_srq(
        dev: &Device<Self>,
        init: SrqInit<'_, Self>,
        ctx: Option<&mut UserCtx<'_>>,
    ) -> Result<(Self::Srq, SrqAttrs)>;
    /// `modify_srq` with the `IB_SRQ_*` bits of `mask`.
    fn modify_srq(srq: &Self::Srq, attrs: &SrqAttrs, mask: u32) -> Result;
    /// `query_srq`.
    fn query_srq(srq: &Self::Srq) -> SrqAttrs;
    /// The SRQ is being destroyed (no QP uses it); its data is dropped next.
    fn destroy_srq(_srq: &Self::Srq) {}
    /// Registers pinned user memory mapped at `iova` with `IB_ACCESS_*` rights `access`.
    /// Returns the MR's data, L_Key and R_Key.
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Self::Pd,
        mem: UserMem,
        iova: u64,
        access: u32,
    ) -> Result<(Self::Mr, u32, u32)>;
    /// The MR is being deregistered; its data is dropped next.
    fn dereg_mr(_mr: &Self::Mr) {}

    // Kernel users. These may be called in any context (also softirq and hard interrupt),
    // concurrently: they must not sleep.

    /// Posts a kernel user's send WR.
    fn post_send(_qp: &Self::Qp, _wr: &SendWr<'_>) -> Result {
        Err(EINVAL)
    }
    /// Posts a kernel user's receive WR to a QP's receive queue.
    fn post_recv(_qp: &Self::Qp, _wr: &RecvWr<'_>) -> Result {
        Err(EINVAL)
    }
    /// Posts a kernel user's receive WR to an SRQ.
    fn post_srq_recv(_srq: &Self::Srq, _wr: &RecvWr<'_>) -> Result {
        Err(EINVAL)
    }
    /// Moves completions of a kernel CQ into `out` while it has room.
    fn poll_cq(_cq: &Self::Cq, _out: &mut WcSink<'_>) {}
    /// A DMA MR of a kernel user with `IB_ACCESS_*` rights `access` over all of `mem`. Returns
    /// the MR's data, L_Key and R_Key. (Process context.)
    fn get_dma_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _access: u32,
        _mem: KernelMem,
    ) -> Result<(Self::Mr, u32, u32)> {
        Err(EINVAL)
    }
    /// A fast-registration MR of a kernel user for up to `max_pages` pages, which
    /// `ib_map_mr_sg` writes into `pages`. Returns the MR's data, L_Key and R_Key (the MR is
    /// invalid until an `IB_WR_REG_MR`). (Process context.)
    fn alloc_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _max_pages: u32,
        _pages: Arc<FastRegPages>,
    ) -> Result<(Self::Mr, u32, u32)> {
        Err(EINVAL)
    }
}

/// An RDMA device: `struct ib_device` followed by the driver's data.
///
/// # Invariants
///
/// Lives in an allocation from `_ib_alloc_device` of `size_of::<Device<T>>()` bytes; `ib` is at
/// offset 0 (ib_core's `container_of` contract); `hca_type` and `data` are initialised from
/// [`register`] until `dealloc_driver`.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    hca_type: &'static CStr,
    data: T,
}

impl<T: Driver> core::ops::Deref for Device<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// # Safety
    ///
    /// `ib` must be the `ib_device` of a `Device<T>` whose data is initialised and stays so for
    /// `'a` (a callback on a registered device, or a registration reference held).
    pub(crate) unsafe fn from_ib<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is at offset 0 of a `Device<T>` (type invariant, caller guarantee).
        unsafe { &*ib.cast::<Self>() }
    }

    fn as_ib(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The device's name (`oxr0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside the live device.
        unsafe { CStr::from_char_ptr(addr_of_mut!((*self.as_ib()).name).cast()) }
    }

    /// The netdev of port `port`, referenced; `None` once it is gone.
    pub fn netdev(&self, port: u32) -> Option<NetDevice> {
        // SAFETY: the device is live; `ib_device_get_netdev` returns a held reference or NULL.
        let nd = unsafe { bindings::ib_device_get_netdev(self.as_ib(), port) };
        // SAFETY: a non-NULL result carries a reference that moves into the `NetDevice`.
        NonNull::new(nd).map(|p| unsafe { NetDevice::from_owned(p) })
    }

    /// Tells ib_core and its clients that port `port` went active or down.
    pub fn port_event(&self, port: u32, active: bool) {
        let mut ev = bindings::ib_event {
            device: self.as_ib(),
            event: if active {
                bindings::ib_event_type_IB_EVENT_PORT_ACTIVE
            } else {
                bindings::ib_event_type_IB_EVENT_PORT_ERR
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: `ev` is a valid event for this registered device; ib_core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }
}

/// A counted reference to a device's memory (`get_device`), usable after unregistration.
///
/// # Invariants
///
/// `ptr` points to a `Device<T>` allocation on which this value owns one `struct device`
/// reference.
pub struct DeviceHandle<T: Driver> {
    ptr: NonNull<Device<T>>,
}

// SAFETY: device references may be taken and dropped on any thread; `T: Send + Sync`.
unsafe impl<T: Driver> Send for DeviceHandle<T> {}
// SAFETY: see `Send`; shared use only goes through ib_core's thread-safe entry points.
unsafe impl<T: Driver> Sync for DeviceHandle<T> {}

impl<T: Driver> DeviceHandle<T> {
    fn ib(&self) -> *mut bindings::ib_device {
        self.ptr.as_ptr().cast()
    }

    /// Whether this handle refers to `dev`.
    pub fn is(&self, dev: &Device<T>) -> bool {
        core::ptr::eq(self.ptr.as_ptr(), dev)
    }

    /// Whether both handles refer to the same device.
    pub fn same(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    /// Runs `f` on the device if it is still registered; `None` if unregistration has begun.
    pub fn with_registered<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        // SAFETY: the memory is kept by this handle (type invariant); `ib_device_try_get` only
        // touches the refcount.
        if !unsafe { bindings::oxrdma_ib_device_try_get(self.ib()) } {
            return None;
        }
        // SAFETY: the registration reference keeps `dealloc_driver` from running, so the data
        // stays initialised until `ib_device_put` below.
        let r = f(unsafe { Device::from_ib(self.ib()) });
        // SAFETY: releases the reference taken above.
        unsafe { bindings::ib_device_put(self.ib()) };
        Some(r)
    }

    /// Unregisters the device and waits until it is done; nothing if already unregistered.
    pub fn unregister(&self) {
        // SAFETY: the memory is kept by this handle; `ib_unregister_device` serialises with
        // other unregistrations and returns at once for an unregistered device.
        unsafe { bindings::ib_unregister_device(self.ib()) };
    }

    /// Schedules unregistration (for contexts that must not wait, e.g. under the RTNL).
    pub fn unregister_queued(&self) {
        self.with_registered(|dev| {
            // SAFETY: the device is registered (registration reference held by the closure's
            // caller), as `ib_unregister_device_queued` requires.
            unsafe { bindings::ib_unregister_device_queued(dev.as_ib()) }
        });
    }
}

impl<T: Driver> Clone for DeviceHandle<T> {
    fn clone(&self) -> Self {
        // SAFETY: the memory is live (type invariant); takes another reference.
        unsafe { bindings::oxrdma_ib_device_get(self.ib()) };
        // INVARIANT: one reference taken for the new value.
        Self { ptr: self.ptr }
    }
}

impl<T: Driver> Drop for DeviceHandle<T> {
    fn drop(&mut self) {
        // SAFETY: this value owns one reference (type invariant).
        unsafe { bindings::oxrdma_ib_device_put(self.ib()) };
    }
}

/// Parameters of a new device.
pub struct NewDevice<'a> {
    /// The name `rdma link add` gave.
    pub name: &'a CStr,
    /// RoCE or iWARP.
    pub kind: NodeKind,
    /// The netdev port 1 runs on.
    pub netdev: &'a NetDeviceRef<'a>,
    /// Node GUID, in network byte order.
    pub node_guid: [u8; 8],
    /// Content of the `hca_type` sysfs attribute, which the userspace provider matches.
    pub hca_type: &'static CStr,
    /// `uverbs_abi_ver`: the driver ABI version userspace providers check.
    pub abi_version: u32,
}

/// Allocates, initialises and registers a device with data from `init`.
pub fn register<T: Driver>(
    module: &'static ThisModule,
    params: NewDevice<'_>,
    init: impl PinInit<T, Error>,
) -> Result<DeviceHandle<T>> {
    // SAFETY: plain allocation of at least `sizeof(struct ib_device)` bytes, zeroed and
    // initialised by ib_core.
    let ib = unsafe { bindings::_ib_alloc_device(size_of::<Device<T>>()) };
    let ib = NonNull::new(ib).ok_or(ENOMEM)?;
    let dev = ib.as_ptr().cast::<Device<T>>();

    // SAFETY: `dev` is a fresh allocation of the right size; the fields are written before
    // anything reads them.
    unsafe { addr_of_mut!((*dev).hca_type).write(params.hca_type) };
    // SAFETY: `data` is uninitialised memory inside the pinned (never moved) allocation.
    if let Err(e) = unsafe { init.__pinned_init(addr_of_mut!((*dev).data)) } {
        // SAFETY: not registered; ib_core's error-unwind path for a driver using
        // `dealloc_driver` is `ib_dealloc_device`.
        unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
        return Err(e);
    }

    let ops = ops_table::<T>(module, params.abi_version);
    // SAFETY: `ib` is a live, unregistered device; `ib_set_device_ops` copies the table.
    unsafe { bindings::ib_set_device_ops(ib.as_ptr(), &ops) };
    // SAFETY: exclusive access to the unregistered device; plain field writes.
    unsafe {
        let d = ib.as_ptr();
        (*d).node_type = match params.kind {
            NodeKind::Roce => bindings::RDMA_NODE_IB_CA,
            NodeKind::Iwarp => bindings::RDMA_NODE_RNIC,
        } as u8;
        (*d).phys_port_cnt = 1;
        (*d).num_comp_vectors = 1;
        // The legacy write() commands the userspace provider uses: POST_SEND (with no work
        // requests) is the send queue doorbell, REQ_NOTIFY_CQ arms the completion event.
        (*d).uverbs_cmd_mask |= (1u64
            << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
            | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        (*d).local_dma_lkey = 0;
        (*d).node_guid = u64::from_ne_bytes(params.node_guid);
        let desc = b"oxrdma\0";
        let node_desc = &mut (*d).node_desc;
        node_desc[..desc.len()].copy_from_slice(&desc.map(|b| b as kernel::ffi::c_char));
    }

    // The handle's reference is taken before registration: once registered, an asynchronous
    // unregistration may free the device as soon as nothing else holds it.
    // SAFETY: live device; takes a `struct device` reference.
    unsafe { bindings::oxrdma_ib_device_get(ib.as_ptr()) };
    // INVARIANT: the reference just taken belongs to the handle.
    let handle = DeviceHandle {
        ptr: NonNull::new(dev).ok_or(EINVAL)?,
    };

    // SAFETY: live device and a netdev the caller holds; ib_core takes its own reference.
    let mut ret = unsafe { bindings::ib_device_set_netdev(ib.as_ptr(), params.netdev.as_ptr(), 1) };
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

// ---- the ops table -------------------------------------------------------------------------

/// The ucontext object ib_core allocates: `struct ib_ucontext` then the driver's data.
#[repr(C)]
struct UcontextObj<T: Driver> {
    ib: bindings::ib_ucontext,
    data: MaybeUninit<T::Ucontext>,
}

/// The PD object ib_core allocates: `struct ib_pd` then the driver's data.
#[repr(C)]
struct PdObj<T: Driver> {
    ib: bindings::ib_pd,
    data: MaybeUninit<T::Pd>,
}

/// # Safety
///
/// `pd` is a live `PdObj<T>` whose allocation succeeded.
pub(crate) unsafe fn pd_data<'a, T: Driver>(pd: *mut bindings::ib_pd) -> &'a T::Pd {
    // SAFETY: function contract: `data` is initialised until `dealloc_pd`.
    unsafe { (*pd.cast::<PdObj<T>>()).data.assume_init_ref() }
}

fn ops_table<T: Driver>(module: &'static ThisModule, abi: u32) -> bindings::ib_device_ops {
    const {
        // ib_core allocates driver objects with kzalloc, which aligns to 8 bytes.
        assert!(core::mem::align_of::<UcontextObj<T>>() <= 8);
        assert!(core::mem::align_of::<PdObj<T>>() <= 8);
        assert!(core::mem::align_of::<Device<T>>() <= 8);
    }
    bindings::ib_device_ops {
        owner: module.as_ptr().cast(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: abi,
        device_group: &raw const HCA_TYPE_GROUP.0,
        dealloc_driver: Some(dealloc_driver::<T>),
        query_device: Some(query_device::<T>),
        query_port: Some(query_port::<T>),
        get_port_immutable: Some(get_port_immutable::<T>),
        get_link_layer: Some(get_link_layer),
        query_pkey: Some(query_pkey),
        query_gid: Some(query_gid::<T>),
        alloc_ucontext: Some(alloc_ucontext::<T>),
        dealloc_ucontext: Some(dealloc_ucontext::<T>),
        alloc_pd: Some(alloc_pd::<T>),
        dealloc_pd: Some(dealloc_pd::<T>),
        create_qp: Some(verbs::create_qp::<T>),
        modify_qp: Some(verbs::modify_qp::<T>),
        query_qp: Some(verbs::query_qp::<T>),
        destroy_qp: Some(verbs::destroy_qp::<T>),
        post_send: Some(verbs::post_send::<T>),
        post_recv: Some(kverbs::post_recv::<T>),
        create_cq: Some(verbs::create_cq::<T>),
        destroy_cq: Some(verbs::destroy_cq::<T>),
        poll_cq: Some(kverbs::poll_cq::<T>),
        req_notify_cq: Some(verbs::req_notify_cq::<T>),
        create_srq: Some(verbs::create_srq::<T>),
        modify_srq: Some(verbs::modify_srq::<T>),
        query_srq: Some(verbs::query_srq::<T>),
        destroy_srq: Some(verbs::destroy_srq::<T>),
        post_srq_recv: Some(kverbs::post_srq_recv::<T>),
        get_dma_mr: Some(verbs::get_dma_mr::<T>),
        alloc_mr: Some(verbs::alloc_mr::<T>),
        map_mr_sg: Some(verbs::map_mr_sg),
        reg_user_mr: Some(verbs::reg_user_mr::<T>),
        dereg_mr: Some(verbs::dereg_mr::<T>),
        mmap: Some(super::mmap::mmap),
        mmap_free: Some(super::mmap::mmap_free),
        size_ib_ucontext: size_of::<UcontextObj<T>>(),
        size_ib_pd: size_of::<PdObj<T>>(),
        size_ib_cq: verbs::object_sizes::<T>().0,
        size_ib_qp: verbs::object_sizes::<T>().1,
        size_ib_srq: verbs::object_sizes::<T>().2,
        ..Default::default()
    }
}

fn errno(r: Result) -> kernel::ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// ib_core calls this once, with the device's registration over and no other callback running.
unsafe extern "C" fn dealloc_driver<T: Driver>(ib: *mut bindings::ib_device) {
    // SAFETY: the data is still initialised: this is the one place that drops it.
    let dev = unsafe { Device::<T>::from_ib(ib) };
    T::unregistered(dev);
    // SAFETY: no callback can run any more (function safety requirement) and nothing else
    // drops the data; the memory itself is freed by ib_core afterwards.
    unsafe { core::ptr::drop_in_place(addr_of_mut!((*ib.cast::<Device<T>>()).data)) };
}

/// # Safety
///
/// Called by ib_core on a registered (or registering) `Device<T>`, with a valid `attr`.
unsafe extern "C" fn query_device<T: Driver>(
    ib: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: callbacks run while the data is initialised (function safety requirement).
    let dev = unsafe { Device::<T>::from_ib(ib) };
    let a = T::query_device(dev);
    // SAFETY: `attr` is valid for writes (function safety requirement); the node GUID was set
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
        out.local_ca_ack_delay = a.local_ca_ack_delay;
    }
    0
}

/// The `enum ib_mtu` value (1 = 256 bytes ... 5 = 4096 bytes) of an MTU in bytes, as ib_core
/// computes it (`ib_mtu_int_to_enum`: the largest IB MTU not above `bytes`).
pub fn mtu_enum(bytes: u32) -> bindings::ib_mtu {
    // SAFETY: pure arithmetic helper.
    let m = unsafe { bindings::oxrdma_ib_mtu_int_to_enum(bytes.min(i32::MAX as u32) as i32) };
    m as bindings::ib_mtu
}

/// # Safety
///
/// Called by ib_core on a registered `Device<T>`, with a valid `attr`.
unsafe extern "C" fn query_port<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> kernel::ffi::c_int {
    // SAFETY: callbacks run while the data is initialised (function safety requirement).
    let dev = unsafe { Device::<T>::from_ib(ib) };
    let p = match T::query_port(dev, port) {
        Ok(p) => p,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `attr` is valid for writes; ib_core zeroed it before the call.
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
    // SAFETY: registered device, valid out pointers; reads the netdev's ethtool link speed.
    if unsafe { bindings::ib_get_eth_speed(ib, port, &mut speed, &mut width) } == 0 {
        out.active_speed = speed;
        out.active_width = width;
    }
    0
}

/// # Safety
///
/// Called by ib_core during registration of a `Device<T>`, with a valid `imm`.
unsafe extern "C" fn get_port_immutable<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    imm: *mut bindings::ib_port_immutable,
) -> kernel::ffi::c_int {
    // SAFETY: callbacks run while the data is initialised (function safety requirement).
    let dev = unsafe { Device::<T>::from_ib(ib) };
    let p = T::port_immutable(dev, port);
    // SAFETY: `imm` is valid for writes (function safety requirement).
    unsafe {
        (*imm).pkey_tbl_len = p.pkey_tbl_len;
        (*imm).gid_tbl_len = p.gid_tbl_len;
        (*imm).core_cap_flags = p.core_cap_flags;
        (*imm).max_mad_size = p.max_mad_size;
    }
    0
}

/// # Safety
///
/// Called by ib_core on a live device.
unsafe extern "C" fn get_link_layer(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> bindings::rdma_link_layer {
    bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
///
/// Called by ib_core with a valid `pkey`.
unsafe extern "C" fn query_pkey(
    _ib: *mut bindings::ib_device,
    _port: u32,
    index: u16,
    pkey: *mut u16,
) -> kernel::ffi::c_int {
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: `pkey` is valid for writes (function safety requirement).
    unsafe { *pkey = 0xffff };
    0
}

/// # Safety
///
/// Called by ib_core on a registered `Device<T>` with a valid `gid`.
unsafe extern "C" fn query_gid<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: kernel::ffi::c_int,
    gid: *mut bindings::ib_gid,
) -> kernel::ffi::c_int {
    // SAFETY: callbacks run while the data is initialised (function safety requirement).
    let dev = unsafe { Device::<T>::from_ib(ib) };
    match T::query_gid(dev, port, index) {
        Ok(raw) => {
            // SAFETY: `gid` is valid for writes (function safety requirement).
            unsafe { (*gid).raw = raw };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by ib_core with a zeroed `UcontextObj<T>` of a registered `Device<T>`.
unsafe extern "C" fn alloc_ucontext<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: `uctx` is valid and its `device` is our registered device.
    let dev = unsafe { Device::<T>::from_ib((*uctx).device) };
    let Some(raw) = NonNull::new(udata) else {
        return EINVAL.to_errno();
    };
    // INVARIANT: ib_core's udata is valid for the call.
    let mut udata = Udata {
        raw,
        _lt: PhantomData,
    };
    errno(T::alloc_ucontext(dev, &mut udata).map(|data| {
        // SAFETY: `uctx` is the start of a `UcontextObj<T>` (size from the ops table).
        unsafe { (*uctx.cast::<UcontextObj<T>>()).data.write(data) };
    }))
}

/// # Safety
///
/// Called by ib_core once per successfully allocated `UcontextObj<T>`.
unsafe extern "C" fn dealloc_ucontext<T: Driver>(uctx: *mut bindings::ib_ucontext) {
    // SAFETY: `alloc_ucontext` succeeded for this object, so `data` is initialised, and this
    // is its only release.
    unsafe { (*uctx.cast::<UcontextObj<T>>()).data.assume_init_drop() };
}

/// # Safety
///
/// Called by ib_core with a zeroed `PdObj<T>` of a registered `Device<T>`.
unsafe extern "C" fn alloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: `pd` is valid and its `device` is our registered device.
    let dev = unsafe { Device::<T>::from_ib((*pd).device) };
    // INVARIANT: a non-NULL udata from ib_core is valid for the call.
    let mut udata = NonNull::new(udata).map(|raw| Udata {
        raw,
        _lt: PhantomData,
    });
    errno(T::alloc_pd(dev, udata.as_mut()).map(|data| {
        // SAFETY: `pd` is the start of a `PdObj<T>` (size from the ops table).
        unsafe { (*pd.cast::<PdObj<T>>()).data.write(data) };
    }))
}

/// # Safety
///
/// Called by ib_core once per successfully allocated `PdObj<T>`.
unsafe extern "C" fn dealloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: `alloc_pd` succeeded for this object, so `data` is initialised; released once.
    unsafe { (*pd.cast::<PdObj<T>>()).data.assume_init_drop() };
    0
}

// ---- sysfs: hca_type -------------------------------------------------------------------------

/// A `static` holding C data with raw pointers, which sysfs only reads.
#[repr(transparent)]
struct SyncStatic<T>(T);
// SAFETY: the wrapped attribute structures are immutable after build time; sysfs reads them.
unsafe impl<T> Sync for SyncStatic<T> {}

/// # Safety
///
/// Called by sysfs for the `hca_type` attribute of a registered `Device<_>`, with a page-sized
/// `buf`.
unsafe extern "C" fn hca_type_show(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *mut kernel::ffi::c_char,
) -> isize {
    // SAFETY: `dev` is the `struct device` inside an `ib_device`.
    let ib = unsafe { bindings::oxrdma_device_to_ibdev(dev) };
    // `hca_type` sits right after the `ib_device` in every `Device<T>` (`#[repr(C)]`, and the
    // field before it is the same type for all `T`), so it can be read without knowing `T`.
    #[repr(C)]
    struct Head {
        ib: bindings::ib_device,
        hca_type: &'static CStr,
    }
    // SAFETY: the attribute exists only while the device is registered, when `hca_type` is
    // initialised (invariant of `Device<T>`).
    let s = unsafe { (*ib.cast::<Head>()).hca_type };
    // SAFETY: `buf` is a sysfs page; the format string and argument are NUL-terminated.
    unsafe {
        bindings::sysfs_emit(buf, kernel::c_str!("%s\n").as_char_ptr(), s.as_char_ptr()) as isize
    }
}

// `struct attribute` has more fields (lockdep keys) only in some configurations.
#[allow(clippy::needless_update)]
static HCA_TYPE_ATTR: SyncStatic<bindings::device_attribute> =
    SyncStatic(bindings::device_attribute {
        attr: bindings::attribute {
            name: kernel::c_str!("hca_type").as_char_ptr(),
            mode: 0o444,
            // SAFETY: zero is valid for the lockdep fields a static attribute may have.
            ..unsafe { core::mem::zeroed() }
        },
        show: Some(hca_type_show),
        store: None,
    });

static HCA_TYPE_ATTRS: SyncStatic<[*mut bindings::attribute; 2]> = SyncStatic([
    (&raw const HCA_TYPE_ATTR.0.attr).cast_mut(),
    core::ptr::null_mut(),
]);

static HCA_TYPE_GROUP: SyncStatic<bindings::attribute_group> =
    SyncStatic(bindings::attribute_group {
        attrs: (&raw const HCA_TYPE_ATTRS.0).cast_mut().cast(),
        // SAFETY: zero is valid for the remaining fields (no name, callbacks or binary attrs).
        ..unsafe { core::mem::zeroed() }
    });
