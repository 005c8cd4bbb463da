// SPDX-License-Identifier: GPL-2.0
//! RoCE v2 packet I/O: building a complete IP/UDP/IBA packet into an skb and sending it
//! along a route looked up in the device's network namespace; receiving from the module's
//! UDP tunnels (one per namespace with an active oxroce device) and handing packets to the
//! device's engine.

use crate::engine::Engine;
use crate::ox::net::NetDevice;
use crate::ox::route::Route;
use crate::ox::skb::{RxSkb, Skb, SkbQueue};
use crate::ox::udp_tunnel::UdpEncapReceiver;
use crate::ox::workqueue;
use crate::wire::icrc::{self, Encap, ICRC_LEN};
use crate::wire::ip::{self, IpAddr, IpUdp};
use crate::wire::packet::{self, Headers};
use core::sync::atomic::{fence, AtomicBool, Ordering};
use kernel::types::ARef;
use kernel::{
    alloc::{flags::GFP_KERNEL, KVec},
    impl_has_work, new_work,
    prelude::*,
    sync::Arc,
    workqueue::{Work, WorkItem},
};

/// The addresses and header fields of a connection's packets.
#[derive(Clone, Copy)]
pub(crate) struct TxPath {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) sport: u16,
}

/// Builds and sends one packet along `route`: IP and UDP headers, `h`, `payload_len` bytes
/// that `fill` writes (false: abandon the packet), pad, ICRC.
pub(crate) fn send(
    nd: &NetDevice,
    route: &Route,
    p: &TxPath,
    ip_id: u16,
    h: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Result {
    let ip_len = p.dst.headers_len();
    let iba_len = packet::packet_len(h, payload_len).ok_or(EINVAL)?;
    let total = ip_len + iba_len + ICRC_LEN;
    let mut skb = Skb::alloc_tx(nd, total)?;
    let buf = skb.data_mut();
    let hl = packet::write_headers(h, payload_len, &mut buf[ip_len..]).map_err(|_| EINVAL)?;
    let at = ip_len + hl;
    if !fill(&mut buf[at..at + payload_len]) {
        return Err(EFAULT);
    }
    let hdr = IpUdp {
        src: p.src,
        dst: p.dst,
        traffic_class: p.traffic_class,
        flow_label: p.flow_label,
        hop_limit: p.hop_limit,
        id: ip_id,
        sport: p.sport,
        dport: icrc::ROCE_V2_UDP_PORT,
    };
    ip::write_headers(&hdr, buf).map_err(|_| EINVAL)?;
    let encap = match p.dst {
        IpAddr::V4(_) => Encap::RoceV2Ipv4,
        IpAddr::V6(_) => Encap::RoceV2Ipv6,
    };
    icrc::fill(encap, buf).map_err(|_| EINVAL)?;
    if let IpAddr::V6(_) = p.dst {
        ip::fill_udp6_checksum(buf).map_err(|_| EINVAL)?;
    }
    skb.xmit(route)
}

/// The route of a path, looked up in `nd`'s namespace out of `nd`.
pub(crate) fn route(nd: &NetDevice, p: &TxPath) -> Result<Route> {
    match (p.src, p.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Route::v4(nd, s, d, p.traffic_class),
        (IpAddr::V6(s), IpAddr::V6(d)) => Route::v6(nd, s, d, p.traffic_class, p.flow_label),
        _ => Err(EINVAL),
    }
}

/// Receives RoCE v2 packets from every tunnel (softirq) and queues them for [`RxWork`].
pub(crate) struct RoceRx {
    inner: Arc<RxWork>,
}

/// Process-context reception: finds each packet's device and runs its engine.
///
/// One context at a time processes the queue: the holder of the gate (`busy`). That is
/// either the rx work item or a sender (a doorbell system call, an engine run): packets a
/// sender's own transmissions deliver to a local device (veth, lo) arrive in softirq while it
/// holds the gate, and it processes them itself right after, without waking a worker (the
/// cost that dominates latency). Whoever drops the gate re-checks the queue.
#[pin_data]
pub(crate) struct RxWork {
    queue: SkbQueue<RxSkb>,
    busy: AtomicBool,
    #[pin]
    work: Work<RxWork>,
}

/// The right to process the rx queue; released (and the queue re-checked) on drop.
pub(crate) struct RxGate {
    rx: Arc<RxWork>,
}

impl RxGate {
    /// Processes up to `budget` queued packets. Returns whether the queue was emptied.
    pub(crate) fn process(&self, budget: usize) -> bool {
        self.rx.process(budget)
    }
}

impl Drop for RxGate {
    fn drop(&mut self) {
        self.rx.busy.store(false, Ordering::Release);
        // Pairs with the fence in `RoceRx::receive`: either it saw the gate taken (and this
        // sees its packet) or it queued the work itself.
        fence(Ordering::SeqCst);
        if !self.rx.queue.is_empty() {
            let _ = workqueue::queue().enqueue(self.rx.clone());
        }
    }
}

impl_has_work! {
    impl HasWork<Self> for RxWork { self.work }
}

impl RoceRx {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let queue = SkbQueue::new(GFP_KERNEL)?;
        let inner = Arc::pin_init(
            pin_init!(RxWork {
                queue,
                busy: AtomicBool::new(false),
                work <- new_work!("oxrdma_rx"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Arc::new(Self { inner }, GFP_KERNEL)?)
    }

    /// Takes the gate if free: the caller processes what arrives until it drops it.
    pub(crate) fn gate(&self) -> Option<RxGate> {
        self.inner.gate()
    }
}

/// Packets waiting beyond this are dropped (RC recovers by retransmission).
const RX_BACKLOG: usize = 8192;
/// Packets one pass of the rx work item processes before it lets other work run.
const RX_BUDGET: usize = 256;

impl UdpEncapReceiver for RoceRx {
    fn receive(&self, pkt: RxSkb) {
        if self.inner.queue.len() >= RX_BACKLOG {
            pkt.discard();
            return;
        }
        self.inner.queue.push(pkt);
        fence(Ordering::SeqCst);
        if !self.inner.busy.load(Ordering::Relaxed) {
            let _ = workqueue::queue().enqueue(self.inner.clone());
        }
    }
}

impl RxWork {
    fn gate(self: &Arc<Self>) -> Option<RxGate> {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| RxGate { rx: self.clone() })
    }

    /// Processes up to `budget` packets (the caller holds the gate).
    fn process(&self, mut budget: usize) -> bool {
        // The engines of the last ingress device (consecutive packets mostly share one).
        let mut cached: Option<(ARef<NetDevice>, KVec<Arc<Engine>>, bool)> = None;
        while budget > 0 {
            let Some(skb) = self.queue.pop() else {
                return true;
            };
            let dev = skb.ingress();
            if !matches!(&cached, Some((d, _, _)) if **d == *dev) {
                let (engines, exact) = crate::link::engines_for(dev);
                cached = Some((dev.into(), engines, exact));
            }
            let handled = match &cached {
                Some((_, engines, exact)) => {
                    engines.iter().any(|e| e.receive(skb.ip_packet(), *exact))
                }
                None => false,
            };
            if !handled {
                skb.discard();
            }
            budget -= 1;
        }
        self.queue.is_empty()
    }
}

impl WorkItem for RxWork {
    type Pointer = Arc<RxWork>;

    fn run(this: Arc<RxWork>) {
        // Taken: the holder processes the queue and re-checks it when it lets go. Dropping
        // the gate after a partial pass queues this work again (other work runs meanwhile).
        if let Some(g) = this.gate() {
            g.process(RX_BUDGET);
        }
    }
}
