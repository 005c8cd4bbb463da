// SPDX-License-Identifier: GPL-2.0
//! KUnit test suites declared from Rust.
//!
//! Linux 6.12 has no `#[kunit_tests]`; this is the small glue that lets a module declare its
//! own suites. [`kunit_suite!`] builds, at compile time, the same objects C's
//! `kunit_test_suite()` does: a NULL-terminated `struct kunit_case` array and a
//! `struct kunit_suite`; [`kunit_register!`] puts pointers to suites in the
//! `.kunit_test_suites` section, which the module loader hands to KUnit. The suites run when
//! the module loads and report in KTAP.
//!
//! `kunit_suite!` expands to safe code only, so test modules can forbid `unsafe`;
//! `kunit_register!` places a section entry (which `unsafe_code` forbids) and belongs in the
//! crate root, next to `module!`.
//!
//! ```ignore
//! fn adds_up(t: &mut Test) {
//!     t.expect_eq(1 + 1, 2);
//! }
//! kunit_suite!(arith_suite, "oxrdma_arith", [adds_up]);
//! // In the crate root:
//! kunit_register!(tests::arith_suite::SUITE);
//! ```

use super::bindings;
use core::cell::UnsafeCell;
use core::fmt::{self, Write};
use kernel::str::CStr;

/// The running test case, passed to each case function.
///
/// # Invariants
///
/// `raw` points to the `struct kunit` KUnit passed to the case, valid until the case returns.
pub struct Test {
    raw: *mut bindings::kunit,
}

/// Formats into a fixed buffer, truncating what does not fit.
struct MsgBuf {
    buf: [u8; 256],
    len: usize,
}

impl Write for MsgBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl Test {
    /// Marks the case failed with a message, reported at the caller's location.
    #[track_caller]
    pub fn fail(&mut self, args: fmt::Arguments<'_>) {
        let loc = core::panic::Location::caller();
        let mut msg = MsgBuf {
            buf: [0; 256],
            len: 0,
        };
        let _ = msg.write_fmt(args);
        let file = loc.file().as_bytes();
        // SAFETY: `self.raw` is the live `struct kunit` of this case (type invariant); both
        // buffers are valid for the lengths passed, which the helper prints with `%.*s`.
        unsafe {
            bindings::oxrdma_kunit_fail(
                self.raw,
                file.as_ptr().cast(),
                file.len().min(i32::MAX as usize) as i32,
                loc.line() as i32,
                msg.buf.as_ptr().cast(),
                msg.len as i32,
            )
        };
    }

    /// Expects `cond` to hold; `what` names the expectation in the failure message.
    #[track_caller]
    pub fn expect(&mut self, cond: bool, what: &str) {
        if !cond {
            self.fail(format_args!("expectation failed: {what}"));
        }
    }

    /// Expects `left == right`.
    #[track_caller]
    pub fn expect_eq<T: PartialEq + fmt::Debug>(&mut self, left: T, right: T) {
        if left != right {
            self.fail(format_args!("expected {left:?} == {right:?}"));
        }
    }
}

/// A test case: the zero-sized types [`kunit_suite!`] makes, one per case function.
pub trait Case {
    /// The case's name.
    const NAME: &'static CStr;
    /// Runs the case.
    fn run(t: &mut Test);
}

/// KUnit's entry point of case `C`.
///
/// # Safety
///
/// Called by KUnit only (the function is private to this module and reaches KUnit only
/// through [`case`]), with the `struct kunit` of the running case.
unsafe extern "C" fn run_case<C: Case>(raw: *mut bindings::kunit) {
    // INVARIANT: `raw` is the live test of this case (function contract).
    let mut test = Test { raw };
    C::run(&mut test);
}

/// A `struct kunit_case` entry.
#[doc(hidden)]
pub struct CaseEntry(bindings::kunit_case);

/// The entry of case `C`.
#[doc(hidden)]
pub const fn case<C: Case>() -> CaseEntry {
    // SAFETY: `kunit_case` is plain data for which all-zeroes is a valid value (no function,
    // NULL pointers, zero attributes); C initialisers leave the same fields zero.
    let mut case: bindings::kunit_case = unsafe { core::mem::zeroed() };
    case.run_case = Some(run_case::<C>);
    case.name = C::NAME.as_char_ptr();
    CaseEntry(case)
}

/// The all-zero entry that terminates a case array.
#[doc(hidden)]
pub const fn end() -> CaseEntry {
    // SAFETY: `kunit_case` is plain data for which all-zeroes is valid; a zero `run_case`
    // marks the end of the array for KUnit.
    CaseEntry(unsafe { core::mem::zeroed() })
}

/// A suite's case array, which KUnit writes (status, log) while it runs the suite.
#[doc(hidden)]
#[repr(transparent)]
pub struct Cases<const N: usize>(UnsafeCell<[bindings::kunit_case; N]>);

// SAFETY: only KUnit reads and writes the array (Rust code never does after construction),
// one suite run at a time.
unsafe impl<const N: usize> Sync for Cases<N> {}

impl<const N: usize> Cases<N> {
    /// The array of `entries`, the last of which must be [`end`].
    pub const fn new(entries: [CaseEntry; N]) -> Self {
        // SAFETY: `kunit_case` is plain data for which all-zeroes is a valid value.
        let mut out: [bindings::kunit_case; N] = unsafe { core::mem::zeroed() };
        let mut i = 0;
        while i < N {
            out[i] = entries[i].0;
            i += 1;
        }
        assert!(
            N > 0 && out[N - 1].run_case.is_none(),
            "the last case must be `end()`"
        );
        Self(UnsafeCell::new(out))
    }
}

/// A `struct kunit_suite`, which KUnit writes while it runs it.
#[doc(hidden)]
#[repr(transparent)]
pub struct Suite(UnsafeCell<bindings::kunit_suite>);

// SAFETY: only KUnit reads and writes the suite (Rust code never does after construction),
// one run at a time.
unsafe impl Sync for Suite {}

impl Suite {
    /// The suite `name` over `cases` (names longer than KUnit's 255 bytes are cut).
    pub const fn new<const N: usize>(name: &'static str, cases: &'static Cases<N>) -> Self {
        // SAFETY: `kunit_suite` is plain data for which all-zeroes is valid (no callbacks,
        // empty name, NULL pointers), which is what a C designated initialiser leaves.
        let mut suite: bindings::kunit_suite = unsafe { core::mem::zeroed() };
        let bytes = name.as_bytes();
        let mut i = 0;
        // Leave room for the terminating NUL (the array is zeroed).
        while i < bytes.len() && i + 1 < suite.name.len() {
            suite.name[i] = bytes[i] as kernel::ffi::c_char;
            i += 1;
        }
        // `Cases` is a transparent wrapper of the array, written through its `UnsafeCell`.
        suite.test_cases = (cases as *const Cases<N>).cast_mut().cast();
        Self(UnsafeCell::new(suite))
    }
}

/// An entry of the `.kunit_test_suites` section: a pointer to a suite.
#[doc(hidden)]
#[repr(transparent)]
pub struct SuitePtr(*const Suite);

// SAFETY: the pointer is only read, by the module loader and KUnit; Rust code never
// dereferences it.
unsafe impl Sync for SuitePtr {}

impl SuitePtr {
    /// The section entry of `suite`.
    pub const fn new(suite: &'static Suite) -> Self {
        Self(suite)
    }
}

/// Declares a KUnit suite named `$name` whose cases are the functions `$case: fn(&mut Test)`
/// of the calling module. `$suite` names a module the macro creates for the suite's statics;
/// register `$suite::SUITE` with [`kunit_register!`].
#[macro_export]
macro_rules! kunit_suite {
    ($suite:ident, $name:literal, [$($case:ident),+ $(,)?]) => {
        #[doc(hidden)]
        pub(crate) mod $suite {
            use $crate::ox::kunit;

            mod cases {
                $(
                    #[allow(non_camel_case_types)]
                    pub(super) struct $case;

                    impl super::kunit::Case for $case {
                        const NAME: &'static ::kernel::str::CStr =
                            ::kernel::c_str!(stringify!($case));
                        fn run(t: &mut super::kunit::Test) {
                            super::super::$case(t)
                        }
                    }
                )+
            }

            const N: usize = [$(stringify!($case)),+].len();

            static CASES: kunit::Cases<{ N + 1 }> =
                kunit::Cases::new([$(kunit::case::<cases::$case>(),)+ kunit::end()]);

            pub(crate) static SUITE: kunit::Suite = kunit::Suite::new($name, &CASES);
        }
    };
}

/// Hands the suites (`static`s made by [`kunit_suite!`]) to KUnit: entries of the
/// `.kunit_test_suites` section. Use once, in the crate root.
#[macro_export]
macro_rules! kunit_register {
    ($($suite:path),+ $(,)?) => {
        #[used]
        #[link_section = ".kunit_test_suites"]
        static __OX_KUNIT_SUITES: [$crate::ox::kunit::SuitePtr; [$(stringify!($suite)),+].len()] =
            [$($crate::ox::kunit::SuitePtr::new(&$suite)),+];
    };
}

/// Sleeps for at least `ms` milliseconds (`msleep`): for cases that wait for softirq work.
/// Process context only.
pub fn msleep(ms: u32) {
    // SAFETY: `msleep` only sleeps; test cases run in process context (a KUnit kthread).
    unsafe { bindings::msleep(ms) };
}
