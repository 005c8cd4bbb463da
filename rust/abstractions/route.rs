// SPDX-License-Identifier: GPL-2.0
//! IPv4/IPv6 output routes for RoCE v2 packets.
//!
//! A [`Route`] is the result of a route lookup in the network namespace of a netdev, with the
//! output interface forced to that netdev (`flowi oif`), so devices in any namespace work.
//! It holds a reference on the route's `dst_entry`; [`super::skb::Skb::xmit`] sends packets
//! along it. Lookups and drops may happen in process or softirq context.

use super::bindings;
use super::error::code;
use super::net::NetDevice;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    types::{ARef, AlwaysRefCounted, Opaque},
};

/// A routing cache entry (`struct dst_entry`), reference counted.
///
/// # Invariants
///
/// A `&Dst` is only created for an entry on which a reference is held for the borrow.
#[repr(transparent)]
pub struct Dst(Opaque<bindings::dst_entry>);

// SAFETY: dst references may be used and released on any CPU (atomic reference count, RCU
// freeing).
unsafe impl Send for Dst {}
// SAFETY: `&self` methods only read fields that do not change during the entry's life.
unsafe impl Sync for Dst {}

// SAFETY: `dst_hold`/`dst_release` keep the entry alive while the count is non-zero.
unsafe impl AlwaysRefCounted for Dst {
    fn inc_ref(&self) {
        // SAFETY: referenced while `&self` lives (type invariant).
        unsafe { bindings::oxrdma_dst_hold(self.0.get()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller owns a reference (trait contract); any context may release.
        unsafe { bindings::dst_release(obj.as_ptr().cast()) };
    }
}

/// A looked-up output route: the routing entry and the source address the lookup chose
/// (4 bytes used for IPv4).
#[derive(Clone)]
pub struct Route {
    dst: ARef<Dst>,
    ipv6: bool,
    saddr: [u8; 16],
}

/// Adopts the referenced dst of a lookup (an `ERR_PTR` on failure).
///
/// # Safety
///
/// `dst` is an error pointer, NULL, or a dst whose reference the caller owns.
unsafe fn adopt(dst: *mut bindings::dst_entry) -> Result<ARef<Dst>> {
    let dst = kernel::error::from_err_ptr(dst)?;
    let dst = NonNull::new(dst).ok_or_else(code::ehostunreach)?;
    // SAFETY: the reference moves into the `ARef` (function contract).
    Ok(unsafe { ARef::from_raw(dst.cast()) })
}

impl Route {
    /// Looks up an IPv4 route from `saddr` to `daddr` (network order bytes) out of `dev`, in
    /// `dev`'s namespace. `saddr` may be `0.0.0.0` (then [`Route::saddr_v4`] tells the chosen
    /// one). `tos` is the IPv4 TOS byte (DSCP bits are used for the lookup).
    pub fn v4(dev: &NetDevice, saddr: [u8; 4], daddr: [u8; 4], tos: u8) -> Result<Route> {
        let mut out = 0u32;
        // The helper returns a dst with a reference or an ERR_PTR.
        // SAFETY: `dev` is valid for the call (type invariant of `NetDevice`), which keeps its
        // namespace alive; `out` is writable.
        let dst = unsafe {
            bindings::oxrdma_route_v4(
                dev.as_raw(),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                tos,
                &mut out,
            )
        };
        // SAFETY: the helper returns an error pointer or a referenced dst.
        let dst = unsafe { adopt(dst)? };
        let mut s = [0u8; 16];
        s[..4].copy_from_slice(&out.to_ne_bytes());
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
        dev: &NetDevice,
        saddr: [u8; 16],
        daddr: [u8; 16],
        tclass: u8,
        flowlabel: u32,
    ) -> Result<Route> {
        let mut out = [0u8; 16];
        // SAFETY: `dev` is valid for the call (`NetDevice` invariant), keeping its namespace
        // alive; the address buffers are the 16 bytes each the helper reads and writes.
        let dst = unsafe {
            bindings::oxrdma_route_v6(
                dev.as_raw(),
                saddr.as_ptr(),
                daddr.as_ptr(),
                tclass,
                flowlabel,
                out.as_mut_ptr(),
            )
        };
        // SAFETY: the helper returns an error pointer or a referenced dst.
        let dst = unsafe { adopt(dst)? };
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
        // SAFETY: the dst is referenced (type invariant of `Dst`).
        unsafe { bindings::oxrdma_dst_mtu(self.dst.0.get()) }
    }

    /// Whether packets leave through `dev` (for a destination local to the namespace, the
    /// output device is the loopback device).
    pub fn leaves_through(&self, dev: &NetDevice) -> bool {
        // SAFETY: the dst is referenced (type invariant of `Dst`); `dst->dev` is set for its
        // lifetime; only the pointers are compared.
        unsafe { bindings::oxrdma_dst_dev(self.dst.0.get()) == dev.as_raw() }
    }

    pub(crate) fn as_dst(&self) -> *mut bindings::dst_entry {
        self.dst.0.get()
    }
}
