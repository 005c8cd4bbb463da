// SPDX-License-Identifier: GPL-2.0
//! Network devices, as far as oxrdma needs them.

use super::bindings;
use kernel::str::CStr;

/// A network device borrowed for the duration of a callback.
///
/// # Invariants
///
/// `ptr` points to a valid, registered `struct net_device` for the lifetime `'a`: the caller
/// that created the reference (ib_core, a notifier) holds the device for at least that long.
pub struct NetDeviceRef<'a> {
    ptr: *mut bindings::net_device,
    _lt: core::marker::PhantomData<&'a bindings::net_device>,
}

impl NetDeviceRef<'_> {
    /// Wraps a raw netdev pointer handed to a callback.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and the device must stay registered for the returned lifetime.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::net_device) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self {
            ptr,
            _lt: core::marker::PhantomData,
        }
    }

    /// The interface name (`eth0`, `veth0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: `self.ptr` is a valid netdev (type invariant); `netdev_name` returns a
        // NUL-terminated string inside it that lives as long as the device.
        unsafe { CStr::from_char_ptr(bindings::oxrdma_netdev_name(self.ptr)) }
    }
}
