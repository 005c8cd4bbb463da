// SPDX-License-Identifier: GPL-2.0
//! The module's parameters (`/sys/module/oxrdma/parameters/`). The 6.12 `module!` macro has
//! no parameters: they are declared in C (`rust/helpers/helpers.c`) and read here.

use super::bindings;

/// `iwarp_markers`: oxiwarp asks its peers for MPA markers in the streams it receives. Read
/// at each connection setup; writable at any time.
pub fn iwarp_markers() -> bool {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_iwarp_markers() }
}

/// `iwarp_crc`: oxiwarp asks its peers for MPA CRCs (a peer that asks gets them either way).
/// Read at each connection setup; writable at any time.
pub fn iwarp_crc() -> bool {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_iwarp_crc() }
}

/// `iwarp_p2p`: oxiwarp offers peer-to-peer mode (RFC 6581) on the connections it initiates,
/// with the ready-to-receive messages of this bitmask (1: a zero-length RDMA write, 2: a
/// zero-length RDMA read; 0: client-server mode). Read at each connection setup; writable at
/// any time.
pub fn iwarp_p2p() -> u32 {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_iwarp_p2p() }
}

/// `iwarp_zcopy`: oxiwarp hands payload of process memory regions to TCP without copying it
/// (the socket references the pinned pages), on streams without CRCs and markers, for the
/// messages of this bitmask (1: RDMA read responses, 2: sends and RDMA writes). Read at each
/// segment; writable at any time.
pub fn iwarp_zcopy() -> u32 {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_iwarp_zcopy() }
}

/// `iwarp_ext`: the oxiwarp devices created from now on offer (as initiators) and take (as
/// responders) RFC 7306's immediate data and atomics, which a connection uses only when both
/// sides said so in the MPA exchange, and report atomics in their attributes. Read when a
/// device is created; writable at any time.
pub fn iwarp_ext() -> bool {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_iwarp_ext() }
}

/// `roce_gso`: oxroce sends runs of equally long RoCE v2 packets as one UDP segmentation
/// offload (off: each packet in an skb of its own). Read at each run; writable at any time.
pub fn roce_gso() -> bool {
    // SAFETY: reads a module-lifetime static once.
    unsafe { bindings::oxrdma_param_roce_gso() }
}
