// SPDX-License-Identifier: GPL-2.0
//! IPv4/IPv6 output routes for RoCE v2 packets.
//!
//! A [`Route`] is the result of a route lookup in the network namespace of a netdev, with the
//! output interface forced to that netdev (`flowi oif`), so devices in any namespace work.
//! It holds a reference on the route's `dst_entry`; [`super::skb::Skb::xmit`] sends packets
//! along it. Lookups and drops may happen in process or softirq context.

use super::bindings;
use super::error::code;
use super::net::NetDeviceRef;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A looked-up output route (a counted `dst_entry` reference).
///
/// # Invariants
///
/// `dst` is valid and this value owns one reference on it; `saddr` holds the source address
/// the lookup chose (4 bytes used for IPv4).
pub struct Route {
    dst: NonNull<bindings::dst_entry>,
    ipv6: bool,
    saddr: [u8; 16],
}

// SAFETY: dst references may be used and released on any CPU (atomic reference count, RCU
// freeing).
unsafe impl Send for Route {}
// SAFETY: `&self` methods only read immutable fields of the dst.
unsafe impl Sync for Route {}

impl Route {
    /// Looks up an IPv4 route from `saddr` to `daddr` (network order bytes) out of `dev`, in
    /// `dev`'s namespace. `saddr` may be `0.0.0.0` (then [`Route::saddr_v4`] tells the chosen
    /// one). `tos` is the IPv4 TOS byte (DSCP bits are used for the lookup).
    pub fn v4(dev: &NetDeviceRef<'_>, saddr: [u8; 4], daddr: [u8; 4], tos: u8) -> Result<Route> {
        let mut out = 0u32;
        // The helper returns a dst with a reference or an ERR_PTR.
        // SAFETY: `dev` is valid for the call (type invariant of `NetDeviceRef`), which keeps
        // its namespace alive; `out` is writable.
        let dst = unsafe {
            bindings::oxrdma_route_v4(
                dev.as_ptr(),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                tos,
                &mut out,
            )
        };
        let dst = kernel::error::from_err_ptr(dst)?;
        let dst = NonNull::new(dst).ok_or_else(code::ehostunreach)?;
        let mut s = [0u8; 16];
        s[..4].copy_from_slice(&out.to_ne_bytes());
        // INVARIANT: the lookup returned a referenced dst.
        Ok(Route {
            dst,
            ipv6: false,
            saddr: s,
        })
    }

    /// Looks up an IPv6 route from `saddr` to `daddr` out of `dev`, in `dev`'s namespace.
    /// `saddr` may be `::` (then [`Route::saddr_v6`] tells the chosen one). `tclass` and the
    /// 20-bit `flowlabel` are part of the flow key. `EAFNOSUPPORT` without IPv6.
    pub fn v6(
        dev: &NetDeviceRef<'_>,
        saddr: [u8; 16],
        daddr: [u8; 16],
        tclass: u8,
        flowlabel: u32,
    ) -> Result<Route> {
        let mut out = [0u8; 16];
        // SAFETY: as in `v4`; the address buffers are 16 bytes each, as the helper reads and
        // writes.
        let dst = unsafe {
            bindings::oxrdma_route_v6(
                dev.as_ptr(),
                saddr.as_ptr(),
                daddr.as_ptr(),
                tclass,
                flowlabel,
                out.as_mut_ptr(),
            )
        };
        let dst = kernel::error::from_err_ptr(dst)?;
        let dst = NonNull::new(dst).ok_or_else(code::ehostunreach)?;
        // INVARIANT: the lookup returned a referenced dst.
        Ok(Route {
            dst,
            ipv6: true,
            saddr: out,
        })
    }

    /// Whether this is an IPv6 route.
    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// The source address the lookup chose (IPv4 routes).
    pub fn saddr_v4(&self) -> [u8; 4] {
        [self.saddr[0], self.saddr[1], self.saddr[2], self.saddr[3]]
    }

    /// The source address the lookup chose (IPv6 routes).
    pub fn saddr_v6(&self) -> [u8; 16] {
        self.saddr
    }

    /// The path MTU in bytes (`dst_mtu`): the largest IP packet this route carries.
    pub fn mtu(&self) -> u32 {
        // SAFETY: `self.dst` is valid (type invariant).
        unsafe { bindings::oxrdma_dst_mtu(self.dst.as_ptr()) }
    }

    /// An identity of the output device (equal to its [`NetDeviceRef::id`]): `dev` itself
    /// or, for a destination local to the namespace, the loopback device.
    pub fn dev_id(&self) -> usize {
        // SAFETY: `self.dst` is valid (type invariant); `dst->dev` is set for its lifetime.
        unsafe { bindings::oxrdma_dst_dev(self.dst.as_ptr()) as usize }
    }

    pub(crate) fn as_dst(&self) -> *mut bindings::dst_entry {
        self.dst.as_ptr()
    }
}

impl Clone for Route {
    fn clone(&self) -> Self {
        // SAFETY: `self.dst` is valid and referenced (type invariant); `dst_hold` takes one
        // more reference, owned by the clone.
        unsafe { bindings::oxrdma_dst_hold(self.dst.as_ptr()) };
        // INVARIANT: the clone owns the reference taken above.
        Route {
            dst: self.dst,
            ipv6: self.ipv6,
            saddr: self.saddr,
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: this value owns one reference (type invariant); `dst_release` may be called
        // in any context.
        unsafe { bindings::dst_release(self.dst.as_ptr()) };
    }
}
