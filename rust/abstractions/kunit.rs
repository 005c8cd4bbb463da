// SPDX-License-Identifier: GPL-2.0
//! KUnit test suites declared from Rust.
//!
//! Linux 6.12 has no `#[kunit_tests]`; this is the small glue that lets a module declare its
//! own suites. [`kunit_suite!`] builds, at compile time, the same objects C's
//! `kunit_test_suite()` does: a NULL-terminated `struct kunit_case` array, a
//! `struct kunit_suite`, and a pointer to it in the `.kunit_test_suites` section, which the
//! module loader hands to KUnit. The suites run when the module loads and report in KTAP.
//!
//! ```ignore
//! fn adds_up(t: &mut Test) {
//!     t.expect_eq(1 + 1, 2);
//! }
//! kunit_suite!(arith_suite, "oxrdma_arith", [adds_up]);
//! ```

use super::bindings;
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

/// Runs one case function for KUnit. Used by [`kunit_suite!`]; not for direct calls.
///
/// # Safety
///
/// `raw` must be the `struct kunit` KUnit passed to the running case.
#[doc(hidden)]
pub unsafe fn __run_case(raw: *mut bindings::kunit, case: fn(&mut Test)) {
    // INVARIANT: `raw` is the live test of this case (function safety requirement).
    let mut test = Test { raw };
    case(&mut test);
}

/// A `kunit_case` entry for `run` named `name`.
#[doc(hidden)]
pub const fn __case(
    run: unsafe extern "C" fn(*mut bindings::kunit),
    name: &'static CStr,
) -> bindings::kunit_case {
    // SAFETY: `kunit_case` is plain data for which all-zeroes is a valid value (no function,
    // NULL pointers, zero attributes); C initialisers leave the same fields zero.
    let mut case: bindings::kunit_case = unsafe { core::mem::zeroed() };
    case.run_case = Some(run);
    case.name = name.as_char_ptr();
    case
}

/// The all-zero entry that terminates a case array.
#[doc(hidden)]
pub const fn __case_end() -> bindings::kunit_case {
    // SAFETY: as in `__case`; a zero `run_case` marks the end of the array for KUnit.
    unsafe { core::mem::zeroed() }
}

/// A `kunit_suite` named `name` over the NULL-terminated array at `cases`.
#[doc(hidden)]
pub const fn __suite(
    name: &'static str,
    cases: *mut bindings::kunit_case,
) -> bindings::kunit_suite {
    // SAFETY: `kunit_suite` is plain data for which all-zeroes is valid (no callbacks, empty
    // name, NULL pointers), which is what a C designated initialiser leaves.
    let mut suite: bindings::kunit_suite = unsafe { core::mem::zeroed() };
    let bytes = name.as_bytes();
    let mut i = 0;
    // Leave room for the terminating NUL (the array is zeroed); longer names are cut.
    while i < bytes.len() && i + 1 < suite.name.len() {
        suite.name[i] = bytes[i] as kernel::ffi::c_char;
        i += 1;
    }
    suite.test_cases = cases;
    suite
}

/// An entry of the `.kunit_test_suites` section: a pointer to a suite.
#[doc(hidden)]
#[repr(transparent)]
pub struct __SuitePtr(pub *mut bindings::kunit_suite);

// SAFETY: the pointer is only read, by the module loader and KUnit, which serialise their use
// of the suite; Rust code never dereferences it.
unsafe impl Sync for __SuitePtr {}

/// Declares a KUnit suite named `$name` whose cases are the functions `$case: fn(&mut Test)`.
///
/// `$suite` names a module the macro creates to hold the suite's statics.
#[macro_export]
macro_rules! kunit_suite {
    ($suite:ident, $name:literal, [$($case:ident),+ $(,)?]) => {
        #[doc(hidden)]
        mod $suite {
            use $crate::ox::{bindings, kunit};

            mod run {
                $(
                    /// KUnit entry point of the case of the same name.
                    ///
                    /// # Safety
                    ///
                    /// Called by KUnit only, with the `struct kunit` of the running case.
                    pub(super) unsafe extern "C" fn $case(test: *mut super::bindings::kunit) {
                        // SAFETY: KUnit calls the case with the `struct kunit` of this run.
                        unsafe { super::kunit::__run_case(test, super::super::$case) }
                    }
                )+
            }

            const N: usize = [$(stringify!($case)),+].len();

            static mut CASES: [bindings::kunit_case; N + 1] = [
                $(kunit::__case(run::$case, ::kernel::c_str!(stringify!($case))),)+
                kunit::__case_end(),
            ];

            static mut SUITE: bindings::kunit_suite =
                kunit::__suite($name, (&raw mut CASES).cast());

            #[used]
            #[link_section = ".kunit_test_suites"]
            static SUITES: kunit::__SuitePtr = kunit::__SuitePtr(&raw mut SUITE);
        }
    };
}

/// Sleeps for at least `ms` milliseconds (`msleep`): for cases that wait for softirq work.
/// Process context only.
pub fn msleep(ms: u32) {
    // SAFETY: `msleep` only sleeps; test cases run in process context (a KUnit kthread).
    unsafe { bindings::msleep(ms) };
}
