// SPDX-License-Identifier: GPL-2.0
//! Socket buffers (`struct sk_buff`) for RoCE v2 packet I/O.
//!
//! * [`Skb`]: a packet being built for transmission. The driver writes the *whole* IP packet
//!   (IPv4 or IPv6 header, UDP header, IBA headers, payload, ICRC) into [`Skb::data_mut`]: the
//!   RoCE ICRC covers IP header fields (IPv4 identification and total length, IPv6 payload
//!   length), so the IP stack must not build the header. [`Skb::xmit`] hands it to
//!   `ip_local_out`/`ip6_local_out` along a [`Route`].
//! * [`RxSkb`]: a received frame, as an ethertype handler gets it (see
//!   [`super::packet_type`]): linear, with the network packet exactly as received.
//! * [`RxDatagram`]: a received UDP datagram, as a RoCE v2 receive socket delivers it (see
//!   [`super::udp_tunnel`]): linear, the IP packet exactly as received, possibly a run of
//!   datagrams that UDP segmentation offload has not cut.
//! * [`SkbQueue`]: a locked queue (`struct sk_buff_head`) to pass packets between contexts,
//!   e.g. from the receive softirq to a work item.
//!
//! Ownership: each value owns its `sk_buff`; dropping one frees it as *consumed*
//! (`consume_skb`); the `discard` methods free it as *dropped* (`kfree_skb`,
//! visible to drop monitors). Every function here may be called from any context (process,
//! softirq, hard IRQ with the exception of [`Skb::xmit`], which needs process or softirq
//! context, like `ip_local_out`).

use super::bindings;
use super::error::code;
use super::net::NetDevice;
use super::route::Route;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::{prelude::*, types::ARef, types::Opaque};

/// `ETH_P_IPV6` in network byte order, as `skb->protocol` holds it.
const ETH_P_IPV6_BE: u16 = (bindings::ETH_P_IPV6 as u16).to_be();

/// Takes ownership of a `struct sk_buff` (implemented by [`Skb`] and [`RxSkb`]), so that
/// [`SkbQueue`] can hold either kind. Sealed: only this layer implements it.
pub trait OwnedSkb: Send + private::Sealed {
    #[doc(hidden)]
    fn into_raw(self) -> *mut bindings::sk_buff;
    /// # Safety
    ///
    /// `skb` must come from `into_raw` of the same type, and ownership moves back.
    #[doc(hidden)]
    unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self;
}

mod private {
    pub trait Sealed {}
}

/// An owned packet being built for transmission.
///
/// # Invariants
///
/// `ptr` is a valid `sk_buff` owned by this value (nobody else references it): linear, its
/// network header at `data`, and `data[..len]` initialised (zeroed at allocation).
pub struct Skb {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: an skb that nobody else references may be used and freed on any CPU.
unsafe impl Send for Skb {}
// SAFETY: `&self` methods only read the packet bytes, which `&mut self` methods alone change.
unsafe impl Sync for Skb {}

impl Skb {
    /// Allocates (`GFP_ATOMIC`, any context) a linear skb for an IP packet of `ip_packet_len`
    /// bytes to be sent through `dev`: `LL_RESERVED_SPACE(dev)` bytes of headroom for the
    /// link-layer header, then `ip_packet_len` zeroed bytes starting at the network header.
    pub fn alloc_tx(dev: &NetDevice, ip_packet_len: usize) -> Result<Skb> {
        Self::alloc_tx_room(dev, ip_packet_len, ip_packet_len)
    }

    /// [`Skb::alloc_tx`] with room for the packet to grow ([`Skb::put_zero`]) to `capacity`
    /// bytes.
    pub fn alloc_tx_room(dev: &NetDevice, ip_packet_len: usize, capacity: usize) -> Result<Skb> {
        let headroom = dev.ll_reserved_space();
        // The skb's sizes are `unsigned int`; refuse what would not fit (never a real packet).
        let len = u32::try_from(ip_packet_len).map_err(|_| EINVAL)?;
        let total = u32::try_from(headroom + capacity.max(ip_packet_len)).map_err(|_| EINVAL)?;
        // SAFETY: plain allocation; `GFP_ATOMIC` is allowed in any context.
        let ptr = unsafe { bindings::oxrdma_alloc_skb_atomic(total) };
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // SAFETY: `ptr` is a fresh, empty skb with `total` bytes of tailroom: reserving
        // `headroom` and then putting `len` bytes stays inside it.
        unsafe {
            bindings::oxrdma_skb_reserve(ptr.as_ptr(), headroom as u32);
            bindings::oxrdma_skb_put_zero(ptr.as_ptr(), len);
            bindings::oxrdma_skb_reset_network_header(ptr.as_ptr());
        }
        // INVARIANT: owned, linear, network header at `data`, `len` zeroed bytes.
        Ok(Skb { ptr })
    }

    /// Grows the packet by `len` zeroed bytes at its end; `ENOSPC` (unchanged) if the buffer
    /// has no room for them.
    pub fn put_zero(&mut self, len: usize) -> Result {
        // SAFETY: `self.ptr` is a valid skb (type invariant).
        let room = unsafe { bindings::oxrdma_skb_tailroom(self.ptr.as_ptr()) };
        let len = u32::try_from(len)
            .ok()
            .filter(|&l| l <= room)
            .ok_or(ENOSPC)?;
        // SAFETY: owned and linear (type invariant), with `len` bytes of tailroom (above).
        unsafe { bindings::oxrdma_skb_put_zero(self.ptr.as_ptr(), len) };
        // INVARIANT: the new bytes are zeroed; the network header has not moved.
        Ok(())
    }

    /// Shortens the packet to `len` bytes (nothing happens if it is not longer).
    pub fn trim(&mut self, len: usize) {
        if len < self.len() {
            // `len` is below the current length, a `u32`.
            // SAFETY: owned and linear (type invariant); trimming keeps `data[..len]` as it
            // was and the network header where it is.
            unsafe { bindings::oxrdma_skb_trim(self.ptr.as_ptr(), len as u32) };
        }
    }

    /// Marks the packet, a complete IP packet carrying one UDP datagram, for UDP segmentation
    /// offload: the stack or the device sends it as `segs` datagrams of `seg_len` payload
    /// bytes each (the last one shorter or as long), each with a copy of the IP and UDP
    /// headers whose lengths fit that datagram, IPv4 identifications counting up from this
    /// packet's, and a UDP checksum (computed by whoever cuts). Call it after the headers
    /// are written; `EINVAL` if the packet is not such a datagram or the geometry does not
    /// cover it exactly.
    pub fn set_udp_gso(&mut self, seg_len: usize, segs: usize) -> Result {
        let pkt = self.data();
        let (ip_hlen, ipv6) = match pkt.first().map(|b| b >> 4) {
            Some(4) if pkt.len() >= 20 && pkt[9] == 17 => (usize::from(pkt[0] & 0xf) * 4, false),
            Some(6) if pkt.len() >= 40 && pkt[6] == 17 => (40, true),
            _ => return Err(EINVAL),
        };
        let udp_len = pkt
            .get(ip_hlen + 4..ip_hlen + 6)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        let payload = pkt.len().saturating_sub(ip_hlen + 8);
        let fits = segs >= 2
            && seg_len > 0
            && (segs - 1).checked_mul(seg_len).is_some_and(|n| n < payload)
            && segs.checked_mul(seg_len).is_some_and(|n| n >= payload);
        let udp_ok =
            ip_hlen >= 20 && pkt.len() >= ip_hlen + 8 && udp_len == Some(pkt.len() - ip_hlen);
        if !udp_ok || !fits {
            return Err(EINVAL);
        }
        // `segs` and `seg_len` are below the UDP length (`fits`, `udp_ok`), a 16-bit field,
        // so they fit `gso_segs` and `gso_size` (`unsigned short`).
        // SAFETY: owned and linear (type invariant), an IP header of `ip_hlen` bytes followed
        // by a whole UDP header inside the data (checked above).
        unsafe {
            bindings::oxrdma_skb_set_udp_gso(
                self.ptr.as_ptr(),
                ip_hlen as u32,
                seg_len as u32,
                segs as u32,
                ipv6,
            )
        };
        Ok(())
    }

    /// The packet length in bytes (the IP packet, from the network header).
    pub fn len(&self) -> usize {
        // SAFETY: `self.ptr` is a valid skb (type invariant).
        unsafe { bindings::oxrdma_skb_len(self.ptr.as_ptr()) as usize }
    }

    /// Whether the packet is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The packet bytes, from the network header on.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the skb is linear and owned, so `data[..len]` is initialised memory that
        // only this value accesses (type invariant); `&self` prevents writes for the borrow.
        unsafe {
            core::slice::from_raw_parts(bindings::oxrdma_skb_data(self.ptr.as_ptr()), self.len())
        }
    }

    /// The packet bytes, for the driver to write the whole IP packet.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let len = self.len();
        // SAFETY: linear and owned, `data[..len]` is initialised memory only this value
        // accesses (type invariant); `&mut self` makes this the only access for the borrow.
        unsafe {
            core::slice::from_raw_parts_mut(bindings::oxrdma_skb_data(self.ptr.as_ptr()), len)
        }
    }

    /// Sends the complete IP packet along `route` (process or softirq context).
    ///
    /// Sets `skb->protocol` from the route's family, `skb->dev` to the route's device and a
    /// clone of the route's dst, then calls `ip_local_out` (IPv4) or `ip6_local_out` (IPv6) in
    /// the namespace of the route's device. The stack rewrites only what the driver must have
    /// written identically anyway: the IPv4 total length and header checksum, the IPv6
    /// payload length. It does not change the IPv4 identification, and it never touches the
    /// UDP checksum (`ip_summed` stays `CHECKSUM_NONE`: "already computed"), except in a
    /// packet marked by [`Skb::set_udp_gso`], whose datagrams get theirs where they are cut.
    ///
    /// Fails with `EINVAL` (packet freed) if the bytes are not an IP packet of the route's
    /// family whose length fields match the packet length, since the ICRC the driver computed
    /// over them would otherwise be wrong on the wire. Other errors are those of the stack
    /// (`ENOBUFS` for a queue drop, `EHOSTUNREACH`, ...); the packet is consumed either way.
    pub fn xmit(self, route: &Route) -> Result {
        if !ip_header_matches(self.data(), route.is_ipv6()) {
            self.discard();
            return Err(EINVAL);
        }
        let skb = self.into_raw();
        // The route's dst is valid while `route` is borrowed; the helper takes its own
        // reference for the skb.
        // SAFETY: `skb` is an owned linear skb with its network header at `data` (type
        // invariant), which moves to the stack here.
        let ret = unsafe { bindings::oxrdma_skb_local_out(skb, route.as_dst(), route.is_ipv6()) };
        match ret {
            0 => Ok(()),
            // NET_XMIT_CN: queued, congestion notified. Anything else positive is a drop.
            r if r == bindings::NET_XMIT_CN as i32 => Ok(()),
            r if r > 0 => Err(code::enobufs()),
            r => Err(Error::from_errno(r)),
        }
    }

    /// Sends the complete network packet out of `dev` with a link-layer header of its own:
    /// `ethertype` (host order), destination `dmac`, the device's address as the source
    /// (`dev_hard_header`, then `dev_queue_xmit`; process or softirq context). No route, no
    /// neighbour lookup: for link-local protocols such as RoCE v1. The packet is consumed;
    /// errors are the queue's (`ENOBUFS` for a drop) or `EINVAL` if the device builds no
    /// such header.
    pub fn xmit_link(self, dev: &NetDevice, ethertype: u16, dmac: &[u8; 6]) -> Result {
        let skb = self.into_raw();
        let (nd, mac) = (dev.as_raw(), dmac.as_ptr());
        // The skb has `LL_RESERVED_SPACE(dev)` of headroom (`alloc_tx` for this device).
        // SAFETY: `skb` is owned and linear (type invariant) and moves to the stack here, with
        // headroom for the header (above); `dev` is valid and `dmac` 6 readable bytes.
        let ret = unsafe { bindings::oxrdma_skb_link_out(skb, nd, ethertype, mac) };
        match ret {
            0 => Ok(()),
            r if r == bindings::NET_XMIT_CN as i32 => Ok(()),
            r if r > 0 => Err(code::enobufs()),
            r => Err(Error::from_errno(r)),
        }
    }

    /// Frees the packet as dropped (`kfree_skb`), for drop monitors.
    pub fn discard(self) {
        let skb = self.into_raw();
        // SAFETY: ownership of the skb moved out of `self`.
        unsafe { bindings::oxrdma_kfree_skb(skb) };
    }
}

/// Whether `pkt` starts with an IP header of the right version whose length field covers
/// exactly `pkt`, and (IPv4) whose header length fits.
fn ip_header_matches(pkt: &[u8], ipv6: bool) -> bool {
    if ipv6 {
        pkt.len() >= 40
            && pkt[0] >> 4 == 6
            && usize::from(u16::from_be_bytes([pkt[4], pkt[5]])) + 40 == pkt.len()
    } else {
        pkt.len() >= 20
            && pkt[0] >> 4 == 4
            && usize::from(pkt[0] & 0xf) * 4 >= 20
            && usize::from(pkt[0] & 0xf) * 4 <= pkt.len()
            && usize::from(u16::from_be_bytes([pkt[2], pkt[3]])) == pkt.len()
    }
}

impl private::Sealed for Skb {}

impl OwnedSkb for Skb {
    fn into_raw(self) -> *mut bindings::sk_buff {
        let ptr = self.ptr.as_ptr();
        core::mem::forget(self);
        ptr
    }

    unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: the skb came from `Skb::into_raw` (safety requirement).
        Skb { ptr: skb }
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: this value owns the skb (type invariant).
        unsafe { bindings::oxrdma_consume_skb(self.ptr.as_ptr()) };
    }
}

/// An owned received frame, as an ethertype handler hands it to its receiver.
///
/// # Invariants
///
/// `ptr` is a valid `sk_buff` owned by this value: linear, its network header set to the
/// start of the received network packet, which extends to the end of the skb's data (the IP
/// stack trimmed it to the IP and UDP lengths; a link-layer frame may carry padding after the
/// packet). `dev` is the device it arrived on (`skb->dev` at
/// delivery), held: the packet may be processed after the receive softirq that delivered it.
pub struct RxSkb {
    ptr: NonNull<bindings::sk_buff>,
    dev: ARef<NetDevice>,
}

// SAFETY: an owned skb may be used and freed on any CPU.
unsafe impl Send for RxSkb {}
// SAFETY: `&self` methods only read.
unsafe impl Sync for RxSkb {}

impl RxSkb {
    /// Adopts a received skb.
    ///
    /// # Safety
    ///
    /// `skb` must be valid, owned by the caller (ownership moves here), linear, with its
    /// network header at the start of the IP packet and its data ending where that packet
    /// ends, and `skb->dev` valid (the receive path that delivers it).
    pub(crate) unsafe fn from_raw_rx(skb: NonNull<bindings::sk_buff>) -> Option<Self> {
        // SAFETY: `skb` is valid (function contract).
        let dev = NonNull::new(unsafe { bindings::oxrdma_skb_dev(skb.as_ptr()) })?;
        // SAFETY: the device is valid during the delivery (function contract); the `ARef`
        // takes a reference of its own.
        let dev = ARef::from(unsafe { NetDevice::from_raw(dev) });
        // INVARIANT: guaranteed by the caller; `dev` is the ingress device, held.
        Some(RxSkb { ptr: skb, dev })
    }

    /// The device the packet arrived on. For a destination address local to the namespace
    /// this is the loopback device, whatever device the sender routed through.
    pub fn ingress(&self) -> &NetDevice {
        &self.dev
    }

    /// Whether this is an IPv6 packet (else IPv4).
    pub fn is_ipv6(&self) -> bool {
        // SAFETY: `self.ptr` is valid (type invariant).
        unsafe { bindings::oxrdma_skb_protocol(self.ptr.as_ptr()) == ETH_P_IPV6_BE }
    }

    /// The whole network packet as received, from the network header to the end (for RoCE
    /// v1: GRH, IBA headers, payload, ICRC and any link-layer padding).
    pub fn network_packet(&self) -> &[u8] {
        // SAFETY: valid, owned and linear, its network header at or before `data` (type
        // invariant).
        unsafe { rx_network_packet(self.ptr) }
    }

    /// Frees the packet as dropped (`kfree_skb`), for drop monitors.
    pub fn discard(self) {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: `me.dev` is read out once (and dropped at the end of this function), never
        // through `me`.
        let _dev = unsafe { core::ptr::read(&me.dev) };
        // SAFETY: the skb is owned (type invariant) and given up here.
        unsafe { bindings::oxrdma_kfree_skb(me.ptr.as_ptr()) };
    }
}

/// The bytes of received `skb` from its network header to the end of its data.
///
/// # Safety
///
/// `skb` is valid and linear, its network header at or before `data` (received packets are
/// pulled past it), and it is not changed while the slice lives.
unsafe fn rx_network_packet<'a>(skb: NonNull<bindings::sk_buff>) -> &'a [u8] {
    let skb = skb.as_ptr();
    // The network header is at or before `data`: the offset is not positive.
    // SAFETY: `skb` is valid and linear (function contract): the bytes from the network
    // header to `data + len` are initialised and in the linear buffer.
    unsafe {
        let off = bindings::oxrdma_skb_network_offset(skb);
        let len = bindings::oxrdma_skb_len(skb) as usize + off.unsigned_abs() as usize;
        core::slice::from_raw_parts(bindings::oxrdma_skb_network_header(skb), len)
    }
}

impl private::Sealed for RxSkb {}

impl OwnedSkb for RxSkb {
    fn into_raw(self) -> *mut bindings::sk_buff {
        let me = core::mem::ManuallyDrop::new(self);
        // The device reference now belongs to the raw skb; `skb->dev` names that device
        // (type invariant), so `from_raw` finds it there.
        // SAFETY: `me.dev` is read out once and never dropped through `me`.
        let dev = unsafe { core::ptr::read(&me.dev) };
        let _ = ARef::into_raw(dev);
        me.ptr.as_ptr()
    }

    unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // SAFETY: the skb came from `RxSkb::into_raw` (safety requirement): `skb->dev` is the
        // held ingress device whose reference it carries, which moves back here.
        let dev = unsafe { bindings::oxrdma_skb_dev(skb.as_ptr()) };
        // SAFETY: `skb->dev` is the device `into_raw` left there with its reference, never NULL
        // (`from_raw_rx` refused packets without one); the reference moves into the `ARef`.
        let dev = unsafe { NetDevice::from_held(NonNull::new_unchecked(dev)) };
        // INVARIANT: as it was before `into_raw`.
        RxSkb { ptr: skb, dev }
    }
}

impl Drop for RxSkb {
    fn drop(&mut self) {
        // SAFETY: this value owns the skb (type invariant); the device reference is dropped
        // with `self.dev`.
        unsafe { bindings::oxrdma_consume_skb(self.ptr.as_ptr()) };
    }
}

/// An owned UDP datagram taken from a receive socket's queue.
///
/// It may be a *run*: several datagrams of one flow in one buffer behind the first one's IP
/// and UDP headers, each [`RxDatagram::segment_size`] bytes of UDP payload but the last, as
/// UDP segmentation offload queues them when the receiving socket takes them uncut (its
/// sender's segmentation offload crossed a veth or the loopback device uncut, or receive
/// offload merged them). The headers then carry the run's lengths.
///
/// # Invariants
///
/// `ptr` is a valid `sk_buff` owned by this value: linear, its network header at the IP
/// header, `data` at the UDP payload (the UDP layer pulled its header) and the data ending
/// where the IP packet ends. `skb->dev` is not used: the device may be gone by the time a
/// datagram queued on another CPU is taken.
pub struct RxDatagram {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: an owned skb may be used and freed on any CPU.
unsafe impl Send for RxDatagram {}
// SAFETY: `&self` methods only read.
unsafe impl Sync for RxDatagram {}

impl RxDatagram {
    /// Adopts a datagram taken from a UDP socket's queue.
    ///
    /// # Safety
    ///
    /// `skb` must be valid, owned by the caller (ownership moves here), linear, with its
    /// network header at the IP header, `data` at the UDP payload and the data ending where
    /// the IP packet ends.
    pub(crate) unsafe fn from_raw_udp(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: guaranteed by the caller.
        RxDatagram { ptr: skb }
    }

    /// The index of the device the datagram arrived on, in the receiving socket's namespace.
    /// For a destination address local to the namespace this is the loopback device,
    /// whatever device the sender routed through.
    pub fn ingress_ifindex(&self) -> i32 {
        // SAFETY: `self.ptr` is valid (type invariant).
        unsafe { bindings::oxrdma_skb_iif(self.ptr.as_ptr()) }
    }

    /// Whether this is an IPv6 datagram (else IPv4).
    pub fn is_ipv6(&self) -> bool {
        // SAFETY: `self.ptr` is valid (type invariant).
        unsafe { bindings::oxrdma_skb_protocol(self.ptr.as_ptr()) == ETH_P_IPV6_BE }
    }

    /// The IP packet as received: IP header, UDP header, UDP payload.
    pub fn network_packet(&self) -> &[u8] {
        // SAFETY: valid, owned and linear, its network header before `data` (type invariant).
        unsafe { rx_network_packet(self.ptr) }
    }

    /// The IP and UDP headers (a run's: its first datagram's, with the run's lengths).
    pub fn headers(&self) -> &[u8] {
        let p = self.network_packet();
        &p[..p.len() - self.payload().len()]
    }

    /// The UDP payload (a run's: every datagram's, one after the other).
    pub fn payload(&self) -> &[u8] {
        let skb = self.ptr.as_ptr();
        // SAFETY: `skb` is valid, owned and linear (type invariant): `data[..len]` is
        // initialised and in the linear buffer.
        unsafe {
            core::slice::from_raw_parts(
                bindings::oxrdma_skb_data(skb),
                bindings::oxrdma_skb_len(skb) as usize,
            )
        }
    }

    /// For a run, the UDP payload length of each of its datagrams but the last (at most this
    /// long); `None` for a single datagram. Only UDP segmentation offload makes a run: a
    /// datagram of another offload type (a tunnel's, say) is `None`, one datagram.
    pub fn segment_size(&self) -> Option<usize> {
        // SAFETY: `self.ptr` is valid (type invariant).
        let size = unsafe { bindings::oxrdma_skb_gso_size(self.ptr.as_ptr()) };
        (size != 0).then_some(size as usize)
    }

    /// Frees the datagram as dropped (`kfree_skb`), for drop monitors.
    pub fn discard(self) {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: the skb is owned (type invariant) and given up here.
        unsafe { bindings::oxrdma_kfree_skb(me.ptr.as_ptr()) };
    }
}

impl private::Sealed for RxDatagram {}

impl OwnedSkb for RxDatagram {
    fn into_raw(self) -> *mut bindings::sk_buff {
        core::mem::ManuallyDrop::new(self).ptr.as_ptr()
    }

    unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: the skb came from `RxDatagram::into_raw` (safety requirement) unchanged.
        RxDatagram { ptr: skb }
    }
}

impl Drop for RxDatagram {
    fn drop(&mut self) {
        // SAFETY: this value owns the skb (type invariant).
        unsafe { bindings::oxrdma_consume_skb(self.ptr.as_ptr()) };
    }
}

/// A queue of owned packets (`struct sk_buff_head`, with its own IRQ-safe spinlock).
///
/// `push` and `pop` may be called from any context (process, softirq, hard IRQ) and
/// concurrently; dropping the queue frees the packets still in it (`skb_queue_purge`).
///
/// # Invariants
///
/// `head` is initialised (`skb_queue_head_init`) and pinned; every skb on it came from
/// `T::into_raw` and is owned by the queue.
pub struct SkbQueue<T: OwnedSkb> {
    head: Pin<KBox<Opaque<bindings::sk_buff_head>>>,
    _t: PhantomData<T>,
}

// SAFETY: the queue's own spinlock serialises all access; the packets are `Send`.
unsafe impl<T: OwnedSkb> Send for SkbQueue<T> {}
// SAFETY: every `&self` method takes the queue's own lock (or reads its length
// once).
unsafe impl<T: OwnedSkb> Sync for SkbQueue<T> {}

impl<T: OwnedSkb> SkbQueue<T> {
    /// An empty queue (allocates with `flags`).
    pub fn new(flags: kernel::alloc::Flags) -> Result<Self> {
        let head = KBox::pin_init(
            Opaque::ffi_init(|slot: *mut bindings::sk_buff_head| {
                // SAFETY: `slot` is valid for writes and pinned; the helper initialises the
                // list and its lock in place.
                unsafe { bindings::oxrdma_skb_queue_head_init(slot) }
            }),
            flags,
        )?;
        // INVARIANT: initialised in place, pinned in the box.
        Ok(Self {
            head,
            _t: PhantomData,
        })
    }

    /// Appends a packet (any context).
    pub fn push(&self, skb: T) {
        // SAFETY: `head` is an initialised queue (type invariant); the skb's ownership moves to
        // the queue; `skb_queue_tail` takes the queue lock with interrupts disabled.
        unsafe { bindings::skb_queue_tail(self.head.get(), skb.into_raw()) };
    }

    /// Removes the oldest packet (any context).
    pub fn pop(&self) -> Option<T> {
        // SAFETY: `head` is an initialised queue (type invariant); `skb_dequeue` takes its
        // lock.
        let skb = unsafe { bindings::skb_dequeue(self.head.get()) };
        // SAFETY: every skb on the queue came from `T::into_raw` (type invariant) and leaves
        // the queue here.
        NonNull::new(skb).map(|skb| unsafe { T::from_raw(skb) })
    }

    /// The number of queued packets (a snapshot).
    pub fn len(&self) -> usize {
        // SAFETY: `head` is an initialised queue (type invariant); a lockless read of its
        // length.
        unsafe { bindings::oxrdma_skb_queue_len(self.head.get()) as usize }
    }

    /// Whether the queue is empty (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: OwnedSkb> Drop for SkbQueue<T> {
    fn drop(&mut self) {
        // Each packet is freed as its type frees it (an `RxSkb` also drops its device
        // reference), not by `skb_queue_purge`.
        while let Some(skb) = self.pop() {
            drop(skb);
        }
    }
}
