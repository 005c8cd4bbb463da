// SPDX-License-Identifier: GPL-2.0
//! KUnit suites run at module load in a kernel with KUnit: the pure crates checked against the
//! kernel's own implementations, inside the kernel, as compiled into this module.

use crate::kunit_suite;
use crate::ox::error::code;
use crate::ox::rdma::device::mtu_enum;
use crate::ox::sync::GlobalMutex;
use crate::ox::{crc::kernel_crc32c, kunit::Test};
use crate::wire::link::{ib_mtu_for_link, IB_MTUS, ROCE_MAX_OVERHEAD};
use crate::wire::{crc32c::crc32c, psn::Psn};

/// A deterministic, non-trivial test pattern.
fn pattern(buf: &mut [u8], seed: u32) {
    let mut x = seed | 1;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
}

fn crc32c_check_value(t: &mut Test) {
    t.expect_eq(crc32c(b"123456789"), 0xE306_9283);
    t.expect_eq(kernel_crc32c(b"123456789"), 0xE306_9283);
}

fn crc32c_matches_kernel(t: &mut Test) {
    let mut buf = [0u8; 1500];
    for len in [0usize, 1, 3, 7, 8, 9, 63, 64, 65, 511, 1024, 1499, 1500] {
        pattern(&mut buf, len as u32);
        t.expect_eq(crc32c(&buf[..len]), kernel_crc32c(&buf[..len]));
    }
}

fn psn_wraps_at_24_bits(t: &mut Test) {
    let last = Psn::new(0xFF_FFFF);
    t.expect_eq(last.next(), Psn::new(0));
    t.expect(Psn::new(0).is_after(last), "0 comes after 0xffffff");
}

kunit_suite!(
    wire_suite,
    "oxrdma_wire",
    [
        crc32c_check_value,
        crc32c_matches_kernel,
        psn_wraps_at_24_bits
    ]
);

static COUNTER: GlobalMutex<u32> = GlobalMutex::new(0);

fn global_mutex_keeps_data(t: &mut Test) {
    let before = *COUNTER.lock();
    for _ in 0..10 {
        *COUNTER.lock() += 1;
    }
    t.expect_eq(*COUNTER.lock(), before + 10);
}

fn error_codes_are_the_errnos(t: &mut Test) {
    t.expect_eq(code::eopnotsupp().to_errno(), -95);
    t.expect_eq(code::eafnosupport().to_errno(), -97);
    t.expect_eq(code::enetdown().to_errno(), -100);
}

/// The wire crate's IB MTU choice and ib_core's MTU enum agree: every IB MTU maps to its own
/// enum value (256 -> 1 ... 4096 -> 5), and what a link MTU yields is one of them.
fn ib_mtu_matches_ib_core(t: &mut Test) {
    for (i, &m) in IB_MTUS.iter().enumerate() {
        t.expect_eq(mtu_enum(m), i as u32 + 1);
    }
    for link in [576u32, 1280, 1500, 2200, 4200, 9000] {
        let m = ib_mtu_for_link(link, ROCE_MAX_OVERHEAD);
        t.expect_eq(mtu_enum(m), mtu_enum(m.min(link)));
    }
}

kunit_suite!(
    abstractions_suite,
    "oxrdma_abstractions",
    [
        global_mutex_keeps_data,
        error_codes_are_the_errnos,
        ib_mtu_matches_ib_core
    ]
);
