// SPDX-License-Identifier: GPL-2.0
//! Kernel TCP sockets: what iWARP runs over.
//!
//! A [`TcpSocket`] owns one `struct socket` of a network namespace. It is not a "kern" socket:
//! like a process's, it holds a reference on its namespace, so the namespace outlives it.
//! Every operation that moves data is non-blocking (`EAGAIN` when it would block); connect is
//! non-blocking too (`EINPROGRESS`), and its outcome arrives as a state change.
//!
//! [`TcpSocket::watch`] installs the socket's `sk_data_ready`, `sk_write_space` and
//! `sk_state_change` callbacks: they call a [`TcpEvents`] implementation, then the callback
//! they replaced (so whoever waited on the socket is still woken). They run in softirq
//! context or with bottom halves disabled, and must not sleep: typically they queue work.
//! Dropping the socket (or [`TcpSocket::unwatch`]) puts the old callbacks back under the
//! socket's callback lock, after which no callback reaches the [`TcpEvents`] any more; the
//! socket's reference on it is dropped then.
//!
//! Sockets accepted from a listener do not inherit the listener's [`TcpEvents`] (their user
//! data is not copied), but they do inherit its callbacks until they are watched themselves:
//! those find no user data and only call the original callbacks.
//!
//! # Context
//!
//! Creating, binding, listening, connecting, accepting, watching and dropping a socket: process
//! context. [`TcpSocket::send`], [`TcpSocket::recv`] and [`TcpSocket::read`]: process context
//! (they take the socket lock, which may sleep). [`TcpInput::read`]: inside `data_ready`, in
//! place, as siw and the kernel's own TCP consumers (`tcp_read_sock`) do.
//!
//! C: `include/linux/net.h`, `include/net/sock.h`.

use super::bindings;
use super::error::code;
use super::net::{NetDevice, NetRef};
use super::page_ref::PageRange;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::alloc::KBox;
use kernel::prelude::*;
use kernel::sync::Arc;

/// An IPv4 or IPv6 socket address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockAddr {
    /// IPv4: address (network order) and port.
    V4 {
        /// The address.
        ip: [u8; 4],
        /// The port.
        port: u16,
    },
    /// IPv6: address (network order), port and scope id (link-local addresses).
    V6 {
        /// The address.
        ip: [u8; 16],
        /// The port.
        port: u16,
        /// The scope (interface index) of a link-local address, else 0.
        scope: u32,
    },
}

impl SockAddr {
    /// The port.
    pub fn port(&self) -> u16 {
        match *self {
            SockAddr::V4 { port, .. } | SockAddr::V6 { port, .. } => port,
        }
    }

    /// Whether this is the wildcard address (`INADDR_ANY`, `in6addr_any`).
    pub fn is_wildcard(&self) -> bool {
        match self {
            SockAddr::V4 { ip, .. } => ip.iter().all(|b| *b == 0),
            SockAddr::V6 { ip, .. } => ip.iter().all(|b| *b == 0),
        }
    }

    /// The same address with another port.
    pub fn with_port(self, p: u16) -> Self {
        match self {
            SockAddr::V4 { ip, .. } => SockAddr::V4 { ip, port: p },
            SockAddr::V6 { ip, scope, .. } => SockAddr::V6 { ip, port: p, scope },
        }
    }

    fn family(&self) -> u32 {
        match self {
            SockAddr::V4 { .. } => bindings::AF_INET,
            SockAddr::V6 { .. } => bindings::AF_INET6,
        }
    }

    /// The C address and its length.
    pub(crate) fn to_raw(self) -> (bindings::__kernel_sockaddr_storage, i32) {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        let (v6, ip, port, scope) = match self {
            SockAddr::V4 { ip, port } => {
                let mut a = [0u8; 16];
                a[..4].copy_from_slice(&ip);
                (false, a, port, 0)
            }
            SockAddr::V6 { ip, port, scope } => (true, ip, port, scope),
        };
        // SAFETY: `ss` is a whole `sockaddr_storage`; `ip` has the 16 bytes the helper reads.
        let len = unsafe { bindings::oxrdma_sockaddr_set(&mut ss, v6, ip.as_ptr(), port, scope) };
        (ss, len)
    }

    /// Reads an IPv4 or IPv6 address (`None` for another family).
    pub(crate) fn from_raw(ss: &bindings::__kernel_sockaddr_storage) -> Option<Self> {
        let mut ip = [0u8; 16];
        let (mut port, mut scope) = (0u16, 0u32);
        let fam = {
            // SAFETY: `ss` is a whole `sockaddr_storage`; the outputs are valid for writes.
            unsafe { bindings::oxrdma_sockaddr_get(ss, ip.as_mut_ptr(), &mut port, &mut scope) }
        };
        match fam {
            4 => Some(SockAddr::V4 {
                ip: [ip[0], ip[1], ip[2], ip[3]],
                port,
            }),
            6 => Some(SockAddr::V6 { ip, port, scope }),
            _ => None,
        }
    }
}

/// A TCP state (`enum` of `include/net/tcp_states.h`), as far as the owner needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// Connected: data may flow.
    Established,
    /// Connecting (`SYN_SENT`, `SYN_RECV`).
    Connecting,
    /// Listening.
    Listening,
    /// Closed, or closing in any of TCP's closing states.
    Closed,
}

/// What a watched socket reports. Runs in softirq context (or with bottom halves disabled),
/// possibly on several CPUs at once; must not sleep.
pub trait TcpEvents: Send + Sync + 'static {
    /// Data arrived (or, on a listener, a connection is ready to accept). `input` reads it
    /// here and now, if the events want it so.
    fn data_ready(&self, input: &mut TcpInput<'_>);
    /// Send buffer space became available, or, once the socket's acknowledgements are watched
    /// ([`TcpSocket::watch_acks`]), the peer acknowledged queued data. `acked` is the sequence
    /// number of the first byte not acknowledged yet (`snd_una`).
    fn write_space(&self, acked: u32);
    /// The TCP state changed (connected, reset, closed by the peer).
    fn state_change(&self);
}

/// The received bytes of a socket whose `data_ready` callback is running: the socket is held
/// for the callback (by the softirq, or by the process that owns it and is processing its
/// backlog), so they can be read in place, without a copy into a buffer of the caller's.
///
/// # Invariants
///
/// `sk` is a valid socket held as described above for `'a`.
pub struct TcpInput<'a> {
    sk: NonNull<bindings::sock>,
    _held: PhantomData<&'a ()>,
}

impl TcpInput<'_> {
    /// Reads what the socket received, in stream order: `f` gets it piece by piece (each
    /// piece valid for that call only) and returns how many of its bytes it took; taking
    /// fewer stops the read, and the rest stays in the socket. Returns the bytes taken.
    pub fn read<F: FnMut(&[u8]) -> usize>(&mut self, mut f: F) -> Result<usize> {
        // SAFETY: the socket is held for the callback (type invariant), as `tcp_read_sock`
        // requires; the chunk function matches `f`'s type and `f` outlives the call.
        let r = unsafe {
            bindings::oxrdma_tcp_read(
                self.sk.as_ptr(),
                Some(read_chunk::<F>),
                core::ptr::addr_of_mut!(f).cast(),
            )
        };
        byte_count(r)
    }

    /// Whether the peer closed its direction and everything it sent before was read.
    pub fn closed(&self) -> bool {
        // SAFETY: the socket is valid (type invariant).
        unsafe { bindings::oxrdma_sk_input_closed(self.sk.as_ptr()) }
    }
}

/// Hands one piece of received bytes to the closure of [`TcpInput::read`] or
/// [`TcpSocket::read`].
///
/// # Safety
///
/// `data` points to a live `F`, not otherwise borrowed during the call; `p` is valid for
/// reads of `len` bytes during the call.
unsafe extern "C" fn read_chunk<F: FnMut(&[u8]) -> usize>(
    data: *mut c_void,
    p: *const u8,
    len: usize,
) -> usize {
    // SAFETY: per the function's contract.
    let f = unsafe { &mut *data.cast::<F>() };
    if len == 0 {
        return 0;
    }
    // SAFETY: per the function's contract.
    let piece = unsafe { core::slice::from_raw_parts(p, len) };
    f(piece).min(len)
}

/// A byte count returned by a socket helper (or a negative errno) as a `Result`.
fn byte_count(r: core::ffi::c_int) -> Result<usize> {
    kernel::error::to_result(r.min(0))?;
    Ok(r as usize)
}

/// What a watched socket's user data points to.
struct Hook<T> {
    events: Arc<T>,
    saved: bindings::oxrdma_sk_saved,
    /// Every acknowledgement that frees queued data is reported ([`TcpSocket::watch_acks`]).
    acks: AtomicBool,
}

/// The installed hook of a watched socket, type-erased.
///
/// # Invariants
///
/// `hook` came from `KBox::<Hook<T>>::into_raw` for the `T` `free` was instantiated with, and
/// is the user data of the socket it belongs to while installed.
struct Installed {
    hook: NonNull<c_void>,
    saved: *const bindings::oxrdma_sk_saved,
    acks: *const AtomicBool,
    free: unsafe fn(NonNull<c_void>),
}

/// An owned TCP socket.
///
/// # Invariants
///
/// `sock` is a valid socket owned by this value, released on drop; its `sk` is non-NULL.
pub struct TcpSocket {
    sock: NonNull<bindings::socket>,
    installed: Option<Installed>,
}

// SAFETY: a socket may be used and released from any process context; the hook is `Send`
// (its events are `Send + Sync`).
unsafe impl Send for TcpSocket {}
// SAFETY: every method goes through the socket layer, which serialises with the socket lock.
unsafe impl Sync for TcpSocket {}

impl TcpSocket {
    /// A new socket of `addr`'s family in `net` (only the family of `addr` is used).
    pub fn new(net: &NetRef, family_of: &SockAddr) -> Result<Self> {
        let mut sock = core::ptr::null_mut();
        // SAFETY: `net` holds a reference on the namespace; `sock` is valid for the write.
        let err = unsafe {
            bindings::oxrdma_tcp_sock_create(net.as_ptr(), family_of.family() as i32, &mut sock)
        };
        kernel::error::to_result(err)?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // INVARIANT: created above, owned here; a created socket has its `sk`.
        Ok(Self {
            sock,
            installed: None,
        })
    }

    fn sk(&self) -> *mut bindings::sock {
        // SAFETY: the socket is valid (type invariant).
        unsafe { bindings::oxrdma_socket_sk(self.sock.as_ptr()) }
    }

    /// Allows binding to a port in `TIME_WAIT` (`SO_REUSEADDR`) and turns Nagle off
    /// (`TCP_NODELAY`): what an RDMA transport wants.
    pub fn set_rdma_options(&self) {
        // SAFETY: `sk` is valid (type invariant); both take the socket lock.
        unsafe {
            bindings::sock_set_reuseaddr(self.sk());
            bindings::tcp_sock_set_nodelay(self.sk());
        }
    }

    /// Data unacknowledged for `ms` milliseconds ends the connection with `ETIMEDOUT`
    /// (`TCP_USER_TIMEOUT`): how a dead peer is noticed while data is outstanding.
    pub fn set_user_timeout(&self, ms: u32) {
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        // SAFETY: `sk` is valid (type invariant); a non-negative value cannot fail.
        let _ = unsafe { bindings::tcp_sock_set_user_timeout(self.sk(), ms) };
    }

    /// Probes an idle connection (`SO_KEEPALIVE`): after `idle` seconds without traffic, every
    /// `interval` seconds, and `count` unanswered probes end it with `ETIMEDOUT`.
    pub fn set_keepalive(&self, idle: u32, interval: u32, count: u32) {
        // Values of at least 1, bounded by `MAX_TCP_KEEP*`, are accepted: the results of the
        // setters are of no interest.
        let v = |x: u32| i32::try_from(x).unwrap_or(i32::MAX).max(1);
        // SAFETY: `sk` is valid (type invariant); each setter takes the socket lock itself.
        unsafe {
            bindings::sock_set_keepalive(self.sk());
            let _ = bindings::tcp_sock_set_keepidle(self.sk(), v(idle).min(32767));
            let _ = bindings::tcp_sock_set_keepintvl(self.sk(), v(interval).min(32767));
            let _ = bindings::tcp_sock_set_keepcnt(self.sk(), v(count).min(127));
        }
    }

    /// Closing sends a reset instead of a FIN (`SO_LINGER` with a zero timeout).
    pub fn set_abort_on_close(&self) {
        // SAFETY: `sk` is valid (type invariant).
        unsafe { bindings::sock_no_linger(self.sk()) };
    }

    /// Binds to `addr` (port 0: an ephemeral port).
    pub fn bind(&self, addr: &SockAddr) -> Result {
        let (mut ss, len) = addr.to_raw();
        // SAFETY: the socket is valid (type invariant); `ss` holds `len` bytes of address.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_sock_bind(self.sock.as_ptr(), &mut ss, len)
        })
    }

    /// Binds the socket to `dev` (`SO_BINDTODEVICE`): it then only takes connections to
    /// that device's addresses (made over any path, including through `lo` from the same
    /// host) and sends only through it. Call before [`TcpSocket::bind`].
    pub fn bind_to_device(&self, dev: &NetDevice) -> Result {
        // SAFETY: the socket is valid (type invariant); the helper takes the socket lock.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_sock_bind_dev(self.sock.as_ptr(), dev.ifindex())
        })
    }

    /// Listens with a queue of `backlog` connections.
    pub fn listen(&self, backlog: i32) -> Result {
        // SAFETY: the socket is valid (type invariant).
        kernel::error::to_result(unsafe { bindings::kernel_listen(self.sock.as_ptr(), backlog) })
    }

    /// Starts connecting to `addr`: `Ok` if connected at once, `EINPROGRESS` while the
    /// handshake runs (a state change reports its end), or the error.
    pub fn connect(&self, addr: &SockAddr) -> Result {
        let (mut ss, len) = addr.to_raw();
        // SAFETY: the socket is valid (type invariant); `ss` holds `len` bytes of address.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_sock_connect(self.sock.as_ptr(), &mut ss, len)
        })
    }

    /// Takes a connection from a listener's queue; `EAGAIN` if there is none.
    pub fn accept(&self) -> Result<TcpSocket> {
        let mut new = core::ptr::null_mut();
        // SAFETY: the socket is valid (type invariant); `new` is valid for the write.
        kernel::error::to_result(unsafe {
            bindings::oxrdma_sock_accept(self.sock.as_ptr(), &mut new)
        })?;
        let sock = NonNull::new(new).ok_or(EINVAL)?;
        // INVARIANT: `kernel_accept` returned a connected socket the caller owns.
        let child = Self {
            sock,
            installed: None,
        };
        if let Some(inst) = &self.installed {
            // The child was cloned from this watched listener: it carries this module's
            // callbacks (without user data). Give it back the stack's own, which the
            // listener's hook saved.
            // SAFETY: `child.sk()` is valid; `inst.saved` points into the listener's live
            // hook, written when it was installed.
            unsafe { bindings::oxrdma_sk_uninstall(child.sk(), inst.saved) };
        }
        Ok(child)
    }

    /// The local (`peer` false) or remote address.
    pub fn addr(&self, peer: bool) -> Result<SockAddr> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        // SAFETY: the socket is valid (type invariant); `ss` is a whole `sockaddr_storage`.
        let r = unsafe { bindings::oxrdma_sock_name(self.sock.as_ptr(), &mut ss, peer) };
        kernel::error::to_result(r.min(0))?;
        SockAddr::from_raw(&ss).ok_or_else(code::eafnosupport)
    }

    /// The TCP state now.
    pub fn state(&self) -> TcpState {
        // SAFETY: `sk` is valid (type invariant); the helper reads the state once.
        match unsafe { bindings::oxrdma_sk_state(self.sk()) } as u32 {
            bindings::TCP_ESTABLISHED => TcpState::Established,
            bindings::TCP_SYN_SENT | bindings::TCP_SYN_RECV => TcpState::Connecting,
            bindings::TCP_LISTEN => TcpState::Listening,
            _ => TcpState::Closed,
        }
    }

    /// The effective maximum segment size of a connected socket (`mss_cache`).
    pub fn mss(&self) -> u32 {
        // SAFETY: `sk` is valid (type invariant); the helper reads the field once.
        unsafe { bindings::oxrdma_tcp_mss(self.sk()) }
    }

    /// The socket's pending error (`sk_err`: `ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, ...),
    /// if any. Not cleared.
    pub fn error(&self) -> Option<Error> {
        // SAFETY: `sk` is valid (type invariant); the helper reads the field once.
        let e = unsafe { bindings::oxrdma_sk_err(self.sk()) };
        (e > 0).then(|| Error::from_errno(-e))
    }

    /// Sends as much of `bufs` (in order) as fits now, without blocking; `more`: more data
    /// follows at once (`MSG_MORE`). Returns the bytes taken (possibly fewer than offered),
    /// `EAGAIN` if none fit, or the socket's error (`EPIPE` once it is shut down).
    pub fn send(&self, bufs: &[&[u8]], more: bool) -> Result<usize> {
        const MAX: usize = 8;
        let mut vec = [bindings::kvec::default(); MAX];
        let mut n = 0;
        let mut len = 0usize;
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            if n == MAX {
                return Err(EINVAL);
            }
            vec[n] = bindings::kvec {
                iov_base: b.as_ptr() as *mut c_void,
                iov_len: b.len(),
            };
            n += 1;
            len += b.len();
        }
        if len == 0 {
            return Ok(0);
        }
        // SAFETY: the socket is valid (type invariant); the `n` kvecs describe live buffers
        // of `len` bytes in all, which `kernel_sendmsg` only reads during the call.
        let r = unsafe {
            bindings::oxrdma_sock_send(self.sock.as_ptr(), vec.as_mut_ptr(), n, len, more)
        };
        byte_count(r)
    }

    /// Sends as much of the page ranges `pages` (in order, 16 at most) as fits now, without blocking and
    /// without copying them: the socket takes its own references on the pages and sends from
    /// them until the peer acknowledged the bytes (and again, should TCP retransmit them), so
    /// whatever changes them before [`TcpSocket::acked`] passes them changes what is sent.
    /// Pages that cannot be sent that way (slab memory) are copied. `more`: more data follows
    /// at once. Returns the bytes taken, `EAGAIN` if none fit, or the socket's error.
    pub fn send_pages<'a>(
        &self,
        pages: impl IntoIterator<Item = &'a PageRange>,
        more: bool,
    ) -> Result<usize> {
        const MAX: usize = bindings::OXRDMA_SEND_PAGES_MAX as usize;
        let mut pieces = [bindings::oxrdma_page_piece::default(); MAX];
        let mut n = 0;
        let mut len = 0usize;
        for r in pages.into_iter().filter(|r| !r.is_empty()) {
            if n == MAX {
                return Err(EINVAL);
            }
            pieces[n] = r.piece();
            n += 1;
            len += r.len();
        }
        if len == 0 {
            return Ok(0);
        }
        // SAFETY: valid socket (type invariant); each piece is bytes of a page `pages` holds a
        // reference on for the call (`PageRange`), and the socket takes its own before return.
        let r = unsafe {
            bindings::oxrdma_sock_send_pages(self.sock.as_ptr(), pieces.as_ptr(), n, len, more)
        };
        byte_count(r)
    }

    /// The sequence number that follows the last byte queued so far (`write_seq`).
    pub fn queued_end(&self) -> u32 {
        // SAFETY: `sk` is valid (type invariant); the helper reads the field once.
        unsafe { bindings::oxrdma_tcp_write_seq(self.sk()) }
    }

    /// The sequence number of the first byte the peer has not acknowledged (`snd_una`).
    pub fn acked(&self) -> u32 {
        // SAFETY: `sk` is valid (type invariant); the helper reads the field once.
        unsafe { bindings::oxrdma_tcp_snd_una(self.sk()) }
    }

    /// From now on, reports every acknowledgement that frees queued data to the watching
    /// events' [`TcpEvents::write_space`], for the rest of the watch. Without a watch, does
    /// nothing.
    pub fn watch_acks(&self) {
        let Some(inst) = self.installed.as_ref() else {
            return;
        };
        // SAFETY: the hook, and its flag, live while installed (invariant of `Installed`).
        let acks = unsafe { &*inst.acks };
        acks.store(true, Ordering::Release);
        // SAFETY: `sk` is valid (type invariant).
        unsafe { bindings::oxrdma_sk_set_nospace(self.sk()) };
    }

    /// Receives up to `buf.len()` bytes without blocking: the count, 0 at the end of the
    /// stream (the peer closed), `EAGAIN` if nothing is there, or the socket's error.
    pub fn recv(&self, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: the socket is valid (type invariant); `buf` is valid for `buf.len()` bytes
        // of writes during the call.
        let r = unsafe {
            bindings::oxrdma_sock_recv(self.sock.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        };
        byte_count(r)
    }

    /// Reads what the socket received, like [`TcpInput::read`], under the socket's lock
    /// (process context): for bytes that arrived before the socket was watched.
    pub fn read<F: FnMut(&[u8]) -> usize>(&self, mut f: F) -> Result<usize> {
        // SAFETY: the socket is valid (type invariant); the helper takes its lock; the chunk
        // function matches `f`'s type and `f` outlives the call.
        let r = unsafe {
            bindings::oxrdma_sock_read(
                self.sock.as_ptr(),
                Some(read_chunk::<F>),
                core::ptr::addr_of_mut!(f).cast(),
            )
        };
        byte_count(r)
    }

    /// Whether the peer closed its direction and everything it sent before was read.
    pub fn input_closed(&self) -> bool {
        // SAFETY: `sk` is valid (type invariant).
        unsafe { bindings::oxrdma_sk_input_closed(self.sk()) }
    }

    /// Shuts both directions down (a FIN goes out; blocked callers return).
    pub fn shutdown(&self) {
        // SAFETY: the socket is valid (type invariant). A socket that is not connected
        // answers `ENOTCONN`, which is of no interest here.
        let _ = unsafe { bindings::oxrdma_sock_shutdown(self.sock.as_ptr()) };
    }

    /// Reports the socket's events to `events` from now on (replacing an earlier watch).
    pub fn watch<T: TcpEvents>(&mut self, events: Arc<T>) -> Result {
        self.unwatch();
        let hook = KBox::new(
            Hook {
                events,
                saved: bindings::oxrdma_sk_saved::default(),
                acks: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?;
        let hook = KBox::into_raw(hook);
        // SAFETY: `hook` is a live allocation; its `saved` field is written by the helper,
        // under the callback lock, before any callback can read it.
        let saved = unsafe { core::ptr::addr_of_mut!((*hook).saved) };
        // SAFETY: `hook` is a live allocation.
        let acks = unsafe { core::ptr::addr_of!((*hook).acks) };
        // SAFETY: `sk` is valid (type invariant); the callbacks are instantiated for `T`,
        // matching the user data, which stays allocated until `unwatch` has uninstalled it.
        unsafe {
            bindings::oxrdma_sk_install(
                self.sk(),
                hook.cast(),
                Some(data_ready::<T>),
                Some(write_space::<T>),
                Some(state_change::<T>),
                saved,
            )
        };
        // INVARIANT: `hook` came from `KBox<Hook<T>>` and `free::<T>` frees it as such.
        self.installed = Some(Installed {
            // SAFETY: `KBox::into_raw` never returns NULL.
            hook: unsafe { NonNull::new_unchecked(hook.cast()) },
            saved,
            acks,
            free: free_hook::<T>,
        });
        Ok(())
    }

    /// Stops reporting events: once this returns, no callback reaches the events any more.
    pub fn unwatch(&mut self) {
        if let Some(inst) = self.installed.take() {
            // SAFETY: `sk` is valid; `inst.saved` is the saved callbacks inside the live hook.
            unsafe { bindings::oxrdma_sk_uninstall(self.sk(), inst.saved) };
            // SAFETY: uninstalled under the callback lock, so no callback holds the hook;
            // `free` matches its type (invariant of `Installed`).
            unsafe { (inst.free)(inst.hook) };
        }
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        self.unwatch();
        // SAFETY: owned (type invariant), released once; nothing uses it afterwards.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}

/// Frees a hook made by [`TcpSocket::watch`] for `T`.
///
/// # Safety
///
/// `p` came from `KBox::<Hook<T>>::into_raw` and is not used afterwards.
unsafe fn free_hook<T>(p: NonNull<c_void>) {
    // SAFETY: per the function's contract.
    drop(unsafe { KBox::from_raw(p.as_ptr().cast::<Hook<T>>()) });
}

/// Runs `f` on the hook of `sk`, if it has one, under the callback lock, then the original
/// callback `orig` picks, after the lock is dropped. Returns what `f` returned (the default
/// without a hook).
///
/// # Safety
///
/// `sk` is a valid socket whose user data, when set, is a `Hook<T>` (installed by `watch`).
unsafe fn with_hook<T: TcpEvents, R: Default>(
    sk: *mut bindings::sock,
    f: impl FnOnce(&Hook<T>) -> R,
    orig: impl FnOnce(&bindings::oxrdma_sk_saved) -> Option<unsafe extern "C" fn(*mut bindings::sock)>,
) -> R {
    // SAFETY: `sk` is valid (function contract); the lock is dropped below.
    let user = unsafe { bindings::oxrdma_sk_user_lock(sk) };
    let mut next = None;
    let mut r = R::default();
    if !user.is_null() {
        // SAFETY: a set user data is a live `Hook<T>` (contract) while the read lock is held:
        // `unwatch` uninstalls it under the write lock before freeing it.
        let hook = unsafe { &*user.cast::<Hook<T>>() };
        r = f(hook);
        next = orig(&hook.saved);
    }
    // SAFETY: taken above.
    unsafe { bindings::oxrdma_sk_user_unlock(sk) };
    if let Some(cb) = next {
        // SAFETY: the socket's own earlier callback, called with its socket as it would be.
        unsafe { cb(sk) };
    }
    r
}

/// The socket's `sk_data_ready` while watched.
///
/// # Safety
///
/// Called by the network stack for a socket `watch` installed it on, for `T`.
unsafe extern "C" fn data_ready<T: TcpEvents>(sk: *mut bindings::sock) {
    // SAFETY: installed by `watch` for `T` on `sk`, which the stack passes in.
    // INVARIANT: the stack calls `sk_data_ready` with the socket held.
    let mut input = TcpInput {
        // SAFETY: the stack passes a valid socket.
        sk: unsafe { NonNull::new_unchecked(sk) },
        _held: PhantomData,
    };
    // SAFETY: installed by `watch` for `T` on `sk`, which the stack passes in.
    unsafe { with_hook::<T, ()>(sk, |h| h.events.data_ready(&mut input), |s| s.data_ready) };
}

/// The socket's `sk_write_space` while watched.
///
/// # Safety
///
/// Called by the network stack for a socket `watch` installed it on, for `T`.
unsafe extern "C" fn write_space<T: TcpEvents>(sk: *mut bindings::sock) {
    // SAFETY: the stack passes a valid socket.
    let acked = unsafe { bindings::oxrdma_tcp_snd_una(sk) };
    let report = |h: &Hook<T>| {
        h.events.write_space(acked);
        h.acks.load(Ordering::Acquire)
    };
    // SAFETY: installed by `watch` for `T` on `sk`, which the stack passes in.
    if unsafe { with_hook::<T, bool>(sk, report, |s| s.write_space) } {
        // The original callback clears `SOCK_NOSPACE` once the socket is writable: set it
        // again, so that the next acknowledgement is reported too.
        // SAFETY: the stack passes a valid socket.
        unsafe { bindings::oxrdma_sk_set_nospace(sk) };
    }
}

/// The socket's `sk_state_change` while watched.
///
/// # Safety
///
/// Called by the network stack for a socket `watch` installed it on, for `T`.
unsafe extern "C" fn state_change<T: TcpEvents>(sk: *mut bindings::sock) {
    // SAFETY: installed by `watch` for `T` on `sk`, which the stack passes in.
    unsafe { with_hook::<T, ()>(sk, |h| h.events.state_change(), |s| s.state_change) };
}
