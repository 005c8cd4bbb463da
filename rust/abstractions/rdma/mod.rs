// SPDX-License-Identifier: GPL-2.0
//! Safe wrappers over ib_core.

pub mod device;
pub mod kmem;
pub mod kverbs;
pub mod link;
pub mod mmap;
pub mod umem;
pub mod verbs;
