// SPDX-License-Identifier: GPL-2.0
//! Network devices and netdev events, as far as oxrdma needs them.

use super::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    str::CStr,
    types::{ARef, AlwaysRefCounted, Opaque},
};

/// A network device (`struct net_device`).
///
/// `&NetDevice` is a device borrowed for a callback or from a held reference;
/// `ARef<NetDevice>` holds a reference (`dev_hold`) that keeps it allocated. Two devices
/// compare equal when they are the same device.
///
/// # Invariants
///
/// A `&NetDevice` is only created for a device that stays allocated for the borrow: whoever
/// created it (ib_core, a notifier, the network stack during a receive, an `ARef`) holds the
/// device that long.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: netdev references may be taken and dropped on any thread.
unsafe impl Send for NetDevice {}
// SAFETY: all methods only read the device through thread-safe accessors.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold`/`dev_put` keep the device allocated while the count is non-zero.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: the device is allocated while `&self` lives (type invariant).
        unsafe { bindings::oxrdma_dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller owns a reference (trait contract).
        unsafe { bindings::oxrdma_dev_put(obj.as_ptr().cast()) };
    }
}

impl PartialEq for NetDevice {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

impl Eq for NetDevice {}

impl NetDevice {
    /// Borrows a device handed to a callback.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and the device must stay allocated during the returned lifetime.
    pub(crate) unsafe fn from_raw<'a>(ptr: NonNull<bindings::net_device>) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; validity per the caller.
        unsafe { &*ptr.as_ptr().cast::<Self>() }
    }

    /// Adopts a reference the caller owns (e.g. returned by `ib_device_get_netdev`).
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and the caller must own one reference on it, which moves here.
    pub(crate) unsafe fn from_held(ptr: NonNull<bindings::net_device>) -> ARef<Self> {
        // SAFETY: the caller's reference moves into the `ARef`.
        unsafe { ARef::from_raw(ptr.cast()) }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Looks a device up by interface name in namespace `ns` (`dev_get_by_name`); `ENODEV` if
    /// there is none. Process or softirq context.
    pub fn get_by_name(ns: &NetNs, name: &CStr) -> Result<ARef<NetDevice>> {
        // SAFETY: `ns` is a live namespace for the borrow (type invariant of `NetNs`); `name`
        // is NUL-terminated. `dev_get_by_name` returns a held device or NULL.
        let ptr = unsafe { bindings::dev_get_by_name(ns.as_ptr(), name.as_char_ptr()) };
        let ptr = NonNull::new(ptr).ok_or(ENODEV)?;
        // SAFETY: `dev_get_by_name` took the reference that moves into the value.
        Ok(unsafe { NetDevice::from_held(ptr) })
    }

    /// The space to reserve before the network header for this device's link-layer header
    /// (`LL_RESERVED_SPACE`).
    pub fn ll_reserved_space(&self) -> usize {
        // SAFETY: the device is allocated (type invariant); the helper reads two lengths.
        unsafe { bindings::oxrdma_ll_reserved_space(self.as_raw()) as usize }
    }

    /// The interface name (`eth0`, `veth0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: the device is allocated (type invariant); `netdev_name` returns a
        // NUL-terminated string inside the device, valid as long as the device.
        unsafe { CStr::from_char_ptr(bindings::oxrdma_netdev_name(self.as_raw())) }
    }

    /// Running and with carrier: traffic can flow.
    pub fn is_up(&self) -> bool {
        // SAFETY: the device is allocated (type invariant); the helper only reads state bits.
        unsafe { bindings::oxrdma_netdev_up(self.as_raw()) }
    }

    /// Administratively up (`ip link set X up`), whatever the carrier.
    pub fn is_running(&self) -> bool {
        // SAFETY: the device is allocated (type invariant); the helper only reads state bits.
        unsafe { bindings::oxrdma_netdev_running(self.as_raw()) }
    }

    /// The link type (`ARPHRD_*`: 1 for Ethernet, 772 for loopback).
    pub fn link_type(&self) -> u16 {
        // SAFETY: the device is allocated (type invariant); the helper reads `type`.
        unsafe { bindings::oxrdma_netdev_type(self.as_raw()) }
    }

    /// The device's MTU in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: the device is allocated (type invariant); the helper reads `mtu` once.
        unsafe { bindings::oxrdma_netdev_mtu(self.as_raw()) }
    }

    /// The interface index (unique in the device's namespace, fixed for its lifetime).
    pub fn ifindex(&self) -> i32 {
        // SAFETY: the device is allocated (type invariant); `ifindex` is set at registration
        // and never changes while the device exists (a namespace move keeps it if free).
        unsafe { (*self.as_raw()).ifindex }
    }

    /// The 6-byte Ethernet address.
    pub fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: the device is allocated (type invariant); an Ethernet device's `dev_addr` is
        // at least `ETH_ALEN` (6) bytes long.
        let addr = unsafe { bindings::oxrdma_netdev_addr(self.as_raw()) };
        if !addr.is_null() {
            // SAFETY: `addr` is the device's non-NULL `dev_addr`, at least 6 readable bytes long for an
            // Ethernet device and valid as long as the device.
            mac.copy_from_slice(unsafe { core::slice::from_raw_parts(addr, 6) });
        }
        mac
    }

    /// Whether both devices are in the same network namespace now.
    pub fn same_net(&self, other: &NetDevice) -> bool {
        // SAFETY: both devices are allocated (type invariant); `dev_net` reads one field each,
        // and only the two pointers are compared.
        unsafe {
            bindings::oxrdma_dev_net(self.as_raw()) == bindings::oxrdma_dev_net(other.as_raw())
        }
    }

    /// Whether `addr` is one of the device's IPv4 addresses now (any context).
    pub fn has_ipv4(&self, addr: [u8; 4]) -> bool {
        // SAFETY: the device is allocated (type invariant); `addr` is 4 readable bytes; the
        // helper reads the address lists under RCU and only compares device pointers.
        unsafe { bindings::oxrdma_dev_has_addr(self.as_raw(), addr.as_ptr(), false) }
    }

    /// Whether `addr` is one of the device's IPv6 addresses now (any context).
    pub fn has_ipv6(&self, addr: &[u8; 16]) -> bool {
        // SAFETY: the device is allocated (type invariant); `addr` is 16 readable bytes; the
        // helper only reads the device's address list and compares device pointers.
        unsafe { bindings::oxrdma_dev_has_addr(self.as_raw(), addr.as_ptr(), true) }
    }

    /// Makes the device a member of the IP multicast group `group` (an IPv4 address,
    /// network order, or an IPv6 one), as a socket joining it would: the IP layer then
    /// accepts the group's packets on the device, including those the host itself sends out
    /// of it, and the device's link-layer filter passes the group's MAC address; IGMP or MLD
    /// tells the network. Memberships are counted: each join needs one [`NetDevice::leave_group`].
    /// Process context, RTNL not held (IPv4 takes it). `ENODEV` if the device has no IP
    /// configuration of that family.
    pub fn join_group(&self, group: IpGroup) -> Result {
        self.mc_group(group, true)
    }

    /// Gives up one membership of `group` taken by [`NetDevice::join_group`]. Process
    /// context, RTNL not held.
    pub fn leave_group(&self, group: IpGroup) -> Result {
        self.mc_group(group, false)
    }

    fn mc_group(&self, group: IpGroup, join: bool) -> Result {
        let ret = match group {
            // The caller does not hold the RTNL: the helper takes it.
            // SAFETY: the device is allocated (type invariant); the helper reads the device's
            // IPv4 configuration under the RTNL.
            IpGroup::V4(a) => unsafe {
                bindings::oxrdma_ip_mc_group(self.as_raw(), u32::from_ne_bytes(a), join)
            },
            // SAFETY: the device is allocated (type invariant); `a` is 16 readable bytes for
            // the call; the IPv6 code takes its own locks.
            IpGroup::V6(a) => unsafe {
                bindings::oxrdma_ipv6_mc_group(self.as_raw(), a.as_ptr(), join)
            },
        };
        kernel::error::to_result(ret)
    }

    /// Whether the device is in namespace `ns` now.
    pub fn is_in(&self, ns: &NetNs) -> bool {
        // SAFETY: the device is allocated (type invariant); only the pointers are compared.
        unsafe { bindings::oxrdma_dev_net(self.as_raw()) == ns.as_ptr() }
    }
}

/// An IP multicast group: its address, network order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpGroup {
    /// An IPv4 group (224.0.0.0/4).
    V4([u8; 4]),
    /// An IPv6 group (ff00::/8).
    V6([u8; 16]),
}

/// A network namespace (`struct net`).
///
/// # Invariants
///
/// A `&NetNs` is only created for a namespace that stays alive (not dismantled) for the
/// borrow: the initial namespace, which is never dismantled, or one a [`NetRef`] holds.
#[repr(transparent)]
pub struct NetNs(Opaque<bindings::net>);

impl NetNs {
    /// The initial network namespace (`init_net`).
    pub fn init_net() -> &'static NetNs {
        // `NetNs` is a transparent wrapper of `Opaque<struct net>`: any content, C mutates it.
        // SAFETY: `init_net` is a static that lives as long as the kernel and is never
        // dismantled.
        unsafe { &*(&raw mut bindings::init_net).cast::<NetNs>() }
    }

    pub(crate) fn as_ptr(&self) -> *mut bindings::net {
        self.0.get()
    }
}

/// A netdev event, as delivered to a [`NetdevNotifier`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// Administratively up.
    Up,
    /// Administratively down.
    Down,
    /// State change (carrier, operstate).
    Change,
    /// MTU changed.
    ChangeMtu,
    /// Address changed.
    ChangeAddr,
    /// Being unregistered: drop every reference.
    Unregister,
    /// Anything else.
    Other,
}

/// Receives netdev events.
pub trait NetdevHandler {
    /// Called under the RTNL for every netdev event of every namespace.
    fn event(event: NetdevEvent, ndev: &NetDevice);
}

/// A registered netdev notifier; unregistered on drop.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier` at a pinned address until `drop`.
pub struct NetdevNotifier<T: NetdevHandler> {
    nb: Pin<KBox<Opaque<bindings::notifier_block>>>,
    _t: PhantomData<T>,
}

// SAFETY: the notifier block is only touched by the notifier chain under its own lock.
unsafe impl<T: NetdevHandler> Send for NetdevNotifier<T> {}
// SAFETY: no `&self` method touches the block.
unsafe impl<T: NetdevHandler> Sync for NetdevNotifier<T> {}

/// The notifier callback for handler `T`.
///
/// # Safety
///
/// Called by the netdev notifier chain only, with a `netdev_notifier_info` as `ptr`.
unsafe extern "C" fn netdev_event_cb<T: NetdevHandler>(
    _nb: *mut bindings::notifier_block,
    event: kernel::ffi::c_ulong,
    ptr: *mut kernel::ffi::c_void,
) -> kernel::ffi::c_int {
    // SAFETY: the chain passes a `netdev_notifier_info` (function safety requirement).
    let ndev = unsafe { bindings::oxrdma_notifier_info_to_dev(ptr) };
    let Some(ndev) = NonNull::new(ndev) else {
        return bindings::NOTIFY_DONE as i32;
    };
    // SAFETY: the device is valid for the duration of the notification (RTNL held).
    let ndev = unsafe { NetDevice::from_raw(ndev) };
    let ev = match event as u32 {
        bindings::netdev_cmd_NETDEV_UP => NetdevEvent::Up,
        bindings::netdev_cmd_NETDEV_DOWN => NetdevEvent::Down,
        bindings::netdev_cmd_NETDEV_CHANGE => NetdevEvent::Change,
        bindings::netdev_cmd_NETDEV_CHANGEMTU => NetdevEvent::ChangeMtu,
        bindings::netdev_cmd_NETDEV_CHANGEADDR => NetdevEvent::ChangeAddr,
        bindings::netdev_cmd_NETDEV_UNREGISTER => NetdevEvent::Unregister,
        _ => NetdevEvent::Other,
    };
    T::event(ev, ndev);
    bindings::NOTIFY_DONE as i32
}

impl<T: NetdevHandler> NetdevNotifier<T> {
    /// Registers `T` for netdev events (replayed for existing devices as `Up`/`Register`).
    pub fn register() -> Result<Self> {
        let nb = KBox::pin(
            Opaque::new(bindings::notifier_block {
                notifier_call: Some(netdev_event_cb::<T>),
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `nb` is initialised and pinned until `drop` unregisters it.
        kernel::error::to_result(unsafe { bindings::register_netdevice_notifier(nb.get()) })?;
        // INVARIANT: registered above.
        Ok(Self {
            nb,
            _t: PhantomData,
        })
    }
}

impl<T: NetdevHandler> Drop for NetdevNotifier<T> {
    fn drop(&mut self) {
        // SAFETY: `nb` was registered in `register` (type invariant).
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

/// A counted reference on a network namespace (`get_net`/`put_net`): the namespace is not
/// dismantled while it exists.
///
/// # Invariants
///
/// `0` is a namespace this value holds one reference on.
pub struct NetRef(NonNull<bindings::net>);

// SAFETY: namespace references may be taken and dropped on any thread.
unsafe impl Send for NetRef {}
// SAFETY: the value only hands out the pointer.
unsafe impl Sync for NetRef {}

impl NetRef {
    /// References `dev`'s current namespace, unless it is being dismantled. Any context but
    /// hard interrupt; no lock needed (so it may be called under locks that the RTNL nests
    /// around, as rdma_cm's listen does).
    pub fn of(dev: &NetDevice) -> Option<NetRef> {
        // A namespace whose count dropped to zero is not referenced (`maybe_get_net`).
        // SAFETY: the device is allocated (type invariant); the helper reads its namespace
        // under RCU, which keeps that `struct net` allocated for the read.
        let net = unsafe { bindings::oxrdma_dev_get_net(dev.as_raw()) };
        // INVARIANT: a non-NULL result carries a reference.
        NonNull::new(net).map(NetRef)
    }

    /// The namespace.
    pub fn ns(&self) -> &NetNs {
        // SAFETY: `NetNs` is a transparent wrapper; the reference held keeps the namespace
        // alive for the borrow of `self` (type invariant).
        unsafe { &*self.0.as_ptr().cast::<NetNs>() }
    }

    pub(crate) fn as_ptr(&self) -> *mut bindings::net {
        self.0.as_ptr()
    }
}

impl Drop for NetRef {
    fn drop(&mut self) {
        // SAFETY: this value holds one reference (type invariant).
        unsafe { bindings::oxrdma_put_net(self.0.as_ptr()) };
    }
}
