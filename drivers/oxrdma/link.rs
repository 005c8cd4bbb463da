// SPDX-License-Identifier: GPL-2.0
//! The two link types: `rdma link add NAME type oxroce|oxiwarp netdev DEV`.

use crate::ox::error::code;
use crate::ox::net::NetDeviceRef;
use crate::ox::rdma::link::{LinkRegistration, LinkType};
use kernel::{c_str, prelude::*, str::CStr};

/// RoCE (v1 and v2) over an Ethernet netdev.
pub(crate) struct RoceLink;

/// iWARP over kernel TCP on a netdev.
pub(crate) struct IwarpLink;

impl LinkType for RoceLink {
    const TYPE: &'static CStr = c_str!("oxroce");

    fn newlink(ibdev_name: &CStr, ndev: &NetDeviceRef<'_>) -> Result {
        pr_info!(
            "{}: RoCE device on {} is not available yet\n",
            ibdev_name,
            ndev.name()
        );
        Err(code::eopnotsupp())
    }
}

impl LinkType for IwarpLink {
    const TYPE: &'static CStr = c_str!("oxiwarp");

    fn newlink(ibdev_name: &CStr, ndev: &NetDeviceRef<'_>) -> Result {
        pr_info!(
            "{}: iWARP device on {} is not available yet\n",
            ibdev_name,
            ndev.name()
        );
        Err(code::eopnotsupp())
    }
}

/// Both link types, registered for the lifetime of the module.
pub(crate) struct Links {
    _roce: LinkRegistration<RoceLink>,
    _iwarp: LinkRegistration<IwarpLink>,
}

impl Links {
    pub(crate) fn register() -> Result<Self> {
        Ok(Self {
            _roce: LinkRegistration::register()?,
            _iwarp: LinkRegistration::register()?,
        })
    }
}
