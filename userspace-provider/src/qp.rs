// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the `CREATE_QP` response, and the send and receive rings of a QP.

use core::mem::{offset_of, size_of};
use core::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use oxrdma_uapi::verbs::CreateQpResp;

use crate::hold::HeldLock;
use crate::recv::{self, RecvQueue};
use crate::ring::{map_ring, Geometry, GeometryError, SetupError};
use crate::send::{SendCaps, SendQueue, SUPPORTED_SEND_OPS};
use crate::sys;

/// The `CREATE_QP` response buffer: core uverbs response, then oxrdma's driver data.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CreateQpRespBuf {
    /// Filled by ib_core on the `write()` path only; with ioctl, libibverbs takes the handle,
    /// QP number and capabilities from attributes (into `ibv_qp` and the init attributes).
    pub(crate) ibv_resp: sys::ib_uverbs_create_qp_resp,
    /// Filled by oxrdma.ko.
    pub(crate) drv: CreateQpResp,
}

const _: () =
    assert!(offset_of!(CreateQpRespBuf, drv) == size_of::<sys::ib_uverbs_create_qp_resp>());

/// What the kernel granted a new QP (from `ibv_cmd_create_qp`'s results).
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpGrant {
    /// Granted `max_send_wr`, `max_recv_wr`, `max_send_sge`, `max_recv_sge`,
    /// `max_inline_data`.
    pub(crate) cap: sys::ibv_qp_cap,
    /// Receives come from an SRQ (no RQ ring).
    pub(crate) has_srq: bool,
    /// `sq_sig_all`.
    pub(crate) sig_all: bool,
    /// A UD QP.
    pub(crate) ud: bool,
    /// The QP number ib_core reported.
    pub(crate) qp_num: u32,
    /// The uverbs handle (for the doorbell).
    pub(crate) handle: u32,
}

/// Ring geometries of a QP, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpLayout {
    /// The send ring.
    pub(crate) sq: Geometry,
    /// The receive ring, `None` with an SRQ.
    pub(crate) rq: Option<Geometry>,
}

fn min_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl QpGrant {
    /// The send queue's capabilities.
    pub(crate) fn send_caps(&self) -> SendCaps {
        SendCaps {
            max_sge: self.cap.max_send_sge,
            max_inline: self.cap.max_inline_data,
            sig_all: self.sig_all,
            ud: self.ud,
        }
    }
}

/// Checks oxrdma's `CREATE_QP` response against what was granted.
pub(crate) fn check_resp(drv: &CreateQpResp, g: &QpGrant) -> Result<QpLayout, SetupError> {
    if drv.qpn != g.qp_num {
        return Err(SetupError::QpnMismatch {
            core: g.qp_num,
            drv: drv.qpn,
        });
    }
    let sq = Geometry {
        slots: drv.sq_slots,
        slot_size: drv.sq_slot_size,
    };
    let min_send = g.send_caps().min_slot_size();
    // A slot size that cannot be a u32 is refused by the check (min = u32::MAX is never met
    // by a multiple of 8).
    sq.check(g.cap.max_send_wr, min_u32(min_send), &drv.sq)?;
    let rq = if g.has_srq {
        if drv.rq.len != 0 {
            return Err(GeometryError::Presence.into());
        }
        None
    } else {
        if drv.rq.len == 0 {
            return Err(GeometryError::Presence.into());
        }
        let rq = Geometry {
            slots: drv.rq_slots,
            slot_size: drv.rq_slot_size,
        };
        rq.check(
            g.cap.max_recv_wr,
            min_u32(recv::min_slot_size(g.cap.max_recv_sge)),
            &drv.rq,
        )?;
        Some(rq)
    };
    Ok(QpLayout { sq, rq })
}

/// What `ibv_create_qp_ex` asks for, checked before anything is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpInitEx {
    /// The `comp_mask` to pass to `ibv_cmd_create_qp_ex` (`IBV_QP_INIT_ATTR_CREATE_FLAGS` with
    /// no flags is dropped: that command refuses the bit, and there is nothing to create).
    pub(crate) comp_mask: u32,
    /// The `send_ops_flags` when the `ibv_wr_*` API is wanted
    /// (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
    pub(crate) send_ops: Option<u64>,
}

/// Checks the attributes of `ibv_create_qp_ex`: `EINVAL` without a PD (as libibverbs),
/// `EOPNOTSUPP` for what the provider does not implement (XRC domains, creation flags, TSO,
/// RSS, memory windows, ...), as rdma-core's tests expect.
pub(crate) fn check_qp_init_ex(
    comp_mask: u32,
    create_flags: u32,
    send_ops_flags: u64,
) -> Result<QpInitEx, i32> {
    let pd = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD;
    let ops = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let cflags = sys::ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS;
    let mut comp_mask = comp_mask;
    if comp_mask & cflags != 0 {
        if create_flags != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        comp_mask &= !cflags;
    }
    if comp_mask & !(pd | ops) != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if comp_mask & pd == 0 {
        return Err(libc::EINVAL);
    }
    let send_ops = if comp_mask & ops == 0 {
        None
    } else if send_ops_flags & !SUPPORTED_SEND_OPS != 0 {
        return Err(libc::EOPNOTSUPP);
    } else {
        Some(send_ops_flags)
    };
    Ok(QpInitEx {
        comp_mask,
        send_ops,
    })
}

/// `sizeof(struct ibv_qp_ex)` in the installed libibverbs (rdma-core 44): v55's structure
/// without the `wr_flush` it appended. libibverbs 44 (and code compiled against its verbs.h,
/// `ibv_qp_to_qp_ex`) finds `verbs_qp::comp_mask` right after that many bytes, so the
/// provider lays `verbs_qp` out itself ([`VerbsQp`]) and never writes `wr_flush`.
pub(crate) const QP_EX_SIZE: usize = offset_of!(sys::ibv_qp_ex, wr_flush);

/// The `ibv_qp` / `ibv_qp_ex` union of rdma-core 44's `struct verbs_qp`.
#[repr(C)]
pub(crate) union QpUnion {
    /// The plain QP (also the start of `ibv_qp_ex`, its `qp_base`).
    pub(crate) qp: sys::ibv_qp,
    raw: [u64; QP_EX_SIZE / 8],
}

/// rdma-core 44's `struct verbs_qp`.
#[repr(C)]
pub(crate) struct VerbsQp {
    /// `ibv_qp`, or `ibv_qp_ex` (44's size) for a QP created with send ops flags.
    pub(crate) u: QpUnion,
    /// `VERBS_QP_XRCD`, `VERBS_QP_EX`.
    pub(crate) comp_mask: u32,
    /// Not used (no XRC).
    pub(crate) xrcd: *mut sys::verbs_xrcd,
}

const _: () = {
    assert!(size_of::<QpUnion>() == QP_EX_SIZE);
    assert!(offset_of!(VerbsQp, comp_mask) == QP_EX_SIZE);
    // Everything the provider writes in ibv_qp_ex lies before wr_flush.
    assert!(offset_of!(sys::ibv_qp_ex, wr_atomic_write) + 8 == QP_EX_SIZE);
};

/// The provider's QP: libibverbs' `verbs_qp` first (the address applications hold, as an
/// `ibv_qp` or an `ibv_qp_ex`), then the rings. libibverbs and the application write the
/// `verbs_qp` part (state, event counters, `ibv_qp_ex::wr_id`) at any time, so the provider
/// only ever borrows `inner`.
#[repr(C)]
pub(crate) struct OxQp {
    /// libibverbs' part.
    pub(crate) vqp: VerbsQp,
    /// Set once the rings are mapped, before the QP is returned.
    pub(crate) inner: Option<QpInner>,
}

impl OxQp {
    /// A QP for `ibv_cmd_create_qp(_ex)` to fill in.
    pub(crate) fn new() -> Box<Self> {
        Box::new(Self {
            vqp: VerbsQp {
                u: QpUnion {
                    raw: [0; QP_EX_SIZE / 8],
                },
                comp_mask: 0,
                xrcd: ptr::null_mut(),
            },
            inner: None,
        })
    }

    /// The `ibv_qp` (for the create commands and the returned pointer).
    pub(crate) fn ibv_qp_ptr(&mut self) -> *mut sys::ibv_qp {
        ptr::addr_of_mut!(self.vqp).cast()
    }
}

/// The provider's own part of a QP: each ring behind its own lock.
#[derive(Debug)]
pub(crate) struct QpInner {
    sq: HeldLock<SendQueue>,
    rq: Option<Mutex<RecvQueue>>,
    /// The uverbs handle, for the doorbell.
    pub(crate) handle: u32,
    /// The command file, for the doorbell.
    pub(crate) cmd_fd: i32,
}

impl QpInner {
    /// Checks oxrdma's `CREATE_QP` response and maps the rings from `cmd_fd`.
    pub(crate) fn setup(cmd_fd: i32, drv: &CreateQpResp, g: &QpGrant) -> Result<Self, SetupError> {
        let layout = check_resp(drv, g)?;
        let sq = SendQueue::new(map_ring(cmd_fd, &drv.sq, layout.sq)?, g.send_caps())?;
        let rq = match layout.rq {
            Some(geo) => Some(Mutex::new(RecvQueue::new(
                map_ring(cmd_fd, &drv.rq, geo)?,
                g.cap.max_recv_sge,
            )?)),
            None => None,
        };
        Ok(Self {
            sq: HeldLock::new(sq),
            rq,
            handle: g.handle,
            cmd_fd,
        })
    }

    /// The send queue (held across `ibv_wr_start` .. `ibv_wr_complete`).
    pub(crate) fn sq(&self) -> &HeldLock<SendQueue> {
        &self.sq
    }

    /// The receive queue, locked; `None` when the QP receives through an SRQ.
    pub(crate) fn lock_rq(&self) -> Option<MutexGuard<'_, RecvQueue>> {
        self.rq
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdma_uapi::queue::{recv_slot_size, send_slot_size};
    use oxrdma_uapi::verbs::RingMmap;

    #[test]
    fn response_buffer_layout() {
        assert_eq!(size_of::<sys::ib_uverbs_create_qp_resp>(), 32);
        assert_eq!(offset_of!(CreateQpRespBuf, drv), 32);
        assert_eq!(size_of::<CreateQpRespBuf>(), 32 + 56);
        assert_eq!(offset_of!(OxQp, vqp), 0);
        // rdma-core 44's verbs_qp: the 352-byte union, comp_mask, xrcd.
        assert_eq!(QP_EX_SIZE, 352);
        assert_eq!(size_of::<VerbsQp>(), 352 + 16);
        let mut qp = OxQp::new();
        assert_eq!(qp.ibv_qp_ptr().cast::<OxQp>(), &mut *qp as *mut OxQp);
    }

    #[test]
    fn qp_init_ex_attributes() {
        use sys::*;
        let pd = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_PD;
        let ops = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        let cf = ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_CREATE_FLAGS;
        let send = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND);
        let ok = |comp_mask, send_ops| {
            Ok(QpInitEx {
                comp_mask,
                send_ops,
            })
        };
        assert_eq!(check_qp_init_ex(pd, 0, 0), ok(pd, None));
        assert_eq!(check_qp_init_ex(pd, 0, send), ok(pd, None), "no mask bit");
        assert_eq!(
            check_qp_init_ex(pd | ops, 0, send),
            ok(pd | ops, Some(send))
        );
        assert_eq!(check_qp_init_ex(ops, 0, send), Err(libc::EINVAL));
        let mw = u64::from(ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW);
        assert_eq!(
            check_qp_init_ex(pd | ops, 0, send | mw),
            Err(libc::EOPNOTSUPP)
        );
        // Creation flags: none is fine (the bit is dropped), any is not supported.
        assert_eq!(check_qp_init_ex(pd | cf, 0, 0), ok(pd, None));
        assert_eq!(check_qp_init_ex(pd | cf, 2, 0), Err(libc::EOPNOTSUPP));
        assert_eq!(check_qp_init_ex(pd, 2, 0), ok(pd, None), "no mask bit");
        for m in [
            ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_XRCD,
            ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
            ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_IND_TABLE,
            ibv_qp_init_attr_mask_IBV_QP_INIT_ATTR_RX_HASH,
            1 << 20,
        ] {
            assert_eq!(check_qp_init_ex(pd | m, 0, 0), Err(libc::EOPNOTSUPP));
        }
    }

    fn grant(has_srq: bool) -> QpGrant {
        QpGrant {
            cap: sys::ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 32,
                max_send_sge: 2,
                max_recv_sge: 4,
                max_inline_data: 64,
            },
            has_srq,
            sig_all: false,
            ud: false,
            qp_num: 0x11,
            handle: 3,
        }
    }

    /// What a kernel following the uapi helpers answers.
    fn resp(g: &QpGrant) -> CreateQpResp {
        let sq_slot_size = send_slot_size(g.cap.max_send_sge, g.cap.max_inline_data);
        let rq_slot_size = recv_slot_size(g.cap.max_recv_sge);
        CreateQpResp {
            sq: RingMmap {
                offset: 0,
                len: 256 + 16 * u64::from(sq_slot_size),
            },
            rq: RingMmap {
                offset: 1 << 12,
                len: if g.has_srq {
                    0
                } else {
                    256 + 32 * u64::from(rq_slot_size)
                },
            },
            sq_slots: 16,
            sq_slot_size,
            rq_slots: if g.has_srq { 0 } else { 32 },
            rq_slot_size: if g.has_srq { 0 } else { rq_slot_size },
            qpn: 0x11,
            reserved: 0,
        }
    }

    #[test]
    fn accepts_what_the_uapi_helpers_size() {
        let g = grant(false);
        let l = check_resp(&resp(&g), &g).unwrap();
        assert_eq!(l.sq.slots, 16);
        assert_eq!(l.rq.unwrap().slot_size, 128);
        let s = grant(true);
        assert_eq!(check_resp(&resp(&s), &s).unwrap().rq, None);
    }

    #[test]
    fn refuses_inconsistent_responses() {
        let g = grant(false);
        let bad = |f: fn(&mut CreateQpResp)| {
            let mut r = resp(&g);
            f(&mut r);
            check_resp(&r, &g)
        };
        assert!(matches!(
            bad(|r| r.qpn = 5),
            Err(SetupError::QpnMismatch { core: 0x11, drv: 5 })
        ));
        assert!(
            bad(|r| r.sq_slots = 8).is_err(),
            "fewer slots than max_send_wr"
        );
        assert!(
            bad(|r| r.sq_slot_size = 64).is_err(),
            "no room for the inline data"
        );
        assert!(bad(|r| r.rq.len = 0).is_err(), "no RQ without an SRQ");
        assert!(bad(|r| r.rq_slot_size = 32).is_err(), "no room for 4 SGEs");
        assert!(
            bad(|r| r.sq.len = 1024).is_err(),
            "mapping shorter than the slots"
        );
        let s = grant(true);
        let mut r = resp(&s);
        r.rq.len = 4096;
        assert_eq!(
            check_resp(&r, &s),
            Err(SetupError::Geometry(GeometryError::Presence))
        );
    }

    #[test]
    fn send_caps_follow_the_grant() {
        let mut g = grant(false);
        g.sig_all = true;
        g.ud = true;
        assert_eq!(
            g.send_caps(),
            SendCaps {
                max_sge: 2,
                max_inline: 64,
                sig_all: true,
                ud: true
            }
        );
    }
}
