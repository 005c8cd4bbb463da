// SPDX-License-Identifier: GPL-2.0
//! RoCE reception: the module's receiver of every namespace's RoCE v2 UDP sockets and of
//! ethertype 0x8915 frames (RoCE v1). Each packet is processed where it arrives, in the
//! receive softirq: the device it is for (by the netdev it came in on), the ICRC, the QP, the
//! QP's responder or completer, the ACK. No queue, no worker, and nothing allocated per
//! packet. A run of packets that arrives as one datagram (segmentation offload not cut on
//! the way) is walked packet by packet, each with the IP and UDP headers it had on the wire
//! rebuilt for its ICRC.

use crate::dev::RoceDev;
use crate::mcast::Members;
use crate::ox::net::{NetDevice, NetNs};
use crate::ox::packet_type::EtherTypeReceiver;
use crate::ox::skb::{RxDatagram, RxSkb};
use crate::ox::sync::SpinLockBh;
use crate::ox::timer::now_us;
use crate::ox::udp_tunnel::UdpReceiver;
use crate::qp::{NetHeader, QpInner};
use crate::stats::Counter;
use crate::tx::{KernelCrc, KernelCrc32c};
use crate::uapi::queue::network_hdr;
use crate::wire::grh::{self, GRH_LEN};
use crate::wire::headers::{pkey_matches, DEFAULT_PKEY, MULTICAST_QPN};
use crate::wire::icrc::{self, Encap, ICRC_LEN};
use crate::wire::ip::{self, SegmentIds};
use crate::wire::opcode::BTH_LEN;
use crate::wire::packet::{self, Packet};
use kernel::{
    alloc::{flags::GFP_KERNEL, KVec},
    prelude::*,
    sync::Arc,
    types::ARef,
};

/// A device the receiver delivers to: the netdev its packets arrive on, and its state.
struct Entry {
    netdev: ARef<NetDevice>,
    dev: Arc<RoceDev>,
}

/// The most devices one packet can be for: those of one namespace (a packet to a local
/// address arrives on the loopback device, not on the device's own netdev).
const CANDIDATES: usize = 8;

/// The module's RoCE v2 receiver.
#[pin_data]
pub(crate) struct RoceRx {
    /// The RoCE devices, looked up per packet: a fixed number of slots, so that adding and
    /// removing never allocates under the lock.
    #[pin]
    index: SpinLockBh<KVec<Option<Entry>>>,
    /// The ICRC engine every device shares.
    crc: Arc<KernelCrc>,
    /// The MPA CRC engine every iWARP device shares.
    crc32c: KernelCrc32c,
}

impl RoceRx {
    /// The receiver, with room for `max` devices. Process context.
    pub(crate) fn new(max: usize) -> Result<Arc<Self>> {
        let mut index = KVec::with_capacity(max, GFP_KERNEL)?;
        for _ in 0..max {
            index.push(None, GFP_KERNEL)?;
        }
        let crc = Arc::new(KernelCrc::pick()?, GFP_KERNEL)?;
        let crc32c = KernelCrc32c::pick()?;
        Arc::pin_init(
            pin_init!(Self {
                index <- crate::new_spinlock_bh!(index, "oxrdma_rx_index"),
                crc,
                crc32c,
            }),
            GFP_KERNEL,
        )
    }

    /// The ICRC engine.
    pub(crate) fn crc(&self) -> Arc<KernelCrc> {
        self.crc.clone()
    }

    /// The MPA CRC engine (iWARP).
    pub(crate) fn crc32c(&self) -> KernelCrc32c {
        self.crc32c
    }

    /// Delivers packets arriving on `netdev` (and local ones of its namespace) to `dev`.
    /// `ENOSPC` beyond the room given to [`RoceRx::new`].
    pub(crate) fn add(&self, netdev: ARef<NetDevice>, dev: Arc<RoceDev>) -> Result {
        let mut index = self.index.lock();
        let slot = index.iter_mut().find(|s| s.is_none()).ok_or(ENOSPC)?;
        *slot = Some(Entry { netdev, dev });
        Ok(())
    }

    /// Stops delivering to `dev`.
    pub(crate) fn remove(&self, dev: &RoceDev) {
        let gone = {
            let mut index = self.index.lock();
            index
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|e| core::ptr::eq(&*e.dev, dev)))
                .and_then(Option::take)
        };
        // Dropped outside the lock.
        drop(gone);
    }

    /// The devices a packet arriving on `ingress` may be for; `true`: an exact match (the
    /// device on that netdev). Otherwise the namespace's devices, each with its netdev.
    fn candidates(&self, ingress: Ingress<'_>) -> ([Option<Candidate>; CANDIDATES], bool) {
        let mut out: [Option<Candidate>; CANDIDATES] = Default::default();
        let index = self.index.lock();
        if let Some(e) = index.iter().flatten().find(|e| ingress.is(&e.netdev)) {
            out[0] = Some(Candidate {
                dev: e.dev.clone(),
                netdev: None,
            });
            return (out, true);
        }
        for (slot, e) in out.iter_mut().zip(
            index
                .iter()
                .flatten()
                .filter(|e| ingress.same_net(&e.netdev)),
        ) {
            *slot = Some(Candidate {
                dev: e.dev.clone(),
                netdev: Some(e.netdev.clone()),
            });
        }
        (out, false)
    }
}

/// Where a packet came in.
#[derive(Clone, Copy)]
enum Ingress<'a> {
    /// On this device (a frame's handler gets it).
    Dev(&'a NetDevice),
    /// On the device of this index in this namespace (a UDP datagram's).
    Index { ifindex: i32, net: &'a NetNs },
}

impl Ingress<'_> {
    /// Whether the packet came in on `nd`.
    fn is(self, nd: &NetDevice) -> bool {
        match self {
            Ingress::Dev(d) => *d == *nd,
            Ingress::Index { ifindex, net } => nd.ifindex() == ifindex && nd.is_in(net),
        }
    }

    /// Whether the packet came in in `nd`'s namespace.
    fn same_net(self, nd: &NetDevice) -> bool {
        match self {
            Ingress::Dev(d) => d.same_net(nd),
            Ingress::Index { net, .. } => nd.is_in(net),
        }
    }
}

/// A device a packet may be for; `netdev` is its netdev when the packet did not arrive on it.
struct Candidate {
    dev: Arc<RoceDev>,
    netdev: Option<ARef<NetDevice>>,
}

impl UdpReceiver for RoceRx {
    fn receive(&self, net: &NetNs, pkt: RxDatagram) {
        let ingress = Ingress::Index {
            ifindex: pkt.ingress_ifindex(),
            net,
        };
        let (devs, exact) = self.candidates(ingress);
        let now = now_us();
        let to_any = |net: Net<'_>, iba: &[u8]| {
            devs.iter()
                .flatten()
                .any(|c| receive(&c.dev, c.netdev.as_deref(), &self.crc, net, iba, exact, now))
        };
        let (headers, payload) = (pkt.headers(), pkt.payload());
        let handled = match pkt.segment_size() {
            None => to_any(Net::Alone(headers), payload),
            // The datagrams of a run one by one (a run shorter than a BTH and an ICRC per
            // datagram is none of ours: that also bounds the walk).
            Some(size) if size >= BTH_LEN + ICRC_LEN => {
                let mut handled = false;
                for (index, iba) in (0..=u16::MAX).zip(payload.chunks(size)) {
                    let run = Net::Cut {
                        run: headers,
                        index,
                    };
                    handled |= to_any(run, iba);
                }
                handled
            }
            Some(_) => false,
        };
        if handled {
            drop(pkt);
        } else {
            pkt.discard();
        }
    }
}

/// The IP and UDP headers of a received RoCE v2 packet.
#[derive(Clone, Copy)]
enum Net<'a> {
    /// It came alone: its own headers.
    Alone(&'a [u8]),
    /// It is packet `index` of a run that arrived as one datagram behind the headers `run`.
    Cut { run: &'a [u8], index: u16 },
}

impl Net<'_> {
    /// The headers the packet had on the wire, in `buf` if they must be rebuilt (a run's
    /// packet whose IPv4 identification is the run's first one's plus its index, or the same
    /// as the first's with `ids` [`SegmentIds::Fixed`]); `iba_len` is what follows them.
    fn headers<'b>(
        &'b self,
        ids: SegmentIds,
        iba_len: usize,
        buf: &'b mut [u8; ip::MAX_SEGMENT_HEADERS],
    ) -> Option<&'b [u8]> {
        match *self {
            Net::Alone(h) => Some(h),
            Net::Cut { run, index } => {
                let n = ip::segment_headers(run, index, iba_len, ids, buf)?;
                Some(&buf[..n])
            }
        }
    }
}

impl EtherTypeReceiver for RoceRx {
    /// RoCE v1 frames: only from the device's own netdev (RoCE v1 does not cross links).
    fn receive(&self, pkt: RxSkb) {
        let (devs, exact) = self.candidates(Ingress::Dev(pkt.ingress()));
        let handled = match (&devs[0], exact) {
            (Some(c), true) => receive_v1(&c.dev, &self.crc, pkt.network_packet(), now_us()),
            _ => false,
        };
        if handled {
            drop(pkt);
        } else {
            pkt.discard();
        }
    }
}

/// A received RoCE v1 packet (GRH onwards, Ethernet padding possibly after it) for `dev`.
fn receive_v1(dev: &RoceDev, crc: &KernelCrc, frame: &[u8], now: u64) -> bool {
    if dev.is_dead() {
        return false;
    }
    let dropped = || {
        dev.tx.stats.inc(Counter::RxDrop);
        false
    };
    let Ok(g) = grh::parse(frame) else {
        return dropped();
    };
    let pkt = &frame[..GRH_LEN + usize::from(g.payload_len)];
    let iba = &pkt[GRH_LEN..];
    let Ok(p) = packet::parse(iba) else {
        return dropped();
    };
    if !pkey_matches(p.headers.bth.pkey, DEFAULT_PKEY) {
        return dropped();
    }
    let Some(to) = Recipients::of(dev, p.headers.bth.dest_qp, &g.dgid) else {
        return dropped();
    };
    if icrc::verify_with(crc, Encap::RoceV1, pkt).is_ok() {
        dev.tx.stats.inc(Counter::RcvdPkts);
        let net = NetHeader {
            bytes: &pkt[..GRH_LEN],
            kind: network_hdr::ROCE_V1,
            sgid: g.sgid,
            dgid: g.dgid,
        };
        to.deliver(&p, iba, &net, now);
    } else {
        dev.tx.stats.inc(Counter::IcrcErr);
    }
    true
}

/// A received IP packet for device `dev`, `net` its IP and UDP headers and `iba` the rest:
/// checks it and gives it to its QP. Without `exact` (the packet did not arrive on the
/// device's netdev, `netdev`, but on the loopback device), only if the packet's destination
/// is the QP's source address or, for a QP without one (UD, GSI), an address of `netdev`.
/// Returns whether the packet was the device's.
fn receive(
    dev: &RoceDev,
    netdev: Option<&NetDevice>,
    crc: &KernelCrc,
    net: Net<'_>,
    iba: &[u8],
    exact: bool,
    now: u64,
) -> bool {
    if dev.is_dead() {
        return false;
    }
    let drop = || {
        if exact {
            dev.tx.stats.inc(Counter::RxDrop);
        }
        exact
    };
    let mut buf = [0u8; ip::MAX_SEGMENT_HEADERS];
    let Some(hdr) = net.headers(SegmentIds::Counting, iba.len(), &mut buf) else {
        return drop();
    };
    let Some(r) = ip::parse(hdr).filter(|r| r.bth_offset == hdr.len()) else {
        return drop();
    };
    let (encap, kind) = match r.src {
        ip::IpAddr::V4(_) => (Encap::RoceV2Ipv4, network_hdr::IPV4),
        ip::IpAddr::V6(_) => (Encap::RoceV2Ipv6, network_hdr::IPV6),
    };
    let Ok(p) = packet::parse(iba) else {
        return drop();
    };
    if !pkey_matches(p.headers.bth.pkey, DEFAULT_PKEY) {
        return drop();
    }
    let to = match Recipients::of(dev, p.headers.bth.dest_qp, &r.dst.to_gid()) {
        // Multicast only from the device's own netdev (sent there, or looped back by the
        // IP layer for the host's own sends).
        Some(Recipients::Group(_)) if !exact => return false,
        Some(to) => to,
        None => return drop(),
    };
    if let (Recipients::One(qp), false) = (&to, exact) {
        let mine = match (qp.local_ip(), netdev) {
            (Some(ip), _) => ip == r.dst,
            (None, Some(nd)) => match r.dst {
                ip::IpAddr::V4(a) => nd.has_ipv4(a),
                ip::IpAddr::V6(a) => nd.has_ipv6(&a),
            },
            (None, None) => false,
        };
        if !mine {
            return false;
        }
    }
    let verified = |h: &[u8]| icrc::verify_split_with(crc, encap, h, iba).is_ok();
    let checked = match (verified(hdr), net, encap) {
        (true, ..) => Some(hdr),
        // Receive offload also merges IPv4 packets that all carry one identification. The
        // headers are rebuilt in place: what was parsed from them above are copies.
        (false, Net::Cut { index: 1.., .. }, Encap::RoceV2Ipv4) => net
            .headers(SegmentIds::Fixed, iba.len(), &mut buf)
            .filter(|h| verified(h)),
        (false, ..) => None,
    };
    if let Some(hdr) = checked {
        dev.tx.stats.inc(Counter::RcvdPkts);
        if let Net::Cut { .. } = net {
            dev.tx.stats.inc(Counter::RcvdGsoPkts);
        }
        let net = NetHeader {
            bytes: &hdr[..hdr.len() - ip::UDP_LEN],
            kind,
            sgid: r.src.to_gid(),
            dgid: r.dst.to_gid(),
        };
        to.deliver(&p, iba, &net, now);
    } else {
        dev.tx.stats.inc(Counter::IcrcErr);
    }
    true
}

/// Who a packet is for: one QP, or the members of a multicast group. Lives on the stack for
/// one packet; boxing the group would allocate per packet.
#[allow(clippy::large_enum_variant)]
enum Recipients {
    One(Arc<QpInner>),
    Group(Members),
}

impl Recipients {
    /// The recipients on `dev` of a packet to QP `dest_qp` and GID `dgid`.
    fn of(dev: &RoceDev, dest_qp: u32, dgid: &[u8; 16]) -> Option<Self> {
        if dest_qp == MULTICAST_QPN {
            dev.mcast.members(dgid).map(Recipients::Group)
        } else {
            dev.qp(dest_qp).map(Recipients::One)
        }
    }

    /// Hands the packet to each recipient (a multicast group's members each get it).
    fn deliver(&self, pkt: &Packet, iba: &[u8], net: &NetHeader<'_>, now: u64) {
        match self {
            Recipients::One(qp) => qp.receive(pkt, iba, net, now),
            Recipients::Group(members) => {
                for qp in members.iter().flatten() {
                    qp.receive(pkt, iba, net, now);
                }
            }
        }
    }
}
