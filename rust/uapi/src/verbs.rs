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
