// SPDX-License-Identifier: GPL-2.0

//! InfiniBand packet sequence numbers (PSNs).
//!
//! A PSN is a 24-bit counter carried in the Base Transport Header; all
//! arithmetic on it is modulo 2^24. Ordering is only meaningful within half
//! the circle: [`psn_diff`] returns the signed distance from `b` to `a` in
//! the range `-2^23 ..= 2^23 - 1`, i.e. the 24-bit difference
//! `(a - b) mod 2^24` sign-extended from bit 23. The InfiniBand
//! specification keeps outstanding windows below 2^23 packets, so for any
//! two PSNs that can legitimately be compared the result is exact.
//!
//! This file is self-contained: it is compiled both as a module of the
//! `oxrdma-wire` crate and, via `#[path]`, as a module of the kernel crate.

/// Mask of the 24 significant bits of a PSN.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// Number of distinct PSN values, 2^24.
pub const PSN_MODULUS: u32 = PSN_MASK + 1;

/// A 24-bit InfiniBand packet sequence number.
///
/// The wrapped value is always below 2^24; every constructor and operation
/// reduces modulo 2^24. `Psn` deliberately does not implement `PartialOrd`:
/// use [`Psn::diff`], [`Psn::is_before`] and [`Psn::is_after`], which are
/// wrap-aware.
///
/// ```
/// # use oxrdma_wire::psn::{psn_diff, Psn};
/// let last = Psn::new(0xFF_FFFF);
/// let first = last.next();
/// assert_eq!(first.get(), 0);
/// assert_eq!(psn_diff(first, last), 1);
/// assert!(last.is_before(first));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// PSN zero.
    pub const ZERO: Psn = Psn(0);

    /// The largest PSN value, `0xFF_FFFF`; its [`next`](Self::next) is
    /// [`ZERO`](Self::ZERO).
    pub const MAX: Psn = Psn(PSN_MASK);

    /// Creates a PSN from the low 24 bits of `raw`; the upper 8 bits are
    /// discarded.
    pub const fn new(raw: u32) -> Self {
        Psn(raw & PSN_MASK)
    }

    /// Returns the PSN as an integer in `0..2^24`.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Returns the following PSN (wrapping from `0xFF_FFFF` to 0).
    pub const fn next(self) -> Self {
        Psn(self.0.wrapping_add(1) & PSN_MASK)
    }

    /// Returns the preceding PSN (wrapping from 0 to `0xFF_FFFF`).
    pub const fn prev(self) -> Self {
        Psn(self.0.wrapping_sub(1) & PSN_MASK)
    }

    /// Returns this PSN advanced by `n` (which may be negative), modulo 2^24.
    ///
    /// For `-2^23 < n < 2^23`, `psn_diff(p.add(n), p) == n`.
    pub const fn add(self, n: i32) -> Self {
        // Two's-complement addition modulo 2^32 reduces correctly modulo
        // 2^24, because 2^24 divides 2^32.
        Psn(self.0.wrapping_add(n as u32) & PSN_MASK)
    }

    /// Signed, wrap-aware distance from `other` to `self`; the same as
    /// [`psn_diff(self, other)`](psn_diff).
    pub const fn diff(self, other: Psn) -> i32 {
        psn_diff(self, other)
    }

    /// Returns true if `self` precedes `other` (`psn_diff(self, other) < 0`).
    pub const fn is_before(self, other: Psn) -> bool {
        psn_diff(self, other) < 0
    }

    /// Returns true if `self` follows `other` (`psn_diff(self, other) > 0`).
    pub const fn is_after(self, other: Psn) -> bool {
        psn_diff(self, other) > 0
    }
}

impl From<Psn> for u32 {
    fn from(psn: Psn) -> u32 {
        psn.get()
    }
}

/// Signed distance from `b` to `a` on the 24-bit PSN circle.
///
/// This is `(a - b) mod 2^24` sign-extended from 24 bits, so the result lies
/// in `-2^23 ..= 2^23 - 1`: positive when `a` is after `b`, negative when it
/// is before, zero when they are equal. Exactly half the circle apart
/// (`2^23`) is ambiguous; by this definition it yields `-2^23` in both
/// directions, so there `a.is_before(b)` and `b.is_before(a)` both hold.
/// Otherwise `psn_diff(a, b) == -psn_diff(b, a)`.
pub const fn psn_diff(a: Psn, b: Psn) -> i32 {
    let d = a.0.wrapping_sub(b.0) & PSN_MASK;
    // Move bit 23 into the sign bit, then shift back arithmetically.
    ((d << 8) as i32) >> 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HALF: i32 = 1 << 23;

    #[test]
    fn constructor_masks() {
        assert_eq!(Psn::new(0x1234_5678).get(), 0x34_5678);
        assert_eq!(Psn::new(0xFFFF_FFFF), Psn::MAX);
        assert_eq!(Psn::new(PSN_MODULUS), Psn::ZERO);
        assert_eq!(Psn::default(), Psn::ZERO);
        assert_eq!(u32::from(Psn::new(0xAB_CDEF)), 0xAB_CDEF);
    }

    #[test]
    fn next_and_prev_wrap() {
        assert_eq!(Psn::MAX.next(), Psn::ZERO);
        assert_eq!(Psn::ZERO.prev(), Psn::MAX);
        assert_eq!(Psn::new(41).next().get(), 42);
        assert_eq!(Psn::new(42).prev().get(), 41);
    }

    #[test]
    fn add_wraps_both_ways() {
        assert_eq!(Psn::MAX.add(1), Psn::ZERO);
        assert_eq!(Psn::ZERO.add(-1), Psn::MAX);
        assert_eq!(Psn::new(10).add(-20).get(), PSN_MODULUS - 10);
        assert_eq!(Psn::new(5).add(1 << 24), Psn::new(5));
        assert_eq!(Psn::new(5).add(i32::MIN), Psn::new(5));
        assert_eq!(Psn::new(5).add(i32::MAX), Psn::new(4));
    }

    #[test]
    fn diff_examples() {
        assert_eq!(psn_diff(Psn::ZERO, Psn::MAX), 1);
        assert_eq!(psn_diff(Psn::MAX, Psn::ZERO), -1);
        assert_eq!(psn_diff(Psn::new(100), Psn::new(100)), 0);
        assert_eq!(psn_diff(Psn::new(0x7F_FFFF), Psn::ZERO), HALF - 1);
        assert_eq!(psn_diff(Psn::ZERO, Psn::new(0x7F_FFFF)), -(HALF - 1));
        assert_eq!(psn_diff(Psn::new(0x80_0000), Psn::ZERO), -HALF);
        assert_eq!(psn_diff(Psn::ZERO, Psn::new(0x80_0000)), -HALF);
        assert_eq!(Psn::new(3).diff(Psn::new(1)), 2);
    }

    #[test]
    fn ordering_helpers() {
        assert!(Psn::MAX.is_before(Psn::ZERO));
        assert!(Psn::ZERO.is_after(Psn::MAX));
        assert!(!Psn::ZERO.is_before(Psn::ZERO));
        assert!(!Psn::ZERO.is_after(Psn::ZERO));
        // Half the circle apart: "before" in both directions.
        let (a, b) = (Psn::ZERO, Psn::new(0x80_0000));
        assert!(a.is_before(b) && b.is_before(a));
        assert!(!a.is_after(b) && !b.is_after(a));
    }

    #[test]
    fn usable_in_const_context() {
        const P: Psn = Psn::new(0xFF_FFFF).next().add(7);
        const D: i32 = psn_diff(P, Psn::ZERO);
        assert_eq!(P.get(), 7);
        assert_eq!(D, 7);
    }

    proptest! {
        #[test]
        fn masking(raw in any::<u32>()) {
            let p = Psn::new(raw);
            prop_assert_eq!(p.get(), raw & PSN_MASK);
            prop_assert!(p.get() < PSN_MODULUS);
            prop_assert_eq!(Psn::new(raw & PSN_MASK), p);
        }

        #[test]
        fn diff_of_add_is_n(raw in any::<u32>(), n in (-HALF + 1)..HALF) {
            let a = Psn::new(raw);
            prop_assert_eq!(psn_diff(a.add(n), a), n);
            prop_assert_eq!(a.add(n).add(-n), a);
        }

        #[test]
        fn add_stays_in_range(raw in any::<u32>(), n in any::<i32>()) {
            let p = Psn::new(raw).add(n);
            prop_assert!(p.get() < PSN_MODULUS);
            prop_assert_eq!(
                i64::from(p.get()),
                (i64::from(raw & PSN_MASK) + i64::from(n)).rem_euclid(1 << 24)
            );
        }

        #[test]
        fn antisymmetry(x in any::<u32>(), y in any::<u32>()) {
            let (a, b) = (Psn::new(x), Psn::new(y));
            let d = psn_diff(a, b);
            prop_assert!((-HALF..HALF).contains(&d));
            if d == -HALF {
                prop_assert_eq!(psn_diff(b, a), -HALF);
            } else {
                prop_assert_eq!(psn_diff(b, a), -d);
                prop_assert_eq!(a.is_before(b), b.is_after(a));
                prop_assert_eq!(a.is_after(b), b.is_before(a));
            }
            prop_assert_eq!(b.add(d), a);
            prop_assert_eq!(d == 0, a == b);
        }

        #[test]
        fn next_prev_are_add_one(raw in any::<u32>()) {
            let p = Psn::new(raw);
            prop_assert_eq!(p.next(), p.add(1));
            prop_assert_eq!(p.prev(), p.add(-1));
            prop_assert_eq!(psn_diff(p.next(), p), 1);
            prop_assert!(p.next().is_after(p));
            prop_assert!(p.prev().is_before(p));
        }
    }
}
