// SPDX-License-Identifier: GPL-2.0
//! oxrdma's kernel abstraction layer: the only place with `unsafe` code.
//!
//! The 6.12 `kernel` crate has no bindings for ib_core, netdevs or KUnit suites declared from
//! Rust. This layer binds them (`bindings`, C helpers for static inlines) and wraps them in safe
//! types whose invariants are documented on each type. Driver code in `drivers/` uses only the
//! safe API.

#[path = "../bindings/mod.rs"]
mod bindings;

pub mod crc;
pub mod error;
pub mod ida;
pub mod kunit;
pub mod net;
pub mod packet_type;
pub mod page_ref;
pub mod params;
pub mod random;
pub mod rdma;
pub mod route;
pub mod skb;
pub mod sync;
pub mod tcp;
pub mod timer;
pub mod udp_tunnel;
pub mod workqueue;
