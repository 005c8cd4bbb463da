// SPDX-License-Identifier: GPL-2.0
//! KUnit: RoCE v2 packet I/O end to end in the test VM's initial namespace, over `lo`:
//! packets built by hand in an `Skb`, routed, sent with `ip_local_out`/`ip6_local_out` and
//! received by a `UdpTunnel` receiver, byte for byte.

use crate::kunit_suite;
use crate::ox::error::code;
use crate::ox::kunit::{msleep, Test};
use crate::ox::net::{NetDevice, NetNs};
use crate::ox::route::Route;
use crate::ox::skb::{RxDatagram, Skb, SkbQueue};
use crate::ox::udp_tunnel::{TunnelRef, UdpReceiver};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::ARef;

const LOCAL4: [u8; 4] = [127, 0, 0, 1];
const LOCAL6: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const SPORT: u16 = 0xc0de;

/// Collects what a tunnel receives (softirq) for the test thread.
struct Collect {
    q: SkbQueue<RxDatagram>,
}

impl UdpReceiver for Collect {
    fn receive(&self, _net: &NetNs, pkt: RxDatagram) {
        self.q.push(pkt);
    }
}

fn collector() -> Result<Arc<Collect>> {
    Ok(Arc::new(
        Collect {
            q: SkbQueue::new(GFP_KERNEL)?,
        },
        GFP_KERNEL,
    )?)
}

fn lo() -> Result<ARef<NetDevice>> {
    NetDevice::get_by_name(NetNs::init_net(), c_str!("lo"))
}

/// The Internet checksum of `data` (RFC 1071).
fn inet_csum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes an IPv4/UDP packet 127.0.0.1 -> 127.0.0.1:`dport` with a patterned payload filling
/// `pkt`, header checksum included (so the stack's recomputation changes nothing).
fn build_v4(pkt: &mut [u8], dport: u16, id: u16) {
    let len = pkt.len() as u16;
    pkt[..20].copy_from_slice(&[
        0x45,
        0x00,
        (len >> 8) as u8,
        len as u8,
        (id >> 8) as u8,
        id as u8,
        0x40,
        0x00,
        64,
        17,
        0,
        0,
        127,
        0,
        0,
        1,
        127,
        0,
        0,
        1,
    ]);
    let csum = inet_csum(&pkt[..20]);
    pkt[10..12].copy_from_slice(&csum.to_be_bytes());
    build_udp(&mut pkt[20..], dport);
}

/// Writes an IPv6/UDP packet ::1 -> ::1:`dport` (UDP checksum 0) filling `pkt`.
fn build_v6(pkt: &mut [u8], dport: u16) {
    let plen = (pkt.len() - 40) as u16;
    pkt[..8].copy_from_slice(&[0x60, 0, 0, 0, (plen >> 8) as u8, plen as u8, 17, 64]);
    pkt[8..24].copy_from_slice(&LOCAL6);
    pkt[24..40].copy_from_slice(&LOCAL6);
    build_udp(&mut pkt[40..], dport);
}

fn build_udp(udp: &mut [u8], dport: u16) {
    let len = udp.len() as u16;
    udp[..8].copy_from_slice(&[
        (SPORT >> 8) as u8,
        SPORT as u8,
        (dport >> 8) as u8,
        dport as u8,
        (len >> 8) as u8,
        len as u8,
        0,
        0,
    ]);
    for (i, b) in udp[8..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7) ^ 0x5a;
    }
}

/// Sends a v4 (or v6) packet of `len` bytes to `dport` over `lo`; returns the bytes sent.
fn send(t: &mut Test, ipv6: bool, dport: u16, len: usize, id: u16) -> Option<KVec<u8>> {
    let dev = lo().ok()?;
    let route = if ipv6 {
        Route::v6(&dev, LOCAL6, LOCAL6, 0, 0)
    } else {
        Route::v4(&dev, LOCAL4, LOCAL4, 0)
    };
    let route = match route {
        Ok(r) => r,
        Err(e) => {
            t.fail(format_args!("route (ipv6 {ipv6}): {e:?}"));
            return None;
        }
    };
    let mut skb = Skb::alloc_tx(&dev, len).ok()?;
    if ipv6 {
        build_v6(skb.data_mut(), dport);
    } else {
        build_v4(skb.data_mut(), dport, id);
    }
    let mut sent = KVec::new();
    sent.extend_from_slice(skb.data(), GFP_KERNEL).ok()?;
    if let Err(e) = skb.xmit(&route) {
        t.fail(format_args!("xmit: {e:?}"));
        return None;
    }
    Some(sent)
}

/// `lo`, a collector and a tunnel on `port` delivering to it (failing `t` if any is missing).
fn open_collecting(t: &mut Test, port: u16) -> Option<(ARef<NetDevice>, Arc<Collect>, TunnelRef)> {
    let (Ok(dev), Ok(rx)) = (lo(), collector()) else {
        t.fail(format_args!("setup"));
        return None;
    };
    match TunnelRef::open(&dev, port, rx.clone()) {
        Ok(tun) => Some((dev, rx, tun)),
        Err(e) => {
            t.fail(format_args!("open: {e:?}"));
            None
        }
    }
}

/// Waits up to one second for a packet.
fn wait(rx: &Collect) -> Option<RxDatagram> {
    for _ in 0..100 {
        if let Some(p) = rx.q.pop() {
            return Some(p);
        }
        msleep(10);
    }
    None
}

fn skb_alloc_is_zeroed_and_writable(t: &mut Test) {
    let Ok(dev) = lo() else {
        return t.fail(format_args!("no lo"));
    };
    match Skb::alloc_tx(&dev, 1500) {
        Ok(mut skb) => {
            t.expect_eq(skb.len(), 1500);
            t.expect(skb.data().iter().all(|&b| b == 0), "zeroed");
            skb.data_mut()[1499] = 0xab;
            t.expect_eq(skb.data()[1499], 0xab);
        }
        Err(e) => t.fail(format_args!("alloc_tx: {e:?}")),
    }
}

fn skb_queue_is_fifo_and_purges(t: &mut Test) {
    let Ok(dev) = lo() else {
        return t.fail(format_args!("no lo"));
    };
    let Ok(q) = SkbQueue::<Skb>::new(GFP_KERNEL) else {
        return t.fail(format_args!("queue"));
    };
    for n in 1..=3usize {
        if let Ok(skb) = Skb::alloc_tx(&dev, n) {
            q.push(skb);
        }
    }
    t.expect_eq(q.len(), 3);
    t.expect_eq(q.pop().map(|s| s.len()), Some(1));
    t.expect_eq(q.len(), 2);
    // The two left are freed by the drop (kmemleak would see a leak otherwise).
}

fn route_v4_loopback(t: &mut Test) {
    let Ok(dev) = lo() else {
        return t.fail(format_args!("no lo"));
    };
    match Route::v4(&dev, [0; 4], LOCAL4, 0) {
        Ok(r) => {
            t.expect_eq(r.saddr_v4(), LOCAL4);
            t.expect(r.leaves_through(&dev), "the route leaves through lo");
            t.expect(r.mtu() >= 1280, "path MTU");
            t.expect(!r.is_ipv6(), "IPv4 route");
            let c = r.clone();
            t.expect(c.leaves_through(&dev), "so does its clone");
        }
        Err(e) => t.fail(format_args!("route: {e:?}")),
    }
}

fn tunnel_v4_delivers_exact_bytes(t: &mut Test) {
    const PORT: u16 = 47911;
    let Some((dev, rx, tun)) = open_collecting(t, PORT) else {
        return;
    };
    t.expect(tun.is_open(), "open");
    t.expect_eq(tun.port(), PORT);
    t.expect(tun.is_in(NetNs::init_net()), "the tunnel is in init_net");
    for (len, id) in [(28 + 40, 0x1234u16), (1500, 0xbeef)] {
        let Some(sent) = send(t, false, PORT, len, id) else {
            return;
        };
        match wait(&rx) {
            Some(p) => {
                t.expect(!p.is_ipv6(), "IPv4");
                t.expect_eq(p.ingress_ifindex(), dev.ifindex());
                t.expect_eq(p.network_packet().len(), sent.len());
                t.expect(
                    p.network_packet() == &sent[..],
                    "received bytes == sent bytes",
                );
            }
            None => t.fail(format_args!("nothing received ({len} bytes)")),
        }
    }
    t.expect(rx.q.is_empty(), "exactly one packet each");
}

fn tunnel_v6_delivers_exact_bytes(t: &mut Test) {
    const PORT: u16 = 47912;
    let Some((dev, rx, tun)) = open_collecting(t, PORT) else {
        return;
    };
    t.expect(tun.has_ipv6(), "IPv6 socket");
    let Some(sent) = send(t, true, PORT, 40 + 8 + 64, 0) else {
        return;
    };
    match wait(&rx) {
        Some(p) => {
            t.expect(p.is_ipv6(), "IPv6");
            t.expect_eq(p.ingress_ifindex(), dev.ifindex());
            t.expect(
                p.network_packet() == &sent[..],
                "received bytes == sent bytes",
            );
        }
        None => t.fail(format_args!("nothing received (UDP checksum 0 over IPv6)")),
    }
}

fn tunnel_takes_offload_run_whole(t: &mut Test) {
    const PORT: u16 = 47916;
    // Four datagrams of UDP payload 500, 500, 500 and 100 bytes, sent as one run.
    const LEN: usize = 28 + 3 * 500 + 100;
    let (Ok(dev), Ok(rx)) = (lo(), collector()) else {
        return t.fail(format_args!("setup"));
    };
    let (Ok(tun), Ok(route), Ok(mut skb)) = (
        TunnelRef::open(&dev, PORT, rx.clone()),
        Route::v4(&dev, LOCAL4, LOCAL4, 0),
        Skb::alloc_tx(&dev, LEN),
    ) else {
        return t.fail(format_args!("open, route, skb"));
    };
    build_v4(skb.data_mut(), PORT, 0x4321);
    if let Err(e) = skb.set_udp_gso(500, 4) {
        return t.fail(format_args!("set_udp_gso: {e:?}"));
    }
    let mut sent = KVec::new();
    if sent.extend_from_slice(skb.data(), GFP_KERNEL).is_err() {
        return t.fail(format_args!("copy"));
    }
    if let Err(e) = skb.xmit(&route) {
        return t.fail(format_args!("xmit: {e:?}"));
    }
    match wait(&rx) {
        Some(p) => {
            t.expect_eq(p.segment_size(), Some(500));
            t.expect_eq(p.ingress_ifindex(), dev.ifindex());
            t.expect_eq(p.headers().len(), 28);
            // The UDP checksum field holds what the sender's offload left there.
            t.expect(p.headers()[..26] == sent[..26], "the run's headers");
            t.expect(
                p.payload() == &sent[28..],
                "every datagram's payload, in order",
            );
        }
        None => t.fail(format_args!("nothing received")),
    }
    msleep(50);
    t.expect(rx.q.is_empty(), "one datagram: the run, uncut");
    drop(tun);
}

fn tunnel_keeps_order_past_a_pause(t: &mut Test) {
    const PORT: u16 = 47917;
    // More than three drain quotas' worth: the work item queues itself again.
    const N: u16 = 200;
    let Some((_dev, rx, tun)) = open_collecting(t, PORT) else {
        return;
    };
    // The work item `open` queued may be looking at the (empty) queues right now: `EBUSY`
    // until it is done.
    let mut paused = tun.pause_receive();
    for _ in 0..100 {
        match &paused {
            Err(e) if e.to_errno() == EBUSY.to_errno() => msleep(10),
            _ => break,
        }
        paused = tun.pause_receive();
    }
    let pause = match paused {
        Ok(p) => p,
        Err(e) => return t.fail(format_args!("pause: {e:?}")),
    };
    for id in 0..N {
        if send(t, false, PORT, 64, id).is_none() {
            return;
        }
    }
    msleep(50);
    t.expect(
        rx.q.is_empty(),
        "nothing taken while another context takes them",
    );
    drop(pause);
    let mut next = 0u16;
    while next < N {
        let Some(p) = wait(&rx) else {
            return t.fail(format_args!("{next} of {N} datagrams received"));
        };
        let ip = p.network_packet();
        let id = u16::from_be_bytes([ip[4], ip[5]]);
        if id != next {
            return t.fail(format_args!("datagram {id} received as number {next}"));
        }
        next += 1;
    }
    msleep(50);
    t.expect(rx.q.is_empty(), "each datagram once");
}

fn tunnel_shared_until_last_handle(t: &mut Test) {
    const PORT: u16 = 47913;
    let (Ok(dev), Ok(rx)) = (lo(), collector()) else {
        return t.fail(format_args!("setup"));
    };
    let (Ok(a), Ok(b)) = (
        TunnelRef::open(&dev, PORT, rx.clone()),
        TunnelRef::open(&dev, PORT, rx.clone()),
    ) else {
        return t.fail(format_args!("open twice with one receiver"));
    };
    drop(a);
    t.expect(b.is_open(), "open while a handle is left");
    if send(t, false, PORT, 64, 1).is_some() {
        t.expect(wait(&rx).is_some(), "delivered with one handle left");
    }
    drop(b);
    if send(t, false, PORT, 64, 2).is_some() {
        msleep(100);
        t.expect(
            rx.q.is_empty(),
            "nothing delivered after the last handle dropped",
        );
    }
    // The port is free again.
    match TunnelRef::open(&dev, PORT, rx.clone()) {
        Ok(c) => {
            if send(t, false, PORT, 64, 3).is_some() {
                t.expect(wait(&rx).is_some(), "delivered after reopening");
            }
            drop(c);
        }
        Err(e) => t.fail(format_args!("reopen: {e:?}")),
    }
}

fn tunnel_port_in_use(t: &mut Test) {
    const PORT: u16 = 47914;
    let (Ok(dev), Ok(rx), Ok(other)) = (lo(), collector(), collector()) else {
        return t.fail(format_args!("setup"));
    };
    let Ok(a) = TunnelRef::open(&dev, PORT, rx.clone()) else {
        return t.fail(format_args!("open"));
    };
    match TunnelRef::open(&dev, PORT, other.clone()) {
        Ok(_) => t.fail(format_args!("second receiver on a bound port")),
        Err(e) => t.expect_eq(e.to_errno(), code::eaddrinuse().to_errno()),
    }
    if send(t, false, PORT, 64, 4).is_some() {
        t.expect(wait(&rx).is_some(), "first tunnel still delivers");
    }
    t.expect(other.q.is_empty(), "nothing for the refused receiver");
    t.expect(a.is_open(), "first tunnel open");
}

fn xmit_refuses_wrong_length(t: &mut Test) {
    let Ok(dev) = lo() else {
        return t.fail(format_args!("no lo"));
    };
    let (Ok(route), Ok(mut skb)) = (Route::v4(&dev, LOCAL4, LOCAL4, 0), Skb::alloc_tx(&dev, 64))
    else {
        return t.fail(format_args!("setup"));
    };
    build_v4(skb.data_mut(), 47915, 5);
    skb.data_mut()[3] = 63; // total length one short
    t.expect_eq(
        skb.xmit(&route).map_err(|e| e.to_errno()),
        Err(EINVAL.to_errno()),
    );
}

kunit_suite!(
    net_suite,
    "oxrdma_net",
    [
        skb_alloc_is_zeroed_and_writable,
        skb_queue_is_fifo_and_purges,
        route_v4_loopback,
        tunnel_v4_delivers_exact_bytes,
        tunnel_v6_delivers_exact_bytes,
        tunnel_takes_offload_run_whole,
        tunnel_keeps_order_past_a_pause,
        tunnel_shared_until_last_handle,
        tunnel_port_in_use,
        xmit_refuses_wrong_length
    ]
);
