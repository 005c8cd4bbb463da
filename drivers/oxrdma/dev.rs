// SPDX-License-Identifier: GPL-2.0
//! The state a RoCE device's QPs share: the tables of its QPs (by number), MRs (by key) and
//! address handles (by number), its GSI QP, its multicast groups, its transmit path, and its
//! RoCE v2 receive sockets.
//!
//! QPs hold the device (`Arc<RoceDev>`); the device reaches QPs only through its table, whose
//! entries the QPs' destroy removes, and the module's receiver reaches the device through its
//! index, which the device's owner ([`crate::device::OxDevice`]) leaves at unregistration: no
//! reference cycle.
//!
//! Context: lookups run per packet in softirq context, under [`SpinLockBh`]s; adding objects,
//! opening the receive sockets and shutting down run in process context.

use crate::ah::AhInner;
use crate::mcast::Groups;
use crate::mr::Mr;
use crate::ox::net::NetDevice;
use crate::ox::sync::{SpinLockBh, SpinLockIrq};
use crate::ox::udp_tunnel::TunnelRef;
use crate::qp::QpInner;
use crate::rx::RoceRx;
use crate::table::{Reservation, Table, Tags};
use crate::tx::{KernelCrc, KernelCrc32c, Tx};
use crate::wire::icrc;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    alloc::{flags::GFP_KERNEL, Flags},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::ARef,
};

/// QP numbers start here (0 and 1 are the special QPs; small numbers look odd in tools).
pub(crate) const QPN_BASE: u32 = 17;
/// The GSI QP's number.
pub(crate) const GSI_QPN: u32 = 1;
/// QP table slots: a slot's index is the low 16 bits of `qpn - QPN_BASE`.
const QPN_SLOTS: usize = 1 << 16;

/// The number of the QP in slot `r`: `QPN_BASE + (tag << 16 | index)`, with the low 7 bits of
/// the slot's tag (random for a new slot, then counting reservations) as the generation. A QP made in the slot of a destroyed one gets
/// another number (the same again only 128 QPs of that slot later), as on hardware: ib_cm
/// takes a REQ from a QPN it still knows a connection of as a stale connection and disconnects
/// that connection. The largest number, `QPN_BASE + (0x7f << 16 | 0xffff)`, stays far below
/// the multicast QPN 0xffffff.
pub(crate) fn qpn_of(r: Reservation) -> u32 {
    QPN_BASE + (u32::from(r.tag & 0x7f) << 16 | r.index as u32)
}

/// The table slot of QP number `qpn` (the QP there must still carry `qpn`).
pub(crate) fn qp_slot(qpn: u32) -> Option<usize> {
    Some((qpn.checked_sub(QPN_BASE)? & 0xffff) as usize)
}

/// One RoCE device's shared state.
#[pin_data]
pub(crate) struct RoceDev {
    #[pin]
    qps: SpinLockBh<Table<QpInner>>,
    #[pin]
    mrs: SpinLockBh<Table<Mr>>,
    /// Taken with interrupts off: ib_core creates and destroys kernel users' AHs also from
    /// code that holds an IRQ-safe spinlock (ib_cm's MAD responses).
    #[pin]
    ahs: SpinLockIrq<Table<AhInner>>,
    /// QP 1, once ib_mad has created it.
    #[pin]
    gsi: SpinLockBh<Option<Arc<QpInner>>>,
    #[pin]
    pub(crate) tx: Tx,
    /// The multicast groups the device's UD QPs are attached to.
    #[pin]
    pub(crate) mcast: Groups,
    /// The engine of iWARP's MPA CRCs.
    pub(crate) crc32c: KernelCrc32c,
    /// The namespace's receive sockets, once a QP needs them (process context only).
    #[pin]
    tunnel: Mutex<Option<TunnelRef>>,
    dead: AtomicBool,
}

impl RoceDev {
    /// The state of a device on `netdev`, computing ICRCs with `crc` and MPA CRCs with
    /// `crc32c`.
    pub(crate) fn new(
        netdev: ARef<NetDevice>,
        crc: Arc<KernelCrc>,
        crc32c: KernelCrc32c,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                qps <- crate::new_spinlock_bh!(Table::new(Tags::Sequential), "oxrdma_qps"),
                mrs <- crate::new_spinlock_bh!(Table::new(Tags::Random), "oxrdma_mrs"),
                ahs <- crate::new_spinlock_irq!(Table::new(Tags::Random), "oxrdma_ahs"),
                gsi <- crate::new_spinlock_bh!(None, "oxrdma_gsi"),
                tx <- Tx::new(netdev, crc),
                mcast <- Groups::new(),
                tunnel <- new_mutex!(None),
                crc32c,
                dead: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the device is going away (no more packets in or out).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Stops the device for good (unregistered; its owner has taken it out of the receiver's
    /// index): no more packets; sockets, netdev and routes released. Process context.
    pub(crate) fn shutdown(&self) {
        self.dead.store(true, Ordering::Release);
        let tun = self.tunnel.lock().take();
        drop(tun);
        self.mcast.clear();
        let released = self.tx.detach();
        drop(released);
        let qps = self.qps.lock().take_all();
        for q in qps.live() {
            q.stop();
        }
        drop(qps);
        let gsi = self.gsi.lock().take();
        if let Some(q) = &gsi {
            q.stop();
        }
        drop(gsi);
        let mrs = self.mrs.lock().take_all();
        drop(mrs);
        let ahs = self.ahs.lock().take_all();
        drop(ahs);
    }

    /// The netdev is going away: stop using it. Process context (under the RTNL).
    pub(crate) fn detach_netdev(&self) {
        self.mcast.forget_netdev();
        let released = self.tx.detach();
        drop(released);
    }

    /// Opens the RoCE v2 receive sockets of the device's namespace, delivering to `rx`, if not
    /// yet open. Process context, RTNL not held (opening takes it).
    pub(crate) fn open_tunnel(&self, rx: &Arc<RoceRx>) -> Result {
        let mut t = self.tunnel.lock();
        if t.as_ref().is_some_and(|t| t.is_open()) {
            return Ok(());
        }
        let nd = self.tx.netdev().ok_or(ENODEV)?;
        match TunnelRef::open(&nd, icrc::ROCE_V2_UDP_PORT, rx.clone()) {
            Ok(new) => {
                let old = t.replace(new);
                drop(t);
                drop(old);
                Ok(())
            }
            Err(e) => {
                pr_warn!(
                    "cannot open UDP port {} in {}'s namespace ({:?}); is rxe loaded there?\n",
                    icrc::ROCE_V2_UDP_PORT,
                    nd.name(),
                    e
                );
                Err(e)
            }
        }
    }

    // ---- QPs ------------------------------------------------------------------------------

    /// Adds a QP made by `make(qpn)`, at most `max` at once. Process context.
    pub(crate) fn add_qp(
        &self,
        max: usize,
        make: impl FnOnce(u32) -> Result<Arc<QpInner>>,
    ) -> Result<Arc<QpInner>> {
        let r = Table::reserve(&self.qps, max.min(QPN_SLOTS), GFP_KERNEL)?;
        let qpn = qpn_of(r);
        match make(qpn) {
            Ok(qp) => {
                self.qps.lock().fill(r, qp.clone());
                Ok(qp)
            }
            Err(e) => {
                self.qps.lock().cancel(r);
                Err(e)
            }
        }
    }

    /// Adds the GSI QP made by `make(GSI_QPN)`; `EBUSY` if the device has one. Process
    /// context.
    pub(crate) fn add_gsi(
        &self,
        make: impl FnOnce(u32) -> Result<Arc<QpInner>>,
    ) -> Result<Arc<QpInner>> {
        if self.gsi.lock().is_some() {
            return Err(EBUSY);
        }
        let qp = make(GSI_QPN)?;
        let mut g = self.gsi.lock();
        if g.is_some() {
            return Err(EBUSY);
        }
        *g = Some(qp.clone());
        Ok(qp)
    }

    /// Removes QP `qpn` from the table.
    pub(crate) fn remove_qp(&self, qpn: u32) {
        if qpn == GSI_QPN {
            let old = self.gsi.lock().take();
            drop(old);
            return;
        }
        let Some(i) = qp_slot(qpn) else {
            return;
        };
        let old = self.qps.lock().remove(i, |q| q.qpn == qpn);
        drop(old);
    }

    /// QP `qpn`, if live.
    pub(crate) fn qp(&self, qpn: u32) -> Option<Arc<QpInner>> {
        if qpn == GSI_QPN {
            return self.gsi.lock().clone();
        }
        self.qps.lock().get(qp_slot(qpn)?).filter(|q| q.qpn == qpn)
    }

    // ---- AHs ------------------------------------------------------------------------------

    /// Adds an AH made by `make(number)`, at most `max` at once, allocating with `gfp` (kernel
    /// users create AHs in atomic context). A number is `index << 8 | tag`, like an MR key.
    pub(crate) fn add_ah(
        &self,
        max: usize,
        gfp: Flags,
        make: impl FnOnce(u32) -> Result<Arc<AhInner>>,
    ) -> Result<Arc<AhInner>> {
        Table::insert_keyed(&self.ahs, max, gfp, make)
    }

    /// Removes AH `num` (any context but hard interrupt).
    pub(crate) fn remove_ah(&self, num: u32) {
        let old = self
            .ahs
            .lock()
            .remove((num >> 8) as usize, |a| a.num == num);
        drop(old);
    }

    /// AH `num`, if live.
    pub(crate) fn ah(&self, num: u32) -> Option<Arc<AhInner>> {
        self.ahs
            .lock()
            .get((num >> 8) as usize)
            .filter(|a| a.num == num)
    }

    // ---- MRs ------------------------------------------------------------------------------

    /// Adds an MR made by `make(key)`, at most `max` at once. Process context. A key is
    /// `index << 8 | tag`: the table slot and its reservation count, so that the key of an
    /// earlier MR in the same slot does not match.
    pub(crate) fn add_mr(
        &self,
        max: usize,
        make: impl FnOnce(u32) -> Result<Arc<Mr>>,
    ) -> Result<Arc<Mr>> {
        Table::insert_keyed(&self.mrs, max, GFP_KERNEL, make)
    }

    /// Removes the MR of `key` and revokes it (see [`Mr::revoke`]).
    pub(crate) fn remove_mr(&self, key: u32) {
        let old = self
            .mrs
            .lock()
            .remove((key >> 8) as usize, |m| m.base_key == key);
        if let Some(m) = &old {
            m.revoke();
        }
        drop(old);
    }

    /// The MR in the table slot `key` names, whatever its state: [`Mr`]'s accessors check the
    /// key itself, REG_MR and invalidation check their own conditions.
    pub(crate) fn mr_slot(&self, key: u32) -> Option<Arc<Mr>> {
        self.mrs.lock().get((key >> 8) as usize)
    }
}
