// SPDX-License-Identifier: GPL-2.0
//! bindgen's bindings to rdma-core v55's `infiniband/driver.h` and `infiniband/kern-abi.h`
//! (see `build.rs` for what is bound and `scripts/setup-provider.sh` for where the headers
//! come from). Only functions exported as `IBVERBS_PRIVATE_34` by Debian 12's libibverbs
//! (rdma-core 44) with an unchanged signature are bound.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]

include!(concat!(env!("OUT_DIR"), "/sys.rs"));
