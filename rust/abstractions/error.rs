// SPDX-License-Identifier: GPL-2.0
//! Error codes the 6.12 `kernel` crate does not define.
//!
//! 6.12 cannot build an `Error` in a `const` from outside the `kernel` crate, so these are
//! functions: `Err(code::eopnotsupp())` where 6.12's own codes read `Err(EINVAL)`.

/// Extra `Error` values.
pub mod code {
    use super::super::bindings;
    use kernel::error::Error;

    macro_rules! declare {
        ($($fn:ident => $name:ident),+ $(,)?) => {$(
            #[doc = concat!("`-", stringify!($name), "`.")]
            pub fn $fn() -> Error {
                Error::from_errno(-(bindings::$name as i32))
            }
        )+};
    }

    declare!(
        eopnotsupp => EOPNOTSUPP,
        eafnosupport => EAFNOSUPPORT,
        enetdown => ENETDOWN,
        enobufs => ENOBUFS,
        ehostunreach => EHOSTUNREACH,
        eaddrinuse => EADDRINUSE,
        einprogress => EINPROGRESS,
        econnrefused => ECONNREFUSED,
        econnreset => ECONNRESET,
        econnaborted => ECONNABORTED,
        etimedout => ETIMEDOUT,
        enotconn => ENOTCONN,
        eproto => EPROTO,
    );
}
