// SPDX-License-Identifier: GPL-2.0
//! Device and port attributes and capabilities: what a driver reports to ib_core, as plain
//! values.
//!
//! C: `include/rdma/ib_verbs.h` (`struct ib_device_attr`, `struct ib_port_attr`,
//! `struct ib_port_immutable`, `enum rdma_link_layer`, `enum rdma_node_type`).

use super::super::bindings;

/// The node type of a device (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    /// An InfiniBand channel adapter (also RoCE).
    Ca,
    /// An RDMA NIC (iWARP).
    Rnic,
}

impl NodeType {
    pub(super) fn to_raw(self) -> u8 {
        (match self {
            Self::Ca => bindings::RDMA_NODE_IB_CA,
            Self::Rnic => bindings::RDMA_NODE_RNIC,
        }) as u8
    }
}

/// The link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    Infiniband,
    /// Ethernet (RoCE, iWARP).
    Ethernet,
}

impl LinkLayer {
    pub(super) fn to_raw(self) -> bindings::rdma_link_layer {
        match self {
            Self::Infiniband => bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
            Self::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// Driver identities (`enum rdma_driver_id`), which userspace providers may match on.
pub mod driver_id {
    use super::bindings;
    /// No identity of its own: providers match the device by name or their own check.
    pub const UNKNOWN: u32 = bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN;
}

/// Legacy uverbs `write()` commands a device accepts besides those ib_core enables from its
/// ops (`IB_USER_VERBS_CMD_*` bits of `uverbs_cmd_mask`).
pub mod uverbs_cmd {
    use super::bindings;
    /// `POST_SEND`.
    pub const POST_SEND: u64 = 1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
    /// `POST_RECV`.
    pub const POST_RECV: u64 = 1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV;
    /// `REQ_NOTIFY_CQ`.
    pub const REQ_NOTIFY_CQ: u64 =
        1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
}

/// Device limits and capabilities reported by `query_device` (`struct ib_device_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttrs {
    /// Firmware version, shown as `fw_ver`.
    pub fw_ver: u64,
    /// Largest memory region, bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit n set: 2^n bytes).
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub vendor_id: u32,
    /// Vendor's part number.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Maximum QPs.
    pub max_qp: i32,
    /// Maximum work requests per QP queue.
    pub max_qp_wr: i32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// Maximum scatter/gather entries per send WR.
    pub max_send_sge: i32,
    /// Maximum scatter/gather entries per receive WR.
    pub max_recv_sge: i32,
    /// Maximum scatter/gather entries per RDMA read WR.
    pub max_sge_rd: i32,
    /// Maximum CQs.
    pub max_cq: i32,
    /// Maximum entries per CQ.
    pub max_cqe: i32,
    /// Maximum MRs.
    pub max_mr: i32,
    /// Maximum PDs.
    pub max_pd: i32,
    /// Maximum outstanding RDMA reads/atomics per QP as responder.
    pub max_qp_rd_atom: i32,
    /// Maximum outstanding RDMA reads/atomics per QP as requester.
    pub max_qp_init_rd_atom: i32,
    /// Maximum responder resources for the device.
    pub max_res_rd_atom: i32,
    /// Maximum SRQs.
    pub max_srq: i32,
    /// Maximum WRs per SRQ.
    pub max_srq_wr: i32,
    /// Maximum scatter/gather entries per SRQ WR.
    pub max_srq_sge: i32,
    /// Maximum pages in a fast-registration page list.
    pub max_fast_reg_page_list_len: u32,
    /// Atomic operations are atomic with respect to the whole device.
    pub atomic_glob: bool,
    /// Maximum partition keys.
    pub max_pkeys: u16,
    /// Maximum address handles.
    pub max_ah: i32,
    /// Maximum multicast groups.
    pub max_mcast_grp: i32,
    /// Maximum QPs attached to one multicast group.
    pub max_mcast_qp_attach: i32,
    /// Maximum QP attachments to multicast groups, all groups together.
    pub max_total_mcast_qp_attach: i32,
    /// Local CA ACK delay (4.096 us * 2^value).
    pub local_ca_ack_delay: u8,
}

/// Port attributes reported by `query_port` (`struct ib_port_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttrs {
    /// The link can carry traffic (netdev running with carrier).
    pub active: bool,
    /// Administratively enabled (netdev running).
    pub enabled: bool,
    /// Largest IB MTU, bytes (256..4096).
    pub max_mtu: u32,
    /// IB MTU in use, bytes (256..4096).
    pub active_mtu: u32,
    /// MTU of the underlying link, bytes.
    pub phys_mtu: u32,
    /// GID table size.
    pub gid_tbl_len: i32,
    /// PortInfo CapabilityMask bits (`IB_PORT_*`).
    pub port_cap_flags: u32,
    /// Largest message, bytes.
    pub max_msg_sz: u32,
    /// P_Key table size.
    pub pkey_tbl_len: u16,
    /// The GID table holds IP-based GIDs (RoCE).
    pub ip_gids: bool,
}

/// `RDMA_CORE_CAP_*` bits for [`PortImmutable::core_cap_flags`].
pub mod core_cap {
    use super::bindings;

    /// RoCE v1: IBA transport over Ethernet, ethertype 0x8915 (GID type "IB/RoCE v1").
    pub const PROT_ROCE: u32 = bindings::RDMA_CORE_CAP_PROT_ROCE;
    /// RoCE v2: IBA transport over UDP/IP, port 4791 (GID type "RoCE v2").
    pub const PROT_ROCE_UDP_ENCAP: u32 = bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP;
    /// iWARP.
    pub const PROT_IWARP: u32 = bindings::RDMA_CORE_CAP_PROT_IWARP;
    /// Address handles carry Ethernet addresses, resolved by ib_core.
    pub const ETH_AH: u32 = bindings::RDMA_CORE_CAP_ETH_AH;
    /// Management datagrams: ib_mad opens the port (needs a GSI QP, QP 1).
    pub const IB_MAD: u32 = bindings::RDMA_CORE_CAP_IB_MAD;
    /// The IB connection manager (ib_cm, over the GSI QP).
    pub const IB_CM: u32 = bindings::RDMA_CORE_CAP_IB_CM;
    /// rdma_cm's native InfiniBand addressing (AF_IB).
    pub const AF_IB: u32 = bindings::RDMA_CORE_CAP_AF_IB;
    /// The iWARP connection manager (needs the `iw_*` ops).
    pub const IW_CM: u32 = bindings::RDMA_CORE_CAP_IW_CM;
}

/// `IB_DEVICE_*` bits for [`DeviceAttrs::device_cap_flags`].
pub mod device_cap {
    use super::bindings;

    /// Fast registration (`IB_WR_REG_MR`) and local invalidate: kernel ULPs check this.
    pub const MEM_MGT_EXTENSIONS: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
}

/// Immutable port properties (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortImmutable {
    /// P_Key table size.
    pub pkey_tbl_len: i32,
    /// GID table size.
    pub gid_tbl_len: i32,
    /// `RDMA_CORE_CAP_*` / `RDMA_CORE_PORT_*` flags: protocols and management the port has.
    pub core_cap_flags: u32,
    /// Largest MAD, bytes; 0 without MAD support.
    pub max_mad_size: u32,
}

/// The `enum ib_mtu` value (1 = 256 bytes ... 5 = 4096 bytes) of an MTU in bytes, as ib_core
/// computes it (`ib_mtu_int_to_enum`: the largest IB MTU not above `bytes`).
pub fn mtu_enum(bytes: u32) -> bindings::ib_mtu {
    // SAFETY: a pure function of its argument.
    let m = unsafe { bindings::oxrdma_ib_mtu_int_to_enum(bytes.min(i32::MAX as u32) as i32) };
    m as bindings::ib_mtu
}

/// A counter a device reports through `rdma statistic` and sysfs (`hw_counters`): its name
/// (`struct rdma_stat_desc`).
#[repr(transparent)]
pub struct HwStat(bindings::rdma_stat_desc);

// SAFETY: the descriptor only holds a pointer to a static string, which ib_core reads.
unsafe impl Sync for HwStat {}

impl HwStat {
    /// A counter named `name`.
    pub const fn new(name: &'static kernel::str::CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: name.as_char_ptr(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}
