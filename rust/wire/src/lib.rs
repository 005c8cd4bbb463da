// SPDX-License-Identifier: GPL-2.0

//! `oxrdma-wire`: the protocol layer of oxrdma.
//!
//! Pure, `no_std`, allocation-free and dependency-free code for the wire
//! formats used by the soft RDMA provider: checksums, InfiniBand packet
//! sequence numbers, the IBA transport headers and opcodes, packet parsing and
//! building, and the RoCE ICRC; and the iWARP layers (MPA framing, DDP segments,
//! RDMAP messages).
//!
//! The module files under `src/` are also compiled directly into the kernel
//! module, which includes each of them with
//! `#[path = "../../rust/wire/src/<name>.rs"] pub mod <name>;`. For that
//! reason:
//!
//! * this file holds only crate-level attributes, crate docs and `pub mod`
//!   declarations;
//! * module files never use `crate::` paths (the crate root differs between
//!   the two builds) and are kept self-contained;
//! * no module uses `unsafe`, `std`, `alloc` or floating point.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

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
