// SPDX-License-Identifier: GPL-2.0
//! KUnit: regression tests for defects a hostile process or peer could use (issue 14):
//! identities that wrap, loops a process keeps going, memory reached through a key that is no
//! longer valid.

use crate::kunit_suite;
use crate::ox::kunit::Test;
use kernel::prelude::*;

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

kunit_suite!(
    hardening_suite,
    "oxrdma_hardening",
    [
        ida_numbers_are_never_shared
    ]
);
