// SPDX-License-Identifier: GPL-2.0
//! Memory regions: all the state is libibverbs' `verbs_mr` (keys, handle), filled by
//! `ibv_cmd_reg_mr`; the kernel pins and checks the memory.

use crate::sys;

/// The provider's MR: `verbs_mr` (whose first member is the `ibv_mr` applications hold).
#[repr(C)]
#[derive(Default)]
pub(crate) struct OxMr {
    /// libibverbs' part.
    pub(crate) vmr: sys::verbs_mr,
}

impl OxMr {
    /// An MR for `ibv_cmd_reg_mr` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn layout() {
        assert_eq!(offset_of!(OxMr, vmr), 0);
        assert_eq!(offset_of!(sys::verbs_mr, ibv_mr), 0);
        let mr = OxMr::new();
        assert_eq!(mr.vmr.ibv_mr.lkey, 0);
    }
}
