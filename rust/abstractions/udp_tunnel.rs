// SPDX-License-Identifier: GPL-2.0
//! RoCE v2 receive sockets: a pair of UDP sockets per network namespace and port.
//!
//! A tunnel is a pair of kernel UDP sockets bound to one port (4791 for RoCE v2) in one
//! network namespace, an IPv4 one and an IPv6 (`v6only`) one, whose `sk_data_ready` hands
//! every datagram queued on them to a [`UdpReceiver`] as an [`RxDatagram`], right away, in
//! the softirq that queued it.
//!
//! They are plain UDP sockets, not encapsulation sockets (`encap_rcv`), for one reason: an
//! encapsulation socket never gets a datagram of UDP segmentation offload uncut
//! (`udp_unexpected_gso`: only tunnel offloads reach one), while a socket with the
//! `UDP_GRO` behaviour (`ACCEPT_L4`) gets such a run whole, so that a sender's run that
//! crossed a veth or the loopback device uncut is received as one unit. The UDP checksum
//! is not verified (the receiver's ICRC covers all it covers); the datagram's memory is
//! charged to the socket only until it is taken off the queue.
//!
//! # Order
//!
//! A socket's queue is shared by all CPUs, and the receiver must get what one CPU queued in
//! the order it was queued (a QP's packets). So one context at a time takes a socket's
//! datagrams (a per-socket flag): the `data_ready` call that finds no one else doing so
//! takes what is queued, including what other CPUs queue meanwhile (their calls see the flag
//! and leave it), in queue order. After clearing the flag it looks at the queue again, so
//! nothing is left behind. It takes at most [`QUOTA`] datagrams; the rest goes on in the
//! tunnel's work item (process context, bottom halves disabled), which takes them the same
//! way, so that a flood from other CPUs cannot hold one CPU's softirq forever.
//!
//! # Lifetime
//!
//! Kernel sockets do not hold a reference on their namespace, so a socket must never outlive
//! it. The layer is a pernet subsystem ([`TunnelRegistration`], held by the module): each
//! namespace has a slot of its own (`net_generic`) listing the tunnels opened in it, and the
//! subsystem's `exit` callback closes them when the namespace is dismantled (after its devices
//! are gone).
//!
//! Devices hold [`TunnelRef`]s: the first [`TunnelRef::open`] in a namespace for a (port,
//! receiver) creates the sockets, later ones share them, and they are closed when the last
//! handle drops or the namespace exits, whichever comes first; after that
//! [`TunnelRef::is_open`] is false. Dropping the registration (module unload) closes every
//! tunnel left.
//!
//! Closing uses `udp_tunnel_sock_release`: it clears the socket's user data (the tunnel),
//! waits for an RCU grace period (every `data_ready` runs inside an RCU read-side section),
//! then releases the socket, freeing what is still queued. `data_ready` takes nothing off a
//! socket whose user data is gone, and the work item takes datagrams only from the sockets
//! the tunnel's state holds, under its lock; so once a tunnel is closed its receiver is
//! never called again. The open sockets hold a count on their tunnel (their user data),
//! given back once they are released.
//!
//! Locks: a namespace's slot, then a tunnel's state. Whoever closes a tunnel's sockets does so
//! holding the tunnel's state lock; the namespace's `exit` takes that lock for every tunnel of
//! the slot, so a namespace is not freed while one of its sockets is being released.
//!
//! # Context
//!
//! [`TunnelRegistration::register`], its drop, [`TunnelRef::open`] and [`TunnelRef`]'s drop
//! sleep: process context only, without the RTNL held (`open` takes it briefly), and not from
//! a receiver. [`UdpReceiver::receive`] runs with bottom halves disabled (in a softirq, or in
//! the tunnel's work item) and must not sleep.

use super::bindings;
use super::error::code;
use super::net::{NetDevice, NetNs, NetRef};
use super::skb::RxDatagram;
use super::workqueue;
use core::cell::UnsafeCell;
use core::mem::size_of;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow, Mutex};
use kernel::types::Opaque;
use kernel::workqueue::{Work, WorkItem};
use kernel::{alloc::KVec, impl_has_work, new_mutex, new_work};

/// Receives the datagrams of a tunnel.
pub trait UdpReceiver: Send + Sync + 'static {
    /// Called for each datagram (or run of datagrams) queued on the sockets of the tunnel in
    /// namespace `net`, in the order each socket queued them, one at a time per socket (the
    /// IPv4 and the IPv6 one may be received on two CPUs at once), with bottom halves
    /// disabled (must not sleep). The datagram is the receiver's: drop it, queue it
    /// ([`super::skb::SkbQueue`]), or discard it. It must not drop a [`TunnelRef`] (the
    /// last one closes the sockets, which waits for the context calling it).
    fn receive(&self, net: &NetNs, pkt: RxDatagram);
}

/// The receive buffer of each socket. Datagrams are taken off the queue as they arrive, so
/// this only bounds what several CPUs queue at once (a run of offload is up to 64 KiB).
const RCVBUF: i32 = 4 << 20;

/// The most datagrams (and passes over the queue) one context takes off a socket before it
/// leaves the rest to the tunnel's work item ("Order" above).
const QUOTA: usize = 64;

/// A tunnel: what the sockets' user data points to while they are open.
#[pin_data]
struct Tunnel {
    receiver: Arc<dyn UdpReceiver>,
    port: u16,
    /// Whether the sockets are open (a mirror of `state.socks` for lockless readers).
    open: AtomicBool,
    /// Per socket (IPv4, IPv6): a context is taking its datagrams ("Order" above).
    draining: [AtomicBool; 2],
    /// Takes on the datagrams a context left at its quota.
    #[pin]
    work: Work<Tunnel>,
    #[pin]
    state: Mutex<TunnelState>,
}

impl_has_work! {
    impl HasWork<Self> for Tunnel { self.work }
}

impl WorkItem for Tunnel {
    type Pointer = Arc<Tunnel>;

    /// Takes what is queued on the open sockets, as `data_ready` does; queues itself again if
    /// it left some.
    fn run(this: Arc<Tunnel>) {
        let st = this.state.lock();
        let Some(socks) = st.socks.as_ref() else {
            return;
        };
        let mut left = false;
        // SAFETY: balanced below, in this function (no sleeping in between: `drain` and the
        // receiver run as in a softirq).
        unsafe {
            bindings::oxrdma_local_bh_disable();
            bindings::oxrdma_rcu_read_lock();
        }
        for sock in [Some(&socks.v4), socks.v6.as_ref()].into_iter().flatten() {
            // The sockets of `socks` stay open while the state lock is held: they are taken out
            // of the state under it before they are released.
            // SAFETY: open sockets of `this` (above); bottom halves disabled, RCU read-side.
            left |= unsafe { drain(&this, sock.sk()) };
        }
        // SAFETY: taken above.
        unsafe { bindings::oxrdma_rcu_read_unlock() };
        // Before the softirqs that enabling bottom halves may run: they need not wait for it.
        drop(st);
        // SAFETY: disabled above.
        unsafe { bindings::oxrdma_local_bh_enable() };
        if left {
            Tunnel::defer(this);
        }
    }
}

impl Tunnel {
    /// Queues the work item (if it is not queued yet).
    fn defer(this: Arc<Tunnel>) {
        // Already queued: it will take what is left; the queued item holds a count, so the
        // one given back here is not the last (no `Tunnel` is dropped in a softirq).
        let _ = workqueue::queue().enqueue(this);
    }
}

struct TunnelState {
    /// [`TunnelRef`]s of this tunnel.
    handles: usize,
    socks: Option<Socks>,
    /// The namespace is gone: the tunnel cannot be opened again.
    dead: bool,
}

/// The open sockets of a tunnel.
struct Socks {
    v4: Sock,
    v6: Option<Sock>,
    /// The count their user data holds on the tunnel.
    reader: ReaderRef,
}

impl Socks {
    /// Releases the sockets (sleeps): afterwards the receiver is not called any more, and
    /// the count their user data held is given back.
    fn release(self) {
        let Socks { v4, v6, reader } = self;
        drop(v6);
        drop(v4);
        drop(reader);
    }
}

/// A count on a tunnel made a raw pointer (`Arc::into_raw`): the sockets' user data.
///
/// # Invariants
///
/// `0` came from `Arc::into_raw` and is given back only by `drop`.
struct ReaderRef(*const Tunnel);

// SAFETY: a count on an `Arc<Tunnel>`, which is `Send`.
unsafe impl Send for ReaderRef {}

impl ReaderRef {
    fn new(tunnel: Arc<Tunnel>) -> Self {
        // INVARIANT: from `into_raw`.
        Self(Arc::into_raw(tunnel))
    }
}

impl Drop for ReaderRef {
    fn drop(&mut self) {
        // SAFETY: from `Arc::into_raw` and given back once, here (type invariant).
        drop(unsafe { Arc::from_raw(self.0) });
    }
}

/// An owned kernel socket (`struct socket`) created by `udp_sock_create{4,6}`.
///
/// # Invariants
///
/// `0` is a valid socket owned by this value until it is dropped.
struct Sock(NonNull<bindings::socket>);

// SAFETY: kernel sockets may be released from any process context.
unsafe impl Send for Sock {}

impl Sock {
    /// Creates a socket of `family` bound to `port` on any address in `net`.
    ///
    /// # Safety
    ///
    /// `net` must be alive (counted reference) for the call.
    unsafe fn create(net: *mut bindings::net, family: u32, port: u16) -> Result<Sock> {
        let mut cfg = bindings::udp_port_cfg {
            family: family as u8,
            local_udp_port: port.to_be(),
            ..Default::default()
        };
        if family == bindings::AF_INET6 {
            cfg.set_ipv6_v6only(1);
        }
        // IPv6: accept UDP checksum 0 (`use_udp6_rx_checksums` = 0, the default), which rxe
        // and RoCE v2 hardware send; a non-zero checksum is still verified by the stack.
        let mut sock = core::ptr::null_mut();
        // SAFETY: `net` is alive (safety requirement); `cfg` and `sock` are valid for the
        // call; on success `sock` is a new socket owned by the caller, else NULL.
        let err = unsafe {
            if family == bindings::AF_INET6 {
                bindings::udp_sock_create6(net, &mut cfg, &mut sock)
            } else {
                bindings::udp_sock_create4(net, &mut cfg, &mut sock)
            }
        };
        kernel::error::to_result(err)?;
        // INVARIANT: created above and owned by the caller.
        NonNull::new(sock).map(Sock).ok_or(EINVAL)
    }

    /// Makes the socket deliver what it receives to `tunnel` (from `data_ready`).
    ///
    /// # Safety
    ///
    /// `tunnel` must stay valid until the socket is released.
    unsafe fn set_reader(&self, tunnel: *const Tunnel) {
        // SAFETY: the socket is valid and owned (type invariant), `tunnel` outlives it (safety
        // requirement); process context (the caller's).
        unsafe {
            bindings::oxrdma_udp_sock_set_reader(
                self.0.as_ptr(),
                tunnel.cast_mut().cast(),
                Some(data_ready),
                RCVBUF,
            )
        };
    }

    /// The socket's `struct sock`.
    fn sk(&self) -> *mut bindings::sock {
        // SAFETY: the socket is valid (type invariant); a kernel UDP socket's `sk` is set at
        // creation and stays until it is released.
        unsafe { (*self.0.as_ptr()).sk }
    }
}

impl Drop for Sock {
    /// Clears the user data, waits for `data_ready`s in flight (`synchronize_rcu`), shuts the
    /// socket down and releases it. Sleeps: a `Sock` is dropped in process context only.
    fn drop(&mut self) {
        // SAFETY: the socket is owned (type invariant) and given up here, never used again.
        unsafe { bindings::udp_tunnel_sock_release(self.0.as_ptr()) };
    }
}

/// `sk_data_ready` of every tunnel socket: takes the queued datagrams to the receiver.
///
/// # Safety
///
/// Called by the socket layer only, for a live socket set up by [`Sock::set_reader`], from
/// the UDP receive path (softirq context) when it has queued a datagram.
unsafe extern "C" fn data_ready(sk: *mut bindings::sock) {
    // The sockets' user data is read under the RCU read lock, so `release` (which clears it and
    // then waits for a grace period) cannot drop the sockets' count on the tunnel while used.
    // SAFETY: balanced below.
    unsafe { bindings::oxrdma_rcu_read_lock() };
    // SAFETY: `sk` is live (function safety requirement).
    let tunnel = unsafe { bindings::oxrdma_sk_user_data(sk) }.cast::<Tunnel>();
    if !tunnel.is_null() {
        // A non-NULL user data is a `ReaderRef`'s pointer, whose count is given back only a
        // grace period after the user data is cleared.
        // SAFETY: so the count is held (RCU read-side section, above); softirq context, and
        // `sk` is one of the tunnel's live sockets.
        let (tunnel, left) = unsafe {
            let t = ArcBorrow::from_raw(tunnel);
            (t, drain(&t, sk))
        };
        if left {
            Tunnel::defer(tunnel.into());
        }
    }
    // SAFETY: taken above.
    unsafe { bindings::oxrdma_rcu_read_unlock() };
}

/// Takes the datagrams queued on `sk` to the tunnel's receiver, unless another context is
/// doing so ("Order" in the module documentation). Returns whether it stopped at its
/// [`QUOTA`] with datagrams still queued: the caller must then queue the work item.
///
/// # Safety
///
/// `sk` is a live socket of `tunnel`; bottom halves are disabled (softirq context or
/// `local_bh_disable`), inside an RCU read-side section.
unsafe fn drain(tunnel: &Tunnel, sk: *mut bindings::sock) -> bool {
    // SAFETY: `sk` is live (function safety requirement).
    let flag = &tunnel.draining[usize::from(unsafe { bindings::oxrdma_sk_is_v6(sk) })];
    // `NetNs` is a transparent wrapper of `Opaque<struct net>`.
    // SAFETY: the socket's namespace outlives the socket (closed by the namespace's exit at
    // the latest), which is live.
    let net = unsafe { &*bindings::oxrdma_sock_net(sk).cast::<NetNs>() };
    let mut budget = QUOTA;
    loop {
        // What this context queued (or saw queued) before the flag is read. With the fence
        // after clearing the flag below, either the context that holds the flag sees the
        // datagram when it looks again, or this swap sees the flag cleared.
        fence(Ordering::SeqCst);
        if flag.swap(true, Ordering::Acquire) {
            return false;
        }
        while budget > 0 {
            // SAFETY: `sk` is a live UDP socket; the datagram, if any, is now ours (its
            // memory uncharged from the socket).
            let Some(skb) = NonNull::new(unsafe { bindings::oxrdma_udp_recv_skb(sk) }) else {
                break;
            };
            budget -= 1;
            // SAFETY: an owned datagram the UDP layer queued; bottom halves are disabled.
            unsafe { deliver(tunnel, net, skb) };
        }
        flag.store(false, Ordering::Release);
        fence(Ordering::SeqCst);
        // SAFETY: `sk` is live; a lockless look, ordered by the fence above.
        if unsafe { bindings::oxrdma_udp_queue_empty(sk) } {
            return false;
        }
        // One pass more costs one from the budget too, so the loop ends even if another
        // context takes every datagram first each time.
        if budget == 0 {
            return true;
        }
        budget -= 1;
    }
}

/// Gives `skb`, a datagram taken off a tunnel socket of `net`, to the tunnel's receiver.
///
/// # Safety
///
/// `skb` is owned by the caller, as the UDP layer queues datagrams; bottom halves are
/// disabled.
unsafe fn deliver(tunnel: &Tunnel, net: &NetNs, skb: NonNull<bindings::sk_buff>) {
    // SAFETY: owned here; `skb_linearize` may reallocate the data but keeps the header
    // offsets.
    if unsafe { bindings::oxrdma_skb_linearize(skb.as_ptr()) } != 0 {
        // SAFETY: still owned; freed as dropped.
        unsafe { bindings::oxrdma_kfree_skb(skb.as_ptr()) };
        return;
    }
    // The UDP layer queues a datagram with its network header at the IP header, `data` past
    // the UDP header (`udp_csum_pull_header`), trimmed to the IP packet's length.
    // SAFETY: owned and linear, laid out as the UDP layer queues datagrams (above).
    let pkt = unsafe { RxDatagram::from_raw_udp(skb) };
    tunnel.receiver.receive(net, pkt);
}

/// The tunnels of one namespace: the subsystem's `net_generic` data, initialised by
/// `net_init` and dropped by `net_exit`.
#[pin_data]
struct NetSlot {
    #[pin]
    tunnels: Mutex<KVec<Arc<Tunnel>>>,
}

/// The subsystem's `net_generic` id, assigned by `register_pernet_subsys`.
///
/// # Invariants
///
/// Written only by the namespace core while it registers the subsystem (when no namespace
/// callback and no [`TunnelRef::open`] can run), read only while it is registered.
struct PernetId(UnsafeCell<kernel::ffi::c_uint>);

// SAFETY: see the type invariant: the one write happens before any read can.
unsafe impl Sync for PernetId {}

static NET_ID: PernetId = PernetId(UnsafeCell::new(0));
/// Whether a [`TunnelRegistration`] exists (so `NET_ID` is valid).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// The slot of `net`.
///
/// # Safety
///
/// The subsystem is registered and `net`'s `exit` has not run (nor started) for it.
unsafe fn slot<'a>(net: *mut bindings::net) -> &'a NetSlot {
    // SAFETY: registered, so `NET_ID` is our id and `net` has our data, initialised by
    // `net_init` and valid until `net_exit` (function contract).
    unsafe { &*bindings::oxrdma_net_generic(net, *NET_ID.0.get()).cast::<NetSlot>() }
}

/// `pernet_operations.init`: a new namespace (or one existing at registration).
///
/// # Safety
///
/// Called by the namespace core only, with our zeroed `net_generic` data allocated.
unsafe extern "C" fn net_init(net: *mut bindings::net) -> kernel::ffi::c_int {
    // SAFETY: the data is allocated (`size` of the ops), not initialised and not yet used.
    let data = unsafe { bindings::oxrdma_net_generic(net, *NET_ID.0.get()) }.cast::<NetSlot>();
    let init = pin_init!(NetSlot {
        tunnels <- new_mutex!(KVec::new(), "oxrdma_net_tunnels"),
    });
    // SAFETY: `data` is valid for writes and stays in place until `net_exit` drops it.
    match unsafe { init.__pinned_init(data) } {
        Ok(()) => 0,
        Err(e) => match e {},
    }
}

/// `pernet_operations.exit`: the namespace is being dismantled (its devices are gone), or the
/// subsystem unregistered.
///
/// # Safety
///
/// Called by the namespace core only, once per successful `net_init`.
unsafe extern "C" fn net_exit(net: *mut bindings::net) {
    // SAFETY: `net_init` succeeded for `net` and its exit is this call.
    let s = unsafe { slot(net) };
    let tunnels = core::mem::replace(&mut *s.tunnels.lock(), KVec::new());
    for t in tunnels.iter() {
        let socks = {
            let mut st = t.state.lock();
            st.dead = true;
            t.open.store(false, Ordering::Release);
            st.socks.take()
        };
        // Released here, with the namespace still alive; a handle dropping concurrently
        // found the sockets gone or released them under the state lock before we took it.
        if let Some(socks) = socks {
            socks.release();
        }
    }
    drop(tunnels);
    // SAFETY: initialised by `net_init`, not used any more (the namespace is going, and no
    // `TunnelRef::open` reaches a dying namespace); the memory is freed by the core.
    unsafe { core::ptr::drop_in_place((s as *const NetSlot).cast_mut()) };
}

/// The module's registration of the tunnel layer with the namespace core; tunnels can be
/// opened while it exists. At most one exists at a time; the module holds it from init to
/// exit. Dropping it closes every tunnel (process context).
///
/// # Invariants
///
/// `ops` is registered with `register_pernet_subsys` at a pinned address until `drop`, and
/// `REGISTERED` is true meanwhile.
pub struct TunnelRegistration {
    ops: Pin<KBox<Opaque<bindings::pernet_operations>>>,
}

// SAFETY: the ops are only touched by the namespace core under its own lock.
unsafe impl Send for TunnelRegistration {}
// SAFETY: no `&self` method touches the ops.
unsafe impl Sync for TunnelRegistration {}

impl TunnelRegistration {
    /// Registers the per-namespace hooks (`register_pernet_subsys`). `EBUSY` if already
    /// registered. Process context, no RTNL.
    pub fn register() -> Result<Self> {
        if REGISTERED.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        // SAFETY: all-zeroes is a valid `pernet_operations` (empty list head, no callbacks).
        let mut raw: bindings::pernet_operations = unsafe { core::mem::zeroed() };
        raw.init = Some(net_init);
        raw.exit = Some(net_exit);
        raw.id = NET_ID.0.get();
        raw.size = size_of::<NetSlot>();
        let ops = match KBox::pin(Opaque::new(raw), GFP_KERNEL) {
            Ok(o) => o,
            Err(e) => {
                REGISTERED.store(false, Ordering::Release);
                return Err(e.into());
            }
        };
        // SAFETY: `ops` is initialised and pinned until `drop` unregisters it; `NET_ID` is
        // written by the core here, before any callback runs.
        let err = unsafe { bindings::register_pernet_subsys(ops.get()) };
        if err != 0 {
            REGISTERED.store(false, Ordering::Release);
            return Err(Error::from_errno(err));
        }
        // INVARIANT: registered above.
        Ok(Self { ops })
    }
}

impl Drop for TunnelRegistration {
    fn drop(&mut self) {
        // Calls `net_exit` for every namespace: it closes every tunnel.
        // SAFETY: registered in `register` (type invariant).
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
        REGISTERED.store(false, Ordering::Release);
    }
}

/// A handle on the RoCE v2 receive sockets of one namespace and port.
///
/// # Invariants
///
/// `tunnel.state.handles` counts this handle; `net` is the tunnel's namespace (compared,
/// never dereferenced: the namespace may be gone).
pub struct TunnelRef {
    tunnel: Arc<Tunnel>,
    net: *mut bindings::net,
}

// SAFETY: `net` is only compared; the tunnel is `Send + Sync`.
unsafe impl Send for TunnelRef {}
// SAFETY: `net` is only compared and the tunnel is `Sync`, so shared references may be used
// from any thread.
unsafe impl Sync for TunnelRef {}

impl TunnelRef {
    /// Opens (or shares) the tunnel of `dev`'s network namespace on UDP `port` delivering to
    /// `receiver`. Process context, RTNL not held; sleeps.
    ///
    /// The first handle for a (namespace, port, receiver) creates an IPv4 and an IPv6
    /// (`v6only`; skipped if the kernel has no IPv6) socket bound to `port` on any address;
    /// later handles with the same receiver (the same `Arc`) share them. A port already bound
    /// in that namespace (by rxe, by another receiver) fails with `EADDRINUSE` and leaves
    /// nothing behind. `ENODEV` if the namespace is being dismantled; `EINVAL` without a
    /// [`TunnelRegistration`].
    pub fn open(dev: &NetDevice, port: u16, receiver: Arc<dyn UdpReceiver>) -> Result<TunnelRef> {
        let net = NetRef::of(dev).ok_or(ENODEV)?;
        if !REGISTERED.load(Ordering::Acquire) {
            return Err(EINVAL);
        }
        // SAFETY: registered (checked above; the caller's module holds the registration
        // while it opens tunnels), and the reference `net` holds keeps its exit from running.
        let s = unsafe { slot(net.as_ptr()) };
        let tunnel = {
            let mut tunnels = s.tunnels.lock();
            let found = tunnels
                .iter()
                .find(|t| t.port == port && Arc::ptr_eq(&t.receiver, &receiver))
                .cloned();
            match found {
                Some(t) => t,
                None => {
                    let t = Arc::pin_init(
                        pin_init!(Tunnel {
                            receiver,
                            port,
                            open: AtomicBool::new(false),
                            draining: [AtomicBool::new(false), AtomicBool::new(false)],
                            work <- new_work!("oxrdma_tunnel"),
                            state <- new_mutex!(TunnelState {
                                handles: 0,
                                socks: None,
                                dead: false,
                            }, "oxrdma_tunnel"),
                        }),
                        GFP_KERNEL,
                    )?;
                    tunnels.push(t.clone(), GFP_KERNEL)?;
                    t
                }
            }
        };
        let mut st = tunnel.state.lock();
        if st.dead {
            return Err(ENODEV);
        }
        if st.socks.is_none() {
            // SAFETY: `net` holds a reference on the namespace for the calls below.
            let v4 = unsafe { Sock::create(net.as_ptr(), bindings::AF_INET, port) }?;
            // SAFETY: `net` holds a reference on the namespace for this call too.
            let v6 = match unsafe { Sock::create(net.as_ptr(), bindings::AF_INET6, port) } {
                Ok(s) => Some(s),
                Err(e) if e == code::eafnosupport() => None,
                Err(e) => {
                    drop(v4);
                    return Err(e);
                }
            };
            let reader = ReaderRef::new(tunnel.clone());
            // SAFETY: `reader`'s count keeps the tunnel alive until it is dropped, after the
            // sockets are released (`Socks::release`).
            unsafe {
                v4.set_reader(reader.0);
                if let Some(s) = &v6 {
                    s.set_reader(reader.0);
                }
            }
            st.socks = Some(Socks { v4, v6, reader });
            tunnel.open.store(true, Ordering::Release);
            // Datagrams that arrived before the reader was set called no `data_ready` of
            // ours: the work item takes them.
            Tunnel::defer(tunnel.clone());
        }
        st.handles += 1;
        drop(st);
        // INVARIANT: counted above.
        Ok(TunnelRef {
            tunnel,
            net: net.as_ptr(),
        })
    }

    /// Whether the sockets are still open: false once the namespace was dismantled or the
    /// [`TunnelRegistration`] dropped (while a handle exists, nothing else closes them).
    pub fn is_open(&self) -> bool {
        self.tunnel.open.load(Ordering::Acquire)
    }

    /// Whether an IPv6 socket was opened too.
    pub fn has_ipv6(&self) -> bool {
        self.tunnel
            .state
            .lock()
            .socks
            .as_ref()
            .is_some_and(|s| s.v6.is_some())
    }

    /// The UDP port.
    pub fn port(&self) -> u16 {
        self.tunnel.port
    }

    /// Whether the tunnel belongs to namespace `ns`.
    pub fn is_in(&self, ns: &NetNs) -> bool {
        self.net == ns.as_ptr()
    }
}

/// For tests: holds off the taking of datagrams off the tunnel's sockets, as a context
/// taking them does ("Order" in the module documentation); datagrams that arrive meanwhile
/// stay queued. Dropping it lets go as a context that reached its quota does: the work item
/// takes what is queued.
#[cfg(CONFIG_KUNIT)]
pub struct ReceivePause(Arc<Tunnel>);

#[cfg(CONFIG_KUNIT)]
impl TunnelRef {
    /// Pauses receiving; `EBUSY` if a context is taking datagrams right now.
    pub fn pause_receive(&self) -> Result<ReceivePause> {
        let t = &self.tunnel;
        if t.draining[0].swap(true, Ordering::Acquire) {
            return Err(EBUSY);
        }
        if t.draining[1].swap(true, Ordering::Acquire) {
            t.draining[0].store(false, Ordering::Release);
            return Err(EBUSY);
        }
        Ok(ReceivePause(t.clone()))
    }
}

#[cfg(CONFIG_KUNIT)]
impl Drop for ReceivePause {
    fn drop(&mut self) {
        for flag in &self.0.draining {
            flag.store(false, Ordering::Release);
        }
        fence(Ordering::SeqCst);
        Tunnel::defer(self.0.clone());
    }
}

impl Drop for TunnelRef {
    /// Process context only: dropping the last handle closes the sockets, which sleeps.
    fn drop(&mut self) {
        let mut st = self.tunnel.state.lock();
        st.handles -= 1;
        if st.handles == 0 {
            if let Some(socks) = st.socks.take() {
                self.tunnel.open.store(false, Ordering::Release);
                // Under the state lock: the namespace's exit waits for it, so the namespace
                // lives while its sockets are released.
                socks.release();
            }
        }
    }
}
