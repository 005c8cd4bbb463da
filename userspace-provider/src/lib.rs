// SPDX-License-Identifier: GPL-2.0
//! oxrdma's userspace provider for rdma-core's libibverbs: `liboxrdma-rdmav34.so`.
//!
//! libibverbs dlopens the library (named by a `driver oxrdma` line in `/etc/libibverbs.d/` or
//! by `RDMAV_DRIVERS`); an ELF constructor registers [`ffi`]'s `verbs_device_ops` with
//! `verbs_register_driver_34`. From then on libibverbs calls in through those ops.
//!
//! Layout, from the leaves up (no module outside [`ffi`] imports anything from it):
//! * [`sys`]: bindgen's bindings to libibverbs' private provider interface. A leaf: every
//!   other module takes the C types from it.
//! * [`mapping`]: the raw memory shared with the kernel ([`mapping::Mapping`]: `mmap`,
//!   bounds-checked atomics and slot copies, `munmap`), the doorbell `write()` and the
//!   inline-data gather. Depends on `sys` only.
//! * [`device`]: which sysfs devices are oxrdma's (matching), the per-device structure.
//! * [`context`]: the user context (`ALLOC_UCONTEXT` response checks), query helpers.
//! * [`pd`]: protection domains; [`mr`]: memory regions; [`ah`]: address handles.
//! * [`ring`]: the provider's side of the shared rings ([`ring::MappedRing`] over a
//!   [`mapping::Mapping`], the room and index checks), used by
//! * [`cq`] (polling the kernel-produced CQ ring), [`send`] (`ibv_send_wr` to send slots and
//!   the doorbell decision), [`recv`] (`ibv_recv_wr` to receive slots), [`qp`] and [`srq`]
//!   (create responses, one lock per ring), [`hold`] (the lock the extended verbs hold from
//!   `ibv_start_poll` to `ibv_end_poll` and from `ibv_wr_start` to `ibv_wr_complete`).
//! * [`ffi`]: the top, depended on by nothing: the ops tables, the registration constructor,
//!   and every `extern "C"` entry point. Entry points translate raw pointers into safe values,
//!   call the modules above, and never let a panic cross into C.
//!
//! Only `ffi`, `sys` and `mapping` contain `unsafe` code (the crate denies it elsewhere).
//!
//! Every structure shared with the kernel comes from the `oxrdma-uapi` crate, the single
//! definition of the user/kernel ABI.

mod ah;
mod context;
mod cq;
mod device;
mod ffi;
mod hold;
mod mapping;
mod mr;
mod pd;
mod qp;
mod recv;
mod ring;
mod send;
mod srq;
mod sys;
