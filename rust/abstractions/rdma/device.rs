// SPDX-License-Identifier: GPL-2.0
//! RDMA devices: allocation, registration and lifetime.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_device`, `_ib_alloc_device`, `ib_register_device`,
//! `ib_unregister_device*`, `ib_device_try_get`).
//!
//! # Lifetime
//!
//! A device is a [`Device<T>`]: the `struct ib_device` followed by the driver's data `T`, in one
//! allocation made by ib_core (`_ib_alloc_device`), as C drivers embed it.
//! [`DeviceHandle::register`] builds
//! and registers it. From then on ib_core owns it: whoever unregisters it (`rdma link delete`,
//! [`DeviceHandle::unregister`], a queued unregistration) ends in the `dealloc_driver` callback,
//! which calls [`Driver::unregistered`] and drops `T`; ib_core then frees the memory when the
//! last `struct device` reference goes.
//!
//! The two types follow that split:
//! * `&Device<T>` gives the driver's data (it dereferences to `T`). Callbacks receive one: ib_core
//!   calls them only while the data lives. Elsewhere it is reached through
//!   [`DeviceHandle::registered`], which holds a registration reference meanwhile.
//! * [`DeviceHandle<T>`] is the reference-counted C object (`ARef<DeviceHandle<T>>` holds a
//!   `struct device` reference). It keeps the memory, not the data, alive.

use super::super::bindings;
use super::super::net::NetDevice;
use super::attrs::NodeType;
use super::driver::Driver;
use core::marker::PhantomData;
use core::ptr::{addr_of_mut, NonNull};
use kernel::{
    str::CStr,
    types::{ARef, AlwaysRefCounted, Opaque},
};

/// The `hca_type` sysfs attribute of a device, inside its [`Device<T>`] allocation; the
/// adapter sets it up when the driver has one.
#[repr(C)]
pub(super) struct SysfsAttrs {
    pub(super) attr: bindings::device_attribute,
    pub(super) list: [*mut bindings::attribute; 2],
    pub(super) group: bindings::attribute_group,
}

/// A registered RDMA device with its driver's data.
///
/// # Invariants
///
/// Lives in an allocation from `_ib_alloc_device` of `size_of::<Device<T>>()` bytes; `ib` is at
/// offset 0 (ib_core's `container_of` contract); `data` is initialised from
/// [`DeviceHandle::register`] until
/// the `dealloc_driver` callback. A `&Device<T>` exists only while `data` is initialised.
/// `sysfs` is the adapter's (the device's own attributes, if the driver has any); so is `qps`
/// (the iw_cm's index of QPs by number), initialised right after the allocation and
/// destroyed by `dealloc_driver`.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    sysfs: Opaque<SysfsAttrs>,
    qps: Opaque<bindings::oxrdma_qp_index>,
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
    /// `ib` is the `ib_device` of a `Device<T>` whose data is initialised and stays so for `'a`
    /// (a callback on a registered device, or a registration reference held).
    pub(super) unsafe fn from_ib<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is at offset 0 of a `Device<T>` (type invariant, caller guarantee).
        unsafe { &*ib.cast::<Self>() }
    }

    pub(super) fn as_ib(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Where the driver's data goes in a new allocation.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` allocation.
    pub(super) unsafe fn data_slot(ib: *mut bindings::ib_device) -> *mut T {
        // SAFETY: a field of the allocation (function contract).
        unsafe { addr_of_mut!((*ib.cast::<Self>()).data) }
    }

    /// Drops the driver's data.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` whose data is initialised, not used any more
    /// and dropped nowhere else (ib_core's `dealloc_driver`).
    pub(super) unsafe fn drop_data(ib: *mut bindings::ib_device) {
        // SAFETY: function contract.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*ib.cast::<Self>()).data)) };
    }

    /// The adapter's sysfs attributes in the allocation.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` allocation.
    pub(super) unsafe fn sysfs(ib: *mut bindings::ib_device) -> *mut SysfsAttrs {
        // SAFETY: a field of the allocation (function contract).
        Opaque::raw_get(unsafe { core::ptr::addr_of!((*ib.cast::<Self>()).sysfs) })
    }

    /// The adapter's index of QPs by number in the allocation.
    ///
    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` allocation.
    pub(super) unsafe fn qp_index(ib: *mut bindings::ib_device) -> *mut bindings::oxrdma_qp_index {
        // SAFETY: a field of the allocation (function contract).
        Opaque::raw_get(unsafe { core::ptr::addr_of!((*ib.cast::<Self>()).qps) })
    }

    /// The reference-counted device (a new reference).
    pub fn handle(&self) -> ARef<DeviceHandle<T>> {
        // SAFETY: `DeviceHandle<T>` is a transparent wrapper of the same `ib_device`.
        let h = unsafe { &*self.as_ib().cast::<DeviceHandle<T>>() };
        ARef::from(h)
    }

    /// The device's name (`oxr0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array inside the live device.
        unsafe { CStr::from_char_ptr(addr_of_mut!((*self.as_ib()).name).cast()) }
    }

    /// The netdev of port `port`, referenced; `None` once it is gone.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: the device is live; `ib_device_get_netdev` returns a held reference or NULL.
        let nd = unsafe { bindings::ib_device_get_netdev(self.as_ib(), port) };
        // SAFETY: a non-NULL result carries a reference, which moves into the `ARef`.
        NonNull::new(nd).map(|p| unsafe { NetDevice::from_held(p) })
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

/// An RDMA device as a reference-counted object: `ARef<DeviceHandle<T>>` keeps its memory
/// (not its driver data) alive, and can unregister it.
///
/// # Invariants
///
/// A `DeviceHandle<T>` is only reached through a reference to the `ib_device` of a
/// [`Device<T>`] allocation on which a `struct device` reference is held.
#[repr(transparent)]
pub struct DeviceHandle<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    _t: PhantomData<T>,
}

// SAFETY: the C object may be referenced and released from any thread; access to the driver
// data goes through `registered`, and `T: Send + Sync`.
unsafe impl<T: Driver> Send for DeviceHandle<T> {}
// SAFETY: the shared methods only call ib_core's thread-safe entry points, and reach the
// driver data (`T: Sync`) only through a registration guard.
unsafe impl<T: Driver> Sync for DeviceHandle<T> {}

// SAFETY: `get_device`/`put_device` on the embedded `struct device` keep the allocation alive
// while the count is non-zero (ib_core frees it in the device's release function).
unsafe impl<T: Driver> AlwaysRefCounted for DeviceHandle<T> {
    fn inc_ref(&self) {
        // SAFETY: the allocation is live while `&self` is (type invariant).
        unsafe { bindings::oxrdma_ib_device_get(self.ib.get()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller owns a reference (trait contract).
        unsafe { bindings::oxrdma_ib_device_put(obj.as_ptr().cast()) };
    }
}

impl<T: Driver> PartialEq for DeviceHandle<T> {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

impl<T: Driver> Eq for DeviceHandle<T> {}

impl<T: Driver> DeviceHandle<T> {
    /// Whether this is `dev`.
    pub fn is(&self, dev: &Device<T>) -> bool {
        core::ptr::eq(self.ib.get(), dev.as_ib())
    }

    /// The device with its data, if it is still registered; the registration reference held
    /// by the guard keeps unregistration from completing meanwhile.
    pub fn registered(&self) -> Option<Registered<'_, T>> {
        // SAFETY: the allocation is live (type invariant); `ib_device_try_get` only touches
        // the registration refcount.
        if !unsafe { bindings::oxrdma_ib_device_try_get(self.ib.get()) } {
            return None;
        }
        // INVARIANT: a registration reference was just taken.
        Some(Registered {
            // SAFETY: the reference keeps `dealloc_driver` from running, so the data stays
            // initialised until the guard drops it.
            dev: unsafe { Device::from_ib(self.ib.get()) },
        })
    }

    /// Unregisters the device and waits until it is done; nothing if already unregistered.
    pub fn unregister(&self) {
        // SAFETY: the allocation is live (type invariant); `ib_unregister_device` serialises
        // with other unregistrations and returns at once for an unregistered device.
        unsafe { bindings::ib_unregister_device(self.ib.get()) };
    }

    /// Schedules unregistration (for contexts that must not wait, e.g. under the RTNL).
    pub fn unregister_queued(&self) {
        if let Some(r) = self.registered() {
            // SAFETY: the device is registered (the guard holds a registration reference),
            // as `ib_unregister_device_queued` requires.
            unsafe { bindings::ib_unregister_device_queued(r.dev.as_ib()) }
        }
    }
}

/// A registered device, held registered (`ib_device_try_get`) while this guard lives.
///
/// # Invariants
///
/// The guard owns one registration reference on `dev`.
pub struct Registered<'a, T: Driver> {
    dev: &'a Device<T>,
}

impl<T: Driver> core::ops::Deref for Registered<'_, T> {
    type Target = Device<T>;
    fn deref(&self) -> &Device<T> {
        self.dev
    }
}

impl<T: Driver> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        // SAFETY: releases the reference this guard owns (type invariant).
        unsafe { bindings::ib_device_put(self.dev.as_ib()) };
    }
}

/// Parameters of a new device.
pub struct NewDevice<'a> {
    /// The name (`rdma link add NAME ...`).
    pub name: &'a CStr,
    /// Its node type.
    pub node_type: NodeType,
    /// The netdev port 1 runs on (RoCE, iWARP).
    pub netdev: &'a NetDevice,
    /// Node GUID, in network byte order.
    pub node_guid: [u8; 8],
}
