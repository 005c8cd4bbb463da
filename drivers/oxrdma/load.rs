// SPDX-License-Identifier: GPL-2.0
//! Loading and unloading the module: what exists once per module (the link types, the
//! namespaces' RoCE receive sockets, the workqueues), made in order and taken down in reverse.

use kernel::prelude::*;

/// The module's state between `init` and unload.
pub(crate) struct OxRdma {
    links: Option<crate::link::Links>,
    tunnels: Option<crate::ox::udp_tunnel::TunnelRegistration>,
    wq: Option<crate::ox::workqueue::ModuleWorkqueue>,
}

impl kernel::Module for OxRdma {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Before any device: RoCE v2 receive sockets need the per-namespace exit hook.
        let wq = crate::ox::workqueue::ModuleWorkqueue::create(
            kernel::c_str!("oxrdma"),
            kernel::c_str!("oxrdma_tx"),
        )?;
        let tunnels = crate::ox::udp_tunnel::TunnelRegistration::register()?;
        let links = crate::link::Links::register()?;
        pr_info!(
            "oxrdma {} loaded (uAPI version {})\n",
            crate::uapi::abi::OXRDMA_VERSION,
            crate::uapi::abi::OXRDMA_ABI_VERSION
        );
        Ok(OxRdma {
            links: Some(links),
            tunnels: Some(tunnels),
            wq: Some(wq),
        })
    }
}

impl Drop for OxRdma {
    fn drop(&mut self) {
        // First stop new devices and netdev events, then remove this module's devices.
        drop(self.links.take());
        crate::link::remove_all();
        // Closes whatever tunnel is still open; then the workqueue drains what is queued.
        drop(self.tunnels.take());
        drop(self.wq.take());
        pr_info!("oxrdma unloaded\n");
    }
}
