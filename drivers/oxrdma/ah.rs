// SPDX-License-Identifier: GPL-2.0
//! Address handles: where a UD or GSI QP's datagram goes.
//!
//! An AH is a number in its device's table (what a process's UD send WQE names, see
//! `rust/uapi`) for a path and the PD it belongs to. A send looks the number up when it takes
//! the WQE and uses the AH only if it is live and of the QP's PD: a process can name only its
//! own AHs, and a destroyed AH's number no longer matches (the table slot's tag changes).

use crate::dev::RoceDev;
use crate::ox::rdma::verbs::Path;
use kernel::sync::Arc;

/// An address handle as the device's table holds it.
pub(crate) struct AhInner {
    /// Its number: table index and tag.
    pub(crate) num: u32,
    /// The PD it was created in.
    pub(crate) pdn: u32,
    /// The destination.
    pub(crate) path: Path,
}

/// The driver data of an AH object: it leaves the device's table when dropped.
pub(crate) struct Ah {
    pub(crate) inner: Arc<AhInner>,
    dev: Arc<RoceDev>,
}

impl Ah {
    pub(crate) fn new(inner: Arc<AhInner>, dev: Arc<RoceDev>) -> Self {
        Self { inner, dev }
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        self.dev.remove_ah(self.inner.num);
    }
}
