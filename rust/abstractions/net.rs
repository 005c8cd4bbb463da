// SPDX-License-Identifier: GPL-2.0
//! Network devices and netdev events, as far as oxrdma needs them.

use super::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::{prelude::*, str::CStr, types::Opaque};

/// A network device borrowed for the duration of a callback.
///
/// # Invariants
///
/// `ptr` points to a valid `struct net_device` for the lifetime `'a`: whoever created the
/// reference (ib_core, a notifier, a [`NetDevice`] reference) holds the device that long.
pub struct NetDeviceRef<'a> {
    ptr: NonNull<bindings::net_device>,
    _lt: PhantomData<&'a bindings::net_device>,
}

impl NetDeviceRef<'_> {
    /// Wraps a raw netdev pointer handed to a callback.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and the device must not be freed during the returned lifetime.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::net_device>) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self {
            ptr,
            _lt: PhantomData,
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut bindings::net_device {
        self.ptr.as_ptr()
    }

    /// The space to reserve before the network header for this device's link-layer header
    /// (`LL_RESERVED_SPACE`).
    pub fn ll_reserved_space(&self) -> usize {
        // SAFETY: `self.ptr` is valid (type invariant); the helper reads two lengths.
        unsafe { bindings::oxrdma_ll_reserved_space(self.ptr.as_ptr()) as usize }
    }

    /// The interface name (`eth0`, `veth0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: `self.ptr` is valid (type invariant); `netdev_name` returns a NUL-terminated
        // string inside the device, valid as long as the device.
        unsafe { CStr::from_char_ptr(bindings::oxrdma_netdev_name(self.ptr.as_ptr())) }
    }

    /// Running and with carrier: traffic can flow.
    pub fn is_up(&self) -> bool {
        // SAFETY: `self.ptr` is valid (type invariant); the helper only reads state bits.
        unsafe { bindings::oxrdma_netdev_up(self.ptr.as_ptr()) }
    }

    /// Administratively up (`ip link set X up`), whatever the carrier.
    pub fn is_running(&self) -> bool {
        // SAFETY: as for `is_up`.
        unsafe { bindings::oxrdma_netdev_running(self.ptr.as_ptr()) }
    }

    /// The link type (`ARPHRD_*`: 1 for Ethernet, 772 for loopback).
    pub fn link_type(&self) -> u16 {
        // SAFETY: `self.ptr` is valid (type invariant); the helper reads `type`.
        unsafe { bindings::oxrdma_netdev_type(self.ptr.as_ptr()) }
    }

    /// The device's MTU in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: `self.ptr` is valid (type invariant); the helper reads `mtu` once.
        unsafe { bindings::oxrdma_netdev_mtu(self.ptr.as_ptr()) }
    }

    /// The 6-byte Ethernet address.
    pub fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: `self.ptr` is valid (type invariant); an Ethernet device's `dev_addr` is
        // at least `ETH_ALEN` (6) bytes long.
        let addr = unsafe { bindings::oxrdma_netdev_addr(self.ptr.as_ptr()) };
        if !addr.is_null() {
            // SAFETY: `addr` points to at least 6 readable bytes (see above).
            mac.copy_from_slice(unsafe { core::slice::from_raw_parts(addr, 6) });
        }
        mac
    }

    /// An identity for comparisons (never dereferenced).
    pub fn id(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// An identity of the device's network namespace, for comparisons (never dereferenced).
    pub fn net_id(&self) -> usize {
        // SAFETY: `self.ptr` is valid (type invariant); `dev_net` reads one field.
        unsafe { bindings::oxrdma_dev_net(self.ptr.as_ptr()) as usize }
    }

    /// Takes a reference that keeps the device allocated.
    pub fn get(&self) -> NetDevice {
        // SAFETY: `self.ptr` is valid (type invariant); `dev_hold` takes a reference.
        unsafe { bindings::oxrdma_dev_hold(self.ptr.as_ptr()) };
        // INVARIANT: the reference taken above is released in `NetDevice::drop`.
        NetDevice { ptr: self.ptr }
    }
}

/// A counted reference to a network device (`dev_hold`/`dev_put`).
///
/// # Invariants
///
/// `ptr` is valid and this value owns one reference on it.
pub struct NetDevice {
    ptr: NonNull<bindings::net_device>,
}

// SAFETY: netdev references may be taken and dropped on any thread.
unsafe impl Send for NetDevice {}
// SAFETY: all methods only read the device through thread-safe accessors.
unsafe impl Sync for NetDevice {}

impl NetDevice {
    /// Adopts a reference the caller owns (e.g. returned by `ib_device_get_netdev`).
    ///
    /// # Safety
    ///
    /// `ptr` must be valid and the caller must own one reference on it, which moves here.
    pub(crate) unsafe fn from_owned(ptr: NonNull<bindings::net_device>) -> Self {
        // INVARIANT: the caller's reference moves into this value.
        Self { ptr }
    }

    /// Borrows the device.
    pub fn borrow(&self) -> NetDeviceRef<'_> {
        // SAFETY: the reference this value owns keeps the device valid while borrowed.
        unsafe { NetDeviceRef::from_raw(self.ptr) }
    }
}

impl Clone for NetDevice {
    fn clone(&self) -> Self {
        self.borrow().get()
    }
}

impl NetDevice {
    /// Looks a device up by interface name in namespace `ns` (`dev_get_by_name`); `ENODEV` if
    /// there is none. Process or softirq context.
    pub fn get_by_name(ns: &NetNs, name: &CStr) -> Result<NetDevice> {
        // SAFETY: `ns` is a live namespace for the borrow (type invariant of `NetNs`); `name`
        // is NUL-terminated. `dev_get_by_name` returns a held device or NULL.
        let ptr = unsafe { bindings::dev_get_by_name(ns.as_ptr(), name.as_char_ptr()) };
        let ptr = NonNull::new(ptr).ok_or(ENODEV)?;
        // SAFETY: `dev_get_by_name` took the reference that moves into the value.
        Ok(unsafe { NetDevice::from_owned(ptr) })
    }
}

/// A network namespace (`struct net`).
///
/// # Invariants
///
/// A `&NetNs` is only created for a namespace that stays alive (not dismantled) for the
/// borrow: so far only the initial namespace, which is never dismantled.
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

    /// An identity for comparisons (never dereferenced); equals
    /// [`super::udp_tunnel::TunnelRef::net_id`] for tunnels of this namespace.
    pub fn id(&self) -> usize {
        self.as_ptr() as usize
    }
}

impl Drop for NetDevice {
    fn drop(&mut self) {
        // SAFETY: this value owns one reference (type invariant).
        unsafe { bindings::oxrdma_dev_put(self.ptr.as_ptr()) };
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
    fn event(event: NetdevEvent, ndev: &NetDeviceRef<'_>);
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
    let ndev = unsafe { NetDeviceRef::from_raw(ndev) };
    let ev = match event as u32 {
        bindings::netdev_cmd_NETDEV_UP => NetdevEvent::Up,
        bindings::netdev_cmd_NETDEV_DOWN => NetdevEvent::Down,
        bindings::netdev_cmd_NETDEV_CHANGE => NetdevEvent::Change,
        bindings::netdev_cmd_NETDEV_CHANGEMTU => NetdevEvent::ChangeMtu,
        bindings::netdev_cmd_NETDEV_CHANGEADDR => NetdevEvent::ChangeAddr,
        bindings::netdev_cmd_NETDEV_UNREGISTER => NetdevEvent::Unregister,
        _ => NetdevEvent::Other,
    };
    T::event(ev, &ndev);
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
