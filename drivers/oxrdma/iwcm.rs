// SPDX-License-Identifier: GPL-2.0
//! iWARP connection management: the provider side of ib_core's iw_cm over kernel TCP.
//!
//! * A listener ([`Listener`]) is a TCP socket in the device's namespace, bound to the
//!   identifier's address; a wildcard one is also bound to the device's netdev (as siw
//!   does), so that devices of one namespace, oxiwarp's and siw's, listen on the same port
//!   side by side and a connection reaches the device that owns its destination address.
//!   Each connection accepted becomes a [`Pending`] connection that
//!   reads the peer's MPA request and reports it to the listener's identifier with a token.
//!   `iw_accept` (with that token) answers with an MPA reply and hands the socket to the QP;
//!   `iw_reject` answers with a rejecting reply and closes.
//! * An active connection ([`Active`]) connects a socket, sends the MPA request, reads the
//!   reply, hands the socket to the QP and reports the connect reply; any failure is reported
//!   as a connect reply with an error status. The iw_cm waits for that reply before it can
//!   destroy the identifier, so exactly one is always reported: on success, failure, timeout
//!   or the device going away.
//!
//! Both kinds of connection have a deadline ([`MPA_TIMEOUT_MS`]); a peer that connects and
//! stays silent holds nothing longer. Everything runs in the module's workqueue (the sockets'
//! callbacks and the deadlines only queue work).
//!
//! Lock order: the device's connection table ([`IwCm`]), then a connection's own state; a
//! QP's locks are taken only with neither held (`QpInner::iw_attach`).

use crate::dev::RoceDev;
use crate::ox::error::code;
use crate::ox::ida::{Ida, IdaId};
use crate::ox::net::NetRef;
use crate::ox::params;
use crate::ox::rdma::iwcm::{CmId, ConnParams, Event, EventKind};
use crate::ox::tcp::{SockAddr, TcpEvents, TcpInput, TcpSocket, TcpState};
use crate::ox::timer::{Timer, TimerHandler};
use crate::ox::workqueue;
use crate::qp::{IwParams, QpInner, RtrRole, MAX_IRD};
use crate::wire::iwarp::mpa::{self, IrdOrd, Negotiated, Policy, RrHeader, RrKind, RtrSet};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    alloc::KVec,
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    types::ARef,
    workqueue::{Work, WorkItem},
};

/// How long a connection may take from TCP connect (or accept) to the end of the MPA
/// exchange, and a reported request may wait for the application's accept or reject.
const MPA_TIMEOUT_MS: u64 = 20_000;
/// Connection requests a listener queues (the TCP backlog).
const BACKLOG_MAX: i32 = 128;
/// Connections a listener accepts in one run (the rest in the next).
const ACCEPTS_PER_RUN: u32 = 16;
/// Connections being set up at once per device (tokens).
const MAX_PENDING: u32 = 1024;
/// The largest MPA request or reply frame.
const RR_MAX: usize = mpa::RR_HDR_LEN + mpa::MAX_PRIVATE_DATA;
/// IRD/ORD for an MPA revision 1 peer, which does not say.
const DEFAULT_RD: u16 = 16;
/// How long a connection's data may stay unacknowledged before the connection is declared
/// dead (`TCP_USER_TIMEOUT`): a peer that vanished (link down, host gone) ends the QP with an
/// error instead of TCP's default of about 15 minutes of retransmissions.
const DEAD_PEER_MS: u32 = 30_000;
/// Keepalive of an idle connection: the first probe after this many seconds without traffic,
/// then one every [`KEEPALIVE_INTERVAL_S`], [`KEEPALIVE_PROBES`] unanswered ones end it. A peer
/// that vanished while nothing was outstanding is noticed too, after about 25 s.
const KEEPALIVE_IDLE_S: u32 = 10;
/// See [`KEEPALIVE_IDLE_S`].
const KEEPALIVE_INTERVAL_S: u32 = 5;
/// See [`KEEPALIVE_IDLE_S`].
const KEEPALIVE_PROBES: u32 = 3;

/// Something a socket or a deadline wakes: its work runs next in the module's queue.
trait Wake: Send + Sync + 'static {
    fn wake(this: &Arc<Self>);
}

/// Makes `$t` a work item of the module's queue that runs `$t::$run`, woken by its socket;
/// with `deadline`, also the handler of its timer, which sets its `expired` flag and wakes it.
macro_rules! connection_work {
    ($t:ident, $run:ident, deadline) => {
        connection_work!($t, $run);

        impl TimerHandler for $t {
            fn expired(this: ArcBorrow<'_, Self>) {
                let this: Arc<Self> = this.into();
                this.expired.store(true, Ordering::Release);
                Wake::wake(&this);
            }
        }
    };
    ($t:ident, $run:ident) => {
        impl_has_work! {
            impl HasWork<Self> for $t { self.work }
        }

        impl WorkItem for $t {
            type Pointer = Arc<$t>;

            fn run(this: Arc<$t>) {
                this.$run();
            }
        }

        impl Wake for $t {
            fn wake(this: &Arc<Self>) {
                let _ = workqueue::queue().enqueue(this.clone());
            }
        }
    };
}

/// A socket's callbacks, waking `T`.
struct Waker<T: Wake>(Arc<T>);

impl<T: Wake> TcpEvents for Waker<T> {
    fn data_ready(&self, _input: &mut TcpInput<'_>) {
        T::wake(&self.0);
    }
    fn write_space(&self, _acked: u32) {
        T::wake(&self.0);
    }
    fn state_change(&self) {
        T::wake(&self.0);
    }
}

/// A device's iWARP connections being set up, and its listeners.
#[pin_data]
pub(crate) struct IwCm {
    dev: Arc<RoceDev>,
    /// The device offers and takes RFC 7306's extensions (the module parameter
    /// `iwarp_ext` when the device was created: its attributes do not change).
    rdmap_ext: bool,
    tokens: Arc<Ida>,
    #[pin]
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    listeners: Slots<Listener>,
    pending: Slots<Pending>,
    active: Slots<Active>,
    dead: bool,
}

/// A set of objects in reusable slots (6.12's `KVec` cannot remove elements).
struct Slots<T>(KVec<Option<Arc<T>>>);

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Self(KVec::new())
    }
}

impl<T> Slots<T> {
    fn insert(&mut self, x: Arc<T>) -> Result {
        match self.0.iter_mut().find(|s| s.is_none()) {
            Some(s) => *s = Some(x),
            None => self.0.push(Some(x), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Takes out the first object `f` picks.
    fn take_where(&mut self, f: impl Fn(&Arc<T>) -> bool) -> Option<Arc<T>> {
        self.0
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(&f))
            .and_then(Option::take)
    }

    /// Takes out every object.
    fn take_all(&mut self) -> KVec<Option<Arc<T>>> {
        core::mem::take(&mut self.0)
    }
}

impl IwCm {
    /// The connection manager of the device `dev`; `rdmap_ext`: it speaks RFC 7306.
    pub(crate) fn new(dev: Arc<RoceDev>, rdmap_ext: bool) -> Result<Arc<Self>> {
        let tokens = Ida::new(1, MAX_PENDING)?;
        Arc::pin_init(
            pin_init!(Self {
                dev,
                rdmap_ext,
                tokens,
                table <- new_mutex!(Table::default(), "oxrdma_iwcm"),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the device speaks RFC 7306's extensions (with peers that do).
    pub(crate) fn rdmap_ext(&self) -> bool {
        self.rdmap_ext
    }

    /// A new TCP socket in the device's namespace, for `addr`'s family.
    fn socket(&self, addr: &SockAddr) -> Result<TcpSocket> {
        let nd = self.dev.tx.netdev().ok_or(ENODEV)?;
        let net = NetRef::of(&nd).ok_or(ENODEV)?;
        let s = TcpSocket::new(&net, addr)?;
        s.set_rdma_options();
        s.set_user_timeout(DEAD_PEER_MS);
        s.set_keepalive(KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES);
        Ok(s)
    }

    /// The device is going away: every listener and connection being set up ends (active
    /// ones report a failed connect). Process context.
    pub(crate) fn shutdown(&self) {
        let (listeners, pending, active) = {
            let mut t = self.table.lock();
            t.dead = true;
            (
                t.listeners.take_all(),
                t.pending.take_all(),
                t.active.take_all(),
            )
        };
        for l in listeners.iter().flatten() {
            l.close();
        }
        for p in pending.iter().flatten() {
            p.close();
        }
        for a in active.iter().flatten() {
            a.finish(Err(code::econnreset()));
        }
    }

    // ---- the iw_cm's calls -----------------------------------------------------------------

    pub(crate) fn create_listen(self: &Arc<Self>, id: &CmId, backlog: i32) -> Result {
        let addr = id.local_addr().ok_or(EINVAL)?;
        let mut sock = self.socket(&addr)?;
        if addr.is_wildcard() {
            // Only the device's own addresses (as siw does): devices of one namespace,
            // oxiwarp's and siw's, listen on one port side by side.
            let nd = self.dev.tx.netdev().ok_or(ENODEV)?;
            sock.bind_to_device(&nd)?;
        }
        sock.bind(&addr)?;
        sock.listen(backlog.clamp(1, BACKLOG_MAX))?;
        let l = Arc::pin_init(
            pin_init!(Listener {
                cm: self.clone(),
                id: ARef::from(id),
                sock <- new_mutex!(None, "oxrdma_iw_listen"),
                work <- new_work!("oxrdma_iw_listen"),
            }),
            GFP_KERNEL,
        )?;
        sock.watch(Arc::new(Waker(l.clone()), GFP_KERNEL)?)?;
        *l.sock.lock() = Some(sock);
        let mut t = self.table.lock();
        if t.dead {
            drop(t);
            l.close();
            return Err(ENODEV);
        }
        t.listeners.insert(l.clone())?;
        drop(t);
        // Connections may have queued before the callbacks were in place.
        Wake::wake(&l);
        Ok(())
    }

    pub(crate) fn destroy_listen(&self, id: &CmId) -> Result {
        let l = self
            .table
            .lock()
            .listeners
            .take_where(|l| core::ptr::eq(&*l.id, id))
            .ok_or(EINVAL)?;
        l.close();
        // Connections of this listener not yet reported go too (reported ones belong to the
        // identifiers the iw_cm made for them).
        loop {
            let p = self.table.lock().pending.take_where(|p| {
                core::ptr::eq(&*p.listener, id) && !p.reported.load(Ordering::Acquire)
            });
            match p {
                Some(p) => p.close(),
                None => break,
            }
        }
        Ok(())
    }

    /// The pending connection of `id`'s token, taken out of the table.
    fn take_pending(&self, id: &CmId) -> Result<Arc<Pending>> {
        let token = id.provider_token() as u32;
        let p = self
            .table
            .lock()
            .pending
            .take_where(|p| {
                p.token.get() == token
                    && p.reported.load(Ordering::Acquire)
                    && !p.expired.load(Ordering::Acquire)
            })
            .ok_or(EINVAL)?;
        p.timer.cancel();
        Ok(p)
    }

    pub(crate) fn accept(&self, id: &CmId, params: &ConnParams<'_>) -> Result {
        let p = self.take_pending(id)?;
        let (sock, req, words) = {
            let mut io = p.io.lock();
            (io.sock.take(), io.req, io.words)
        };
        let mut sock = sock.ok_or_else(code::econnreset)?;
        sock.unwatch();
        let req = req.ok_or(EINVAL)?;
        let qp = self.dev.qp(params.qpn).ok_or(EINVAL)?;
        let policy = Policy {
            revision: 2,
            crc: params::iwarp_crc(),
            markers: params::iwarp_markers(),
            ird: (params.ird.min(u32::from(MAX_IRD)) as u16).max(1),
            ord: params.ord.min(u32::from(MAX_IRD)) as u16,
            // Peer-to-peer mode when the initiator offers it, with a zero-length RDMA write
            // or read as its ready-to-receive message (a zero-length send would take a
            // receive WQE the ULP did not post for it).
            rtr: Some(RTR_TYPES),
            rdmap_ext: self.rdmap_ext,
        };
        let pd = params.private_data;
        let pd_len = u16::try_from(pd.len()).map_err(|_| EINVAL)?;
        let (hdr, rwords, neg) = policy
            .reply(&req, words, pd_len, false)
            .or_else(|_| {
                // An initiator offering only a send gets a client-server reply (RFC 6581
                // leaves it to the initiator to go on or not).
                Policy {
                    rtr: None,
                    ..policy
                }
                .reply(&req, words, pd_len, false)
            })
            .map_err(|_| EINVAL)?;
        send_frame(&sock, &hdr, rwords, pd)?;
        let local = sock.addr(false).ok();
        let remote = sock.addr(true).ok();
        let params = iw_params(&sock, &neg, false);
        qp.iw_attach(sock, ARef::from(id), &params, |cm| {
            let mut ev = Event::new(EventKind::Established);
            ev.local = local;
            ev.remote = remote;
            ev.ird = neg.ird.min(255) as u8;
            ev.ord = neg.ord.min(255) as u8;
            cm.event(&ev)
        })
    }

    pub(crate) fn reject(&self, id: &CmId, pd: &[u8]) -> Result {
        let p = self.take_pending(id)?;
        let (sock, req, words) = {
            let mut io = p.io.lock();
            (io.sock.take(), io.req, io.words)
        };
        let (Some(sock), Some(req)) = (sock, req) else {
            return Ok(());
        };
        let policy = Policy {
            revision: 2,
            crc: false,
            markers: params::iwarp_markers(),
            ird: 0,
            ord: 0,
            rtr: None,
            rdmap_ext: false,
        };
        let pd = &pd[..pd.len().min(mpa::MAX_PRIVATE_DATA - mpa::IRD_ORD_LEN)];
        if let Ok((hdr, w, _)) = policy.reply(&req, words, pd.len() as u16, true) {
            let _ = send_frame(&sock, &hdr, w, pd);
        }
        sock.shutdown();
        Ok(())
    }

    pub(crate) fn connect(self: &Arc<Self>, id: &CmId, params: &ConnParams<'_>) -> Result {
        let local = id.local_addr().ok_or(EINVAL)?;
        let remote = id.remote_addr().ok_or(EINVAL)?;
        if self.dev.qp(params.qpn).is_none() {
            return Err(EINVAL);
        }
        let policy = Policy {
            revision: 2,
            crc: params::iwarp_crc(),
            markers: params::iwarp_markers(),
            ird: (params.ird.min(u32::from(MAX_IRD)) as u16).max(1),
            ord: params.ord.min(u32::from(MAX_IRD)) as u16,
            rtr: {
                let p2p = params::iwarp_p2p();
                let offer = RtrSet {
                    send: false,
                    write: p2p & 1 != 0,
                    read: p2p & 2 != 0,
                };
                (offer.write || offer.read).then_some(offer)
            },
            rdmap_ext: self.rdmap_ext,
        };
        let pd_len = u16::try_from(params.private_data.len()).map_err(|_| EINVAL)?;
        let (req, words) = policy.request(pd_len).map_err(|_| EINVAL)?;
        let mut pdata = KVec::new();
        pdata.extend_from_slice(params.private_data, GFP_KERNEL)?;
        let mut sock = self.socket(&local)?;
        sock.bind(&local)?;
        let a = Arc::pin_init(
            pin_init!(&this in Active {
                cm: self.clone(),
                id: ARef::from(id),
                qpn: params.qpn,
                policy,
                req,
                words,
                pdata,
                done: AtomicBool::new(false),
                expired: AtomicBool::new(false),
                io <- new_mutex!(ActIo { sock: None, sent: false, buf: KVec::new(), have: 0 }, "oxrdma_iw_active"),
                work <- new_work!("oxrdma_iw_active"),
                timer <- Timer::new(this),
            }),
            GFP_KERNEL,
        )?;
        a.io.lock().buf = KVec::from_elem(0u8, RR_MAX, GFP_KERNEL)?;
        sock.watch(Arc::new(Waker(a.clone()), GFP_KERNEL)?)?;
        match sock.connect(&remote) {
            Ok(()) => {}
            Err(e) if e.to_errno() == code::einprogress().to_errno() => {}
            Err(e) => return Err(e),
        }
        a.io.lock().sock = Some(sock);
        {
            let mut t = self.table.lock();
            if t.dead {
                return Err(ENODEV);
            }
            t.active.insert(a.clone())?;
        }
        a.timer.arm_us(&a, MPA_TIMEOUT_MS * 1000);
        Wake::wake(&a);
        Ok(())
    }
}

/// The data path's parameters from the negotiation and the socket's MSS.
/// The ready-to-receive messages oxiwarp sends as an initiator and accepts as a responder in
/// peer-to-peer mode.
const RTR_TYPES: RtrSet = RtrSet {
    send: false,
    write: true,
    read: true,
};

/// What the QP needs of the negotiated `n`, this side being the `initiator` or not.
fn iw_params(sock: &TcpSocket, n: &Negotiated, initiator: bool) -> IwParams {
    let emss = sock.mss().max(536);
    IwParams {
        rtr: match n.rtr {
            Some(r) if initiator => RtrRole::Send(r),
            Some(r) => RtrRole::Await(r),
            None => RtrRole::None,
        },
        crc: n.crc,
        markers_tx: n.markers_tx,
        markers_rx: n.markers_rx,
        ird: n.ird,
        ord: n.ord,
        rdmap_ext: n.rdmap_ext,
        mulpdu: mpa::mulpdu(emss, n.markers_tx).unwrap_or(512),
    }
}

/// Sends an MPA request or reply frame at once (it fits a new socket's buffer).
fn send_frame(sock: &TcpSocket, hdr: &RrHeader, words: Option<IrdOrd>, pd: &[u8]) -> Result {
    let h = hdr.to_bytes();
    let w = words.map(|w| w.to_bytes());
    let parts: [&[u8]; 3] = [&h, w.as_ref().map_or(&[][..], |w| &w[..]), pd];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let n = sock.send(&parts, false)?;
    if n != total {
        return Err(code::econnreset());
    }
    Ok(())
}

/// Reads into `buf[*have..need]` what the socket has; `Ok(true)` once `need` bytes are in.
fn read_exact(sock: &TcpSocket, buf: &mut [u8], have: &mut usize, need: usize) -> Result<bool> {
    while *have < need {
        match sock.recv(&mut buf[*have..need]) {
            Ok(0) => return Err(code::econnreset()),
            Ok(n) => *have += n,
            Err(e) if e == EAGAIN => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// A whole MPA request or reply frame: its header, IRD/ORD words, and where the ULP's
/// private data is in the buffer.
struct Frame {
    hdr: RrHeader,
    words: Option<IrdOrd>,
    ulp: core::ops::Range<usize>,
}

/// Reads an MPA request or reply frame of `kind` into `buf`: `Ok(Some(...))` once whole.
fn read_frame(
    sock: &TcpSocket,
    kind: RrKind,
    buf: &mut [u8],
    have: &mut usize,
) -> Result<Option<Frame>> {
    if !read_exact(sock, buf, have, mpa::RR_HDR_LEN)? {
        return Ok(None);
    }
    let hdr = RrHeader::parse(buf, kind).map_err(|_| code::eproto())?;
    let need = mpa::RR_HDR_LEN + usize::from(hdr.pd_len);
    if !read_exact(sock, buf, have, need)? {
        return Ok(None);
    }
    let mut ulp = mpa::RR_HDR_LEN..need;
    let words = if hdr.enhanced {
        let w = IrdOrd::parse(&buf[ulp.clone()]).map_err(|_| code::eproto())?;
        ulp.start += mpa::IRD_ORD_LEN;
        Some(w)
    } else {
        None
    };
    Ok(Some(Frame { hdr, words, ulp }))
}

// ---- listeners ------------------------------------------------------------------------------

#[pin_data]
struct Listener {
    cm: Arc<IwCm>,
    id: ARef<CmId>,
    #[pin]
    sock: Mutex<Option<TcpSocket>>,
    #[pin]
    work: Work<Listener>,
}

connection_work!(Listener, accept_some);

impl Listener {
    /// Accepts what the listener's queue holds (some of it, then runs again).
    fn accept_some(self: &Arc<Self>) {
        for _ in 0..ACCEPTS_PER_RUN {
            let s = match self.sock.lock().as_ref().map(|l| l.accept()) {
                Some(Ok(s)) => s,
                _ => return,
            };
            if let Err(e) = Pending::start(self, s) {
                pr_info!("iWARP connection request dropped: {:?}\n", e);
            }
        }
        Wake::wake(self);
    }

    fn close(&self) {
        let s = self.sock.lock().take();
        drop(s);
    }
}

// ---- connection requests --------------------------------------------------------------------

#[pin_data]
struct Pending {
    cm: Arc<IwCm>,
    listener: ARef<CmId>,
    token: IdaId,
    /// Reported to the listener: the iw_cm has the token.
    reported: AtomicBool,
    /// The deadline passed.
    expired: AtomicBool,
    #[pin]
    io: Mutex<PendIo>,
    #[pin]
    work: Work<Pending>,
    #[pin]
    timer: Timer<Pending>,
}

struct PendIo {
    sock: Option<TcpSocket>,
    buf: KVec<u8>,
    have: usize,
    req: Option<RrHeader>,
    words: Option<IrdOrd>,
}

// The deadline: the MPA request never came, or nobody answered it.
connection_work!(Pending, step, deadline);

impl Pending {
    fn start(l: &Arc<Listener>, mut sock: TcpSocket) -> Result {
        let cm = &l.cm;
        let token = cm.tokens.alloc()?;
        let p = Arc::pin_init(
            pin_init!(&this in Pending {
                cm: cm.clone(),
                listener: l.id.clone(),
                token,
                reported: AtomicBool::new(false),
                expired: AtomicBool::new(false),
                io <- new_mutex!(PendIo { sock: None, buf: KVec::new(), have: 0, req: None, words: None }, "oxrdma_iw_pending"),
                work <- new_work!("oxrdma_iw_pending"),
                timer <- Timer::new(this),
            }),
            GFP_KERNEL,
        )?;
        p.io.lock().buf = KVec::from_elem(0u8, RR_MAX, GFP_KERNEL)?;
        sock.set_rdma_options();
        sock.set_user_timeout(DEAD_PEER_MS);
        sock.set_keepalive(KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES);
        sock.watch(Arc::new(Waker(p.clone()), GFP_KERNEL)?)?;
        p.io.lock().sock = Some(sock);
        {
            let mut t = cm.table.lock();
            if t.dead {
                drop(t);
                p.close();
                return Err(ENODEV);
            }
            t.pending.insert(p.clone())?;
        }
        p.timer.arm_us(&p, MPA_TIMEOUT_MS * 1000);
        Wake::wake(&p);
        Ok(())
    }

    fn close(&self) {
        self.timer.cancel();
        let s = self.io.lock().sock.take();
        drop(s);
    }

    /// Ends the connection: out of the table, socket closed.
    fn fail(self: &Arc<Self>) {
        let me = self.clone();
        let taken = self
            .cm
            .table
            .lock()
            .pending
            .take_where(|p| Arc::ptr_eq(p, &me));
        drop(taken);
        self.close();
    }

    fn step(self: &Arc<Self>) {
        if self.expired.load(Ordering::Acquire) || !self.read_request() {
            self.fail();
        }
    }

    /// Reads the MPA request and reports it once whole; `false` if the connection must end.
    fn read_request(&self) -> bool {
        let mut g = self.io.lock();
        let io = &mut *g;
        let Some(sock) = io.sock.as_ref() else {
            return true;
        };
        if io.req.is_some() {
            // Reported: the accept or reject takes it from here.
            return true;
        }
        let got = read_frame(sock, RrKind::Request, &mut io.buf, &mut io.have);
        let Frame { hdr, words, ulp } = match got {
            Ok(Some(x)) => x,
            Ok(None) => return sock.state() == TcpState::Established,
            Err(_) => return false,
        };
        io.req = Some(hdr);
        io.words = words;
        let w = words.unwrap_or(IrdOrd {
            ird: DEFAULT_RD,
            ord: DEFAULT_RD,
            ..Default::default()
        });
        let mut ev = Event::new(EventKind::ConnectRequest);
        ev.local = sock.addr(false).ok();
        ev.remote = sock.addr(true).ok();
        ev.private_data = &io.buf[ulp];
        ev.token = self.token.get() as usize;
        ev.ird = w.ird.min(255) as u8;
        ev.ord = w.ord.min(255) as u8;
        self.reported.store(true, Ordering::Release);
        if self.listener.event(&ev).is_err() {
            self.reported.store(false, Ordering::Release);
            return false;
        }
        true
    }
}

// ---- active connections ---------------------------------------------------------------------

#[pin_data]
struct Active {
    cm: Arc<IwCm>,
    id: ARef<CmId>,
    qpn: u32,
    policy: Policy,
    req: RrHeader,
    words: Option<IrdOrd>,
    pdata: KVec<u8>,
    /// The connect reply is reported.
    done: AtomicBool,
    expired: AtomicBool,
    #[pin]
    io: Mutex<ActIo>,
    #[pin]
    work: Work<Active>,
    #[pin]
    timer: Timer<Active>,
}

struct ActIo {
    sock: Option<TcpSocket>,
    /// The MPA request is out.
    sent: bool,
    buf: KVec<u8>,
    have: usize,
}

// The deadline: no connection, or no MPA reply.
connection_work!(Active, run_step, deadline);

/// What the MPA reply says.
struct Replied {
    neg: Negotiated,
    ulp: core::ops::Range<usize>,
}

impl Active {
    fn run_step(self: &Arc<Self>) {
        if let Some(r) = self.step() {
            self.finish(r);
        }
    }

    /// Moves the connection on; `Some` once it is over (with the reply, or the failure).
    fn step(&self) -> Option<Result<Replied>> {
        if self.done.load(Ordering::Acquire) {
            return None;
        }
        if self.expired.load(Ordering::Acquire) {
            return Some(Err(code::etimedout()));
        }
        let mut io = self.io.lock();
        let io = &mut *io;
        let sock = io.sock.as_ref()?;
        if !io.sent {
            if let Some(e) = sock.error() {
                return Some(Err(e));
            }
            match sock.state() {
                TcpState::Connecting => return None,
                TcpState::Established => {}
                _ => return Some(Err(code::econnreset())),
            }
            if let Err(e) = send_frame(sock, &self.req, self.words, &self.pdata) {
                return Some(Err(e));
            }
            io.sent = true;
        }
        // The reply first: a peer that rejects sends its reply and closes at once, and what it
        // sent is still to be read once the connection is closed (or reset).
        let Frame { hdr, words, ulp } =
            match read_frame(sock, RrKind::Reply, &mut io.buf, &mut io.have) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    return match (sock.error(), sock.state()) {
                        (Some(e), _) => Some(Err(e)),
                        (None, TcpState::Established) => None,
                        (None, _) => Some(Err(code::econnreset())),
                    };
                }
                Err(e) => return Some(Err(e)),
            };
        match self.policy.complete(&self.req, &hdr, words) {
            Ok(neg) => Some(Ok(Replied { neg, ulp })),
            Err(mpa::RrError::Rejected) => {
                // Reported with the peer's private data.
                self.report(code::econnrefused().to_errno(), &io.buf[ulp], None);
                Some(Err(code::econnrefused()))
            }
            Err(_) => Some(Err(code::econnreset())),
        }
    }

    /// Reports the connect reply, once.
    fn report(&self, status: i32, pd: &[u8], n: Option<&Negotiated>) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut ev = Event::new(EventKind::ConnectReply);
        ev.status = status;
        ev.private_data = pd;
        ev.local = self.id.local_addr();
        ev.remote = self.id.remote_addr();
        if let Some(n) = n {
            ev.ird = n.ird.min(255) as u8;
            ev.ord = n.ord.min(255) as u8;
        }
        let _ = self.id.event(&ev);
    }

    /// The connection attempt is over: hand the socket to the QP (reporting success from
    /// there), or report the failure.
    fn finish(self: &Arc<Self>, r: Result<Replied>) {
        let me = self.clone();
        let taken = self
            .cm
            .table
            .lock()
            .active
            .take_where(|a| Arc::ptr_eq(a, &me));
        drop(taken);
        self.timer.cancel();
        let (sock, buf) = {
            let mut io = self.io.lock();
            (io.sock.take(), core::mem::take(&mut io.buf))
        };
        let r = r.and_then(|rep| {
            let sock = sock.ok_or_else(code::econnreset)?;
            let qp: Arc<QpInner> = self.cm.dev.qp(self.qpn).ok_or_else(code::econnreset)?;
            let mut sock = sock;
            sock.unwatch();
            let params = iw_params(&sock, &rep.neg, true);
            let pd = buf.get(rep.ulp.clone()).unwrap_or(&[]);
            let done = &self.done;
            qp.iw_attach(sock, self.id.clone(), &params, |cm| {
                if done.swap(true, Ordering::AcqRel) {
                    return Err(code::econnreset());
                }
                let mut ev = Event::new(EventKind::ConnectReply);
                ev.private_data = pd;
                ev.local = cm.local_addr();
                ev.remote = cm.remote_addr();
                ev.ird = rep.neg.ird.min(255) as u8;
                ev.ord = rep.neg.ord.min(255) as u8;
                let r = cm.event(&ev);
                if r.is_err() {
                    done.store(false, Ordering::Release);
                }
                r
            })
        });
        if let Err(e) = r {
            self.report(e.to_errno(), &[], None);
        }
    }
}
