// SPDX-License-Identifier: GPL-2.0
//! The multicast groups of a RoCE device (IBA 10.5, RoCE annex A17.4.6): the UD QPs attached to
//! each group, to which a packet for the group's GID is delivered, one copy each; and the
//! device's membership of the group's IP address on its netdev (IGMP for an IPv4-mapped GID,
//! MLD for an IPv6 one), without which the IP layer takes none of the group's packets off the
//! wire nor loops back those the host sends itself.
//!
//! Attaching and detaching run in process context and sleep (a membership change takes the
//! RTNL); a mutex orders them. Delivery runs per packet in softirq context: it copies a
//! group's members out under a `SpinLockBh` and hands the packet to each outside it.

use crate::ox::net::{IpGroup, NetDevice};
use crate::ox::sync::SpinLockBh;
use crate::qp::QpInner;
use crate::wire::ip::IpAddr;
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::ARef,
};

/// Groups per device.
pub(crate) const MAX_GROUPS: usize = 256;
/// QPs attached to one group.
pub(crate) const MAX_MEMBERS: usize = 32;

/// The QPs of one group, as delivery gets them.
pub(crate) type Members = [Option<Arc<QpInner>>; MAX_MEMBERS];

/// One group with at least one member.
struct Group {
    gid: [u8; 16],
    members: Members,
    /// The netdev the device joined the group's IP address on; `None` once it went away
    /// (its teardown ends the membership).
    joined: Option<ARef<NetDevice>>,
}

/// The IP multicast address of a multicast GID; `EINVAL` for any other GID.
fn ip_group(gid: &[u8; 16]) -> Result<IpGroup> {
    match IpAddr::from_gid(*gid) {
        a if !a.is_multicast() => Err(EINVAL),
        IpAddr::V4(a) => Ok(IpGroup::V4(a)),
        IpAddr::V6(a) => Ok(IpGroup::V6(a)),
    }
}

/// A device's multicast groups.
#[pin_data]
pub(crate) struct Groups {
    /// Orders attach, detach and clear.
    #[pin]
    changes: Mutex<()>,
    #[pin]
    groups: SpinLockBh<[Option<KBox<Group>>; MAX_GROUPS]>,
}

impl Groups {
    /// No groups.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            changes <- new_mutex!(()),
            groups <- crate::new_spinlock_bh!([const { None }; MAX_GROUPS], "oxrdma_mcast"),
        })
    }

    /// Attaches `qp` to the group of `gid`; the first member makes the device join the
    /// group's IP address on `netdev`. Attaching twice is not an error. `ENOMEM` beyond
    /// [`MAX_GROUPS`] groups or [`MAX_MEMBERS`] members, `ENODEV` without a netdev (or
    /// without IP of the group's family on it). Process context.
    pub(crate) fn attach(
        &self,
        qp: &Arc<QpInner>,
        gid: &[u8; 16],
        netdev: Option<ARef<NetDevice>>,
    ) -> Result {
        let group = ip_group(gid)?;
        let _order = self.changes.lock();
        let free = {
            let mut gs = self.groups.lock();
            if let Some(g) = gs.iter_mut().flatten().find(|g| g.gid == *gid) {
                if g.members.iter().flatten().any(|m| m.qpn == qp.qpn) {
                    return Ok(());
                }
                let m = g.members.iter_mut().find(|m| m.is_none()).ok_or(ENOMEM)?;
                *m = Some(qp.clone());
                return Ok(());
            }
            gs.iter().position(Option::is_none).ok_or(ENOMEM)?
        };
        // A new group. Only this path fills a slot, and `changes` is held: slot `free` stays
        // free meanwhile.
        let nd = netdev.ok_or(ENODEV)?;
        let mut members: Members = [const { None }; MAX_MEMBERS];
        members[0] = Some(qp.clone());
        let mut g = KBox::new(
            Group {
                gid: *gid,
                members,
                joined: None,
            },
            GFP_KERNEL,
        )?;
        nd.join_group(group)?;
        g.joined = Some(nd);
        self.groups.lock()[free] = Some(g);
        Ok(())
    }

    /// Detaches QP `qpn` from the group of `gid`; the last member leaves the group's IP
    /// address. `EINVAL` if the QP is not attached. Process context.
    pub(crate) fn detach(&self, qpn: u32, gid: &[u8; 16]) -> Result {
        let group = ip_group(gid)?;
        let _order = self.changes.lock();
        let (member, emptied) = {
            let mut gs = self.groups.lock();
            let slot = gs
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|g| g.gid == *gid))
                .ok_or(EINVAL)?;
            let Some(g) = slot.as_mut() else {
                return Err(EINVAL);
            };
            let m = g
                .members
                .iter_mut()
                .find(|m| m.as_ref().is_some_and(|q| q.qpn == qpn))
                .and_then(Option::take)
                .ok_or(EINVAL)?;
            let emptied = if g.members.iter().all(Option::is_none) {
                slot.take()
            } else {
                None
            };
            (m, emptied)
        };
        // Dropped outside the lock.
        drop(member);
        if let Some(nd) = emptied.and_then(|mut g| g.joined.take()) {
            // Leaving fails only if the netdev lost its IP configuration, which ended the
            // membership with it.
            let _ = nd.leave_group(group);
        }
        Ok(())
    }

    /// The members of `gid`'s group, if it has any. Any context but hard interrupt.
    pub(crate) fn members(&self, gid: &[u8; 16]) -> Option<Members> {
        let gs = self.groups.lock();
        let g = gs.iter().flatten().find(|g| g.gid == *gid)?;
        Some(g.members.clone())
    }

    /// The netdev is going away (the caller holds the RTNL): its teardown ends the
    /// memberships; only the references go.
    pub(crate) fn forget_netdev(&self) {
        let mut gs = self.groups.lock();
        for g in gs.iter_mut().flatten() {
            // `dev_put`: does not sleep.
            drop(g.joined.take());
        }
    }

    /// Removes every group, leaving their IP addresses: the device is going away. Process
    /// context, RTNL not held.
    pub(crate) fn clear(&self) {
        let _order = self.changes.lock();
        for i in 0..MAX_GROUPS {
            let g = self.groups.lock()[i].take();
            let Some(mut g) = g else { continue };
            if let (Some(nd), Ok(group)) = (g.joined.take(), ip_group(&g.gid)) {
                let _ = nd.leave_group(group);
            }
        }
    }
}
