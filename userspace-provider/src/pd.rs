// SPDX-License-Identifier: GPL-2.0
//! Protection domains.

use core::mem::{offset_of, size_of};

use oxrdma_uapi::verbs::AllocPdResp;

use crate::sys;

/// The `ALLOC_PD` response buffer: core uverbs response, then oxrdma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct AllocPdRespBuf {
    /// Filled by ib_core (`pd_handle`).
    pub(crate) ibv_resp: sys::ib_uverbs_alloc_pd_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: AllocPdResp,
}

const _: () = assert!(offset_of!(AllocPdRespBuf, drv) == size_of::<sys::ib_uverbs_alloc_pd_resp>());

/// The provider's PD: libibverbs' `ibv_pd` first (applications and libibverbs hold
/// `*mut ibv_pd`, which is also the address of the `OxPd`), then oxrdma's PD number.
#[repr(C)]
pub(crate) struct OxPd {
    /// libibverbs' part (context, handle), filled by `ibv_cmd_alloc_pd`.
    pub(crate) ibv_pd: sys::ibv_pd,
    /// The kernel's PD number, [`AllocPdResp::pdn`].
    pub(crate) pdn: u32,
}

impl OxPd {
    /// A PD for `ibv_cmd_alloc_pd` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::new(OxPd {
            ibv_pd: sys::ibv_pd::default(),
            pdn: 0,
        })
    }

    /// Records oxrdma's part of the response.
    pub(crate) fn set_from_resp(&mut self, resp: &AllocPdResp) {
        // `reserved` is not checked: a later kernel may give it a meaning an older provider
        // can ignore.
        self.pdn = resp.pdn;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_buffer_layout() {
        // pd_handle, then pdn and reserved.
        assert_eq!(size_of::<sys::ib_uverbs_alloc_pd_resp>(), 4);
        assert_eq!(offset_of!(AllocPdRespBuf, drv), 4);
        assert_eq!(size_of::<AllocPdRespBuf>(), 12);
    }

    #[test]
    fn records_pdn() {
        let mut pd = OxPd::new();
        pd.set_from_resp(&AllocPdResp {
            pdn: 42,
            reserved: 0,
        });
        assert_eq!(pd.pdn, 42);
        assert!(pd.ibv_pd.context.is_null());
    }
}
