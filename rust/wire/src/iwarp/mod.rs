// SPDX-License-Identifier: GPL-2.0

//! iWARP wire protocols: MPA (RFC 5044, RFC 6581) framing over a TCP stream, DDP (RFC 5041)
//! segments and the RDMAP (RFC 5040) messages they carry.
//!
//! * [`mpa`]: request and reply frames and their negotiation (CRC, markers, revision, IRD/ORD,
//!   the peer-to-peer ready-to-receive message); framing ULPDUs into FPDUs for transmission.
//! * [`stream`]: the receive side, FPDUs out of a byte stream cut anywhere, headers parsed,
//!   payload handed out as ranges of the input for placement, markers and CRC checked.
//! * [`ddp`]: DDP/RDMAP headers, terminate codes, untagged queue sequencing, segmentation.
//!
//! No I/O and no clocks: the kernel's socket code drives these.

pub mod ddp;
pub mod mpa;
pub mod stream;
