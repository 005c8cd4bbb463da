// SPDX-License-Identifier: GPL-2.0
//! Safe wrappers over ib_core: an RDMA device driver implements [`driver::Driver`]; the
//! adapter turns ib_core's callbacks into calls of it.
//!
//! Plain values (no C pointers): [`attrs`] (device and port attributes), [`verbs`] (QP and SRQ
//! attributes), [`wr`] (kernel work requests and completions), [`events`] (event sinks).
//! Objects: [`device`], [`udata`] (a process's call), [`mmap`] (memory a process maps),
//! [`umem`] (pinned process memory), [`kmem`] (kernel memory by DMA address), [`link`]
//! (`rdma link add` types). Every callback ib_core makes into a driver is in `adapter.rs`.

mod adapter;
pub mod attrs;
pub mod device;
pub mod driver;
pub mod events;
pub mod iwcm;
pub mod kmem;
pub mod link;
pub mod mmap;
pub mod udata;
pub mod umem;
pub mod verbs;
pub mod wr;
