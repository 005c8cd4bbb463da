// SPDX-License-Identifier: GPL-2.0
//! KUnit: regression tests for defects a hostile process or peer could use (issue 14):
//! identities that wrap, loops a process keeps going, memory reached through a key that is no
//! longer valid.

use crate::kunit_suite;
use crate::mr::{Access, Mr, MrError, MrMem, Op};
use crate::ox::kunit::Test;
use crate::ox::rdma::kmem::{FastRegPages, KernelMem};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::rdma::verbs::access;
use crate::ox::rdma::wr::{RecvWr, Sge};
use crate::queue::{Geometry, RecvQueue, RingFault, SendRing};
use crate::uapi::queue::{
    recv_slot_size, send_slot_size, SendWqe, Sge as RingSge, RECV_WQE_SIZE, SEND_WQE_SIZE,
    SGE_SIZE, WQE_FLAG_INLINE,
};
use crate::uapi::ring::RING_HEADER_SIZE;
use kernel::{alloc::KVec, prelude::*};

/// PD numbers (and every identity from an [`Ida`](crate::ox::ida::Ida)) belong to live
/// objects only: however many objects come and go, a live one's number is never handed out
/// again, and the range bounds how many live at once. A counter would wrap back onto a live
/// number (here after two rounds of a three-number range).
fn ida_numbers_are_never_shared(t: &mut Test) {
    let Ok(ids) = crate::ox::ida::Ida::new(1, 3) else {
        return t.fail(format_args!("Ida::new"));
    };
    let Ok(a) = ids.alloc() else {
        return t.fail(format_args!("first alloc"));
    };
    t.expect_eq(a.get(), 1);
    for _ in 0..1000 {
        match ids.alloc() {
            Ok(b) => t.expect(b.get() != a.get() && (1..=3).contains(&b.get()), "live"),
            Err(e) => return t.fail(format_args!("alloc: {e:?}")),
        }
    }
    let (Ok(b), Ok(c)) = (ids.alloc(), ids.alloc()) else {
        return t.fail(format_args!("alloc 2 and 3"));
    };
    t.expect_eq(ids.alloc().err(), Some(ENOSPC));
    drop(b);
    t.expect_eq(ids.alloc().map(|x| x.get()).ok(), Some(2));
    drop(c);
    t.expect(
        crate::ox::ida::Ida::new(3, 2).is_err(),
        "empty range refused",
    );
}

/// Flushing a receive queue takes what was waiting when it started, not what the process
/// posts meanwhile: a process that keeps posting into the RQ of a QP in error cannot keep
/// the device's worker in the flush (it used to re-read the producer index per entry).
fn rq_flush_is_bounded(t: &mut Test) {
    let slots = 8u32;
    let slot = recv_slot_size(1);
    let Ok(ring) = RingBuf::new(RING_HEADER_SIZE + (slots * slot) as usize) else {
        return t.fail(format_args!("RingBuf::new"));
    };
    let geo = Geometry {
        slots,
        slot_size: slot,
    };
    let Ok(rq) = RecvQueue::new(
        ring,
        geo,
        (slot - RECV_WQE_SIZE as u32) / SGE_SIZE as u32,
        None,
        0,
    ) else {
        return t.fail(format_args!("RecvQueue::new"));
    };
    let sge = [Sge {
        addr: 0,
        length: 1,
        lkey: 0,
    }];
    let post = |id: u64| {
        rq.post(&RecvWr {
            wr_id: id,
            sges: &sge,
        })
    };
    for id in 0..3 {
        t.expect(post(id).is_ok(), "post");
    }
    // The "process" posts another WQE for each one flushed, up to 100.
    let mut flushed = KVec::new();
    let mut next = 3u64;
    rq.drain(|wr_id| {
        let _ = flushed.push(wr_id, GFP_KERNEL);
        if next < 100 && post(next).is_ok() {
            next += 1;
        }
    });
    t.expect_eq(flushed.len(), 3);
    t.expect(flushed.iter().copied().eq(0..3u64), "in order");
    // What was posted meanwhile is left for the next pass.
    let mut later = 0;
    rq.drain(|_| later += 1);
    t.expect_eq(later, 3);
}

/// A reference to an MR kept by work in progress (a responder's READ resource, a WRITE half
/// received) gives no access once the key is invalidated or the MR deregistered, and a
/// re-registration under a new key does not revive the old one.
fn mr_access_ends_with_its_key(t: &mut Test) {
    let Ok(page) = KVec::from_elem(0x5au8, 4096, GFP_KERNEL) else {
        return t.fail(format_args!("allocation"));
    };
    let addr = page.as_ptr() as u64;
    if addr % 4096 != 0 {
        return t.fail(format_args!("kmalloc(4096) not page aligned"));
    }
    let Ok(fr) = FastRegPages::new(1) else {
        return t.fail(format_args!("FastRegPages::new"));
    };
    fr.begin(4096);
    t.expect(fr.push(addr).is_ok(), "page");
    fr.finish(0x10000);
    let base = 7 << 8;
    let Ok(mr) = Mr::new(base, 1, MrMem::Fast(fr), 0, 0, 0) else {
        return t.fail(format_args!("Mr::new"));
    };
    let read = |key: u32, pdn: u32| Access {
        key,
        pdn,
        remote: true,
        va: 0x10000,
        len: 64,
    };
    let mut buf = [0u8; 16];
    t.expect_eq(mr.read(&read(base | 1, 1), 0, &mut buf), Err(MrError::Key));
    t.expect(
        mr.register(1, base | 1, access::REMOTE_READ, 0x10000, 4096)
            .is_ok(),
        "REG_MR",
    );
    // The "responder" keeps its reference and its access across what follows.
    let kept = mr.clone();
    let a = read(base | 1, 1);
    t.expect_eq(kept.check(&a, Op::Read), Ok(()));
    t.expect_eq(kept.check(&a, Op::Write), Err(MrError::Rights));
    t.expect_eq(kept.read(&a, 8, &mut buf), Ok(()));
    t.expect_eq(buf[0], 0x5a);
    t.expect_eq(kept.read(&read(base | 1, 2), 0, &mut buf), Err(MrError::Pd));
    t.expect_eq(kept.read(&a, 60, &mut buf), Err(MrError::Bounds));
    t.expect_eq(kept.write(&a, 0, &buf), Err(MrError::Rights));
    // LOCAL_INV / SEND with invalidate.
    t.expect(mr.invalidate(1, base | 1).is_ok(), "invalidate");
    t.expect_eq(kept.read(&a, 0, &mut buf), Err(MrError::Key));
    // Registered again under a new key: the old access stays dead.
    t.expect(
        mr.register(1, base | 2, access::REMOTE_READ, 0x10000, 4096)
            .is_ok(),
        "REG_MR again",
    );
    t.expect_eq(kept.read(&a, 0, &mut buf), Err(MrError::Key));
    t.expect_eq(kept.read(&read(base | 2, 1), 0, &mut buf), Ok(()));
    // Deregistration.
    mr.revoke();
    t.expect_eq(
        kept.read(&read(base | 2, 1), 0, &mut buf),
        Err(MrError::Key),
    );

    // A DMA MR (all of kernel memory) ends the same way.
    let Ok(dma) = Mr::new(
        9 << 8,
        1,
        MrMem::Dma(KernelMem::new()),
        access::REMOTE_WRITE,
        0,
        u64::MAX,
    ) else {
        return t.fail(format_args!("Mr::new"));
    };
    let w = Access {
        key: 9 << 8,
        pdn: 1,
        remote: true,
        va: addr,
        len: 8,
    };
    t.expect_eq(dma.write(&w, 0, &[1, 2]), Ok(()));
    t.expect_eq(page[1], 2);
    dma.revoke();
    t.expect_eq(dma.write(&w, 0, &[3, 4]), Err(MrError::Key));
    t.expect_eq(page[1], 2);
}

/// A QP made in the slot of a destroyed QP gets another number, for the next 127 reuses of
/// the slot; every number maps back to its slot, and none is 0, 1 (the special QPs) or the
/// multicast QPN.
fn qp_numbers_change_with_reuse(t: &mut Test) {
    use crate::dev::{qp_slot, qpn_of, QPN_BASE};
    use crate::table::Reservation;
    use crate::wire::headers::MULTICAST_QPN;
    for index in [0usize, 1, 17, 0xfffe, 0xffff] {
        let mut last = None;
        for tag in 0..=u8::MAX {
            let qpn = qpn_of(Reservation { index, tag });
            t.expect((QPN_BASE..MULTICAST_QPN).contains(&qpn), "in range");
            t.expect_eq(qp_slot(qpn), Some(index));
            t.expect(last != Some(qpn), "differs from the slot's previous QP");
            last = Some(qpn);
        }
        t.expect(
            qpn_of(Reservation { index, tag: 1 }) != qpn_of(Reservation { index, tag: 100 }),
            "100 reuses later",
        );
    }
}

/// A ring whose last reference goes with softirqs disabled (as a packet's reference on its QP
/// can) is freed later, from the module's queue, and nothing is written into its pages: a
/// process may still map them (here a page reference stands for its mapping). `vfree` in that
/// context defers through the area's first bytes, which put a kernel pointer where the
/// process reads and writes, and took back whatever it wrote there as the pointer.
fn ring_freed_in_softirq_keeps_its_pages(t: &mut Test) {
    let Ok(ring) = RingBuf::new(2 * 4096) else {
        return t.fail(format_args!("RingBuf::new"));
    };
    let pattern = [0x5au8; 16];
    t.expect(ring.write(0, &pattern).is_ok(), "write");
    let Some(page) = ring.page(0) else {
        return t.fail(format_args!("RingBuf::page"));
    };
    let Ok(holder) = KBox::pin_init(crate::new_spinlock_bh!(Some(ring), "test_ring"), GFP_KERNEL)
    else {
        return t.fail(format_args!("lock"));
    };
    {
        let mut g = holder.lock();
        // The last reference, dropped with softirqs disabled.
        drop(g.take());
    }
    crate::ox::workqueue::flush();
    let mut now = [0u8; 16];
    t.expect(page.read(0, &mut now).is_ok(), "read");
    t.expect_eq(now, pattern);
}

/// A send WQE is copied out of the ring whole, however many SGEs or inline bytes it has
/// (in place up to two SGEs or 32 bytes, allocated beyond: both sides of each limit here),
/// and never past its slot: a header that claims more than the slot holds is refused.
fn send_entries_are_copied_whole_and_bounded(t: &mut Test) {
    let slots = 8u32;
    let slot = send_slot_size(4, 64);
    let Ok(ring) = RingBuf::new(RING_HEADER_SIZE + (slots * slot) as usize) else {
        return t.fail(format_args!("RingBuf::new"));
    };
    let sq = SendRing {
        ring,
        geo: Geometry {
            slots,
            slot_size: slot,
        },
    };
    let at = |i: u32| RING_HEADER_SIZE + (i * slot) as usize;
    let sge = |i: u32| RingSge {
        addr: 0x1000 * u64::from(i),
        length: i,
        lkey: 7 + i,
    };
    let mut four = [0u8; 4 * SGE_SIZE];
    for i in 0..4u32 {
        let o = i as usize * SGE_SIZE;
        four[o..o + SGE_SIZE].copy_from_slice(&sge(i + 1).to_bytes());
    }
    let mut text = [0u8; 64];
    for (i, b) in text.iter_mut().enumerate() {
        *b = i as u8 ^ 0x5a;
    }
    let base = SendWqe {
        wr_id: 1,
        ..Default::default()
    };
    let inline = |n: u32| SendWqe {
        flags: WQE_FLAG_INLINE,
        inline_len: n,
        ..base
    };
    // Slots 0-3: one to four SGEs; 4 and 5: 32 and 33 inline bytes; 6 and 7: more SGEs or
    // inline bytes than the slot holds.
    let entries: [(SendWqe, &[u8]); 8] = [
        (SendWqe { num_sge: 1, ..base }, &four[..SGE_SIZE]),
        (SendWqe { num_sge: 2, ..base }, &four[..2 * SGE_SIZE]),
        (SendWqe { num_sge: 3, ..base }, &four[..3 * SGE_SIZE]),
        (SendWqe { num_sge: 4, ..base }, &four),
        (inline(32), &text[..32]),
        (inline(33), &text[..33]),
        (
            SendWqe {
                num_sge: 200,
                ..base
            },
            &[],
        ),
        (inline(slot), &[]),
    ];
    for (i, (wqe, body)) in (0u32..).zip(entries.iter()) {
        let ok = sq.ring.write(at(i), &wqe.to_bytes()).is_ok()
            && sq.ring.write(at(i) + SEND_WQE_SIZE, body).is_ok();
        t.expect(ok, "ring write");
    }
    let same = |a: &[RingSge], n: u32| {
        a.len() == n as usize
            && a.iter()
                .zip(1..)
                .all(|(s, i)| (s.addr, s.length, s.lkey) == (0x1000 * u64::from(i), i, 7 + i))
    };
    for n in 1..=4u32 {
        match sq.read(n - 1) {
            Ok(e) => t.expect(
                same(&e.sges, n)
                    && e.inline.is_empty()
                    && e.data_len() == u64::from(n * (n + 1) / 2),
                "SGEs copied",
            ),
            Err(f) => t.fail(format_args!("{n} SGEs: {f:?}")),
        }
    }
    for (slot, n) in [(4u32, 32usize), (5, 33)] {
        match sq.read(slot) {
            Ok(e) => t.expect(e.sges.is_empty() && *e.inline == text[..n], "inline bytes"),
            Err(f) => t.fail(format_args!("{n} inline bytes: {f:?}")),
        }
    }
    t.expect_eq(sq.read(6).err(), Some(RingFault::Entry));
    t.expect_eq(sq.read(7).err(), Some(RingFault::Entry));
}

kunit_suite!(
    hardening_suite,
    "oxrdma_hardening",
    [
        ida_numbers_are_never_shared,
        qp_numbers_change_with_reuse,
        rq_flush_is_bounded,
        send_entries_are_copied_whole_and_bounded,
        mr_access_ends_with_its_key,
        ring_freed_in_softirq_keeps_its_pages
    ]
);
