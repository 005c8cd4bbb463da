// SPDX-License-Identifier: GPL-2.0
//! Verbs objects' attributes as plain values: QP types, states and attributes, queue
//! capacities, paths, SRQ attributes, access rights.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_qp_attr`, `struct ib_qp_cap`,
//! `struct rdma_ah_attr`, `struct ib_srq_attr`, `enum ib_access_flags`).

use super::super::bindings;

/// Queue pair types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1).
    Gsi,
    /// Anything else (XRC, raw packet, ...).
    Other(u32),
}

impl QpType {
    pub(super) fn from_raw(t: u32) -> Self {
        match t {
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            o => Self::Other(o),
        }
    }

    pub(super) fn to_raw(self) -> u32 {
        match self {
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            Self::Other(o) => o,
        }
    }
}

/// QP states (IBA 10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// RESET.
    Reset,
    /// INIT.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain.
    Sqd,
    /// Send queue error.
    Sqe,
    /// Error.
    Err,
}

impl QpState {
    pub(super) fn from_raw(s: u32) -> Option<Self> {
        Some(match s {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    pub(super) fn to_raw(self) -> u32 {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// Whether the IBA allows moving a QP of type `t` from `cur` to `next` with the attributes
/// in `mask` (required and optional ones: ib_core's table, `ib_modify_qp_is_ok`).
pub fn modify_is_ok(cur: QpState, next: QpState, t: QpType, mask: u32) -> bool {
    // SAFETY: pure table lookup.
    unsafe { bindings::ib_modify_qp_is_ok(cur.to_raw(), next.to_raw(), t.to_raw(), mask) }
}

/// `IB_QP_*` attribute mask bits.
pub mod qp_mask {
    use super::bindings;
    /// `qp_state`.
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    /// `cur_qp_state`.
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    /// `pkey_index`.
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    /// `port_num`.
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    /// `qkey`.
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    /// `ah_attr`.
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    /// `path_mtu`.
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    /// `timeout`.
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    /// `dest_qp_num`.
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
}

/// `IB_ACCESS_*` bits.
pub mod access {
    use super::bindings;
    /// Local write.
    pub const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    /// Remote write.
    pub const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    /// Remote read.
    pub const REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
    /// Remote atomic.
    pub const REMOTE_ATOMIC: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
}

/// Queue capacities (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send WRs.
    pub max_send_wr: u32,
    /// Receive WRs.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// A RoCE path: the address vector of a connected QP (`ah_attr` with its GRH and source
/// GID attribute).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Path {
    /// The source GID is a RoCE v2 GID (UDP/IP); otherwise RoCE v1 (GRH on Ethernet).
    pub roce_v2: bool,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Its index in the GID table.
    pub sgid_index: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Destination MAC (resolved by ib_core).
    pub dmac: [u8; 6],
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / DSCP+ECN.
    pub traffic_class: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Service level.
    pub sl: u8,
}

/// QP attributes: what `modify_qp` sets (`None`: not in the mask) and `query_qp` reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttrs {
    /// The raw `IB_QP_*` mask of a modify (see [`qp_mask`]).
    pub mask: u32,
    /// New state.
    pub state: Option<QpState>,
    /// The state the caller believes the QP is in.
    pub cur_state: Option<QpState>,
    /// Path MTU, bytes (256..4096).
    pub path_mtu: Option<u32>,
    /// Remote QP number.
    pub dest_qpn: Option<u32>,
    /// Expected receive PSN.
    pub rq_psn: Option<u32>,
    /// Next send PSN.
    pub sq_psn: Option<u32>,
    /// `IB_ACCESS_*` remote rights.
    pub access: Option<u32>,
    /// Local ACK timeout (4.096 us * 2^timeout; 0 = infinite).
    pub timeout: Option<u8>,
    /// Retries on timeout or sequence errors.
    pub retry_cnt: Option<u8>,
    /// Retries on RNR NAK (7 = infinite).
    pub rnr_retry: Option<u8>,
    /// The RNR NAK timer this QP asks for, encoded.
    pub min_rnr_timer: Option<u8>,
    /// Outstanding RDMA reads/atomics as requester.
    pub max_rd_atomic: Option<u8>,
    /// Outstanding RDMA reads/atomics as responder.
    pub max_dest_rd_atomic: Option<u8>,
    /// Q_Key (UD).
    pub qkey: Option<u32>,
    /// P_Key index.
    pub pkey_index: Option<u16>,
    /// Port.
    pub port: Option<u32>,
    /// Primary path.
    pub path: Option<Path>,
    /// An address vector came that is not a RoCE address (`path` is then `None`): an iWARP
    /// device has no use for one, a RoCE device refuses it.
    pub foreign_av: bool,
    /// Capacities (query only).
    pub caps: QpCaps,
    /// Every send WR completes (query only).
    pub sig_all: bool,
    /// Moving to SQD: raise `IB_EVENT_SQ_DRAINED` once the send queue has drained.
    pub sqd_notify: bool,
}

/// SRQ attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttrs {
    /// WRs.
    pub max_wr: u32,
    /// SGEs per WR.
    pub max_sge: u32,
    /// Limit: below this many WRs, the SRQ raises `SRQ_LIMIT_REACHED` (0: disarmed).
    pub limit: u32,
}

/// `IB_SRQ_*` modify mask bits.
pub mod srq_mask {
    use super::bindings;
    /// Resize.
    pub const MAX_WR: u32 = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    /// Arm the limit.
    pub const LIMIT: u32 = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
}
