// SPDX-License-Identifier: GPL-2.0
//! bindgen's bindings to rdma-core v55's `infiniband/driver.h` and `infiniband/kern-abi.h`
//! (see `build.rs` for what is bound and `scripts/setup-provider.sh` for where the headers
//! come from). Only functions exported as `IBVERBS_PRIVATE_34` by Debian 12's libibverbs
//! (rdma-core 44) with an unchanged signature are bound.
//!
//! A leaf module: it depends on nothing in the crate, and every other module takes the C
//! types from here. Besides the generated code it holds the one accessor of a bound union
//! that the safe modules need ([`wc_imm`]).
// The generated code has `unsafe` (union accessors, zeroed `Default`s), as does `wc_imm`.
#![allow(unsafe_code)]

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/sys.rs"));
}

pub(crate) use bindings::*;

/// The immediate/invalidated-key union of a work completion, as a `u32`.
pub(crate) fn wc_imm(wc: &ibv_wc) -> u32 {
    // SAFETY: both members of the union are u32s; every bit pattern is valid.
    unsafe { wc.__bindgen_anon_1.imm_data }
}
