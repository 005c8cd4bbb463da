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

struct Counter(AtomicU32);

impl TimerHandler for Counter {
    fn expired(this: ArcBorrow<'_, Self>) {
        this.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A timer fires once, not early, after `arm_us`; re-arming moves it; dropping it cancels a
/// pending expiry.
fn timer_fires_once_and_drop_cancels(t: &mut Test) {
    let Ok(c) = Arc::new(Counter(AtomicU32::new(0)), GFP_KERNEL) else {
        return t.fail(format_args!("allocation"));
    };
    let Ok(timer) = Timer::new(c.clone()) else {
        return t.fail(format_args!("Timer::new"));
    };
    let start = now_us();
    timer.arm_us(20_000);
    let mut waited = 0;
    while c.0.load(Ordering::SeqCst) == 0 && waited < 2000 {
        msleep(5);
        waited += 5;
    }
    t.expect_eq(c.0.load(Ordering::SeqCst), 1);
    t.expect(now_us() - start >= 20_000, "the timer did not fire early");
    msleep(50);
    t.expect_eq(c.0.load(Ordering::SeqCst), 1);
    timer.arm_us(30_000);
    drop(timer);
    msleep(80);
    t.expect_eq(c.0.load(Ordering::SeqCst), 1);
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
        timer_fires_once_and_drop_cancels,
        ring_buf_bounds,
        kernel_mem_by_address,
        fast_reg_pages_span_pages
    ]
);
