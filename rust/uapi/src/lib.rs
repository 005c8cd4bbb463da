// SPDX-License-Identifier: GPL-2.0
//! oxrdma's user/kernel ABI.
//!
//! This crate is the single definition of everything the kernel module and the userspace
//! provider exchange: the ABI version, and (as the data path lands) create responses, ring
//! layouts and WQE/CQE formats. The kernel module compiles these same files as modules of its
//! own crate, so they are `no_std`, dependency-free and free of `crate::` paths.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod abi;
pub mod queue;
pub mod ring;
pub mod verbs;
