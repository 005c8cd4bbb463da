// SPDX-License-Identifier: GPL-2.0
//! The per-device engine: the tables of QPs and MRs, and the work item that runs the send
//! side of every QP (on doorbells, ACKs and timer expiries) and the receive side of each
//! packet the RoCE receiver hands over.
//!
//! Context: everything here runs in process context (verbs calls, the module's workqueue);
//! the timer and the UDP receiver only queue work.

use crate::mr::{Mr, MrTable};
use crate::ox::net::NetDevice;
use crate::ox::route::Route;
use crate::ox::timer::{now_us, Timer, TimerHandler};
use crate::ox::udp_tunnel::TunnelRef;
use crate::ox::workqueue;
use crate::qp::QpInner;
use crate::roce::{RoceRx, TxPath};
use crate::wire::icrc::{self, Encap};
use crate::wire::ip::{self, IpAddr};
use crate::wire::link::{ib_mtu_for_link, ROCE_MAX_OVERHEAD};
use crate::wire::packet::{self, Headers};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::types::ARef;
use kernel::{
    alloc::flags::GFP_KERNEL,
    alloc::KVec,
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{Work, WorkItem},
};

/// QP numbers start here (0 and 1 are the special QPs; small numbers look odd in tools).
pub(crate) const QPN_BASE: u32 = 17;

struct Misc {
    netdev: Option<ARef<NetDevice>>,
    tunnel: Option<TunnelRef>,
    routes: KVec<CachedRoute>,
}

/// A recently used route: a lookup per packet is the single most expensive step of sending.
struct CachedRoute {
    src: IpAddr,
    dst: IpAddr,
    traffic_class: u8,
    flow_label: u32,
    route: Route,
    since_us: u64,
}

/// Routes are looked up again after this long (route or address changes take effect).
const ROUTE_TTL_US: u64 = 1_000_000;
/// Received packets a sender processes itself before it leaves the rest to the rx work.
const INLINE_RX_BUDGET: usize = 64;
/// Routes cached per device.
const ROUTE_CACHE: usize = 16;

/// One device's engine.
#[pin_data]
pub(crate) struct Engine {
    #[pin]
    work: Work<Engine>,
    #[pin]
    qps: Mutex<KVec<Option<Arc<QpInner>>>>,
    #[pin]
    mrs: Mutex<MrTable>,
    #[pin]
    misc: Mutex<Misc>,
    #[pin]
    timer: Timer<Engine>,
    dead: AtomicBool,
    ip_id: AtomicU32,
    /// The module's RoCE receiver (see [`RoceRx::gate`]).
    rx: Option<Arc<RoceRx>>,
}

impl_has_work! {
    impl HasWork<Self> for Engine { self.work }
}

impl Engine {
    pub(crate) fn new(netdev: ARef<NetDevice>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(&this in Self {
                work <- new_work!("oxrdma_engine"),
                timer <- Timer::new(this),
                qps <- new_mutex!(KVec::new()),
                mrs <- new_mutex!(MrTable::new()),
                misc <- new_mutex!(Misc {
                    netdev: Some(netdev),
                    tunnel: None,
                    routes: KVec::new(),
                }),
                dead: AtomicBool::new(false),
                ip_id: AtomicU32::new(0),
                rx: crate::link::roce_rx(),
            }),
            GFP_KERNEL,
        )
    }

    /// Stops the engine for good (device unregistered): no more work, timer or packets.
    pub(crate) fn shutdown(&self) {
        self.dead.store(true, Ordering::Release);
        self.timer.cancel();
        let (tun, nd, routes) = {
            let mut m = self.misc.lock();
            let routes = core::mem::replace(&mut m.routes, KVec::new());
            (m.tunnel.take(), m.netdev.take(), routes)
        };
        drop(tun);
        drop(routes);
        drop(nd);
        let qps = core::mem::replace(&mut *self.qps.lock(), KVec::new());
        drop(qps);
    }

    /// The netdev is going away: stop using it.
    pub(crate) fn detach_netdev(&self) {
        let (nd, routes) = {
            let mut m = self.misc.lock();
            (
                m.netdev.take(),
                core::mem::replace(&mut m.routes, KVec::new()),
            )
        };
        drop(routes);
        drop(nd);
    }

    /// The doorbell of `qp` (a process published send WQEs): runs its send side now, in the
    /// caller's context, and processes what that delivers to local devices (the rx gate), so
    /// a message to a local peer needs no worker wake-up.
    pub(crate) fn doorbell(self: &Arc<Self>, qp: &Arc<QpInner>) {
        if self.dead.load(Ordering::Acquire) {
            return;
        }
        let gate = self.rx.as_ref().and_then(|r| r.gate());
        let deadline = qp.service(now_us());
        if let Some(g) = gate {
            g.process(INLINE_RX_BUDGET);
        }
        if let Some(d) = deadline {
            self.arm_by(d);
        }
    }

    /// Makes the timer fire by `deadline` (us) at the latest.
    pub(crate) fn arm_by(self: &Arc<Self>, deadline: u64) {
        self.timer
            .arm_earlier_us(self, deadline.saturating_sub(now_us()));
    }

    /// Queues a run of the engine.
    pub(crate) fn kick(self: &Arc<Self>) {
        if !self.dead.load(Ordering::Acquire) {
            let _ = workqueue::queue().enqueue(self.clone());
        }
    }

    /// The IB MTU the port runs at now.
    pub(crate) fn active_mtu(&self) -> u32 {
        let m = self.misc.lock();
        m.netdev
            .as_ref()
            .map_or(1024, |nd| ib_mtu_for_link(nd.mtu(), ROCE_MAX_OVERHEAD))
    }

    /// Opens the RoCE v2 port of the device's namespace if not yet open.
    ///
    /// The engine's lock is not held while opening: that takes the RTNL, and the netdev
    /// notifier (which runs under the RTNL) takes the engine's lock.
    pub(crate) fn open_tunnel(&self) -> Result {
        let nd = {
            let m = self.misc.lock();
            if m.tunnel.as_ref().is_some_and(|t| t.is_open()) {
                return Ok(());
            }
            m.netdev.as_ref().ok_or(ENODEV)?.clone()
        };
        let rx = crate::link::receiver().ok_or(ENODEV)?;
        match TunnelRef::open(&nd, icrc::ROCE_V2_UDP_PORT, rx) {
            Ok(t) => {
                // A concurrent opener may have won: keep one handle, drop the other (after
                // the lock: dropping the last handle of a tunnel sleeps).
                let old = {
                    let mut m = self.misc.lock();
                    if self.dead.load(Ordering::Acquire) {
                        Some(t)
                    } else {
                        m.tunnel.replace(t)
                    }
                };
                drop(old);
                Ok(())
            }
            Err(e) => {
                pr_warn!(
                    "oxrdma: cannot open UDP port {} in {}'s namespace ({:?}); is rxe loaded there?\n",
                    icrc::ROCE_V2_UDP_PORT,
                    nd.name(),
                    e
                );
                Err(e)
            }
        }
    }

    // ---- tables -------------------------------------------------------------------------

    /// Adds a QP made by `make(qpn)`.
    pub(crate) fn add_qp(
        &self,
        max: usize,
        make: impl FnOnce(u32) -> Result<Arc<QpInner>>,
    ) -> Result<Arc<QpInner>> {
        let mut t = self.qps.lock();
        let idx = match t.iter().position(|q| q.is_none()) {
            Some(i) => i,
            None => {
                if t.len() >= max {
                    return Err(ENOMEM);
                }
                t.push(None, GFP_KERNEL)?;
                t.len() - 1
            }
        };
        let qp = make(idx as u32 + QPN_BASE)?;
        t[idx] = Some(qp.clone());
        Ok(qp)
    }

    pub(crate) fn remove_qp(&self, qpn: u32) {
        let old = {
            let mut t = self.qps.lock();
            qpn.checked_sub(QPN_BASE)
                .and_then(|i| t.get_mut(i as usize))
                .and_then(Option::take)
        };
        drop(old);
    }

    fn qp(&self, qpn: u32) -> Option<Arc<QpInner>> {
        let t = self.qps.lock();
        let i = qpn.checked_sub(QPN_BASE)? as usize;
        t.get(i)?.clone()
    }

    pub(crate) fn add_mr(
        &self,
        max: usize,
        make: impl FnOnce(u32) -> Result<Arc<Mr>>,
    ) -> Result<Arc<Mr>> {
        self.mrs.lock().insert(max, make)
    }

    pub(crate) fn remove_mr(&self, key: u32) {
        let old = self.mrs.lock().remove(key);
        drop(old);
    }

    /// The MR in the table slot `key` names, whatever its state: [`Mr::access`] checks the key
    /// itself, REG_MR and invalidation check their own conditions.
    pub(crate) fn mr_slot(&self, key: u32) -> Option<Arc<Mr>> {
        self.mrs.lock().slot_of(key)
    }

    // ---- packets ------------------------------------------------------------------------

    /// Sends one packet of a connection (see [`crate::roce::send`]).
    pub(crate) fn send(
        &self,
        path: &TxPath,
        h: &Headers,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        let now = now_us();
        let same = |c: &CachedRoute| {
            c.src == path.src
                && c.dst == path.dst
                && c.traffic_class == path.traffic_class
                && c.flow_label == path.flow_label
        };
        let (nd, cached) = {
            let m = self.misc.lock();
            let nd = m.netdev.as_ref().ok_or(ENODEV)?.clone();
            let r = m
                .routes
                .iter()
                .find(|c| same(c) && now.saturating_sub(c.since_us) < ROUTE_TTL_US)
                .map(|c| c.route.clone());
            (nd, r)
        };
        let route = match cached {
            Some(r) => r,
            None => {
                let r = crate::roce::route(&nd, path)?;
                let mut m = self.misc.lock();
                let entry = CachedRoute {
                    src: path.src,
                    dst: path.dst,
                    traffic_class: path.traffic_class,
                    flow_label: path.flow_label,
                    route: r.clone(),
                    since_us: now,
                };
                if let Some(c) = m.routes.iter_mut().find(|c| same(c)) {
                    *c = entry;
                } else if m.routes.len() < ROUTE_CACHE {
                    let _ = m.routes.push(entry, GFP_KERNEL);
                } else if let Some(c) = m.routes.iter_mut().min_by_key(|c| c.since_us) {
                    *c = entry;
                }
                r
            }
        };
        let id = self.ip_id.fetch_add(1, Ordering::Relaxed) as u16;
        let res = crate::roce::send(&nd, &route, path, id, h, payload_len, fill);
        if res.is_err() {
            // Look the route up again next time.
            if let Some(c) = self.misc.lock().routes.iter_mut().find(|c| same(c)) {
                c.since_us = 0;
            }
        }
        res
    }

    /// A received IP packet: checks it and gives it to its QP. Without `exact` (the packet
    /// did not arrive on this device's netdev), only if the QP's source address is the
    /// packet's destination. Returns whether the packet was this device's.
    pub(crate) fn receive(&self, pkt: &[u8], exact: bool) -> bool {
        if self.dead.load(Ordering::Acquire) {
            return false;
        }
        let Some(r) = ip::parse(pkt) else {
            return exact;
        };
        let encap = match r.src {
            ip::IpAddr::V4(_) => Encap::RoceV2Ipv4,
            ip::IpAddr::V6(_) => Encap::RoceV2Ipv6,
        };
        let iba = &pkt[r.bth_offset..];
        let Ok(p) = packet::parse(iba) else {
            return exact;
        };
        let Some(qp) = self.qp(p.headers.bth.dest_qp) else {
            return exact;
        };
        if !exact && qp.local_ip() != Some(r.dst) {
            return false;
        }
        if icrc::verify(encap, pkt).is_ok() {
            qp.receive(&p, iba, now_us());
        }
        true
    }

    fn run(self: &Arc<Self>) {
        if self.dead.load(Ordering::Acquire) {
            return;
        }
        let gate = self.rx.as_ref().and_then(|r| r.gate());
        let now = now_us();
        let qps: KVec<Arc<QpInner>> = {
            let t = self.qps.lock();
            let mut v = KVec::new();
            for q in t.iter().flatten() {
                if v.push(q.clone(), GFP_KERNEL).is_err() {
                    break;
                }
            }
            v
        };
        let mut next: Option<u64> = None;
        for q in qps.iter() {
            if let Some(d) = q.service(now) {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        drop(qps);
        if let Some(g) = gate {
            g.process(INLINE_RX_BUDGET);
        }
        if let Some(d) = next {
            self.timer.arm_us(self, d.saturating_sub(now_us()));
        }
    }
}

impl WorkItem for Engine {
    type Pointer = Arc<Engine>;

    fn run(this: Arc<Engine>) {
        Engine::run(&this);
    }
}

impl TimerHandler for Engine {
    fn expired(this: ArcBorrow<'_, Self>) {
        let e: Arc<Engine> = this.into();
        e.kick();
    }
}
