// SPDX-License-Identifier: GPL-2.0
//! Device matching and the provider's per-device structure.
//!
//! oxrdma devices have user-chosen names (`rdma link add <name> type oxroce|oxiwarp ...`), no
//! parent bus device (so no modalias) and, being out of tree, report
//! `driver_id = RDMA_DRIVER_UNKNOWN`. libibverbs' table matching (driver id, name pattern,
//! modalias) therefore cannot identify them; the provider decides in its `match_device`
//! callback instead: a device is oxrdma's iff its driver id is `RDMA_DRIVER_UNKNOWN` and the
//! `hca_type` attribute the module adds to the device's sysfs directory
//! (`/sys/class/infiniband/<name>/hca_type`) reads `oxroce` or `oxiwarp`. rxe and siw report
//! their own driver ids and have no `hca_type`; other drivers' `hca_type` holds a chip name.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use oxrdma_uapi::verbs::{OXRDMA_DEVICE_IWARP, OXRDMA_DEVICE_ROCE};

use crate::sys;

/// Name of the sysfs attribute, in the ib device's directory, that marks an oxrdma device.
pub(crate) const HCA_TYPE_ATTR: &str = "hca_type";

/// `RDMA_DRIVER_UNKNOWN`, the driver id every out-of-tree driver reports.
pub(crate) const DRIVER_ID_UNKNOWN: u32 = sys::rdma_driver_id_RDMA_DRIVER_UNKNOWN;

/// What kind of oxrdma device this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum DeviceKind {
    /// RoCE (v1 and v2) over an Ethernet netdev: `hca_type` "oxroce".
    Roce = OXRDMA_DEVICE_ROCE,
    /// iWARP over kernel TCP: `hca_type` "oxiwarp".
    Iwarp = OXRDMA_DEVICE_IWARP,
}

impl DeviceKind {
    /// The `hca_type` attribute's value for this kind (without the newline).
    pub(crate) const fn hca_type(self) -> &'static str {
        match self {
            DeviceKind::Roce => "oxroce",
            DeviceKind::Iwarp => "oxiwarp",
        }
    }

    /// The kind named by the contents of an `hca_type` file: exactly `oxroce` or `oxiwarp`,
    /// optionally followed by trailing whitespace (sysfs adds a newline). Anything else,
    /// including other drivers' chip names and prefixes like `oxroce2`, is not oxrdma.
    pub(crate) fn from_hca_type(contents: &[u8]) -> Option<Self> {
        match contents.trim_ascii_end() {
            b"oxroce" => Some(DeviceKind::Roce),
            b"oxiwarp" => Some(DeviceKind::Iwarp),
            _ => None,
        }
    }

    /// The kind a kernel response's `device_kind` field names.
    pub(crate) fn from_uapi(kind: u32) -> Option<Self> {
        match kind {
            OXRDMA_DEVICE_ROCE => Some(DeviceKind::Roce),
            OXRDMA_DEVICE_IWARP => Some(DeviceKind::Iwarp),
            _ => None,
        }
    }
}

/// The match decision from what libibverbs knows about a device (its driver id, from netlink,
/// or `RDMA_DRIVER_UNKNOWN` when libibverbs fell back to sysfs) and the contents of its
/// `hca_type` file (`None`: no such file or unreadable).
pub(crate) fn classify(driver_id: u32, hca_type: Option<&[u8]>) -> Option<DeviceKind> {
    if driver_id != DRIVER_ID_UNKNOWN {
        return None;
    }
    DeviceKind::from_hca_type(hca_type?)
}

/// Reads the start of `<ibdev_path>/hca_type`; `None` if it does not exist or cannot be read.
fn read_hca_type(ibdev_path: &Path) -> Option<Vec<u8>> {
    // sysfs attributes are at most a page; ours is a word. Read little, so a foreign driver's
    // large attribute cannot cost much.
    let mut buf = Vec::with_capacity(64);
    File::open(ibdev_path.join(HCA_TYPE_ATTR))
        .ok()?
        .take(64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

/// The match decision for the device whose sysfs directory is `ibdev_path` (libibverbs'
/// `verbs_sysfs_dev::ibdev_path`, which honours `SYSFS_PATH`).
pub(crate) fn match_sysfs_device(driver_id: u32, ibdev_path: &Path) -> Option<DeviceKind> {
    if driver_id != DRIVER_ID_UNKNOWN {
        // Not ours, whatever the file says; and no I/O for other drivers' devices.
        return None;
    }
    classify(driver_id, read_hca_type(ibdev_path).as_deref())
}

/// The provider's device: libibverbs' `verbs_device` (which must come first: libibverbs and
/// the entry points convert between `*mut ibv_device`, `*mut verbs_device` and `*mut OxDevice`
/// by address) and what matching learned.
#[repr(C)]
pub(crate) struct OxDevice {
    /// libibverbs' part; filled by libibverbs after `alloc_device` returns.
    pub(crate) vdev: sys::verbs_device,
    /// RoCE or iWARP, from `hca_type`.
    pub(crate) kind: DeviceKind,
    /// The driver id libibverbs reported (`RDMA_DRIVER_UNKNOWN`), passed back to it when a
    /// context is created.
    pub(crate) driver_id: u32,
}

impl OxDevice {
    /// A new device for libibverbs to fill in.
    pub(crate) fn new(kind: DeviceKind, driver_id: u32) -> Box<Self> {
        Box::new(OxDevice {
            vdev: sys::verbs_device::default(),
            kind,
            driver_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const RXE: u32 = sys::rdma_driver_id_RDMA_DRIVER_RXE;
    const SIW: u32 = sys::rdma_driver_id_RDMA_DRIVER_SIW;

    #[test]
    fn hca_type_values() {
        assert_eq!(
            DeviceKind::from_hca_type(b"oxroce\n"),
            Some(DeviceKind::Roce)
        );
        assert_eq!(
            DeviceKind::from_hca_type(b"oxiwarp\n"),
            Some(DeviceKind::Iwarp)
        );
        assert_eq!(DeviceKind::from_hca_type(b"oxroce"), Some(DeviceKind::Roce));
        assert_eq!(
            DeviceKind::from_hca_type(b"oxiwarp \n"),
            Some(DeviceKind::Iwarp)
        );
        for other in [
            &b""[..],
            b"\n",
            b"oxroce2\n",
            b"oxro\n",
            b" oxroce\n",
            b"OXROCE\n",
            b"oxroce\0",
            b"MT4099\n",
            b"rxe\n",
            b"siw\n",
        ] {
            assert_eq!(DeviceKind::from_hca_type(other), None, "{other:?}");
        }
        for kind in [DeviceKind::Roce, DeviceKind::Iwarp] {
            assert_eq!(
                DeviceKind::from_hca_type(kind.hca_type().as_bytes()),
                Some(kind)
            );
        }
    }

    #[test]
    fn only_unknown_driver_id_matches() {
        assert_eq!(
            classify(DRIVER_ID_UNKNOWN, Some(b"oxroce\n")),
            Some(DeviceKind::Roce)
        );
        assert_eq!(
            classify(DRIVER_ID_UNKNOWN, Some(b"oxiwarp\n")),
            Some(DeviceKind::Iwarp)
        );
        // rxe and siw devices are never claimed, even with a (hypothetical) oxrdma hca_type.
        assert_eq!(classify(RXE, Some(b"oxroce\n")), None);
        assert_eq!(classify(SIW, Some(b"oxiwarp\n")), None);
        assert_eq!(classify(RXE, None), None);
        // An unknown-driver device without the attribute is someone else's.
        assert_eq!(classify(DRIVER_ID_UNKNOWN, None), None);
        assert_eq!(classify(DRIVER_ID_UNKNOWN, Some(b"MT4115\n")), None);
    }

    #[test]
    fn uapi_kinds_round_trip() {
        for kind in [DeviceKind::Roce, DeviceKind::Iwarp] {
            assert_eq!(DeviceKind::from_uapi(kind as u32), Some(kind));
        }
        assert_eq!(DeviceKind::from_uapi(0), None);
        assert_eq!(DeviceKind::from_uapi(3), None);
    }

    #[test]
    fn reads_the_sysfs_attribute() {
        let dir = std::env::temp_dir().join(format!("oxrdma-match-{}", std::process::id()));
        let ox = dir.join("oxr0");
        let plain = dir.join("mlx0");
        fs::create_dir_all(&ox).unwrap();
        fs::create_dir_all(&plain).unwrap();
        fs::write(ox.join(HCA_TYPE_ATTR), "oxiwarp\n").unwrap();
        fs::write(plain.join(HCA_TYPE_ATTR), "MT4099\n").unwrap();

        assert_eq!(
            match_sysfs_device(DRIVER_ID_UNKNOWN, &ox),
            Some(DeviceKind::Iwarp)
        );
        assert_eq!(match_sysfs_device(RXE, &ox), None);
        assert_eq!(match_sysfs_device(DRIVER_ID_UNKNOWN, &plain), None);
        assert_eq!(
            match_sysfs_device(DRIVER_ID_UNKNOWN, &dir.join("absent")),
            None
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
