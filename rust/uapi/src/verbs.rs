// SPDX-License-Identifier: GPL-2.0
//! Driver-specific parts of verbs commands and responses.
//!
//! Each structure follows the generic uverbs structure of the same command on the wire
//! (libibverbs' `DECLARE_DRV_CMD`): the kernel copies it to or from `udata`, the provider
//! embeds it after the core part. All are `#[repr(C)]`, naturally aligned, with explicit
//! reserved fields and no implicit padding, and sized in multiples of 8 bytes.

/// Device kind reported in [`AllocUcontextResp::device_kind`]: RoCE (v1 and v2).
pub const OXRDMA_DEVICE_ROCE: u32 = 1;
/// Device kind reported in [`AllocUcontextResp::device_kind`]: iWARP.
pub const OXRDMA_DEVICE_IWARP: u32 = 2;

/// Response to `ALLOC_UCONTEXT` (libibverbs `ibv_cmd_get_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocUcontextResp {
    /// [`super::abi::OXRDMA_ABI_VERSION`] of the kernel; the provider refuses another.
    pub abi_version: u32,
    /// [`OXRDMA_DEVICE_ROCE`] or [`OXRDMA_DEVICE_IWARP`].
    pub device_kind: u32,
    /// Capability flags, none defined yet; zero.
    pub caps: u64,
}

/// Response to `ALLOC_PD` (libibverbs `ibv_cmd_alloc_pd`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocPdResp {
    /// The PD's number, unique within its device while the PD exists.
    pub pdn: u32,
    /// Zero.
    pub reserved: u32,
}

/// Response to `CREATE_AH` (libibverbs `ibv_cmd_create_ah`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateAhResp {
    /// The AH's number, which a UD send WQE names (`SendWqe::ah`); unique within its device
    /// while the AH exists, and usable only by QPs of the AH's PD.
    pub ah_num: u32,
    /// Zero.
    pub reserved: u32,
}

/// Where a shared ring lives in the mmap space of the uverbs command file: the provider maps
/// `len` bytes at file offset `offset` (`mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
/// cmd_fd, offset)`). Both are multiples of the page size. A zero `len` means "no ring" (the
/// receive queue of a QP attached to an SRQ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingMmap {
    /// The `mmap` offset (a key the kernel made up, not a real file position).
    pub offset: u64,
    /// Bytes to map: header and slots, rounded up to whole pages.
    pub len: u64,
}

/// The response of a command that creates one ring: where it is and its geometry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingResp {
    /// The ring.
    pub ring: RingMmap,
    /// Number of slots, a power of two.
    pub slots: u32,
    /// Bytes per slot.
    pub slot_size: u32,
}

/// Response to `CREATE_CQ` (libibverbs `ibv_cmd_create_cq`): the completion ring (produced by
/// the kernel, consumed by the process), slots of [`super::queue::CQE_SIZE`] bytes. The core
/// response's `cqe` is `slots`: the ring holds that many completions.
pub type CreateCqResp = RingResp;

/// Response to `CREATE_QP` (libibverbs `ibv_cmd_create_qp`). The core response's `max_*`
/// capabilities are the ones granted; the ring geometry is here.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpResp {
    /// The send queue ring (produced by the process, consumed by the kernel).
    pub sq: RingMmap,
    /// The receive queue ring; `len == 0` when the QP takes receives from an SRQ.
    pub rq: RingMmap,
    /// Send ring slots, a power of two (at least `max_send_wr`).
    pub sq_slots: u32,
    /// Bytes per send slot ([`super::queue::send_slot_size`]).
    pub sq_slot_size: u32,
    /// Receive ring slots, a power of two; 0 with an SRQ.
    pub rq_slots: u32,
    /// Bytes per receive slot ([`super::queue::recv_slot_size`]); 0 with an SRQ.
    pub rq_slot_size: u32,
    /// The QP number (also in the core response).
    pub qpn: u32,
    /// Zero.
    pub reserved: u32,
}

/// Response to `CREATE_SRQ` (libibverbs `ibv_cmd_create_srq`): the receive ring (produced by
/// the process, consumed by the kernel), at least `max_wr` slots of
/// [`super::queue::recv_slot_size`] bytes.
pub type CreateSrqResp = RingResp;

/// The doorbell: how the process tells the kernel that it published new send WQEs (or new
/// receive WQEs for a QP in the error state: [`super::ring::RING_FLAG_QP_ERROR`]).
///
/// The provider writes a uverbs `POST_SEND` command with `wr_count = 0` and `sge_count = 0`
/// (and `wqe_size = size_of::<ib_uverbs_send_wr>()`) to the command file; the kernel then
/// reads the SQ ring. It rings only if the SQ ring's flags word does not have
/// [`super::ring::RING_FLAG_KERNEL_BUSY`] after publishing the producer index with a
/// sequentially consistent fence between the two: the kernel clears the flag, fences, and
/// re-reads the producer index before it stops, so one of the two always sees the other.
pub const DOORBELL_WR_COUNT: u32 = 0;

/// A response structure as the kernel copies it to userspace: its native-endian bytes, in
/// field order, exactly `size_of::<Self>()` long (the structures have no padding).
pub trait Response: Copy {
    /// `[u8; size_of::<Self>()]`.
    type Bytes: AsRef<[u8]>;
    /// The bytes of `self`.
    fn to_bytes(&self) -> Self::Bytes;
}

impl Response for AllocUcontextResp {
    type Bytes = [u8; 16];
    fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.abi_version.to_ne_bytes());
        b[4..8].copy_from_slice(&self.device_kind.to_ne_bytes());
        b[8..16].copy_from_slice(&self.caps.to_ne_bytes());
        b
    }
}

impl Response for AllocPdResp {
    type Bytes = [u8; 8];
    fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&self.pdn.to_ne_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_ne_bytes());
        b
    }
}

impl Response for CreateAhResp {
    type Bytes = [u8; 8];
    fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&self.ah_num.to_ne_bytes());
        b[4..8].copy_from_slice(&self.reserved.to_ne_bytes());
        b
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

fn put_ring(b: &mut [u8], at: usize, r: &RingMmap) {
    put_u64(b, at, r.offset);
    put_u64(b, at + 8, r.len);
}

impl Response for RingResp {
    type Bytes = [u8; 24];
    fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        put_ring(&mut b, 0, &self.ring);
        put_u32(&mut b, 16, self.slots);
        put_u32(&mut b, 20, self.slot_size);
        b
    }
}

impl Response for CreateQpResp {
    type Bytes = [u8; 56];
    fn to_bytes(&self) -> [u8; 56] {
        let mut b = [0u8; 56];
        put_ring(&mut b, 0, &self.sq);
        put_ring(&mut b, 16, &self.rq);
        put_u32(&mut b, 32, self.sq_slots);
        put_u32(&mut b, 36, self.sq_slot_size);
        put_u32(&mut b, 40, self.rq_slots);
        put_u32(&mut b, 44, self.rq_slot_size);
        put_u32(&mut b, 48, self.qpn);
        put_u32(&mut b, 52, self.reserved);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, size_of};

    #[test]
    fn layouts_are_fixed() {
        let r = AllocUcontextResp::default();
        assert_eq!(size_of::<AllocUcontextResp>(), r.to_bytes().as_ref().len());
        assert_eq!(align_of::<AllocUcontextResp>(), 8);
        let p = AllocPdResp::default();
        assert_eq!(size_of::<AllocPdResp>(), p.to_bytes().as_ref().len());
        let a = CreateAhResp::default();
        assert_eq!(size_of::<CreateAhResp>(), a.to_bytes().as_ref().len());
        assert_eq!(size_of::<CreateCqResp>(), 24);
        assert_eq!(size_of::<CreateQpResp>(), 56);
        assert_eq!(size_of::<CreateSrqResp>(), 24);
    }

    #[test]
    fn create_qp_bytes_follow_field_order() {
        let r = CreateQpResp {
            sq: RingMmap {
                offset: 0x1000,
                len: 0x3000,
            },
            rq: RingMmap {
                offset: 0x4000,
                len: 0x2000,
            },
            sq_slots: 8,
            sq_slot_size: 128,
            rq_slots: 16,
            rq_slot_size: 32,
            qpn: 17,
            reserved: 0,
        };
        let b = r.to_bytes();
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(
            (u64_at(0), u64_at(8), u64_at(16), u64_at(24)),
            (0x1000, 0x3000, 0x4000, 0x2000)
        );
        assert_eq!(
            (u32_at(32), u32_at(36), u32_at(40), u32_at(44), u32_at(48)),
            (8, 128, 16, 32, 17)
        );
    }

    #[test]
    fn bytes_follow_field_order() {
        let r = AllocUcontextResp {
            abi_version: 1,
            device_kind: OXRDMA_DEVICE_IWARP,
            caps: 0x0102_0304_0506_0708,
        };
        let b = r.to_bytes();
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 2);
        assert_eq!(
            u64::from_ne_bytes(b[8..16].try_into().unwrap()),
            0x0102_0304_0506_0708
        );
    }
}
