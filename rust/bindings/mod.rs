// SPDX-License-Identifier: GPL-2.0
//! Raw bindings to the C headers listed in `bindings_helper.h`.
//!
//! Generated at build time by bindgen with the kernel's own flags (see `Kbuild`). Nothing here
//! is safe to use directly: the safe wrappers in `rust/abstractions` are the only users.

#![allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::cast_lossless,
    clippy::as_underscore,
    unnecessary_transmutes
)]

// The kernel's bindgen parameters block these so that they map to Rust's pointer-sized
// integers (as in the kernel crate's own bindings).
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
