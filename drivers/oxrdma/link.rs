// SPDX-License-Identifier: GPL-2.0
//! The two link types, `rdma link add NAME type oxroce|oxiwarp netdev DEV`, the registry of
//! the devices they create, and what happens to those devices on netdev events and unload.

use crate::device::{NodeKind, OxDevice};
use crate::ox::net::{NetDevice, NetdevEvent, NetdevHandler, NetdevNotifier};
use crate::ox::packet_type::EtherTypeHandler;
use crate::ox::rdma::attrs::NodeType;
use crate::ox::rdma::device::{Device, DeviceHandle, NewDevice};
use crate::ox::rdma::link::{LinkRegistration, LinkType};
use crate::ox::sync::GlobalMutex;
use crate::rx::RoceRx;
use crate::wire::grh::ETH_P_IBOE;
use crate::wire::link::node_guid_from_mac;
use kernel::{
    alloc::flags::GFP_KERNEL, alloc::KVec, c_str, prelude::*, str::CStr, sync::Arc, types::ARef,
};

/// `ARPHRD_ETHER` and `ARPHRD_LOOPBACK` (`include/uapi/linux/if_arp.h`).
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;

/// A device this module created. `handle` is `None` while its registration is under way;
/// `netdev` is `None` once the netdev is being unregistered (the device goes too).
struct Entry {
    netdev: Option<ARef<NetDevice>>,
    kind: NodeKind,
    handle: Option<ARef<DeviceHandle<OxDevice>>>,
}

impl Entry {
    fn on(&self, ndev: &NetDevice) -> bool {
        self.netdev.as_deref() == Some(ndev)
    }
}

/// How many devices the module manages at once (documented in the admin guide).
pub(crate) const MAX_DEVICES: usize = 64;

/// Every device of this module, so that link creation can refuse duplicates, netdev events
/// reach the right devices, and unload removes exactly this module's devices.
struct Registry {
    slots: [Option<Entry>; MAX_DEVICES],
}

impl Registry {
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().flatten()
    }

    /// Removes and returns the entry `pred` picks first.
    fn take(&mut self, pred: impl Fn(&Entry) -> bool) -> Option<Entry> {
        self.slots
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(&pred))
            .and_then(Option::take)
    }
}

static DEVICES: GlobalMutex<Registry> = GlobalMutex::new(
    Registry {
        slots: [const { None }; MAX_DEVICES],
    },
    c_str!("oxrdma_devices"),
);

/// The `hca_type` of a device (which the userspace provider matches).
pub(crate) fn hca_type(kind: NodeKind) -> &'static CStr {
    match kind {
        NodeKind::Roce => c_str!("oxroce"),
        NodeKind::Iwarp => c_str!("oxiwarp"),
    }
}

/// Creates and registers a device of `kind` named `name` on `ndev`.
fn add(kind: NodeKind, name: &CStr, ndev: &NetDevice) -> Result {
    let suitable = match kind {
        NodeKind::Roce => ndev.link_type() == ARPHRD_ETHER,
        NodeKind::Iwarp => matches!(ndev.link_type(), ARPHRD_ETHER | ARPHRD_LOOPBACK),
    };
    if !suitable {
        pr_warn!(
            "{}: {} is not an Ethernet device (type {}); {} needs one\n",
            name,
            ndev.name(),
            ndev.link_type(),
            hca_type(kind)
        );
        return Err(EINVAL);
    }
    // Reserve the (netdev, kind) slot first, so a concurrent `rdma link add` cannot create a
    // twin; the registration itself runs without the lock (it takes the RTNL).
    {
        let mut devs = DEVICES.lock();
        if devs.entries().any(|e| e.on(ndev) && e.kind == kind) {
            pr_info!(
                "{}: {} already has an {} device\n",
                name,
                ndev.name(),
                hca_type(kind)
            );
            return Err(EEXIST);
        }
        let Some(free) = devs.slots.iter_mut().find(|s| s.is_none()) else {
            pr_warn!("{}: the module already has {} devices\n", name, MAX_DEVICES);
            return Err(ENOSPC);
        };
        *free = Some(Entry {
            netdev: Some(ndev.into()),
            kind,
            handle: None,
        });
    }
    let res = roce_rx()
        .ok_or(ENODEV)
        .and_then(|rx| OxDevice::new(kind, ndev.is_up(), ndev.into(), rx))
        .and_then(|data| {
            DeviceHandle::register(
                &crate::THIS_MODULE,
                NewDevice {
                    name,
                    node_type: match kind {
                        NodeKind::Roce => NodeType::Ca,
                        NodeKind::Iwarp => NodeType::Rnic,
                    },
                    netdev: ndev,
                    node_guid: node_guid_from_mac(ndev.mac()),
                },
                data,
            )
        });
    let mut devs = DEVICES.lock();
    let reserved = devs
        .slots
        .iter_mut()
        .flatten()
        .find(|e| e.on(ndev) && e.kind == kind && e.handle.is_none());
    match (res, reserved) {
        (Ok(handle), Some(entry)) => {
            entry.handle = Some(handle);
            drop(devs);
            pr_info!("{}: {} device on {}\n", name, hca_type(kind), ndev.name());
            Ok(())
        }
        (Ok(handle), None) => {
            // Cannot happen (only this function fills a reserved slot), but never leak.
            drop(devs);
            handle.unregister_queued();
            Err(ENODEV)
        }
        (Err(e), _) => {
            let entry = devs.take(|e| e.on(ndev) && e.kind == kind && e.handle.is_none());
            drop(devs);
            drop(entry);
            Err(e)
        }
    }
}

/// Removes `dev` from the registry; called when ib_core has unregistered it.
pub(crate) fn forget(dev: &Device<OxDevice>) {
    let entry = DEVICES
        .lock()
        .take(|e| e.handle.as_ref().is_some_and(|h| h.is(dev)));
    // Dropping the handle (outside the lock) releases a `struct device` reference; ib_core
    // holds its own until it has finished with the device.
    drop(entry);
}

/// RoCE (v1 and v2) over an Ethernet netdev.
pub(crate) struct RoceLink;

/// iWARP over kernel TCP on a netdev.
pub(crate) struct IwarpLink;

impl LinkType for RoceLink {
    const TYPE: &'static CStr = c_str!("oxroce");

    fn newlink(ibdev_name: &CStr, ndev: &NetDevice) -> Result {
        add(NodeKind::Roce, ibdev_name, ndev)
    }
}

impl LinkType for IwarpLink {
    const TYPE: &'static CStr = c_str!("oxiwarp");

    fn newlink(ibdev_name: &CStr, ndev: &NetDevice) -> Result {
        add(NodeKind::Iwarp, ibdev_name, ndev)
    }
}

/// Follows the netdevs under this module's devices.
struct NetdevWatch;

impl NetdevHandler for NetdevWatch {
    fn event(event: NetdevEvent, ndev: &NetDevice) {
        let mut devs = DEVICES.lock();
        let mut released = KVec::new();
        for e in devs.slots.iter_mut().flatten().filter(|e| e.on(ndev)) {
            if event == NetdevEvent::Unregister {
                // The netdev is going away: drop the registry's reference now (its
                // unregistration waits for every reference).
                if let Some(nd) = e.netdev.take() {
                    let _ = released.push(nd, GFP_KERNEL);
                }
            }
            let Some(h) = e.handle.as_ref() else { continue };
            match event {
                NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                    if let Some(d) = h.registered() {
                        OxDevice::update_port_state(&d);
                    }
                }
                // ... and so do its RDMA devices. Queued, because this runs under the RTNL
                // and unregistration takes it.
                NetdevEvent::Unregister => {
                    if let Some(d) = h.registered() {
                        d.detach_netdev();
                    }
                    h.unregister_queued()
                }
                _ => {}
            }
        }
        drop(devs);
        drop(released);
    }
}

/// The module's RoCE v2 receiver, while the module is loaded.
static RECEIVER: GlobalMutex<Option<Arc<RoceRx>>> =
    GlobalMutex::new(None, c_str!("oxrdma_receiver"));

/// The module's receiver, while it is loaded.
pub(crate) fn roce_rx() -> Option<Arc<RoceRx>> {
    RECEIVER.lock().as_ref().cloned()
}

/// Everything registered for the module's lifetime. Dropping it unregisters the link types
/// and the notifier first (no new devices, no new events), then every device.
pub(crate) struct Links {
    /// RoCE v1 frames to the receiver (unregistered first, before the devices go).
    _v1: Pin<KBox<EtherTypeHandler<RoceRx>>>,
    _roce: LinkRegistration<RoceLink>,
    _iwarp: LinkRegistration<IwarpLink>,
    _watch: NetdevNotifier<NetdevWatch>,
}

impl Links {
    pub(crate) fn register() -> Result<Self> {
        let rx = RoceRx::new(MAX_DEVICES)?;
        let v1 = KBox::pin_init(
            EtherTypeHandler::register(ETH_P_IBOE, rx.clone()),
            GFP_KERNEL,
        )?;
        *RECEIVER.lock() = Some(rx);
        let links = Self::register_links(v1);
        if links.is_err() {
            let r = RECEIVER.lock().take();
            drop(r);
        }
        links
    }

    fn register_links(v1: Pin<KBox<EtherTypeHandler<RoceRx>>>) -> Result<Self> {
        Ok(Self {
            _v1: v1,
            _watch: NetdevNotifier::register()?,
            _roce: LinkRegistration::register()?,
            _iwarp: LinkRegistration::register()?,
        })
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        let r = RECEIVER.lock().take();
        drop(r);
    }
}

/// Unregisters every device of this module and waits for it (module unload).
pub(crate) fn remove_all() {
    loop {
        // Take one handle at a time: unregistering calls back into `forget`, which locks.
        let next = DEVICES.lock().entries().find_map(|e| e.handle.clone());
        let Some(h) = next else { break };
        h.unregister();
        // `forget` removed the entry when ib_core unregistered the device, now or earlier;
        // make sure it is gone either way so that the loop ends.
        let stale = DEVICES
            .lock()
            .take(|e| e.handle.as_ref().is_some_and(|x| **x == *h));
        drop(stale);
    }
}
