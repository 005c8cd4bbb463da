// SPDX-License-Identifier: GPL-2.0
//! Generates the FFI bindings to libibverbs' private provider interface and links libibverbs.
//!
//! * `$OUT_DIR/sys.rs`: bindgen over `wrapper.h` (rdma-core v55's `infiniband/driver.h` and
//!   `infiniband/kern-abi.h`), from the headers `scripts/setup-provider.sh` puts in
//!   `${XDG_CACHE_HOME:-$HOME/.cache}/oxrdma/rdma-core-headers/include`, or from
//!   `$OXRDMA_RDMA_CORE_INCLUDE`.
//! * `$OUT_DIR/sys_installed.rs`: the public structures of the *installed* `infiniband/verbs.h`
//!   (Debian's libibverbs-dev, rdma-core 44): the unit tests compare their sizes with v55's, so
//!   a header/library mismatch is caught at `cargo test`, not in a user's process.

use std::env;
use std::path::PathBuf;

/// Private functions the provider may call: each is exported as `IBVERBS_PRIVATE_34` by
/// Debian 12's libibverbs.so.1 (rdma-core 44) with the signature v55's driver.h declares.
const ALLOWED_FUNCTIONS: &str = "verbs_register_driver_34|_verbs_init_and_alloc_context|\
verbs_uninit_context|verbs_set_ops|verbs_init_cq|__verbs_log|ibv_cmd_.*|ibv_query_gid_type|\
ibv_read_ibdev_sysfs_file|ibv_dontfork_range|ibv_dofork_range";

/// Declared by v55's driver.h but absent from rdma-core 44's libibverbs.so.1, or exported there
/// with another signature (`ibv_cmd_reg_dmabuf_mr` lost an argument in v55). Never bound.
const BLOCKED_FUNCTIONS: &str =
    "ibv_cmd_alloc_async_fd|ibv_cmd_create_cq_ex2|ibv_cmd_reg_dmabuf_mr|verbs_init_context";

/// Public structures whose size must agree between v55's and the installed verbs.h.
const COMPARED_TYPES: &str = "ibv_device|ibv_context|verbs_context|ibv_pd|ibv_device_attr|\
ibv_device_attr_ex|ibv_query_device_ex_input|ibv_port_attr|ibv_context_ops|ibv_cq|ibv_qp|\
ibv_srq|ibv_mr|ibv_wc|ibv_send_wr|ibv_recv_wr|ibv_sge|ibv_qp_init_attr|ibv_qp_attr|ibv_ah_attr|\
ibv_cq_ex|ibv_cq_init_attr_ex|ibv_poll_cq_attr|ibv_qp_ex|ibv_qp_init_attr_ex|ibv_data_buf";

fn include_dir() -> PathBuf {
    println!("cargo:rerun-if-env-changed=OXRDMA_RDMA_CORE_INCLUDE");
    println!("cargo:rerun-if-env-changed=XDG_CACHE_HOME");
    if let Some(dir) = env::var_os("OXRDMA_RDMA_CORE_INCLUDE") {
        return PathBuf::from(dir);
    }
    let cache = match env::var_os("XDG_CACHE_HOME") {
        Some(c) if !c.is_empty() => PathBuf::from(c),
        _ => PathBuf::from(env::var_os("HOME").unwrap_or_default()).join(".cache"),
    };
    cache.join("oxrdma/rdma-core-headers/include")
}

fn main() {
    let inc = include_dir();
    if !inc.join("infiniband/driver.h").is_file() || !inc.join("config.h").is_file() {
        panic!(
            "rdma-core private headers not found in {} \
             (run scripts/setup-provider.sh, or set OXRDMA_RDMA_CORE_INCLUDE)",
            inc.display()
        );
    }
    // The setup script rewrites .stamp whenever it regenerates the headers.
    println!("cargo:rerun-if-changed={}", inc.join("../.stamp").display());
    println!("cargo:rerun-if-changed=wrapper.h");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));

    bindgen::Builder::default()
        .header("wrapper.h")
        .clang_arg(format!("-I{}", inc.display()))
        .allowlist_function(ALLOWED_FUNCTIONS)
        .blocklist_function(BLOCKED_FUNCTIONS)
        // Command and response structures (kern-abi.h, rdma/ib_user_verbs.h), provider
        // structures (driver.h), verbs structures, and the constants the provider uses.
        .allowlist_type("verbs_.*|ibv_.*|ib_uverbs_.*|rdma_driver_id")
        .allowlist_var("VERBS_.*|RDMA_DRIVER_.*|IB_USER_VERBS_.*|IBV_SYSFS_.*")
        .derive_default(true)
        .generate_comments(false)
        .layout_tests(true)
        .wrap_unsafe_ops(true)
        .generate()
        .expect("bindgen over rdma-core's driver.h failed")
        .write_to_file(out.join("sys.rs"))
        .expect("writing sys.rs");

    bindgen::Builder::default()
        .header_contents("installed.h", "#include <infiniband/verbs.h>\n")
        .allowlist_type(COMPARED_TYPES)
        .allowlist_recursively(false)
        .opaque_type(".*")
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen over the installed <infiniband/verbs.h> (libibverbs-dev) failed")
        .write_to_file(out.join("sys_installed.rs"))
        .expect("writing sys_installed.rs");

    println!("cargo:rustc-link-lib=dylib=ibverbs");
    // The name libibverbs dlopens; and fail the link, not the dlopen, on a missing symbol.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liboxrdma-rdmav34.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-undefined");
}
