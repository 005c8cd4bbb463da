// SPDX-License-Identifier: GPL-2.0
//! KUnit: kernel TCP sockets (the transport of iWARP) over `lo` in the initial namespace:
//! listen, non-blocking connect and accept, data both ways through watched sockets, the
//! events that report them, and the end of the stream.

use crate::kunit_suite;
use crate::ox::error::code;
use crate::ox::kunit::{msleep, Test};
use crate::ox::net::{NetDevice, NetNs, NetRef};
use crate::ox::page_ref::{PageRange, PageRef};
use crate::ox::tcp::{SockAddr, TcpEvents, TcpInput, TcpSocket, TcpState};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Counts what a watched socket reports.
#[derive(Default)]
struct Counts {
    data: AtomicUsize,
    space: AtomicUsize,
    state: AtomicUsize,
}

impl TcpEvents for Counts {
    fn data_ready(&self, _input: &mut TcpInput<'_>) {
        self.data.fetch_add(1, Ordering::Relaxed);
    }
    fn write_space(&self, _acked: u32) {
        self.space.fetch_add(1, Ordering::Relaxed);
    }
    fn state_change(&self) {
        self.state.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes what arrives in its `data_ready` callback, in place: the byte count, a
/// position-weighted sum of the bytes, and whether the stream ended. The callbacks of one
/// socket are serialised by its lock, so the positions are those of the stream.
#[derive(Default)]
struct Reader {
    len: AtomicUsize,
    sum: AtomicU64,
    closed: AtomicBool,
}

/// The sum a [`Reader`] computes over `bytes`.
fn weighted(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .map(|(i, b)| (i as u64 + 1) * u64::from(*b))
        .sum()
}

impl TcpEvents for Reader {
    fn data_ready(&self, input: &mut TcpInput<'_>) {
        let _ = input.read(|piece| {
            let at = self.len.load(Ordering::Relaxed);
            let w: u64 = piece
                .iter()
                .enumerate()
                .map(|(i, b)| ((at + i) as u64 + 1) * u64::from(*b))
                .sum();
            self.sum.fetch_add(w, Ordering::Relaxed);
            self.len.store(at + piece.len(), Ordering::Relaxed);
            piece.len()
        });
        if input.closed() {
            self.closed.store(true, Ordering::Relaxed);
        }
    }
    fn write_space(&self, _acked: u32) {}
    fn state_change(&self) {}
}

/// Records the acknowledgements its `write_space` callback reports.
#[derive(Default)]
struct Acks {
    calls: AtomicUsize,
    acked: AtomicU64,
}

impl TcpEvents for Acks {
    fn data_ready(&self, _input: &mut TcpInput<'_>) {}
    fn write_space(&self, acked: u32) {
        self.acked.store(u64::from(acked), Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    fn state_change(&self) {}
}

fn counts() -> Result<Arc<Counts>> {
    Ok(Arc::new(Counts::default(), GFP_KERNEL)?)
}

/// Polls `f` every 10 ms for up to 2 s.
fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if f() {
            return true;
        }
        msleep(10);
    }
    f()
}

/// The initial namespace, referenced through `lo`.
fn init_ns() -> Option<NetRef> {
    let lo = NetDevice::get_by_name(NetNs::init_net(), c_str!("lo")).ok()?;
    NetRef::of(&lo)
}

/// A listener on `addr` port 0, watched; its port.
fn listener(net: &NetRef, addr: SockAddr, ev: &Arc<Counts>) -> Result<(TcpSocket, SockAddr)> {
    let mut l = TcpSocket::new(net, &addr)?;
    l.set_rdma_options();
    l.bind(&addr)?;
    l.listen(4)?;
    l.watch(ev.clone())?;
    let bound = l.addr(false)?;
    Ok((l, bound))
}

/// Connects to `to`, accepts on `l`, returns (client, server).
fn pair(t: &mut Test, net: &NetRef, l: &TcpSocket, to: SockAddr) -> Option<(TcpSocket, TcpSocket)> {
    let c = TcpSocket::new(net, &to).ok()?;
    match c.connect(&to) {
        Ok(()) => {}
        Err(e) if e.to_errno() == code::einprogress().to_errno() => {}
        Err(e) => {
            t.fail(format_args!("connect: {e:?}"));
            return None;
        }
    }
    let mut s = None;
    let ok = wait_for(|| match l.accept() {
        Ok(a) => {
            s = Some(a);
            true
        }
        Err(_) => false,
    });
    t.expect(ok, "a connection to accept");
    t.expect(
        wait_for(|| c.state() == TcpState::Established),
        "client established",
    );
    Some((c, s?))
}

fn tcp_loopback(t: &mut Test, addr: SockAddr) {
    let (Some(net), Ok(lev), Ok(cev), Ok(sev)) = (init_ns(), counts(), counts(), counts()) else {
        return t.fail(format_args!("setup"));
    };
    let (l, bound) = match listener(&net, addr, &lev) {
        Ok(x) => x,
        Err(e) => return t.fail(format_args!("listen: {e:?}")),
    };
    t.expect(bound.port() != 0, "an ephemeral port");
    t.expect_eq(l.state(), TcpState::Listening);
    let Some((mut c, mut s)) = pair(t, &net, &l, bound) else {
        return;
    };
    t.expect(
        lev.data.load(Ordering::Relaxed) >= 1,
        "listener reported the connection",
    );
    t.expect_eq(s.addr(true).ok(), c.addr(false).ok());
    if c.watch(cev.clone()).is_err() || s.watch(sev.clone()).is_err() {
        return t.fail(format_args!("watch"));
    }

    // Client to server, in two buffers; nothing to read before.
    let mut buf = [0u8; 64];
    t.expect_eq(
        s.recv(&mut buf).map_err(|e| e.to_errno()),
        Err(EAGAIN.to_errno()),
    );
    t.expect_eq(c.send(&[b"hello ", b"iwarp"], false).ok(), Some(11));
    t.expect(
        wait_for(|| sev.data.load(Ordering::Relaxed) > 0),
        "server reported data",
    );
    let mut got = 0;
    wait_for(|| {
        if let Ok(n) = s.recv(&mut buf[got..]) {
            got += n;
        }
        got >= 11
    });
    t.expect(&buf[..got] == b"hello iwarp", "server read what was sent");

    // Server to client.
    t.expect_eq(s.send(&[b"ok"], false).ok(), Some(2));
    t.expect(
        wait_for(|| cev.data.load(Ordering::Relaxed) > 0),
        "client reported data",
    );
    let mut two = [0u8; 2];
    t.expect(
        wait_for(|| c.recv(&mut two).ok() == Some(2)),
        "client read the reply",
    );
    t.expect(&two == b"ok", "reply bytes");

    // The client closes: the server sees the end of the stream and a state change.
    let before = sev.state.load(Ordering::Relaxed);
    drop(c);
    t.expect(
        wait_for(|| s.recv(&mut buf).ok() == Some(0)),
        "end of stream",
    );
    t.expect(
        sev.state.load(Ordering::Relaxed) > before,
        "server reported the state change",
    );
    t.expect(cev.data.load(Ordering::Relaxed) >= 1, "client events kept");
    s.unwatch();
    let after = sev.data.load(Ordering::Relaxed);
    let _ = s.send(&[b"x"], false);
    msleep(50);
    t.expect_eq(sev.data.load(Ordering::Relaxed), after);
}

fn tcp_loopback_v4(t: &mut Test) {
    tcp_loopback(
        t,
        SockAddr::V4 {
            ip: [127, 0, 0, 1],
            port: 0,
        },
    );
}

fn tcp_loopback_v6(t: &mut Test) {
    let mut ip = [0u8; 16];
    ip[15] = 1;
    tcp_loopback(
        t,
        SockAddr::V6 {
            ip,
            port: 0,
            scope: 0,
        },
    );
}

/// A connection to a port nobody listens on ends in `ECONNREFUSED`, reported as a state
/// change.
fn tcp_connect_refused(t: &mut Test) {
    let (Some(net), Ok(ev)) = (init_ns(), counts()) else {
        return t.fail(format_args!("setup"));
    };
    let to = SockAddr::V4 {
        ip: [127, 0, 0, 1],
        port: 9,
    };
    let Ok(mut c) = TcpSocket::new(&net, &to) else {
        return t.fail(format_args!("socket"));
    };
    if c.watch(ev.clone()).is_err() {
        return t.fail(format_args!("watch"));
    }
    let r = c.connect(&to);
    t.expect(
        r.is_err() || c.state() == TcpState::Established,
        "connect in progress or failed",
    );
    t.expect(
        wait_for(|| c.error().is_some() || c.state() == TcpState::Closed),
        "refused",
    );
    t.expect_eq(
        c.error().map(|e| e.to_errno()),
        Some(code::econnrefused().to_errno()),
    );
    t.expect(
        ev.state.load(Ordering::Relaxed) >= 1,
        "state change reported",
    );
}

/// Received bytes read in place: what came before the socket was watched under the socket's
/// lock ([`TcpSocket::read`]), what comes after in the callback ([`TcpInput::read`]), then
/// the end of the stream.
fn tcp_read_in_place(t: &mut Test) {
    let addr = SockAddr::V4 {
        ip: [127, 0, 0, 1],
        port: 0,
    };
    let (Some(net), Ok(lev), Ok(rd)) =
        (init_ns(), counts(), Arc::new(Reader::default(), GFP_KERNEL))
    else {
        return t.fail(format_args!("setup"));
    };
    let (l, bound) = match listener(&net, addr, &lev) {
        Ok(x) => x,
        Err(e) => return t.fail(format_args!("listen: {e:?}")),
    };
    let Some((c, mut s)) = pair(t, &net, &l, bound) else {
        return;
    };
    // Before the watch: read under the socket's lock, a piece at a time, and only part of
    // what is there (the rest stays).
    t.expect_eq(c.send(&[b"early bytes"], false).ok(), Some(11));
    let mut early = [0u8; 16];
    let mut have = 0;
    let ok = wait_for(|| {
        let _ = s.read(|piece| {
            let n = piece.len().min(5 - have.min(5));
            for (d, b) in early[have..have + n].iter_mut().zip(piece) {
                *d = *b;
            }
            have += n;
            n
        });
        have == 5
    });
    t.expect(
        ok && &early[..5] == b"early",
        "the first five bytes, read in place",
    );
    let ok = wait_for(|| {
        let _ = s.read(|piece| {
            let n = piece.len().min(early.len() - have);
            for (d, b) in early[have..have + n].iter_mut().zip(piece) {
                *d = *b;
            }
            have += n;
            n
        });
        have == 11
    });
    t.expect(ok && &early[..11] == b"early bytes", "the rest, after them");
    // Watched: the callback takes the bytes as they arrive.
    if s.watch(rd.clone()).is_err() {
        return t.fail(format_args!("watch"));
    }
    t.expect_eq(c.send(&[b"hello ", b"iwarp"], false).ok(), Some(11));
    t.expect(
        wait_for(|| rd.len.load(Ordering::Relaxed) == 11),
        "the callback read 11 bytes",
    );
    t.expect_eq(rd.sum.load(Ordering::Relaxed), weighted(b"hello iwarp"));
    t.expect(!s.input_closed(), "the stream goes on");
    drop(c);
    t.expect(
        wait_for(|| rd.closed.load(Ordering::Relaxed)),
        "the callback saw the end of the stream",
    );
    t.expect(s.input_closed(), "input closed");
}

/// Bytes sent from a page the socket references ([`TcpSocket::send_pages`]) arrive as they
/// are in the page; the stream's end moves by their count; once acknowledgements are watched,
/// each one that frees sent data reaches `write_space` with the acknowledged sequence.
fn tcp_send_pages(t: &mut Test) {
    let addr = SockAddr::V4 {
        ip: [127, 0, 0, 1],
        port: 0,
    };
    let (Some(net), Ok(lev), Ok(rd), Ok(acks)) = (
        init_ns(),
        counts(),
        Arc::new(Reader::default(), GFP_KERNEL),
        Arc::new(Acks::default(), GFP_KERNEL),
    ) else {
        return t.fail(format_args!("setup"));
    };
    let (l, bound) = match listener(&net, addr, &lev) {
        Ok(x) => x,
        Err(e) => return t.fail(format_args!("listen: {e:?}")),
    };
    let Some((mut c, mut s)) = pair(t, &net, &l, bound) else {
        return;
    };
    if s.watch(rd.clone()).is_err() || c.watch(acks.clone()).is_err() {
        return t.fail(format_args!("watch"));
    }
    let Ok(page) = PageRef::alloc_zeroed() else {
        return t.fail(format_args!("page"));
    };
    let mut pattern = [0u8; 3000];
    for (i, b) in pattern.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    t.expect(page.write(100, &pattern).is_ok(), "page written");
    t.expect(
        page.write(4000, &pattern).is_err(),
        "a write past the page refused",
    );
    let (Some(a), Some(b)) = (
        PageRange::new(page.clone(), 100, 1000),
        PageRange::new(page.clone(), 1100, 2000),
    ) else {
        return t.fail(format_args!("ranges"));
    };
    t.expect(
        PageRange::new(page.clone(), 4000, 97).is_none(),
        "a range past the page",
    );
    c.watch_acks();
    let start = c.queued_end();
    t.expect_eq(c.send_pages([&a, &b], false).ok(), Some(3000));
    let end = c.queued_end();
    t.expect_eq(end.wrapping_sub(start), 3000);
    t.expect(
        wait_for(|| rd.len.load(Ordering::Relaxed) == 3000),
        "3000 bytes received",
    );
    t.expect_eq(rd.sum.load(Ordering::Relaxed), weighted(&pattern));
    t.expect(
        wait_for(|| c.acked() == end),
        "the peer acknowledged the stream's end",
    );
    t.expect(
        wait_for(|| acks.acked.load(Ordering::Relaxed) == u64::from(end)),
        "write_space reported the acknowledgement",
    );
    // Watched for good: the next acknowledgement is reported too.
    let calls = acks.calls.load(Ordering::Relaxed);
    t.expect_eq(c.send_pages([&a], false).ok(), Some(1000));
    let end = c.queued_end();
    t.expect(
        wait_for(|| acks.acked.load(Ordering::Relaxed) == u64::from(end)),
        "and the next one",
    );
    t.expect(acks.calls.load(Ordering::Relaxed) > calls, "another call");
}

kunit_suite!(
    tcp_suite,
    "oxrdma_tcp",
    [
        tcp_loopback_v4,
        tcp_loopback_v6,
        tcp_connect_refused,
        tcp_read_in_place,
        tcp_send_pages
    ]
);
