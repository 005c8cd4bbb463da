// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: the `CREATE_SRQ` response and the SRQ's receive ring.

use core::mem::{offset_of, size_of};
use std::sync::{Mutex, MutexGuard, PoisonError};

use oxrdma_uapi::verbs::CreateSrqResp;

use crate::recv::{self, RecvQueue};
use crate::ring::{map_ring, Geometry, SetupError};
use crate::sys;

/// The `CREATE_SRQ` response buffer: core uverbs response, then oxrdma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateSrqRespBuf {
    /// Filled by ib_core on the `write()` path only (libibverbs reports `max_wr` and
    /// `max_sge` in the init attributes on both paths).
    pub(crate) ibv_resp: sys::ib_uverbs_create_srq_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: CreateSrqResp,
}

const _: () =
    assert!(offset_of!(CreateSrqRespBuf, drv) == size_of::<sys::ib_uverbs_create_srq_resp>());

/// Checks the ring geometry of a `CREATE_SRQ` response for the granted `max_wr`, `max_sge`.
pub(crate) fn check_resp(
    drv: &CreateSrqResp,
    max_wr: u32,
    max_sge: u32,
) -> Result<Geometry, SetupError> {
    let geo = Geometry {
        slots: drv.slots,
        slot_size: drv.slot_size,
    };
    let min = u32::try_from(recv::min_slot_size(max_sge)).unwrap_or(u32::MAX);
    geo.check(max_wr, min, &drv.ring)?;
    Ok(geo)
}

/// The provider's SRQ: libibverbs' `ibv_srq` first, then the ring (only `inner` is ever
/// borrowed, as for QPs and CQs).
#[repr(C)]
pub(crate) struct OxSrq {
    /// libibverbs' part.
    pub(crate) ibv_srq: sys::ibv_srq,
    /// Set once the ring is mapped, before the SRQ is returned.
    pub(crate) inner: Option<SrqInner>,
}

impl OxSrq {
    /// An SRQ for `ibv_cmd_create_srq` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::new(Self {
            ibv_srq: sys::ibv_srq::default(),
            inner: None,
        })
    }
}

/// The provider's own part of an SRQ.
#[derive(Debug)]
pub(crate) struct SrqInner {
    rq: Mutex<RecvQueue>,
}

impl SrqInner {
    /// Checks oxrdma's `CREATE_SRQ` response and maps the ring from `cmd_fd`.
    pub(crate) fn setup(
        cmd_fd: i32,
        drv: &CreateSrqResp,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<Self, SetupError> {
        let geo = check_resp(drv, max_wr, max_sge)?;
        let rq = RecvQueue::new(map_ring(cmd_fd, &drv.ring, geo)?, max_sge)?;
        Ok(Self { rq: Mutex::new(rq) })
    }

    /// The receive queue, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, RecvQueue> {
        self.rq.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `ibv_modify_srq` attribute bits the provider passes to the kernel. Resizing
/// (`IBV_SRQ_MAX_WR`) would need a new ring, which the ABI cannot describe yet.
pub(crate) const MODIFY_SRQ_SUPPORTED: u32 = sys::ibv_srq_attr_mask_IBV_SRQ_LIMIT;

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::verbs::RingMmap;

    #[test]
    fn response_buffer_layout() {
        assert_eq!(size_of::<sys::ib_uverbs_create_srq_resp>(), 16);
        assert_eq!(offset_of!(CreateSrqRespBuf, drv), 16);
        assert_eq!(size_of::<CreateSrqRespBuf>(), 16 + 24);
        assert_eq!(offset_of!(OxSrq, ibv_srq), 0);
    }

    #[test]
    fn checks_geometry() {
        let r = |slots, slot_size| CreateSrqResp {
            ring: RingMmap {
                offset: 0,
                len: 8192,
            },
            slots,
            slot_size,
        };
        assert!(check_resp(&r(64, 64), 64, 3).is_ok());
        assert!(check_resp(&r(32, 64), 64, 3).is_err());
        assert!(check_resp(&r(64, 32), 64, 3).is_err());
        assert!(
            check_resp(&r(256, 64), 64, 3).is_err(),
            "longer than the mapping"
        );
    }

    #[test]
    fn modify_mask() {
        assert_eq!(
            MODIFY_SRQ_SUPPORTED & sys::ibv_srq_attr_mask_IBV_SRQ_MAX_WR,
            0
        );
    }
}
