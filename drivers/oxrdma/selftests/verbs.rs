// SPDX-License-Identifier: GPL-2.0
//! KUnit: the abstractions under the data path that can run without a process: timers and
//! the shared-ring memory.

use crate::kunit_suite;
use crate::ox::kunit::{msleep, Test};
use crate::ox::rdma::kmem::{FastRegPages, KernelMem};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::timer::{now_us, Timer, TimerHandler};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::sync::{Arc, ArcBorrow};
use kernel::{alloc::KVec, prelude::*};

/// What happens to the objects of a timer test, counted outside them.
struct Tally {
    hits: AtomicU32,
    drops: AtomicU32,
}

/// Counts the drop of the object it is in.
struct DropCount(Arc<Tally>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// An object with a timer in it that counts its expiries.
#[pin_data]
struct Counter {
    tally: DropCount,
    #[pin]
    timer: Timer<Counter>,
}

impl TimerHandler for Counter {
    fn expired(this: ArcBorrow<'_, Self>) {
        this.tally.0.hits.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> Result<(Arc<Counter>, Arc<Tally>)> {
    let tally = Arc::new(
        Tally {
            hits: AtomicU32::new(0),
            drops: AtomicU32::new(0),
        },
        GFP_KERNEL,
    )?;
    let mine = DropCount(tally.clone());
    let c = Arc::pin_init(
        pin_init!(&this in Counter {
            tally: mine,
            timer <- Timer::new(this),
        }),
        GFP_KERNEL,
    )?;
    Ok((c, tally))
}

/// Waits up to 2 s for `v` to reach `n`.
fn wait_for(v: &AtomicU32, n: u32) {
    let mut waited = 0;
    while v.load(Ordering::SeqCst) < n && waited < 2000 {
        msleep(5);
        waited += 5;
    }
}

/// A timer fires once, not early; while pending it keeps its object alive (and only then: no
/// reference cycle); re-arming leaks no reference; it cannot be armed with another object;
/// `cancel` drops a pending expiry and stops the timer for good.
fn timer_fires_once_and_owns_its_object_while_pending(t: &mut Test) {
    // Not armed: our reference is the only one.
    let Ok((c, tally)) = counter() else {
        return t.fail(format_args!("allocation"));
    };
    drop(c);
    t.expect_eq(tally.drops.load(Ordering::SeqCst), 1);

    // Armed (three times), our reference dropped: the object lives until the expiry, which
    // frees it, once.
    let Ok((c, tally)) = counter() else {
        return t.fail(format_args!("allocation"));
    };
    let start = now_us();
    c.timer.arm_us(&c, 20_000);
    c.timer.arm_us(&c, 20_000);
    c.timer.arm_earlier_us(&c, 30_000);
    drop(c);
    t.expect_eq(tally.drops.load(Ordering::SeqCst), 0);
    wait_for(&tally.drops, 1);
    t.expect(now_us() - start >= 20_000, "the timer did not fire early");
    msleep(50);
    t.expect_eq(tally.hits.load(Ordering::SeqCst), 1);
    t.expect_eq(tally.drops.load(Ordering::SeqCst), 1);

    // Armed with another object's `Arc`: refused.
    let (Ok((c, tally)), Ok((other, other_tally))) = (counter(), counter()) else {
        return t.fail(format_args!("allocation"));
    };
    c.timer.arm_us(&other, 1_000);
    drop(other);
    t.expect_eq(other_tally.drops.load(Ordering::SeqCst), 1);
    msleep(50);
    t.expect_eq(tally.hits.load(Ordering::SeqCst), 0);
    t.expect_eq(other_tally.hits.load(Ordering::SeqCst), 0);

    // Cancelled while pending: never fires, its reference is dropped, and arming is over.
    c.timer.arm_us(&c, 30_000);
    c.timer.cancel();
    c.timer.arm_us(&c, 1_000);
    drop(c);
    t.expect_eq(tally.drops.load(Ordering::SeqCst), 1);
    msleep(80);
    t.expect_eq(tally.hits.load(Ordering::SeqCst), 0);
}

/// Ring memory: whole zeroed pages; copies and atomics only inside it, misaligned atomics
/// refused.
fn ring_buf_bounds(t: &mut Test) {
    let Ok(r) = RingBuf::new(300) else {
        return t.fail(format_args!("RingBuf::new"));
    };
    t.expect_eq(r.len(), 4096);
    let mut b = [0xffu8; 16];
    t.expect(r.read(4080, &mut b).is_ok(), "read at the end");
    t.expect_eq(b, [0u8; 16]);
    t.expect(r.read(4081, &mut b).is_err(), "read past the end refused");
    t.expect(
        r.write(usize::MAX - 3, &b).is_err(),
        "offset overflow refused",
    );
    r.store_release(64, 0x1234_5678);
    t.expect_eq(r.load_acquire(64), 0x1234_5678);
    t.expect_eq(r.load_acquire(66), 0);
    t.expect_eq(r.load_acquire(4096), 0);
    r.store_release(4094, 7);
    t.expect_eq(r.fetch_or(128, 4), 0);
    t.expect_eq(r.fetch_clear(128, 4), 4);
    t.expect_eq(r.load_acquire(128), 0);
    t.expect(
        r.write(60, &[1, 2, 3, 4, 5, 6, 7, 8]).is_ok(),
        "unaligned copy",
    );
    let mut w = [0u8; 4];
    t.expect(r.read(64, &mut w).is_ok(), "read back");
    t.expect_eq(w, [5, 6, 7, 8]);
}

/// Kernel memory by DMA address (a kernel user's DMA MR): copies and atomics reach the
/// buffer; addresses outside the linear map are refused, never touched.
fn kernel_mem_by_address(t: &mut Test) {
    let Ok(buf) = KVec::from_elem(0u8, 64, GFP_KERNEL) else {
        return t.fail(format_args!("allocation"));
    };
    let addr = buf.as_ptr() as u64;
    let m = KernelMem::new();
    t.expect(m.write(addr + 3, &[1, 2, 3]).is_ok(), "write");
    let mut b = [0u8; 5];
    t.expect(m.read(addr + 2, &mut b).is_ok(), "read");
    t.expect_eq(b, [0, 1, 2, 3, 0]);
    t.expect_eq(m.fetch_add(addr + 8, 5), Ok(0));
    t.expect_eq(m.compare_swap(addr + 8, 5, 9), Ok(5));
    t.expect(
        m.fetch_add(addr + 9, 1).is_err(),
        "misaligned atomic refused",
    );
    t.expect(m.read(16, &mut b).is_err(), "address 16 refused");
    t.expect(
        m.write(u64::MAX - 1, &b).is_err(),
        "end of address space refused",
    );
    t.expect_eq(buf[3], 1);
}

/// A fast-registration page list over two separate pages, mapped from byte 100 of the
/// first: a copy across the page boundary lands in both, in order; bounds follow the map.
fn fast_reg_pages_span_pages(t: &mut Test) {
    let (Ok(p0), Ok(p1)) = (
        KVec::from_elem(0u8, 4096, GFP_KERNEL),
        KVec::from_elem(0u8, 4096, GFP_KERNEL),
    ) else {
        return t.fail(format_args!("allocation"));
    };
    let (a0, a1) = (p0.as_ptr() as u64, p1.as_ptr() as u64);
    if a0 % 4096 != 0 || a1 % 4096 != 0 {
        return t.fail(format_args!("kmalloc(4096) not page aligned"));
    }
    let Ok(fr) = FastRegPages::new(2) else {
        return t.fail(format_args!("FastRegPages::new"));
    };
    fr.begin(4096);
    t.expect(fr.push(a0).is_ok() && fr.push(a1).is_ok(), "two pages");
    t.expect(fr.push(a0).is_err(), "a third page does not fit");
    fr.finish(a0 + 100);
    t.expect_eq(fr.mapped_len(), 8192 - 100);
    // On the heap: KUnit runs cases on a kthread's 16 KiB stack.
    let (Ok(mut data), Ok(mut back)) = (
        KVec::from_elem(0u8, 5000, GFP_KERNEL),
        KVec::from_elem(0u8, 5000, GFP_KERNEL),
    ) else {
        return t.fail(format_args!("allocation"));
    };
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    t.expect(fr.write(0, &data).is_ok(), "write across the boundary");
    t.expect_eq(p0[100], 0);
    t.expect_eq(p0[101], 1);
    t.expect_eq(p0[4095], ((4095 - 100) % 251) as u8);
    t.expect_eq(p1[0], ((4096 - 100) % 251) as u8);
    t.expect(fr.read(0, &mut back).is_ok(), "read back");
    t.expect(back == data, "same bytes");
    t.expect(
        fr.read(8192 - 100 - 4, &mut back[..4]).is_ok(),
        "last bytes",
    );
    t.expect(
        fr.read(8192 - 100 - 3, &mut back[..4]).is_err(),
        "past the map refused",
    );
    t.expect_eq(fr.fetch_add(6000 - 100, 3), Ok(0));
    t.expect_eq(fr.compare_swap(6000 - 100, 3, 7), Ok(3));
    t.expect(
        fr.fetch_add(6001 - 100, 1).is_err(),
        "misaligned atomic refused",
    );
}

kunit_suite!(
    verbs_suite,
    "oxrdma_verbs",
    [
        timer_fires_once_and_owns_its_object_while_pending,
        ring_buf_bounds,
        kernel_mem_by_address,
        fast_reg_pages_span_pages
    ]
);
