// SPDX-License-Identifier: GPL-2.0
//! The transmit path of a RoCE device: RoCE v2 packets built whole (IP and UDP headers
//! included: the ICRC covers IP header fields) into an skb and sent along a route looked up
//! in the device's network namespace, out of its netdev; RoCE v1 packets (GRH, ethertype
//! 0x8915) straight out of the netdev to the path's MAC address.
//!
//! Context: any but hard interrupt (QPs send from system calls, work items, timers and
//! packet reception); nothing here sleeps.

use crate::ox::crc::{crc32c_update, Crc32Shash};
use crate::ox::net::NetDevice;
use crate::ox::route::Route;
use crate::ox::skb::Skb;
use crate::ox::sync::SpinLockBh;
use crate::ox::timer::now_us;
use crate::stats::{Counter, Stats};
use crate::wire::crc32::{Crc32Engine, SoftCrc32};
use crate::wire::crc32c::{Crc32cEngine, SoftCrc32c};
use crate::wire::grh::{self, Grh, ETH_P_IBOE, GRH_LEN};
use crate::wire::icrc::{self, Encap, ICRC_LEN};
use crate::wire::ip::{self, IpAddr, IpUdp};
use crate::wire::link::{ib_mtu_for_link, ROCE_MAX_OVERHEAD};
use crate::wire::packet::{self, Headers};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{alloc::flags::GFP_KERNEL, alloc::KVec, prelude::*, sync::Arc, types::ARef};

/// The CRC-32 engine of the ICRC: the kernel's ("crc32" shash, the CPU's carry-less
/// multiplication where it has one) or the wire crate's (a sparse multiple's shifts and XORs,
/// and tables), whichever was faster when the module measured both ([`KernelCrc::pick`]).
/// Under an emulated CPU the vector path, with its FPU state saves, can be the slower one.
pub(crate) enum KernelCrc {
    Shash(Crc32Shash),
    Soft,
}

impl Crc32Engine for KernelCrc {
    fn update_raw(&self, state: u32, data: &[u8]) -> u32 {
        match self {
            Self::Shash(s) => s.update(state, data),
            Self::Soft => SoftCrc32.update_raw(state, data),
        }
    }
}

impl KernelCrc {
    /// Times the two engines ([`time_crc`]) and keeps the faster (process context).
    pub(crate) fn pick() -> Result<Self> {
        let Ok(shash) = Crc32Shash::new() else {
            pr_info!("ICRC with the built-in CRC-32 (no crc32 shash)\n");
            return Ok(Self::Soft);
        };
        let buf = KVec::from_elem(0x5au8, 4096, GFP_KERNEL)?;
        let hw = KernelCrc::Shash(shash);
        let (t_hw, c_hw) = time_crc(&buf, |crc, data| hw.update_raw(crc, data));
        let (t_sw, c_sw) = time_crc(&buf, |crc, data| Self::Soft.update_raw(crc, data));
        if c_hw != c_sw {
            pr_warn!("the crc32 shash disagrees with CRC-32; using the built-in CRC\n");
            return Ok(Self::Soft);
        }
        pr_info!(
            "ICRC with {} (128 KiB: crc32 shash {} us, built-in {} us)\n",
            if t_hw <= t_sw {
                "the crc32 shash"
            } else {
                "the built-in CRC"
            },
            t_hw,
            t_sw
        );
        Ok(if t_hw <= t_sw { hw } else { Self::Soft })
    }
}

/// The time in microseconds a CRC register update takes over 32 passes of `buf` (the best of
/// three, after one pass untimed: an emulator translates code the first time it runs), and
/// the register after them.
fn time_crc(buf: &[u8], update: impl Fn(u32, &[u8]) -> u32) -> (u64, u32) {
    core::hint::black_box(update(!0, buf));
    let (mut best, mut crc) = (u64::MAX, 0);
    for _ in 0..3 {
        let start = now_us();
        crc = !0;
        for _ in 0..32 {
            crc = update(crc, buf);
        }
        best = best.min(now_us() - start);
    }
    (best, crc)
}

/// The CRC-32C engine of iWARP's MPA CRCs: the kernel's `crc32c()` (the CPU's CRC32
/// instruction where it has one) or the wire crate's, whichever was faster when the module
/// measured both ([`KernelCrc32c::pick`]), as for the ICRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelCrc32c {
    Lib,
    Soft,
}

impl Crc32cEngine for KernelCrc32c {
    fn update_raw(&self, state: u32, data: &[u8]) -> u32 {
        match self {
            Self::Lib => crc32c_update(state, data),
            Self::Soft => SoftCrc32c.update_raw(state, data),
        }
    }
}

impl KernelCrc32c {
    /// Times the two ([`time_crc`]) and keeps the faster (process context).
    pub(crate) fn pick() -> Result<Self> {
        let buf = KVec::from_elem(0x5au8, 4096, GFP_KERNEL)?;
        let (t_lib, c_lib) = time_crc(&buf, |crc, data| Self::Lib.update_raw(crc, data));
        let (t_sw, c_sw) = time_crc(&buf, |crc, data| Self::Soft.update_raw(crc, data));
        if c_lib != c_sw {
            pr_warn!("crc32c() disagrees with CRC-32C; MPA CRCs with the built-in CRC\n");
            return Ok(Self::Soft);
        }
        let pick = if t_lib <= t_sw { Self::Lib } else { Self::Soft };
        pr_info!(
            "MPA CRCs with {} (128 KiB: crc32c() {} us, built-in {} us)\n",
            if pick == Self::Lib {
                "crc32c()"
            } else {
                "the built-in CRC"
            },
            t_lib,
            t_sw
        );
        Ok(pick)
    }
}

/// The addresses and header fields of a connection's packets.
#[derive(Clone, Copy)]
pub(crate) struct TxPath {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) sport: u16,
    /// RoCE v1 (the source GID's type): the destination MAC address; `None` for RoCE v2.
    pub(crate) v1_dmac: Option<[u8; 6]>,
}

impl TxPath {
    fn encap(&self) -> Encap {
        match self.dst {
            IpAddr::V4(_) => Encap::RoceV2Ipv4,
            IpAddr::V6(_) => Encap::RoceV2Ipv6,
        }
    }

    fn same_route(&self, c: &CachedRoute) -> bool {
        c.src == self.src
            && c.dst == self.dst
            && c.traffic_class == self.traffic_class
            && c.flow_label == self.flow_label
    }
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
/// Routes cached per device.
const ROUTE_CACHE: usize = 16;

struct TxState {
    netdev: Option<ARef<NetDevice>>,
    routes: KVec<CachedRoute>,
}

/// A device's transmit path.
#[pin_data]
pub(crate) struct Tx {
    #[pin]
    st: SpinLockBh<TxState>,
    ip_id: AtomicU32,
    crc: Arc<KernelCrc>,
    /// The device's counters.
    pub(crate) stats: Stats,
}

impl Tx {
    /// The transmit path out of `netdev`, computing ICRCs with `crc`.
    pub(crate) fn new(netdev: ARef<NetDevice>, crc: Arc<KernelCrc>) -> impl PinInit<Self> {
        pin_init!(Self {
            st <- crate::new_spinlock_bh!(
                TxState {
                    netdev: Some(netdev),
                    routes: KVec::new(),
                },
                "oxrdma_tx"
            ),
            ip_id: AtomicU32::new(0),
            crc,
            stats: Stats::new(),
        })
    }

    /// The netdev, while the device has one.
    pub(crate) fn netdev(&self) -> Option<ARef<NetDevice>> {
        self.st.lock().netdev.clone()
    }

    /// Stops using the netdev (it is going away); returns what to drop, outside locks.
    pub(crate) fn detach(&self) -> impl Sized {
        let mut st = self.st.lock();
        (
            st.netdev.take(),
            core::mem::replace(&mut st.routes, KVec::new()),
        )
    }

    /// The IB MTU the port runs at now.
    pub(crate) fn active_mtu(&self) -> u32 {
        self.st
            .lock()
            .netdev
            .as_ref()
            .map_or(1024, |nd| ib_mtu_for_link(nd.mtu(), ROCE_MAX_OVERHEAD))
    }

    /// The route of `path`, from the cache or looked up (and cached).
    fn route(&self, path: &TxPath, now: u64) -> Result<(ARef<NetDevice>, Route)> {
        let (nd, cached) = {
            let st = self.st.lock();
            let nd = st.netdev.clone().ok_or(ENODEV)?;
            let r = st
                .routes
                .iter()
                .find(|c| path.same_route(c) && now.saturating_sub(c.since_us) < ROUTE_TTL_US)
                .map(|c| c.route.clone());
            (nd, r)
        };
        if let Some(r) = cached {
            return Ok((nd, r));
        }
        let r = match (path.src, path.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Route::v4(&nd, s, d, path.traffic_class),
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                Route::v6(&nd, s, d, path.traffic_class, path.flow_label)
            }
            _ => Err(EINVAL),
        }?;
        let entry = CachedRoute {
            src: path.src,
            dst: path.dst,
            traffic_class: path.traffic_class,
            flow_label: path.flow_label,
            route: r.clone(),
            since_us: now,
        };
        let old = {
            let mut st = self.st.lock();
            if let Some(c) = st.routes.iter_mut().find(|c| path.same_route(c)) {
                Some(core::mem::replace(c, entry))
            } else if st.routes.len() < ROUTE_CACHE {
                // A small allocation, atomic (this may run in softirq); without it the route
                // is simply not cached.
                let _ = st.routes.push(entry, GFP_ATOMIC);
                None
            } else if let Some(c) = st.routes.iter_mut().min_by_key(|c| c.since_us) {
                Some(core::mem::replace(c, entry))
            } else {
                None
            }
        };
        drop(old);
        Ok((nd, r))
    }

    /// Builds and sends one packet of `path`: IP and UDP headers, `h`, `payload_len` bytes
    /// that `fill` writes (false: abandon the packet, `EFAULT`), pad, ICRC.
    pub(crate) fn send(
        &self,
        path: &TxPath,
        h: &Headers,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        if let Some(dmac) = path.v1_dmac {
            return self.send_v1(path, &dmac, h, payload_len, fill);
        }
        let (nd, route) = self.route(path, now_us())?;
        let ip_len = path.dst.headers_len();
        let iba_len = packet::packet_len(h, payload_len).ok_or(EINVAL)?;
        let mut skb = Skb::alloc_tx(&nd, ip_len + iba_len + ICRC_LEN)?;
        write_iba(&mut skb.data_mut()[ip_len..], h, payload_len, fill)?;
        self.finish_one(path, &route, skb)
    }

    /// The IP and UDP header fields of `path`'s packets, with identification `id`.
    fn ip_udp(path: &TxPath, id: u16) -> IpUdp {
        IpUdp {
            src: path.src,
            dst: path.dst,
            traffic_class: path.traffic_class,
            flow_label: path.flow_label,
            hop_limit: path.hop_limit,
            id,
            sport: path.sport,
            dport: icrc::ROCE_V2_UDP_PORT,
        }
    }

    /// Completes the one RoCE v2 packet in `skb` (IBA headers and payload written): IP and
    /// UDP headers, ICRC, and the UDP checksum over IPv6; then sends it.
    fn finish_one(&self, path: &TxPath, route: &Route, mut skb: Skb) -> Result {
        let buf = skb.data_mut();
        let hdr = Self::ip_udp(path, self.ip_id.fetch_add(1, Ordering::Relaxed) as u16);
        ip::write_headers(&hdr, buf).map_err(|_| EINVAL)?;
        icrc::fill_with(&*self.crc, path.encap(), buf).map_err(|_| EINVAL)?;
        if let IpAddr::V6(_) = path.dst {
            ip::fill_udp6_checksum(buf).map_err(|_| EINVAL)?;
        }
        self.xmit(path, route, skb, 1)
    }

    /// Sends `skb`, which carries `pkts` RoCE packets, and counts them.
    fn xmit(&self, path: &TxPath, route: &Route, skb: Skb, pkts: usize) -> Result {
        let res = skb.xmit(route);
        let counter = match res {
            Ok(()) => Counter::SentPkts,
            Err(_) => Counter::SendErr,
        };
        self.stats.add(counter, pkts as u64);
        if res.is_err() {
            // Look the route up again next time.
            if let Some(c) = self
                .st
                .lock()
                .routes
                .iter_mut()
                .find(|c| path.same_route(c))
            {
                c.since_us = 0;
            }
        }
        res
    }

    /// A batch of packets for `path` ([`TxBatch`]).
    pub(crate) fn batch<'a>(&'a self, path: &'a TxPath) -> TxBatch<'a> {
        TxBatch {
            tx: self,
            path,
            open: None,
        }
    }

    /// [`Tx::send`] for a RoCE v1 path: GRH, `h`, payload, pad, ICRC, out of the netdev in an
    /// Ethernet frame to `dmac` (RoCE v1 does not leave the link: no route).
    fn send_v1(
        &self,
        path: &TxPath,
        dmac: &[u8; 6],
        h: &Headers,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        let nd = self.netdev().ok_or(ENODEV)?;
        let iba_len = packet::packet_len(h, payload_len).ok_or(EINVAL)?;
        let after_grh = u16::try_from(iba_len + ICRC_LEN).map_err(|_| EINVAL)?;
        let mut skb = Skb::alloc_tx(&nd, GRH_LEN + usize::from(after_grh))?;
        let buf = skb.data_mut();
        write_iba(&mut buf[GRH_LEN..], h, payload_len, fill)?;
        let g = Grh {
            traffic_class: path.traffic_class,
            flow_label: path.flow_label,
            payload_len: after_grh,
            hop_limit: path.hop_limit,
            sgid: path.src.to_gid(),
            dgid: path.dst.to_gid(),
        };
        grh::write(&g, buf).map_err(|_| EINVAL)?;
        icrc::fill_with(&*self.crc, Encap::RoceV1, buf).map_err(|_| EINVAL)?;
        let res = skb.xmit_link(&nd, ETH_P_IBOE, dmac);
        self.stats.inc(match res {
            Ok(()) => Counter::SentPkts,
            Err(_) => Counter::SendErr,
        });
        res
    }
}

/// Writes the IBA headers `h` at the start of `iba` and has `fill` write the `payload_len`
/// bytes after them (false: `EFAULT`); pad and ICRC stay as they are.
fn write_iba(
    iba: &mut [u8],
    h: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Result {
    let hl = packet::write_headers(h, payload_len, iba).map_err(|_| EINVAL)?;
    let payload = iba.get_mut(hl..hl + payload_len).ok_or(EINVAL)?;
    if fill(payload) {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Payload bytes (IBA packets, ICRCs included) a [`TxBatch`] gathers into one skb: with the
/// headroom and the skb's shared info, the buffer stays within an order-2 allocation.
const BATCH_BYTES: usize = 15 * 1024;

/// Packets of one RoCE v2 path sent together: a run of equally long packets (the middle
/// packets of a message and its last, or single-packet messages of one length) goes into
/// one skb that the stack, or the device, cuts into one datagram per packet (UDP
/// segmentation offload): one trip through the IP stack and the link for the run, and over
/// a veth one through the peer's IP receive path until its UDP socket cuts it. Every
/// datagram is a complete RoCE packet whose ICRC covers the IP and UDP headers it carries
/// once cut (its own lengths; IPv4 identifications count up from the run's first). Dropping
/// the batch sends what it holds.
pub(crate) struct TxBatch<'a> {
    tx: &'a Tx,
    path: &'a TxPath,
    open: Option<OpenBatch>,
}

/// The skb a [`TxBatch`] fills.
struct OpenBatch {
    route: Route,
    skb: Skb,
    /// The length of each packet (BTH through ICRC); the last may be shorter.
    seg_len: usize,
    /// Packets in the skb.
    segs: usize,
    /// Packets it has room for.
    room: usize,
    /// A shorter packet ended the run.
    closed: bool,
}

impl TxBatch<'_> {
    /// Sends a packet as [`Tx::send`] does, or adds it to the batch: `more` says packets of
    /// the same length are likely to follow. A failure of `fill` (`EFAULT`) leaves the batch
    /// as it was.
    pub(crate) fn send(
        &mut self,
        h: &Headers,
        payload_len: usize,
        more: bool,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result {
        let Some(len) = packet::packet_len(h, payload_len).map(|l| l + ICRC_LEN) else {
            return Err(EINVAL);
        };
        let ended = self
            .open
            .as_ref()
            .is_some_and(|b| b.closed || len > b.seg_len || b.segs == b.room);
        if ended {
            self.flush();
        }
        if self.open.is_none() && (!more || self.path.v1_dmac.is_some() || !self.start(len)) {
            return self.tx.send(self.path, h, payload_len, fill);
        }
        let Some(b) = self.open.as_mut() else {
            return Err(EINVAL);
        };
        let at = self.path.dst.headers_len() + b.segs * b.seg_len;
        if b.skb.put_zero(len).is_err() {
            // Not reached (`start` made room for `room` packets of at most `len` bytes).
            self.flush();
            return self.tx.send(self.path, h, payload_len, fill);
        }
        let res = write_iba(&mut b.skb.data_mut()[at..], h, payload_len, fill);
        if res.is_ok() {
            b.segs += 1;
            b.closed = len < b.seg_len;
        } else {
            b.skb.trim(at);
        }
        res
    }

    /// Opens the batch for packets of `len` bytes; false if it cannot (no route, no memory:
    /// the packet goes alone, which reports the error).
    fn start(&mut self, len: usize) -> bool {
        if !crate::ox::params::roce_gso() {
            return false;
        }
        let Ok((nd, route)) = self.tx.route(self.path, now_us()) else {
            return false;
        };
        let ip_len = self.path.dst.headers_len();
        let room = (BATCH_BYTES / len).max(1);
        let Ok(skb) = Skb::alloc_tx_room(&nd, ip_len, ip_len + room * len) else {
            return false;
        };
        self.open = Some(OpenBatch {
            route,
            skb,
            seg_len: len,
            segs: 0,
            room,
            closed: false,
        });
        true
    }

    /// Sends what the batch holds: one packet as it is, several as one segmentation offload.
    pub(crate) fn flush(&mut self) {
        let Some(b) = self.open.take() else { return };
        let _ = match b.segs {
            0 => Ok(()),
            1 => self.tx.finish_one(self.path, &b.route, b.skb),
            n => self.flush_run(b, n),
        };
    }

    /// Sends the `n` packets (at least two) of `b` as one segmentation offload.
    fn flush_run(&self, mut b: OpenBatch, n: usize) -> Result {
        let tx = self.tx;
        if let Err(e) = self.seal_run(&mut b, n) {
            tx.stats.add(Counter::SendErr, n as u64);
            b.skb.discard();
            return Err(e);
        }
        tx.xmit(self.path, &b.route, b.skb, n)?;
        tx.stats.add(Counter::SentGsoPkts, n as u64);
        Ok(())
    }

    /// Completes the run of `n` packets in `b`: each packet's ICRC over the IP and UDP
    /// headers it will carry once cut, the run's own headers, the offload's geometry.
    fn seal_run(&self, b: &mut OpenBatch, n: usize) -> Result {
        let (path, tx) = (self.path, self.tx);
        let ip_len = path.dst.headers_len();
        let base = tx.ip_id.fetch_add(n as u32, Ordering::Relaxed) as u16;
        let buf = b.skb.data_mut();
        let (net, iba) = buf.split_at_mut(ip_len);
        let mut seg_net = [0u8; ip::IPV6_LEN + ip::UDP_LEN];
        let seg_net = &mut seg_net[..ip_len];
        for (i, seg) in iba.chunks_mut(b.seg_len).enumerate() {
            let hdr = Tx::ip_udp(path, base.wrapping_add(i as u16));
            ip::write_headers_of_len(&hdr, ip_len + seg.len(), seg_net).map_err(|_| EINVAL)?;
            icrc::fill_split_with(&*tx.crc, path.encap(), seg_net, seg).map_err(|_| EINVAL)?;
        }
        ip::write_headers_of_len(&Tx::ip_udp(path, base), ip_len + iba.len(), net)
            .map_err(|_| EINVAL)?;
        b.skb.set_udp_gso(b.seg_len, n)
    }
}

impl Drop for TxBatch<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}
