// SPDX-License-Identifier: GPL-2.0
//! Address handles: the kernel creates them (ib_core resolves the destination MAC) and returns
//! a number, which the provider writes into each UD send WQE (`SendWqe::ah`).

use core::mem::{offset_of, size_of};

use oxrdma_uapi::verbs::CreateAhResp;

use crate::sys;

/// The `CREATE_AH` response buffer: core uverbs response, then oxrdma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateAhRespBuf {
    /// Filled by ib_core (`ah_handle`).
    pub(crate) ibv_resp: sys::ib_uverbs_create_ah_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: CreateAhResp,
}

const _: () =
    assert!(offset_of!(CreateAhRespBuf, drv) == size_of::<sys::ib_uverbs_create_ah_resp>());

/// The provider's AH: libibverbs' `ibv_ah` first (applications hold `*mut ibv_ah`, which is
/// also the address of the `OxAh`), then the kernel's AH number.
#[repr(C)]
pub(crate) struct OxAh {
    /// libibverbs' part (context, PD, handle), filled by `ibv_cmd_create_ah`.
    pub(crate) ibv_ah: sys::ibv_ah,
    /// The kernel's AH number, [`CreateAhResp::ah_num`].
    pub(crate) ah_num: u32,
}

impl OxAh {
    /// An AH for `ibv_cmd_create_ah` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::new(OxAh {
            ibv_ah: sys::ibv_ah::default(),
            ah_num: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_buffer_layout() {
        // ah_handle, then ah_num and reserved.
        assert_eq!(size_of::<sys::ib_uverbs_create_ah_resp>(), 4);
        assert_eq!(offset_of!(CreateAhRespBuf, drv), 4);
        assert_eq!(size_of::<CreateAhRespBuf>(), 12);
    }
}
