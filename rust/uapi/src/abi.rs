// SPDX-License-Identifier: GPL-2.0
//! ABI identity: version numbers the kernel and the provider check against each other.

/// Version of the user/kernel ABI. The kernel reports it to the provider in the
/// `ucontext` allocation response; a provider refuses a kernel with another version.
/// Bump it on any incompatible change to a structure in this crate.
pub const OXRDMA_ABI_VERSION: u32 = 1;

/// The driver's version string, logged at module load and shown by `modinfo`.
pub const OXRDMA_VERSION: &str = "0.1.0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_is_the_package_version() {
        // The module logs OXRDMA_VERSION; it must not drift from the crate's own version.
        assert_eq!(OXRDMA_VERSION, env!("CARGO_PKG_VERSION"));
    }
}
