// SPDX-License-Identifier: GPL-2.0
//! The entries of the shared rings (see [`super::ring`]): send and receive work queue entries
//! written by the process, completion queue entries written by the kernel.
//!
//! All are `#[repr(C)]` with explicit reserved fields (no implicit padding) and native byte
//! order: both sides run on the same machine. Opcode and status numbers are the uverbs uAPI's
//! (`enum ib_uverbs_wr_opcode`, `enum ib_wc_status`, `enum ib_uverbs_wc_opcode`), which are also
//! libibverbs' `IBV_WR_*`, `IBV_WC_*` values, so the provider passes them through.
//!
//! # Slots
//!
//! A send slot is a 64-byte [`SendWqe`] followed by `num_sge` [`Sge`]s or `inline_len` bytes of
//! inline data; a receive slot is a 16-byte [`RecvWqe`] followed by `num_sge` [`Sge`]s. Slot
//! sizes are fixed per queue at creation ([`send_slot_size`], [`recv_slot_size`]) and reported
//! in the create response. A CQ slot is one 64-byte [`Cqe`].
//!
//! # The kernel does not trust a WQE
//!
//! The kernel copies a slot out of shared memory once ([`SendWqe::from_bytes`]) and works only
//! on the copy after [`SendWqe::validate`], which checks every field against the queue's limits.
//! A WQE that fails gets an error completion (`IB_WC_LOC_QP_OP_ERR` or `IB_WC_LOC_LEN_ERR`) and
//! moves the QP to the error state; it never reaches the data path.

/// Size of a [`Sge`].
pub const SGE_SIZE: usize = 16;
/// Size of a [`SendWqe`] header.
pub const SEND_WQE_SIZE: usize = 64;
/// Size of a [`RecvWqe`] header.
pub const RECV_WQE_SIZE: usize = 16;
/// Size of a [`Cqe`].
pub const CQE_SIZE: usize = 64;

/// [`SendWqe::flags`]: generate a completion for this WQE.
pub const WQE_FLAG_SIGNALED: u8 = 1 << 0;
/// [`SendWqe::flags`]: set the solicited-event bit of the last packet.
pub const WQE_FLAG_SOLICITED: u8 = 1 << 1;
/// [`SendWqe::flags`]: wait for outstanding RDMA reads and atomics before this WQE.
pub const WQE_FLAG_FENCE: u8 = 1 << 2;
/// [`SendWqe::flags`]: the data is inline after the header, not described by SGEs.
pub const WQE_FLAG_INLINE: u8 = 1 << 3;
const WQE_FLAGS_ALL: u8 = WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_FENCE | WQE_FLAG_INLINE;

/// [`Cqe::wc_flags`]: a GRH (RoCE: network header) precedes UD receive data.
pub const WC_FLAG_GRH: u16 = 1 << 0;
/// [`Cqe::wc_flags`]: [`Cqe::imm_or_inv`] holds immediate data.
pub const WC_FLAG_WITH_IMM: u16 = 1 << 1;
/// [`Cqe::wc_flags`]: [`Cqe::imm_or_inv`] holds the invalidated R_Key.
pub const WC_FLAG_WITH_INV: u16 = 1 << 3;

/// One scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address in the MR.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

impl Sge {
    /// The slot bytes of this SGE.
    pub fn to_bytes(&self) -> [u8; SGE_SIZE] {
        let mut b = [0u8; SGE_SIZE];
        b[0..8].copy_from_slice(&self.addr.to_ne_bytes());
        b[8..12].copy_from_slice(&self.length.to_ne_bytes());
        b[12..16].copy_from_slice(&self.lkey.to_ne_bytes());
        b
    }

    /// The SGE from its slot bytes (a private copy).
    pub fn from_bytes(b: &[u8; SGE_SIZE]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[0..8]);
        Self {
            addr: u64::from_ne_bytes(a),
            length: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            lkey: u32::from_ne_bytes([b[12], b[13], b[14], b[15]]),
        }
    }
}

/// Send work request opcodes (`enum ib_uverbs_wr_opcode`) oxrdma accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum WrOpcode {
    /// RDMA WRITE.
    RdmaWrite = 0,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate.
    SendWithImm = 3,
    /// RDMA READ.
    RdmaRead = 4,
    /// Compare and swap.
    AtomicCmpAndSwp = 5,
    /// Fetch and add.
    AtomicFetchAndAdd = 6,
    /// Local invalidate.
    LocalInv = 7,
    /// SEND with invalidate.
    SendWithInv = 9,
    /// RDMA READ, then the MR the data went to is invalidated (`IB_WR_RDMA_READ_WITH_INV`,
    /// which kernel ULPs use on iWARP; `imm_or_inv` carries the WR's key): kernel users only.
    RdmaReadWithInv = 11,
    /// Fast registration (`IB_WR_REG_MR`): kernel users only, never accepted from a process's
    /// ring. `rkey` is the new key, `imm_or_inv` the access rights, `remote_addr` the iova,
    /// `compare_add` the length.
    RegMr = 0x20,
}

impl WrOpcode {
    /// The opcode of a uverbs number, if oxrdma supports it.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            7 => Self::LocalInv,
            9 => Self::SendWithInv,
            11 => Self::RdmaReadWithInv,
            0x20 => Self::RegMr,
            _ => return None,
        })
    }

    /// Whether the opcode moves data described by SGEs or inline bytes.
    pub const fn has_data(self) -> bool {
        !matches!(self, Self::LocalInv | Self::RegMr)
    }

    /// Whether the opcode acts on the local device only (no packet): LOCAL_INV, REG_MR.
    pub const fn is_local(self) -> bool {
        matches!(self, Self::LocalInv | Self::RegMr)
    }

    /// Whether the opcode may carry its data inline (sends and writes).
    pub const fn may_be_inline(self) -> bool {
        matches!(
            self,
            Self::Send
                | Self::SendWithImm
                | Self::SendWithInv
                | Self::RdmaWrite
                | Self::RdmaWriteWithImm
        )
    }

    /// Whether only kernel users may post the opcode.
    pub const fn is_kernel_only(self) -> bool {
        matches!(self, Self::RegMr | Self::RdmaReadWithInv)
    }

    /// Whether the opcode addresses remote memory (`remote_addr`, `rkey`).
    pub const fn is_remote(self) -> bool {
        matches!(
            self,
            Self::RdmaWrite
                | Self::RdmaWriteWithImm
                | Self::RdmaRead
                | Self::RdmaReadWithInv
                | Self::AtomicCmpAndSwp
                | Self::AtomicFetchAndAdd
        )
    }

    /// Whether the opcode is an 8-byte atomic.
    pub const fn is_atomic(self) -> bool {
        matches!(self, Self::AtomicCmpAndSwp | Self::AtomicFetchAndAdd)
    }
}

/// The header of a send slot, as the process writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    /// Returned in the completion.
    pub wr_id: u64,
    /// A [`WrOpcode`] number.
    pub opcode: u8,
    /// `WQE_FLAG_*`.
    pub flags: u8,
    /// SGEs following the header (0 with [`WQE_FLAG_INLINE`]).
    pub num_sge: u8,
    /// Zero.
    pub reserved0: u8,
    /// Immediate data (as the verbs user gave it) or the R_Key to invalidate.
    pub imm_or_inv: u32,
    /// Remote virtual address (RDMA and atomics).
    pub remote_addr: u64,
    /// Remote key (RDMA and atomics); the key to invalidate for LOCAL_INV.
    pub rkey: u32,
    /// Bytes of inline data following the header (with [`WQE_FLAG_INLINE`]).
    pub inline_len: u32,
    /// Compare value (compare and swap) or addend (fetch and add).
    pub compare_add: u64,
    /// Swap value (compare and swap).
    pub swap: u64,
    /// UD: the address handle's number.
    pub ah: u32,
    /// UD: destination QP number.
    pub remote_qpn: u32,
    /// UD: destination Q_Key.
    pub remote_qkey: u32,
    /// Zero.
    pub reserved1: u32,
}

/// Why a send WQE was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeError {
    /// Unknown or unsupported opcode.
    Opcode,
    /// Unknown flag bits.
    Flags,
    /// More SGEs than the queue was created for.
    TooManySge,
    /// More inline data than the queue was created for.
    InlineTooLong,
    /// Inline data with an opcode that cannot carry it (reads, atomics, invalidate).
    InlineNotAllowed,
    /// An atomic whose data is not one 8-byte SGE, or whose remote address is not 8-aligned.
    BadAtomic,
    /// A reserved field is not zero.
    Reserved,
}

/// A send WQE that passed [`SendWqe::validate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidSendWqe {
    /// The header, unchanged.
    pub wqe: SendWqe,
    /// Its opcode.
    pub opcode: WrOpcode,
}

impl SendWqe {
    /// The header from the first [`SEND_WQE_SIZE`] bytes of a slot (a private copy).
    pub fn from_bytes(b: &[u8; SEND_WQE_SIZE]) -> Self {
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(x)
        };
        Self {
            wr_id: u64_at(0),
            opcode: b[8],
            flags: b[9],
            num_sge: b[10],
            reserved0: b[11],
            imm_or_inv: u32_at(12),
            remote_addr: u64_at(16),
            rkey: u32_at(24),
            inline_len: u32_at(28),
            compare_add: u64_at(32),
            swap: u64_at(40),
            ah: u32_at(48),
            remote_qpn: u32_at(52),
            remote_qkey: u32_at(56),
            reserved1: u32_at(60),
        }
    }

    /// The slot bytes of this header.
    pub fn to_bytes(&self) -> [u8; SEND_WQE_SIZE] {
        let mut b = [0u8; SEND_WQE_SIZE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8] = self.opcode;
        b[9] = self.flags;
        b[10] = self.num_sge;
        b[11] = self.reserved0;
        b[12..16].copy_from_slice(&self.imm_or_inv.to_ne_bytes());
        b[16..24].copy_from_slice(&self.remote_addr.to_ne_bytes());
        b[24..28].copy_from_slice(&self.rkey.to_ne_bytes());
        b[28..32].copy_from_slice(&self.inline_len.to_ne_bytes());
        b[32..40].copy_from_slice(&self.compare_add.to_ne_bytes());
        b[40..48].copy_from_slice(&self.swap.to_ne_bytes());
        b[48..52].copy_from_slice(&self.ah.to_ne_bytes());
        b[52..56].copy_from_slice(&self.remote_qpn.to_ne_bytes());
        b[56..60].copy_from_slice(&self.remote_qkey.to_ne_bytes());
        b[60..64].copy_from_slice(&self.reserved1.to_ne_bytes());
        b
    }

    /// Checks every field against the queue's limits. The SGEs themselves (lkeys, bounds) are
    /// checked against the MRs when the data moves. Kernel-only opcodes are refused.
    pub fn validate(&self, max_sge: u8, max_inline: u32) -> Result<ValidSendWqe, WqeError> {
        self.validate_for(max_sge, max_inline, false)
    }

    /// [`SendWqe::validate`], accepting kernel-only opcodes if `kernel` (a kernel user's
    /// queue, which no process can write).
    pub fn validate_for(
        &self,
        max_sge: u8,
        max_inline: u32,
        kernel: bool,
    ) -> Result<ValidSendWqe, WqeError> {
        let opcode = WrOpcode::from_u8(self.opcode).ok_or(WqeError::Opcode)?;
        if opcode.is_kernel_only() && !kernel {
            return Err(WqeError::Opcode);
        }
        if self.flags & !WQE_FLAGS_ALL != 0 {
            return Err(WqeError::Flags);
        }
        if self.reserved0 != 0 || self.reserved1 != 0 {
            return Err(WqeError::Reserved);
        }
        if self.flags & WQE_FLAG_INLINE != 0 {
            if !opcode.may_be_inline() {
                return Err(WqeError::InlineNotAllowed);
            }
            if self.inline_len > max_inline {
                return Err(WqeError::InlineTooLong);
            }
            if self.num_sge != 0 {
                return Err(WqeError::TooManySge);
            }
        } else if self.inline_len != 0 {
            // Without the flag the length means nothing: refused, not read as "no data".
            return Err(WqeError::Reserved);
        } else if self.num_sge > max_sge || (!opcode.has_data() && self.num_sge != 0) {
            return Err(WqeError::TooManySge);
        }
        if opcode.is_atomic() && (self.num_sge != 1 || self.remote_addr % 8 != 0) {
            return Err(WqeError::BadAtomic);
        }
        Ok(ValidSendWqe { wqe: *self, opcode })
    }
}

/// The header of a receive slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// Returned in the completion.
    pub wr_id: u64,
    /// SGEs following the header.
    pub num_sge: u32,
    /// Zero.
    pub reserved: u32,
}

impl RecvWqe {
    /// The slot bytes of this header.
    pub fn to_bytes(&self) -> [u8; RECV_WQE_SIZE] {
        let mut b = [0u8; RECV_WQE_SIZE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&self.num_sge.to_ne_bytes());
        b[12..16].copy_from_slice(&self.reserved.to_ne_bytes());
        b
    }

    /// The header from the first [`RECV_WQE_SIZE`] bytes of a slot (a private copy).
    pub fn from_bytes(b: &[u8; RECV_WQE_SIZE]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[0..8]);
        Self {
            wr_id: u64::from_ne_bytes(a),
            num_sge: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            reserved: u32::from_ne_bytes([b[12], b[13], b[14], b[15]]),
        }
    }
}

/// [`Cqe::network_hdr_type`] values (`enum rdma_network_type`).
pub mod network_hdr {
    /// RoCE v1: the GRH area holds the InfiniBand GRH.
    pub const ROCE_V1: u8 = 1;
    /// RoCE v2 over IPv4: the IPv4 header in the last 20 bytes of the GRH area.
    pub const IPV4: u8 = 2;
    /// RoCE v2 over IPv6: the IPv6 header fills the GRH area.
    pub const IPV6: u8 = 3;
}

/// Bytes in front of the data of every UD receive: the network header (IBA's GRH).
pub const GRH_AREA: usize = 40;

/// Completion opcodes (`enum ib_uverbs_wc_opcode`).
pub mod wc_opcode {
    /// SEND completed.
    pub const SEND: u8 = 0;
    /// RDMA WRITE completed.
    pub const RDMA_WRITE: u8 = 1;
    /// RDMA READ completed.
    pub const RDMA_READ: u8 = 2;
    /// Compare and swap completed.
    pub const COMP_SWAP: u8 = 3;
    /// Fetch and add completed.
    pub const FETCH_ADD: u8 = 4;
    /// Local invalidate completed.
    pub const LOCAL_INV: u8 = 6;
    /// Fast registration (kernel users' CQs only: `IB_WC_REG_MR`, not in the uverbs ABI).
    pub const REG_MR: u8 = 10;
    /// A receive completed.
    pub const RECV: u8 = 1 << 7;
    /// A receive consumed by RDMA WRITE with immediate.
    pub const RECV_RDMA_WITH_IMM: u8 = (1 << 7) + 1;
}

/// Completion status (`enum ib_wc_status`).
pub mod wc_status {
    /// Success.
    pub const SUCCESS: u8 = 0;
    /// Local length error.
    pub const LOC_LEN_ERR: u8 = 1;
    /// Local QP operation error (e.g. an invalid WQE).
    pub const LOC_QP_OP_ERR: u8 = 2;
    /// Local protection error (bad lkey or bounds).
    pub const LOC_PROT_ERR: u8 = 4;
    /// Flushed: the QP went to the error state.
    pub const WR_FLUSH_ERR: u8 = 5;
    /// Bad response.
    pub const BAD_RESP_ERR: u8 = 7;
    /// Local access error.
    pub const LOC_ACCESS_ERR: u8 = 8;
    /// Remote invalid request.
    pub const REM_INV_REQ_ERR: u8 = 9;
    /// Remote access error.
    pub const REM_ACCESS_ERR: u8 = 10;
    /// Remote operational error.
    pub const REM_OP_ERR: u8 = 11;
    /// Transport retry counter exceeded.
    pub const RETRY_EXC_ERR: u8 = 12;
    /// RNR retry counter exceeded.
    pub const RNR_RETRY_EXC_ERR: u8 = 13;
    /// General error.
    pub const GENERAL_ERR: u8 = 21;
}

/// A completion, as the kernel writes it into the CQ ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The WQE's `wr_id`.
    pub wr_id: u64,
    /// A [`wc_status`] value.
    pub status: u8,
    /// A [`wc_opcode`] value.
    pub opcode: u8,
    /// `WC_FLAG_*`.
    pub wc_flags: u16,
    /// Driver-specific detail of an error status; 0 on success.
    pub vendor_err: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data or invalidated R_Key (see `wc_flags`).
    pub imm_or_inv: u32,
    /// The local QP.
    pub qp_num: u32,
    /// UD: the sender's QP.
    pub src_qp: u32,
    /// P_Key index (0).
    pub pkey_index: u16,
    /// Zero on Ethernet.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Zero on Ethernet.
    pub dlid_path_bits: u8,
    /// UD receives: RoCE v1 (GRH), v2 IPv4 or v2 IPv6 (`enum rdma_network_type`).
    pub network_hdr_type: u8,
    /// Zero.
    pub reserved0: u8,
    /// UD receives: the sender's MAC address.
    pub smac: [u8; 6],
    /// UD receives: VLAN id, or 0xffff for none.
    pub vlan_id: u16,
    /// Zero.
    pub reserved1: [u8; 16],
}

impl Cqe {
    /// The slot bytes of this completion.
    pub fn to_bytes(&self) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8] = self.status;
        b[9] = self.opcode;
        b[10..12].copy_from_slice(&self.wc_flags.to_ne_bytes());
        b[12..16].copy_from_slice(&self.vendor_err.to_ne_bytes());
        b[16..20].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[20..24].copy_from_slice(&self.imm_or_inv.to_ne_bytes());
        b[24..28].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[28..32].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[32..34].copy_from_slice(&self.pkey_index.to_ne_bytes());
        b[34..36].copy_from_slice(&self.slid.to_ne_bytes());
        b[36] = self.sl;
        b[37] = self.dlid_path_bits;
        b[38] = self.network_hdr_type;
        b[39] = self.reserved0;
        b[40..46].copy_from_slice(&self.smac);
        b[46..48].copy_from_slice(&self.vlan_id.to_ne_bytes());
        b[48..64].copy_from_slice(&self.reserved1);
        b
    }

    /// The completion from its slot bytes (a private copy), the inverse of [`Cqe::to_bytes`].
    pub fn from_bytes(b: &[u8; CQE_SIZE]) -> Self {
        let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut wr_id = [0u8; 8];
        wr_id.copy_from_slice(&b[0..8]);
        let mut smac = [0u8; 6];
        smac.copy_from_slice(&b[40..46]);
        let mut reserved1 = [0u8; 16];
        reserved1.copy_from_slice(&b[48..64]);
        Self {
            wr_id: u64::from_ne_bytes(wr_id),
            status: b[8],
            opcode: b[9],
            wc_flags: u16_at(10),
            vendor_err: u32_at(12),
            byte_len: u32_at(16),
            imm_or_inv: u32_at(20),
            qp_num: u32_at(24),
            src_qp: u32_at(28),
            pkey_index: u16_at(32),
            slid: u16_at(34),
            sl: b[36],
            dlid_path_bits: b[37],
            network_hdr_type: b[38],
            reserved0: b[39],
            smac,
            vlan_id: u16_at(46),
            reserved1,
        }
    }
}

/// Bytes of a send slot for a queue with `max_sge` SGEs and `max_inline` inline bytes: the
/// header plus the larger of the two, rounded up to a power of two.
pub const fn send_slot_size(max_sge: u32, max_inline: u32) -> u32 {
    let sges = max_sge * SGE_SIZE as u32;
    let body = if sges > max_inline { sges } else { max_inline };
    (SEND_WQE_SIZE as u32 + body).next_power_of_two()
}

/// Bytes of a receive slot for a queue with `max_sge` SGEs, rounded up to a power of two.
pub const fn recv_slot_size(max_sge: u32) -> u32 {
    (RECV_WQE_SIZE as u32 + max_sge * SGE_SIZE as u32).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_fixed() {
        assert_eq!(size_of::<Sge>(), SGE_SIZE);
        assert_eq!(size_of::<SendWqe>(), SEND_WQE_SIZE);
        assert_eq!(size_of::<RecvWqe>(), RECV_WQE_SIZE);
        assert_eq!(size_of::<Cqe>(), CQE_SIZE);
        assert_eq!(offset_of!(SendWqe, remote_addr), 16);
        assert_eq!(offset_of!(SendWqe, compare_add), 32);
        assert_eq!(offset_of!(SendWqe, remote_qkey), 56);
        assert_eq!(offset_of!(Cqe, qp_num), 24);
        assert_eq!(offset_of!(Cqe, smac), 40);
        assert_eq!(offset_of!(Cqe, reserved1), 48);
    }

    #[test]
    fn send_wqe_bytes_round_trip() {
        let w = SendWqe {
            wr_id: 0x0102_0304_0506_0708,
            opcode: WrOpcode::AtomicCmpAndSwp as u8,
            flags: WQE_FLAG_SIGNALED | WQE_FLAG_FENCE,
            num_sge: 1,
            imm_or_inv: 0xdead_beef,
            remote_addr: 0x1000,
            rkey: 0x42,
            compare_add: 7,
            swap: 9,
            ah: 3,
            remote_qpn: 0x11,
            remote_qkey: 0x1111_0000,
            ..Default::default()
        };
        assert_eq!(SendWqe::from_bytes(&w.to_bytes()), w);
        assert!(w.validate(4, 64).is_ok());
    }

    #[test]
    fn validation_refuses_what_the_queue_cannot_do() {
        let ok = SendWqe {
            opcode: WrOpcode::Send as u8,
            num_sge: 2,
            ..Default::default()
        };
        assert!(ok.validate(2, 0).is_ok());
        let v = |f: fn(&mut SendWqe)| {
            let mut w = ok;
            f(&mut w);
            w.validate(2, 32)
        };
        assert_eq!(v(|w| w.opcode = 8), Err(WqeError::Opcode));
        assert_eq!(v(|w| w.opcode = 255), Err(WqeError::Opcode));
        assert_eq!(v(|w| w.flags = 0x80), Err(WqeError::Flags));
        assert_eq!(v(|w| w.num_sge = 3), Err(WqeError::TooManySge));
        assert_eq!(v(|w| w.reserved1 = 1), Err(WqeError::Reserved));
        // An inline length without the inline flag (it used to send zero bytes).
        assert_eq!(v(|w| w.inline_len = 16), Err(WqeError::Reserved));
        assert_eq!(
            v(|w| {
                w.flags = WQE_FLAG_INLINE;
                w.num_sge = 0;
                w.inline_len = 33;
            }),
            Err(WqeError::InlineTooLong)
        );
        assert_eq!(
            v(|w| {
                w.opcode = WrOpcode::RdmaRead as u8;
                w.flags = WQE_FLAG_INLINE;
                w.num_sge = 0;
            }),
            Err(WqeError::InlineNotAllowed)
        );
        assert_eq!(
            v(|w| {
                w.opcode = WrOpcode::AtomicFetchAndAdd as u8;
                w.num_sge = 1;
                w.remote_addr = 4;
            }),
            Err(WqeError::BadAtomic)
        );
        assert_eq!(
            v(|w| {
                w.opcode = WrOpcode::LocalInv as u8;
                w.num_sge = 1;
            }),
            Err(WqeError::TooManySge)
        );
    }

    #[test]
    fn reg_mr_is_for_kernel_queues_only() {
        let w = SendWqe {
            opcode: WrOpcode::RegMr as u8,
            rkey: 0x1234_5601,
            imm_or_inv: 7,
            remote_addr: 0x1000,
            compare_add: 8192,
            ..Default::default()
        };
        assert_eq!(w.validate(2, 0), Err(WqeError::Opcode));
        assert_eq!(w.validate_for(2, 0, false), Err(WqeError::Opcode));
        let v = w.validate_for(2, 0, true).unwrap();
        assert_eq!(v.opcode, WrOpcode::RegMr);
        assert!(v.opcode.is_local() && !v.opcode.has_data());
        assert!(WrOpcode::LocalInv.is_local() && !WrOpcode::LocalInv.is_kernel_only());
        // No data with a local operation.
        let mut d = w;
        d.num_sge = 1;
        assert_eq!(d.validate_for(2, 0, true), Err(WqeError::TooManySge));
    }

    #[test]
    fn cqe_bytes_follow_the_layout() {
        let c = Cqe {
            wr_id: 5,
            status: wc_status::REM_ACCESS_ERR,
            opcode: wc_opcode::RECV_RDMA_WITH_IMM,
            wc_flags: WC_FLAG_WITH_IMM,
            byte_len: 33,
            qp_num: 0x12,
            smac: [1, 2, 3, 4, 5, 6],
            vlan_id: 0xffff,
            ..Default::default()
        };
        let b = c.to_bytes();
        assert_eq!(b[8], 10);
        assert_eq!(b[9], 129);
        assert_eq!(&b[40..46], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(u32::from_ne_bytes([b[24], b[25], b[26], b[27]]), 0x12);
    }

    #[test]
    fn sge_recv_and_cqe_bytes_round_trip() {
        let s = Sge {
            addr: 0x0102_0304_0506_0708,
            length: 0x1111_2222,
            lkey: 0x3333_4444,
        };
        let b = s.to_bytes();
        assert_eq!(u64::from_ne_bytes(b[0..8].try_into().unwrap()), s.addr);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), s.length);
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), s.lkey);
        assert_eq!(Sge::from_bytes(&b), s);
        let r = RecvWqe {
            wr_id: u64::MAX - 1,
            num_sge: 3,
            reserved: 0,
        };
        let rb = r.to_bytes();
        assert_eq!(u32::from_ne_bytes(rb[8..12].try_into().unwrap()), 3);
        assert_eq!(RecvWqe::from_bytes(&rb), r);
        let c = Cqe {
            wr_id: 0xfeed,
            status: wc_status::WR_FLUSH_ERR,
            opcode: wc_opcode::RECV,
            wc_flags: WC_FLAG_GRH | WC_FLAG_WITH_INV,
            vendor_err: 7,
            byte_len: 4096,
            imm_or_inv: 0x1234_5678,
            qp_num: 17,
            src_qp: 18,
            pkey_index: 1,
            slid: 2,
            sl: 3,
            dlid_path_bits: 4,
            network_hdr_type: 2,
            reserved0: 0,
            smac: [9, 8, 7, 6, 5, 4],
            vlan_id: 0xffff,
            reserved1: [0xab; 16],
        };
        assert_eq!(Cqe::from_bytes(&c.to_bytes()), c);
    }

    #[test]
    fn slot_sizes() {
        assert_eq!(send_slot_size(1, 0), 128);
        assert_eq!(send_slot_size(4, 64), 128);
        assert_eq!(send_slot_size(32, 256), 1024);
        assert_eq!(recv_slot_size(1), 32);
        assert_eq!(recv_slot_size(32), 1024);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any 64 bytes a process writes decode, and validation either refuses them or
            /// yields a WQE within the queue's limits; nothing panics.
            #[test]
            fn hostile_slots_are_bounded(bytes in proptest::array::uniform32(any::<u8>()),
                                         more in proptest::array::uniform32(any::<u8>()),
                                         max_sge in 0u8..=32, max_inline in 0u32..=1024) {
                let mut b = [0u8; SEND_WQE_SIZE];
                b[..32].copy_from_slice(&bytes);
                b[32..].copy_from_slice(&more);
                let w = SendWqe::from_bytes(&b);
                prop_assert_eq!(w.to_bytes(), b);
                if let Ok(v) = w.validate(max_sge, max_inline) {
                    prop_assert!(v.wqe.num_sge <= max_sge);
                    if v.wqe.flags & WQE_FLAG_INLINE != 0 {
                        prop_assert!(v.wqe.inline_len <= max_inline);
                    }
                    prop_assert_eq!(v.opcode as u8, v.wqe.opcode);
                }
            }

            /// Any 64 bytes decode as a completion and encode back unchanged.
            #[test]
            fn cqe_bytes_round_trip(lo in proptest::array::uniform32(any::<u8>()),
                                    hi in proptest::array::uniform32(any::<u8>())) {
                let mut b = [0u8; CQE_SIZE];
                b[..32].copy_from_slice(&lo);
                b[32..].copy_from_slice(&hi);
                prop_assert_eq!(Cqe::from_bytes(&b).to_bytes(), b);
            }
        }
    }
}
