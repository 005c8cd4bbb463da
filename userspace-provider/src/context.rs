// SPDX-License-Identifier: GPL-2.0
//! The user context: the `ALLOC_UCONTEXT` exchange and what the provider keeps per context.

use core::fmt;
use core::mem::{offset_of, size_of};

use oxrdma_uapi::abi::OXRDMA_ABI_VERSION;
use oxrdma_uapi::verbs::AllocUcontextResp;

use crate::device::DeviceKind;
use crate::sys;

/// The `ALLOC_UCONTEXT` (`ibv_cmd_get_context`) response buffer: the core uverbs response
/// followed by oxrdma's driver data, as rdma-core's `DECLARE_DRV_CMD` lays it out.
#[repr(C)]
#[derive(Default)]
pub(crate) struct GetContextResp {
    /// Filled by libibverbs/ib_core.
    pub(crate) ibv_resp: sys::ib_uverbs_get_context_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: AllocUcontextResp,
}

// The kernel writes the driver data right after the core response (udata); there must be no
// padding between the two.
const _: () =
    assert!(offset_of!(GetContextResp, drv) == size_of::<sys::ib_uverbs_get_context_resp>());

/// What a context learned from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ContextInfo {
    /// RoCE or iWARP, as the kernel reports it.
    pub(crate) kind: DeviceKind,
    /// The kernel's capability flags (none defined yet).
    pub(crate) caps: u64,
}

/// Why the provider refuses a context the kernel created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContextError {
    /// The kernel speaks another user/kernel ABI version.
    AbiVersion {
        /// The version the kernel reported.
        kernel: u32,
    },
    /// The kernel reported a device kind this provider does not know.
    UnknownKind(u32),
    /// The kernel's device kind contradicts the device's `hca_type`.
    KindMismatch {
        /// From the response.
        kernel: DeviceKind,
        /// From sysfs, at matching.
        sysfs: DeviceKind,
    },
}

impl ContextError {
    /// The errno `ibv_open_device` fails with.
    pub(crate) fn errno(self) -> i32 {
        libc::EPROTO
    }
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContextError::AbiVersion { kernel } => write!(
                f,
                "kernel oxrdma ABI version {kernel}, provider supports {OXRDMA_ABI_VERSION}"
            ),
            ContextError::UnknownKind(k) => write!(f, "kernel reports unknown device kind {k}"),
            ContextError::KindMismatch { kernel, sysfs } => write!(
                f,
                "kernel reports a {} device, sysfs hca_type says {}",
                kernel.hca_type(),
                sysfs.hca_type()
            ),
        }
    }
}

/// Checks oxrdma's part of the `ALLOC_UCONTEXT` response for a device that matched as
/// `sysfs_kind`.
pub(crate) fn check_ucontext_resp(
    resp: &AllocUcontextResp,
    sysfs_kind: DeviceKind,
) -> Result<ContextInfo, ContextError> {
    if resp.abi_version != OXRDMA_ABI_VERSION {
        return Err(ContextError::AbiVersion {
            kernel: resp.abi_version,
        });
    }
    let kind = DeviceKind::from_uapi(resp.device_kind)
        .ok_or(ContextError::UnknownKind(resp.device_kind))?;
    if kind != sysfs_kind {
        return Err(ContextError::KindMismatch {
            kernel: kind,
            sysfs: sysfs_kind,
        });
    }
    Ok(ContextInfo {
        kind,
        caps: resp.caps,
    })
}

/// The provider's context. libibverbs allocates it (zeroed, with `calloc`, in
/// `_verbs_init_and_alloc_context`) and the provider frees it with `free`, so every field
/// must be valid when all-zero and nothing in it may need dropping.
#[repr(C)]
pub(crate) struct OxContext {
    /// libibverbs' part; first, so `*mut verbs_context` and `*mut OxContext` share an address.
    pub(crate) ibv_ctx: sys::verbs_context,
    /// [`DeviceKind`] as `u32` (0 until the context is set up).
    kind: u32,
    /// [`ContextInfo::caps`].
    caps: u64,
}

impl OxContext {
    /// Records what the kernel reported.
    pub(crate) fn set_info(&mut self, info: ContextInfo) {
        self.kind = info.kind as u32;
        self.caps = info.caps;
    }

    /// What the kernel reported; `None` before [`Self::set_info`].
    pub(crate) fn info(&self) -> Option<ContextInfo> {
        Some(ContextInfo {
            kind: DeviceKind::from_uapi(self.kind)?,
            caps: self.caps,
        })
    }
}

/// Size of `ibv_device_attr::fw_ver`.
pub(crate) const FW_VER_LEN: usize = 64;

/// `ibv_device_attr::fw_ver` from the kernel's 64-bit firmware version, formatted as rxe and
/// siw do ("major.minor.sub_minor" from bits 47..32, 31..16, 15..0), NUL-terminated.
pub(crate) fn fw_ver(raw: u64) -> [u8; FW_VER_LEN] {
    let s = format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    );
    let mut out = [0u8; FW_VER_LEN];
    // At most 17 characters: always fits with its NUL.
    let n = s.len().min(FW_VER_LEN - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::verbs::{OXRDMA_DEVICE_IWARP, OXRDMA_DEVICE_ROCE};

    fn resp(abi_version: u32, device_kind: u32) -> AllocUcontextResp {
        AllocUcontextResp {
            abi_version,
            device_kind,
            caps: 0,
        }
    }

    #[test]
    fn accepts_matching_response() {
        let r = AllocUcontextResp {
            caps: 0x10,
            ..resp(OXRDMA_ABI_VERSION, OXRDMA_DEVICE_ROCE)
        };
        assert_eq!(
            check_ucontext_resp(&r, DeviceKind::Roce),
            Ok(ContextInfo {
                kind: DeviceKind::Roce,
                caps: 0x10
            })
        );
        assert_eq!(
            check_ucontext_resp(
                &resp(OXRDMA_ABI_VERSION, OXRDMA_DEVICE_IWARP),
                DeviceKind::Iwarp
            )
            .map(|i| i.kind),
            Ok(DeviceKind::Iwarp)
        );
    }

    #[test]
    fn rejects_other_abi_versions() {
        // 0 is also what a kernel that wrote no driver data leaves in the zeroed buffer.
        for v in [0, OXRDMA_ABI_VERSION + 1, u32::MAX] {
            let e = check_ucontext_resp(&resp(v, OXRDMA_DEVICE_ROCE), DeviceKind::Roce);
            assert_eq!(e, Err(ContextError::AbiVersion { kernel: v }));
            assert_eq!(e.unwrap_err().errno(), libc::EPROTO);
        }
    }

    #[test]
    fn rejects_unknown_or_contradicting_kind() {
        assert_eq!(
            check_ucontext_resp(&resp(OXRDMA_ABI_VERSION, 7), DeviceKind::Roce),
            Err(ContextError::UnknownKind(7))
        );
        assert_eq!(
            check_ucontext_resp(
                &resp(OXRDMA_ABI_VERSION, OXRDMA_DEVICE_IWARP),
                DeviceKind::Roce
            ),
            Err(ContextError::KindMismatch {
                kernel: DeviceKind::Iwarp,
                sysfs: DeviceKind::Roce
            })
        );
    }

    #[test]
    fn response_buffer_layout() {
        // Core response (async_fd, num_comp_vectors), then the 16-byte driver data.
        assert_eq!(size_of::<sys::ib_uverbs_get_context_resp>(), 8);
        assert_eq!(offset_of!(GetContextResp, drv), 8);
        assert_eq!(size_of::<GetContextResp>(), 8 + 16);
    }

    #[test]
    fn context_info_after_set() {
        // All-zero, as calloc leaves it.
        let mut ctx = OxContext {
            ibv_ctx: sys::verbs_context::default(),
            kind: 0,
            caps: 0,
        };
        assert_eq!(ctx.info(), None);
        let info = ContextInfo {
            kind: DeviceKind::Iwarp,
            caps: 3,
        };
        ctx.set_info(info);
        assert_eq!(ctx.info(), Some(info));
    }

    #[test]
    fn fw_ver_format() {
        let s = fw_ver(0x0001_0002_0003);
        assert_eq!(&s[..6], b"1.2.3\0");
        assert_eq!(&fw_ver(0)[..6], b"0.0.0\0");
        let max = fw_ver(u64::MAX);
        let end = max.iter().position(|&b| b == 0).unwrap();
        assert_eq!(&max[..end], b"65535.65535.65535");
    }
}
