// SPDX-License-Identifier: GPL-2.0
//! oxrdma: a software RDMA provider (RoCE v1/v2 and iWARP over any Ethernet netdev).
//!
//! This is the crate root of `oxrdma.ko`. It pulls in, as modules of one crate:
//! * `ox`: the kernel abstraction layer (`rust/abstractions`), where all FFI lives;
//! * `uapi` and `wire`: the pure `no_std` crates (`rust/uapi`, `rust/wire`), the same files the
//!   host tests and the userspace provider compile;
//! * the driver itself (this directory), safe Rust over those: every module of it forbids
//!   FFI code (`forbid` below), and the abstraction layer keeps its raw bindings private.
//!
//! This root file holds only what macros must expand in the crate itself: the `module!`
//! declaration (of `load::OxRdma`) and the registration of the KUnit suites.

// `pin_init!` of the QP (many fields) nests deeper than the default limit.
#![recursion_limit = "256"]

use kernel::prelude::*;

#[path = "../../rust/abstractions/mod.rs"]
pub mod ox;

/// The user/kernel ABI shared with the userspace provider (`rust/uapi`).
#[path = "../../rust/uapi/src"]
pub mod uapi {
    pub mod abi;
    pub mod queue;
    pub mod ring;
    pub mod verbs;
}

/// Pure protocol logic shared with the host tests (`rust/wire`).
#[path = "../../rust/wire/src"]
pub mod wire {
    pub mod crc32;
    pub mod crc32c;
    mod crcfold;
    pub mod grh;
    pub mod headers;
    pub mod icrc;
    pub mod ip;
    pub mod iwarp;
    pub mod link;
    pub mod opcode;
    pub mod packet;
    pub mod psn;
    pub mod rc;
    pub mod uc;
}

#[forbid(unsafe_code)]
mod ah;
#[forbid(unsafe_code)]
mod cq;
#[forbid(unsafe_code)]
mod dev;
#[forbid(unsafe_code)]
mod device;
#[forbid(unsafe_code)]
mod iwcm;
#[forbid(unsafe_code)]
mod link;
#[forbid(unsafe_code)]
mod load;
#[forbid(unsafe_code)]
mod mcast;
#[forbid(unsafe_code)]
mod mr;
#[forbid(unsafe_code)]
mod qp;
#[forbid(unsafe_code)]
mod queue;
#[forbid(unsafe_code)]
mod rx;
#[cfg(CONFIG_KUNIT)]
#[forbid(unsafe_code)]
mod selftests;
#[forbid(unsafe_code)]
mod stats;
#[forbid(unsafe_code)]
mod table;
#[forbid(unsafe_code)]
mod tx;

#[cfg(CONFIG_KUNIT)]
kunit_register!(
    selftests::wire_suite::SUITE,
    selftests::abstractions_suite::SUITE,
    selftests::net::net_suite::SUITE,
    selftests::tcp::tcp_suite::SUITE,
    selftests::verbs::verbs_suite::SUITE,
    selftests::hardening::hardening_suite::SUITE,
);

use load::OxRdma;

module! {
    type: OxRdma,
    name: "oxrdma",
    author: "The oxrdma developers",
    description: "Software RDMA provider: RoCE v1 and v2 over Ethernet, iWARP over kernel TCP",
    license: "GPL",
    alias: ["rdma-link-oxroce", "rdma-link-oxiwarp"],
}
