// SPDX-License-Identifier: GPL-2.0
//! Link-layer protocol handlers (`struct packet_type`, `dev_add_pack`): every frame of one
//! ethertype, from every device of every network namespace, handed to an
//! [`EtherTypeReceiver`] as an [`RxSkb`].
//!
//! # Context
//!
//! [`EtherTypeHandler::register`] and the handler's drop run in process context
//! (`dev_remove_pack` waits for a network grace period, so that no delivery is in flight when
//! the drop returns). [`EtherTypeReceiver::receive`] runs in softirq context and must not
//! sleep.

use super::bindings;
use super::skb::RxSkb;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// Receives the frames of one ethertype.
pub trait EtherTypeReceiver: Send + Sync + 'static {
    /// Called for each frame, in softirq context (must not sleep), possibly on several CPUs at
    /// once, with the packet from the network header (the link-layer header pulled) to the end
    /// of the frame, Ethernet padding included. The packet is the receiver's.
    fn receive(&self, pkt: RxSkb);
}

/// A registered handler: frames of its ethertype reach the receiver until it is dropped.
///
/// # Invariants
///
/// `pt` is registered with `dev_add_pack` from initialisation until drop, with `func` =
/// [`rcv::<T>`], and stays pinned meanwhile: the stack finds this value through it.
#[pin_data(PinnedDrop)]
pub struct EtherTypeHandler<T: EtherTypeReceiver> {
    #[pin]
    pt: Opaque<bindings::packet_type>,
    receiver: Arc<T>,
}

// SAFETY: the handler may be dropped on any CPU: `dev_remove_pack` has no CPU affinity, and
// the receiver is `Send`.
unsafe impl<T: EtherTypeReceiver> Send for EtherTypeHandler<T> {}
// SAFETY: a shared handler is only read: the stack reads `pt` (registered, never changed after
// initialisation) from any CPU, and the receiver is `Sync`.
unsafe impl<T: EtherTypeReceiver> Sync for EtherTypeHandler<T> {}

impl<T: EtherTypeReceiver> EtherTypeHandler<T> {
    /// Registers `receiver` for frames of `ethertype` (host byte order) on every device.
    pub fn register(ethertype: u16, receiver: Arc<T>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            pt <- Opaque::ffi_init(move |pt: *mut bindings::packet_type| {
                // Zeroed: no device (all devices), no list function. INVARIANT: registered
                // until `drop` removes it.
                // SAFETY: `pt` is the handler's own pinned, uninitialised `packet_type`; zeroed,
                // with the type and the function set, it is valid to register.
                unsafe {
                    pt.write(core::mem::zeroed());
                    (*pt).type_ = ethertype.to_be();
                    (*pt).func = Some(rcv::<T>);
                    bindings::dev_add_pack(pt);
                }
            }),
            receiver,
        })
    }
}

#[pinned_drop]
impl<T: EtherTypeReceiver> PinnedDrop for EtherTypeHandler<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered since initialisation (type invariant); `dev_remove_pack` waits
        // until no CPU runs `rcv` for it, so the receiver outlives every call.
        unsafe { bindings::dev_remove_pack(self.pt.get()) };
    }
}

/// `packet_type.func`.
///
/// # Safety
///
/// Called by the stack in softirq context with a reference to `skb` that it hands over, and
/// `pt` the `pt` field of a registered [`EtherTypeHandler<T>`].
unsafe extern "C" fn rcv<T: EtherTypeReceiver>(
    skb: *mut bindings::sk_buff,
    _dev: *mut bindings::net_device,
    pt: *mut bindings::packet_type,
    _orig: *mut bindings::net_device,
) -> kernel::ffi::c_int {
    // SAFETY: `pt` is the `pt` field of a registered handler (function contract), so
    // `container_of` gives the handler, which stays alive while the stack can call this.
    let handler = unsafe { &*kernel::container_of!(pt, EtherTypeHandler<T>, pt) };
    // The frame may be shared with other handlers (taps): take a private copy before
    // linearising it. Frames for other hosts (a promiscuous device) are not ours.
    // SAFETY: the stack handed over one reference to `skb` (function contract).
    let skb = unsafe { bindings::oxrdma_skb_share_check(skb) };
    let Some(skb) = NonNull::new(skb) else {
        // Already freed by the failed share check.
        return bindings::NET_RX_DROP as kernel::ffi::c_int;
    };
    // SAFETY: `skb` is owned here; `skb_linearize` may reallocate its data but keeps the
    // header offsets.
    let usable = unsafe {
        bindings::oxrdma_skb_pkt_type(skb.as_ptr()) != bindings::PACKET_OTHERHOST as u8
            && bindings::oxrdma_skb_linearize(skb.as_ptr()) == 0
    };
    if usable {
        // SAFETY: owned, linear, its network header at the start of the packet (the stack
        // reset it after pulling the link-layer header), `skb->dev` the ingress device.
        if let Some(pkt) = unsafe { RxSkb::from_raw_rx(skb) } {
            handler.receiver.receive(pkt);
            return bindings::NET_RX_SUCCESS as kernel::ffi::c_int;
        }
    }
    // SAFETY: still owned here; freed as dropped.
    unsafe { bindings::oxrdma_kfree_skb(skb.as_ptr()) };
    bindings::NET_RX_DROP as kernel::ffi::c_int
}
