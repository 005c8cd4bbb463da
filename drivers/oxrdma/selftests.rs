// SPDX-License-Identifier: GPL-2.0
//! KUnit suites run at module load in a kernel with KUnit: the pure crates checked against the
//! kernel's own implementations, inside the kernel, as compiled into this module.

use crate::kunit_suite;
use crate::ox::crc::{kernel_crc32, kernel_crc32c};
use crate::ox::error::code;
use crate::ox::kunit::Test;
use crate::ox::rdma::attrs::mtu_enum;
use crate::ox::sync::GlobalMutex;
use crate::wire::headers::{NakCode, Syndrome};
use crate::wire::link::{ib_mtu_for_link, IB_MTUS, ROCE_MAX_OVERHEAD};
use crate::wire::{crc32::crc32, crc32c::crc32c, psn::Psn};
use crate::wire::{icrc, opcode::Opcode, packet};
use kernel::{alloc::KVec, prelude::*};

pub(crate) mod hardening;
pub(crate) mod net;
pub(crate) mod tcp;
pub(crate) mod verbs;

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
    let Ok(mut buf) = KVec::from_elem(0u8, 1500, GFP_KERNEL) else {
        return t.fail(format_args!("allocation"));
    };
    for len in [0usize, 1, 3, 7, 8, 9, 63, 64, 65, 511, 1024, 1499, 1500] {
        pattern(&mut buf, len as u32);
        t.expect_eq(crc32c(&buf[..len]), kernel_crc32c(&buf[..len]));
    }
}

fn crc32_matches_kernel(t: &mut Test) {
    // On the heap: KUnit runs cases on a kthread's 16 KiB stack.
    let Ok(mut buf) = KVec::from_elem(0u8, 4200, GFP_KERNEL) else {
        return t.fail(format_args!("allocation"));
    };
    t.expect_eq(kernel_crc32(b"123456789"), 0xCBF4_3926);
    for len in [0usize, 1, 5, 8, 64, 1024, 4096, 4200] {
        pattern(&mut buf, 7 * len as u32);
        t.expect_eq(crc32(&buf[..len]), kernel_crc32(&buf[..len]));
    }
}

/// A NAK (remote access error) rxe sent in the test VM, from the IPv4 header on
/// (rust/wire/fixtures/rxe-roce-v2.txt, `v4-rc-ack-pad0-nak-rem-access`).
const RXE_NAK_IPV4: [u8; 48] = [
    0x45, 0x00, 0x00, 0x30, 0xa8, 0x08, 0x40, 0x00, 0x40, 0x11, 0x7e, 0x16, 0x0a, 0x4e, 0x00, 0x02,
    0x0a, 0x4e, 0x00, 0x01, 0xc4, 0x00, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x10, 0x62, 0x00, 0x00, 0x00, 0xfa, 0xb9, 0xa1, 0x67,
];

/// The wire crate, as compiled into the module, parses a real rxe packet and reproduces its
/// ICRC; a flipped bit is caught.
fn rxe_packet_parses_and_verifies(t: &mut Test) {
    let pkt = RXE_NAK_IPV4;
    t.expect(
        icrc::verify(icrc::Encap::RoceV2Ipv4, &pkt).is_ok(),
        "ICRC of the rxe packet verifies",
    );
    match icrc::bth_offset(icrc::Encap::RoceV2Ipv4, &pkt) {
        Ok(off) => match packet::parse(&pkt[off..]) {
            Ok(p) => {
                t.expect_eq(p.opcode, Opcode::RcAcknowledge);
                t.expect_eq(
                    p.syndrome(),
                    Some(Syndrome::Nak(NakCode::RemoteAccessError)),
                );
            }
            Err(e) => t.fail(format_args!("parse: {e:?}")),
        },
        Err(e) => t.fail(format_args!("bth_offset: {e:?}")),
    }
    let mut bad = pkt;
    bad[40] ^= 1;
    t.expect(
        icrc::verify(icrc::Encap::RoceV2Ipv4, &bad).is_err(),
        "a flipped AETH bit fails the ICRC",
    );
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
        crc32_matches_kernel,
        psn_wraps_at_24_bits,
        rxe_packet_parses_and_verifies
    ]
);

static COUNTER: GlobalMutex<u32> = GlobalMutex::new(0, kernel::c_str!("oxrdma_test_counter"));

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
