// SPDX-License-Identifier: GPL-2.0
//! `rdma link add NAME type TYPE netdev DEV`: link types registered with ib_core's netlink.
//!
//! C: `include/rdma/rdma_netlink.h` (`rdma_link_register`, `struct rdma_link_ops`).

use super::super::{bindings, net::NetDevice};
use core::{marker::PhantomData, pin::Pin};
use kernel::{error::code, prelude::*, str::CStr, types::Opaque};

/// A link type that `rdma link add ... type <TYPE>` can create.
pub trait LinkType {
    /// The type name given to `rdma link add` (e.g. `c"oxroce"`); also the module alias
    /// `rdma-link-<TYPE>` the kernel uses to load the driver on demand.
    const TYPE: &'static CStr;

    /// Creates an RDMA device named `ibdev_name` on top of `ndev`.
    ///
    /// Called from ib_core's netlink handler with the RTNL not held.
    fn newlink(ibdev_name: &CStr, ndev: &NetDevice) -> Result;
}

/// A registered link type; unregistered on drop.
///
/// # Invariants
///
/// `ops` was passed to `rdma_link_register` and stays pinned at a fixed address until `drop`
/// has called `rdma_link_unregister`, so ib_core's list never sees a dangling entry.
pub struct LinkRegistration<T: LinkType> {
    ops: Pin<KBox<Opaque<bindings::rdma_link_ops>>>,
    _t: PhantomData<T>,
}

// SAFETY: the registration only holds a pinned C structure that ib_core accesses under its own
// lock; dropping it (unregistering) from any thread is allowed.
unsafe impl<T: LinkType> Send for LinkRegistration<T> {}
// SAFETY: no method takes `&self` to reach the C structure.
unsafe impl<T: LinkType> Sync for LinkRegistration<T> {}

/// ib_core's `newlink` callback for link type `T`.
///
/// # Safety
///
/// Called by ib_core only: `ibdev_name` is a NUL-terminated string and `ndev` a netdev on which
/// the caller holds a reference, both valid for the duration of the call.
unsafe extern "C" fn newlink_callback<T: LinkType>(
    ibdev_name: *const kernel::ffi::c_char,
    ndev: *mut bindings::net_device,
) -> kernel::ffi::c_int {
    // SAFETY: ib_core passes the NUL-terminated name from the netlink request, valid for the
    // duration of the call.
    let name = unsafe { CStr::from_char_ptr(ibdev_name) };
    let Some(ndev) = core::ptr::NonNull::new(ndev) else {
        return code::EINVAL.to_errno();
    };
    // SAFETY: ib_core holds a reference on `ndev` (`dev_get_by_name`) across the call.
    let ndev = unsafe { NetDevice::from_raw(ndev) };
    match T::newlink(name, ndev) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

impl<T: LinkType> LinkRegistration<T> {
    /// Registers link type `T` with ib_core.
    pub fn register() -> Result<Self> {
        let ops = KBox::pin(
            Opaque::new(bindings::rdma_link_ops {
                list: bindings::list_head::default(),
                type_: T::TYPE.as_char_ptr(),
                newlink: Some(newlink_callback::<T>),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `ops` is a fully initialised `rdma_link_ops` at a pinned address that
        // outlives the registration (type invariant, `Drop` unregisters).
        unsafe { bindings::rdma_link_register(ops.get()) };
        Ok(Self {
            ops,
            _t: PhantomData,
        })
    }
}

impl<T: LinkType> Drop for LinkRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: `self.ops` was registered in `register` (type invariant) and is still pinned.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
