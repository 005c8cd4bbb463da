// SPDX-License-Identifier: GPL-2.0
//! RoCE v2 receive sockets: UDP tunnel sockets per network namespace.
//!
//! A tunnel is a pair of kernel UDP sockets bound to one port (4791 for RoCE v2) in one
//! network namespace, an IPv4 one and an IPv6 (`v6only`) one, set up as UDP encapsulation
//! sockets (`setup_udp_tunnel_sock`) whose `encap_rcv` hands every packet to a
//! [`UdpEncapReceiver`] as an [`RxSkb`].
//!
//! # Lifetime
//!
//! Kernel sockets do not hold a reference on their namespace, so a socket must never outlive
//! it. The layer keeps a module-global registry of open tunnels keyed by (namespace, port,
//! receiver) under its own mutex, and a `pernet_operations` ([`TunnelRegistration`], held by
//! the module) whose `exit` callback closes every tunnel of a namespace being dismantled. The
//! namespace `exit` runs after the namespace's devices are gone.
//!
//! Devices hold [`TunnelRef`]s: the first [`TunnelRef::open`] in a namespace for a (port,
//! receiver) creates the sockets, later ones share them, and they are closed when the last
//! handle drops or the namespace exits, whichever comes first; after that
//! [`TunnelRef::is_open`] is false. Dropping the registration (module unload) closes every
//! tunnel left.
//!
//! Closing uses `udp_tunnel_sock_release`: it clears the socket's user data (the tunnel),
//! waits for an RCU grace period (every `encap_rcv` in flight runs inside an RCU read-side
//! section), then releases the socket. `encap_rcv` drops packets of a socket whose user data
//! is gone, so once a tunnel is closed its receiver is never called again.
//!
//! # Context
//!
//! [`TunnelRegistration::register`], its drop, [`TunnelRef::open`] and [`TunnelRef`]'s drop
//! sleep: process context only, without the RTNL held (`open` takes it briefly), and not from
//! a receiver. [`UdpEncapReceiver::receive`] runs in softirq context and must not sleep.

use super::bindings;
use super::error::code;
use super::net::NetDeviceRef;
use super::skb::RxSkb;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Arc;

/// Receives the packets of a tunnel.
pub trait UdpEncapReceiver: Send + Sync + 'static {
    /// Called for each packet, in softirq context (must not sleep), possibly on several CPUs
    /// at once. The packet is the receiver's: drop it, queue it ([`super::skb::SkbQueue`]),
    /// or discard it.
    fn receive(&self, pkt: RxSkb);
}

/// `encap_type` for RoCE: any non-zero value enables `encap_rcv` (rxe uses 1, like VXLAN's
/// `UDP_ENCAP_ESPINUDP_NON_IKE`).
const ENCAP_TYPE: u8 = 1;

/// What the sockets' user data points to while they are open.
struct Tunnel {
    receiver: Arc<dyn UdpEncapReceiver>,
    open: AtomicBool,
    has_ipv6: bool,
    key: Key,
}

/// Namespace identity, UDP port, receiver identity.
type Key = (usize, u16, usize);

/// An owned kernel socket (`struct socket`) created by `udp_sock_create{4,6}`.
///
/// # Invariants
///
/// `0` is a valid socket owned by this value until [`Sock::release`].
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

    /// Turns the socket into an encapsulation socket delivering to `tunnel`.
    ///
    /// # Safety
    ///
    /// `net` must be the socket's namespace and alive; `tunnel` must stay valid until the
    /// socket is released.
    unsafe fn setup(&self, net: *mut bindings::net, tunnel: *const Tunnel) {
        let mut cfg = bindings::udp_tunnel_sock_cfg {
            sk_user_data: tunnel as *mut kernel::ffi::c_void,
            encap_type: ENCAP_TYPE,
            encap_rcv: Some(encap_rcv),
            ..Default::default()
        };
        // SAFETY: the socket is valid (type invariant), `net` is its live namespace and `cfg`
        // is valid for the call (safety requirements).
        unsafe { bindings::setup_udp_tunnel_sock(net, self.0.as_ptr(), &mut cfg) };
    }

    /// Clears the user data, waits for `encap_rcv`s in flight (`synchronize_rcu`), shuts the
    /// socket down and releases it. Sleeps.
    fn release(self) {
        // SAFETY: the socket is owned (type invariant) and given up here.
        unsafe { bindings::udp_tunnel_sock_release(self.0.as_ptr()) };
    }
}

/// `encap_rcv` of every tunnel socket.
///
/// # Safety
///
/// Called by the UDP stack only, in softirq context with an owned `skb` whose data starts at
/// the UDP header and whose network header is set.
unsafe extern "C" fn encap_rcv(sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> i32 {
    // SAFETY: balanced below; the sockets' user data is read under it, so `release` (which
    // clears it and then waits for a grace period) cannot free the tunnel while it is used.
    unsafe { bindings::oxrdma_rcu_read_lock() };
    // SAFETY: `sk` is the live socket the stack delivers to (function safety requirement).
    let tunnel = unsafe { bindings::oxrdma_sk_user_data(sk) }.cast::<Tunnel>();
    // SAFETY: `skb` is owned here (function safety requirement); `skb_linearize` may
    // reallocate its data but keeps the header offsets.
    let linear = !tunnel.is_null() && unsafe { bindings::oxrdma_skb_linearize(skb) } == 0;
    match NonNull::new(skb) {
        Some(skb) if linear => {
            // The IP and UDP layers trimmed the skb to the packet's length (function contract).
            // SAFETY: owned, linear, network header at the IP header; ownership moves to the
            // receiver.
            let pkt = unsafe { RxSkb::from_raw_rx(skb) };
            // SAFETY: a non-NULL user data is a `Tunnel` kept alive until a grace period
            // after it is cleared; this runs inside an RCU read-side section.
            unsafe { (*tunnel).receiver.receive(pkt) };
        }
        // SAFETY: the skb is owned here (function safety requirement); freed as dropped.
        _ => unsafe { bindings::oxrdma_kfree_skb(skb) },
    }
    // SAFETY: taken above.
    unsafe { bindings::oxrdma_rcu_read_unlock() };
    // Consumed: the stack does not process it further.
    0
}

/// An open tunnel in the registry.
struct Entry {
    tunnel: Arc<Tunnel>,
    handles: usize,
    v4: Option<Sock>,
    v6: Option<Sock>,
}

impl Entry {
    /// Closes the sockets (sleeps): afterwards the receiver is not called any more.
    fn close(&mut self) {
        self.tunnel.open.store(false, Ordering::Release);
        if let Some(s) = self.v6.take() {
            s.release();
        }
        if let Some(s) = self.v4.take() {
            s.release();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Unregistered,
    Registering,
    Registered,
    Unregistering,
}

struct Registry {
    state: State,
    tunnels: Option<RBTree<Key, Entry>>,
}

/// The registry, behind the tunnel mutex (a C `DEFINE_MUTEX` of its own, so that driver code
/// holding its [`super::sync::GlobalMutex`] may open and drop tunnels).
///
/// # Invariants
///
/// `data` is only accessed through a [`RegistryGuard`], which exists only while the C mutex
/// `oxrdma_tunnel_mutex` is held by the current task.
struct RegistryLock {
    data: UnsafeCell<Registry>,
}

// SAFETY: access to `data` is serialised by the mutex (type invariant) and `Registry` is
// `Send`.
unsafe impl Sync for RegistryLock {}

static REGISTRY: RegistryLock = RegistryLock {
    data: UnsafeCell::new(Registry {
        state: State::Unregistered,
        tunnels: None,
    }),
};

struct RegistryGuard;

impl RegistryLock {
    fn lock(&self) -> RegistryGuard {
        // SAFETY: the mutex is statically initialised; callers are in process context.
        unsafe { bindings::oxrdma_tunnel_lock() };
        // INVARIANT: the mutex is held until the guard is dropped.
        RegistryGuard
    }
}

impl Deref for RegistryGuard {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        // SAFETY: the tunnel mutex is held while the guard lives (type invariant of
        // `RegistryLock`).
        unsafe { &*REGISTRY.data.get() }
    }
}

impl DerefMut for RegistryGuard {
    fn deref_mut(&mut self) -> &mut Registry {
        // SAFETY: the tunnel mutex is held while the guard lives and `&mut self` makes this
        // the only access through it.
        unsafe { &mut *REGISTRY.data.get() }
    }
}

impl Drop for RegistryGuard {
    fn drop(&mut self) {
        // SAFETY: this task took the mutex in `RegistryLock::lock`.
        unsafe { bindings::oxrdma_tunnel_unlock() };
    }
}

/// Removes and closes (under the lock) one tunnel of namespace `net`, if any; returns it to
/// be dropped outside the lock.
fn close_one_of(net: usize) -> Option<Entry> {
    let mut reg = REGISTRY.lock();
    let tree = reg.tunnels.as_mut()?;
    let key = *tree.keys().find(|k| k.0 == net)?;
    let mut entry = tree.remove(&key)?;
    entry.close();
    Some(entry)
}

/// `pernet_operations.exit`: the namespace is being dismantled (its devices are gone).
///
/// # Safety
///
/// Called by the namespace core only.
unsafe extern "C" fn net_exit(net: *mut bindings::net) {
    while let Some(entry) = close_one_of(net as usize) {
        drop(entry);
    }
}

const fn pernet_ops() -> bindings::pernet_operations {
    // SAFETY: `pernet_operations` is plain data for which all-zeroes is valid (empty list
    // head, no callbacks, no generic data), what a C designated initialiser leaves.
    let mut ops: bindings::pernet_operations = unsafe { core::mem::zeroed() };
    ops.exit = Some(net_exit);
    ops
}

/// The `pernet_operations`; only touched by `register_pernet_subsys` and
/// `unregister_pernet_subsys`, which the registry state serialises.
static mut PERNET_OPS: bindings::pernet_operations = pernet_ops();

/// The module's registration of the tunnel layer with the namespace core; tunnels can be
/// opened while it exists. At most one exists at a time; the module holds it from init to
/// exit. Dropping it closes every tunnel (process context).
pub struct TunnelRegistration {
    _private: (),
}

impl TunnelRegistration {
    /// Registers the per-namespace exit hook (`register_pernet_subsys`). `EBUSY` if already
    /// registered. Process context, no RTNL.
    pub fn register() -> Result<Self> {
        {
            let mut reg = REGISTRY.lock();
            if reg.state != State::Unregistered {
                return Err(EBUSY);
            }
            reg.state = State::Registering;
            reg.tunnels = Some(RBTree::new());
        }
        // Not called with the tunnel mutex held: the namespace core calls `net_exit`, which
        // takes it, under the lock that registration takes.
        // SAFETY: `PERNET_OPS` is a static initialised above; the `Registering` state keeps
        // anyone else from registering or unregistering it.
        let err = unsafe { bindings::register_pernet_subsys(&raw mut PERNET_OPS) };
        let mut reg = REGISTRY.lock();
        if err != 0 {
            reg.state = State::Unregistered;
            reg.tunnels = None;
            return Err(Error::from_errno(err));
        }
        reg.state = State::Registered;
        Ok(Self { _private: () })
    }
}

impl Drop for TunnelRegistration {
    fn drop(&mut self) {
        REGISTRY.lock().state = State::Unregistering;
        // `unregister_pernet_subsys` calls `net_exit` for every namespace: it closes every tunnel.
        // SAFETY: registered in `register` (this value exists); no new tunnel can be opened
        // now.
        unsafe { bindings::unregister_pernet_subsys(&raw mut PERNET_OPS) };
        let tree = {
            let mut reg = REGISTRY.lock();
            reg.state = State::Unregistered;
            reg.tunnels.take()
        };
        // Every namespace went through `net_exit`, so this is empty; drop it outside the lock.
        drop(tree);
    }
}

/// A counted namespace reference taken for the duration of `open`.
///
/// # Invariants
///
/// `0` is a namespace this value holds one reference on.
struct NetGuard(*mut bindings::net);

impl NetGuard {
    /// References `dev`'s current namespace, unless it is being dismantled.
    fn of(dev: &NetDeviceRef<'_>) -> Option<NetGuard> {
        // The caller does not hold the RTNL; `maybe_get_net` fails once the namespace's count
        // dropped to zero.
        // SAFETY: the RTNL keeps the device from moving between namespaces, and a device in
        // a namespace keeps its `struct net` allocated.
        let net = unsafe {
            bindings::rtnl_lock();
            let net = bindings::oxrdma_maybe_get_net(bindings::oxrdma_dev_net(dev.as_ptr()));
            bindings::rtnl_unlock();
            net
        };
        // INVARIANT: a non-NULL result carries a reference.
        (!net.is_null()).then_some(NetGuard(net))
    }
}

impl Drop for NetGuard {
    fn drop(&mut self) {
        // SAFETY: this value holds one reference (type invariant).
        unsafe { bindings::oxrdma_put_net(self.0) };
    }
}

/// A handle on the RoCE v2 receive sockets of one namespace and port.
///
/// # Invariants
///
/// While the registry holds an entry for `tunnel` (same `Arc`), that entry counts this handle
/// in `handles`.
pub struct TunnelRef {
    tunnel: Arc<Tunnel>,
}

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
    pub fn open(
        dev: &NetDeviceRef<'_>,
        port: u16,
        receiver: Arc<dyn UdpEncapReceiver>,
    ) -> Result<TunnelRef> {
        let net = NetGuard::of(dev).ok_or(ENODEV)?;
        let rx_id = (&*receiver as *const dyn UdpEncapReceiver).cast::<u8>() as usize;
        let key: Key = (net.0 as usize, port, rx_id);
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;

        let mut reg = REGISTRY.lock();
        if reg.state != State::Registered {
            return Err(EINVAL);
        }
        let tree = reg.tunnels.as_mut().ok_or(EINVAL)?;
        if let Some(entry) = tree.get_mut(&key) {
            entry.handles += 1;
            // INVARIANT: counted above.
            return Ok(TunnelRef {
                tunnel: entry.tunnel.clone(),
            });
        }

        // SAFETY: `net` holds a reference on the namespace for the calls below.
        let v4 = unsafe { Sock::create(net.0, bindings::AF_INET, port) }?;
        // SAFETY: as above.
        let v6 = match unsafe { Sock::create(net.0, bindings::AF_INET6, port) } {
            Ok(s) => Some(s),
            Err(e) if e == code::eafnosupport() => None,
            Err(e) => {
                v4.release();
                return Err(e);
            }
        };
        let tunnel = match Arc::new(
            Tunnel {
                receiver,
                open: AtomicBool::new(true),
                has_ipv6: v6.is_some(),
                key,
            },
            GFP_KERNEL,
        ) {
            Ok(t) => t,
            Err(e) => {
                if let Some(s) = v6 {
                    s.release();
                }
                v4.release();
                return Err(e.into());
            }
        };
        let ptr: *const Tunnel = &*tunnel;
        // SAFETY: `net` is the sockets' live namespace; the tunnel is kept alive by the entry
        // until `Entry::close` has released the sockets.
        unsafe {
            v4.setup(net.0, ptr);
            if let Some(s) = &v6 {
                s.setup(net.0, ptr);
            }
        }
        tree.insert(node.into_node(
            key,
            Entry {
                tunnel: tunnel.clone(),
                handles: 1,
                v4: Some(v4),
                v6,
            },
        ));
        // INVARIANT: the new entry counts this handle.
        Ok(TunnelRef { tunnel })
    }

    /// Whether the sockets are still open: false once the namespace was dismantled or the
    /// [`TunnelRegistration`] dropped (while a handle exists, nothing else closes them).
    pub fn is_open(&self) -> bool {
        self.tunnel.open.load(Ordering::Acquire)
    }

    /// Whether an IPv6 socket was opened too.
    pub fn has_ipv6(&self) -> bool {
        self.tunnel.has_ipv6
    }

    /// The UDP port.
    pub fn port(&self) -> u16 {
        self.tunnel.key.1
    }

    /// The namespace's identity (never dereferenced): see [`super::net::NetNs::id`].
    pub fn net_id(&self) -> usize {
        self.tunnel.key.0
    }
}

impl Drop for TunnelRef {
    /// Process context only: dropping the last handle closes the sockets, which sleeps.
    fn drop(&mut self) {
        let entry = {
            let mut reg = REGISTRY.lock();
            let Some(tree) = reg.tunnels.as_mut() else {
                return;
            };
            let key = self.tunnel.key;
            match tree.get_mut(&key) {
                Some(e) if Arc::ptr_eq(&e.tunnel, &self.tunnel) => {
                    e.handles -= 1;
                    if e.handles > 0 {
                        return;
                    }
                }
                // Closed already (namespace exit, unregistration).
                _ => return,
            }
            let mut entry = tree.remove(&key);
            if let Some(e) = entry.as_mut() {
                e.close();
            }
            entry
        };
        // The receiver may be dropped here, outside the lock.
        drop(entry);
    }
}
