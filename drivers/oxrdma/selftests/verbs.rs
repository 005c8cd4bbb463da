// SPDX-License-Identifier: GPL-2.0
//! KUnit: the abstractions under the data path that can run without a process: timers and
//! the shared-ring memory.

use crate::kunit_suite;
use crate::ox::kunit::{msleep, Test};
use crate::ox::rdma::mmap::RingBuf;
use crate::ox::timer::{now_us, Timer, TimerHandler};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

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

kunit_suite!(
    verbs_suite,
    "oxrdma_verbs",
    [timer_fires_once_and_drop_cancels, ring_buf_bounds]
);
