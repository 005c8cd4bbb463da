// SPDX-License-Identifier: GPL-2.0
//! The state a RoCE device's QPs share: the tables of its QPs (by number) and MRs (by key),
//! its transmit path, and its RoCE v2 receive sockets.
//!
//! QPs hold the device (`Arc<RoceDev>`); the device reaches QPs only through its table, whose
//! entries the QPs' destroy removes, and the module's receiver reaches the device through its
//! index, which the device's owner ([`crate::device::OxDevice`]) leaves at unregistration: no
//! reference cycle.
//!
//! Context: lookups run per packet in softirq context, under [`SpinLockBh`]s; adding objects,
//! opening the receive sockets and shutting down run in process context.

use crate::mr::Mr;
use crate::ox::net::NetDevice;
use crate::ox::sync::SpinLockBh;
use crate::ox::udp_tunnel::TunnelRef;
use crate::qp::QpInner;
use crate::rx::RoceRx;
use crate::table::Table;
use crate::tx::{KernelCrc, Tx};
use crate::wire::icrc;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    alloc::flags::GFP_KERNEL,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::ARef,
};

/// QP numbers start here (0 and 1 are the special QPs; small numbers look odd in tools).
pub(crate) const QPN_BASE: u32 = 17;

/// One RoCE device's shared state.
#[pin_data]
pub(crate) struct RoceDev {
    #[pin]
    qps: SpinLockBh<Table<QpInner>>,
    #[pin]
    mrs: SpinLockBh<Table<Mr>>,
    #[pin]
    pub(crate) tx: Tx,
    /// The namespace's receive sockets, once a QP needs them (process context only).
    #[pin]
    tunnel: Mutex<Option<TunnelRef>>,
    dead: AtomicBool,
}

impl RoceDev {
    /// The state of a device on `netdev`, computing ICRCs with `crc`.
    pub(crate) fn new(netdev: ARef<NetDevice>, crc: Arc<KernelCrc>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                qps <- crate::new_spinlock_bh!(Table::new(), "oxrdma_qps"),
                mrs <- crate::new_spinlock_bh!(Table::new(), "oxrdma_mrs"),
                tx <- Tx::new(netdev, crc),
                tunnel <- new_mutex!(None),
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
        let released = self.tx.detach();
        drop(released);
        let qps = self.qps.lock().take_all();
        for q in qps.live() {
            q.stop();
        }
        drop(qps);
        let mrs = self.mrs.lock().take_all();
        drop(mrs);
    }

    /// The netdev is going away: stop using it. Process context (under the RTNL).
    pub(crate) fn detach_netdev(&self) {
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
                    "oxrdma: cannot open UDP port {} in {}'s namespace ({:?}); is rxe loaded there?\n",
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
        let r = Table::reserve(&self.qps, max)?;
        let qpn = u32::try_from(r.index).map_err(|_| ENOSPC)? + QPN_BASE;
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

    /// Removes QP `qpn` from the table.
    pub(crate) fn remove_qp(&self, qpn: u32) {
        let Some(i) = qpn.checked_sub(QPN_BASE) else {
            return;
        };
        let old = self.qps.lock().remove(i as usize, |_| true);
        drop(old);
    }

    /// QP `qpn`, if live.
    pub(crate) fn qp(&self, qpn: u32) -> Option<Arc<QpInner>> {
        let i = qpn.checked_sub(QPN_BASE)?;
        self.qps.lock().get(i as usize)
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
        let r = Table::reserve(&self.mrs, max.min(1 << 24))?;
        let key = ((r.index as u32) << 8) | u32::from(r.tag);
        match make(key) {
            Ok(mr) => {
                self.mrs.lock().fill(r, mr.clone());
                Ok(mr)
            }
            Err(e) => {
                self.mrs.lock().cancel(r);
                Err(e)
            }
        }
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
