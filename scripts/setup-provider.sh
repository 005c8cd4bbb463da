#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Prepare what the userspace provider's build (userspace-provider/build.rs) needs beyond a
# plain Rust toolchain: Debian packages, and rdma-core's *private* libibverbs headers
# (libibverbs/driver.h and friends), which Debian's libibverbs-dev does not install and whose
# source package cannot be fetched (`apt-get source rdma-core` fails, the orig tarball is missing).
#
# The headers come from the crates.io package ibverbs-sys 0.3.2+55.0, which vendors rdma-core
# v55.0 (same private ABI, IBVERBS_PRIVATE_34, as Debian 12's libibverbs 44.0). The .crate is
# downloaded with cargo itself (a throw-away manifest + `cargo fetch`), checked against a pinned
# SHA-256, and only header directories are extracted; ibverbs-sys is never compiled. Result:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/oxrdma/rdma-core-headers/
#     include/infiniband/   libibverbs public + internal headers (verbs.h, driver.h, kern-abi.h,
#                           cmd_ioctl.h, ...) and ib_user_ioctl_verbs.h, as rdma-core's build
#                           publishes them
#     include/rdma/         rdma-core's copy of the kernel uAPI headers (kernel-headers/rdma)
#     include/linux/        kernel-headers/linux/stddef.h (as rdma-core publishes it)
#     include/ccan/         ccan headers (list.h, container_of.h, ...)
#     include/util/         util/compiler.h (included by cmd_ioctl.h)
#     include/kernel-abi/   GENERATED: ib_user_verbs.h run through rdma-core's own
#                           buildlib/make_abi_structs.py (the _STRUCT_* macros kern-abi.h uses)
#     include/config.h      GENERATED STUB: the few macros the headers read, with the values of
#                           Debian's rdma-core 44 build (see below)
#     COPYING.*             rdma-core's licence files
#
# build.rs looks there (or in $OXRDMA_RDMA_CORE_INCLUDE, pointing at an `include` directory).
# Idempotent: does nothing, silently, when the cache is complete for this version of the script.
# Nothing of rdma-core is written into the source tree.
set -euo pipefail

CRATE=ibverbs-sys
CRATE_VERSION=0.3.2+55.0
CRATE_SHA256=8149ab8d940ea7e7073a24ba6e3ec6b0cc8ceab6ea3d562d60a21ca5cc23413a
DEST=${XDG_CACHE_HOME:-$HOME/.cache}/oxrdma/rdma-core-headers
# The cache is valid for this exact script: any change to it regenerates the headers.
STAMP="$CRATE $CRATE_VERSION $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"

die() { echo "setup-provider: $*" >&2; exit 1; }

# --- Debian packages the provider build links and generates against ---------------------------
# libibverbs-dev: libibverbs.so to link and the installed (v44) verbs.h the ABI test compares
# with; libclang-dev: bindgen; python3: make_abi_structs.py.
. "$(dirname "${BASH_SOURCE[0]}")/lib/env.sh"
ensure_debs libibverbs-dev libclang-dev python3 ibverbs-utils || die "installing Debian packages failed"

if [ -f "$DEST/.stamp" ] && [ "$(cat "$DEST/.stamp")" = "$STAMP" ]; then
	exit 0
fi

command -v cargo >/dev/null || die "cargo not found in PATH"
command -v python3 >/dev/null || die "python3 not found in PATH"

# --- the .crate, from cargo's cache or crates.io ---------------------------------------------
CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
find_crate() {
	compgen -G "$CARGO_HOME/registry/cache/*/$CRATE-$CRATE_VERSION.crate" | head -1 || true
}
crate_file=$(find_crate)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$crate_file" ]; then
	echo "setup-provider: downloading $CRATE $CRATE_VERSION (rdma-core v55 headers) from crates.io"
	mkdir -p "$tmp/fetch/src"
	: >"$tmp/fetch/src/lib.rs"
	cat >"$tmp/fetch/Cargo.toml" <<-EOF
		[package]
		name = "oxrdma-fetch-rdma-core-headers"
		version = "0.0.0"
		edition = "2021"
		[dependencies]
		$CRATE = "=$CRATE_VERSION"
		[workspace]
	EOF
	host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
	cargo fetch --quiet ${host:+--target "$host"} --manifest-path "$tmp/fetch/Cargo.toml" ||
		die "cargo fetch of $CRATE $CRATE_VERSION failed"
	crate_file=$(find_crate)
	[ -n "$crate_file" ] || die "$CRATE-$CRATE_VERSION.crate not in $CARGO_HOME/registry/cache after cargo fetch"
fi
echo "$CRATE_SHA256  $crate_file" | sha256sum --check --quiet - ||
	die "$crate_file: SHA-256 mismatch (expected $CRATE_SHA256)"

# --- extract only what the headers need ------------------------------------------------------
top="$CRATE-$CRATE_VERSION/vendor/rdma-core"
tar -xzf "$crate_file" -C "$tmp" \
	--wildcards "$top/libibverbs/*.h" "$top/kernel-headers/rdma/*.h" \
	"$top/kernel-headers/linux/stddef.h" "$top/ccan/*.h" "$top/util/compiler.h" \
	"$top/buildlib/make_abi_structs.py" "$top/COPYING.*" ||
	die "extracting headers from $crate_file failed"
src="$tmp/$top"
out="$tmp/out"
inc="$out/include"
mkdir -p "$inc/infiniband" "$inc/rdma" "$inc/linux" "$inc/ccan" "$inc/util" "$inc/kernel-abi"

# Mirror rdma-core's build/include layout (libibverbs/CMakeLists.txt publish_headers and
# publish_internal_headers, kernel-headers/CMakeLists.txt, ccan/CMakeLists.txt).
for h in arch.h opcode.h sa-kern-abi.h sa.h verbs.h verbs_api.h tm_types.h \
	cmd_ioctl.h cmd_write.h driver.h kern-abi.h marshall.h; do
	cp "$src/libibverbs/$h" "$inc/infiniband/"
done
cp "$src/kernel-headers/rdma/ib_user_ioctl_verbs.h" "$inc/infiniband/"
cp "$src"/kernel-headers/rdma/*.h "$inc/rdma/"
cp "$src/kernel-headers/linux/stddef.h" "$inc/linux/"
cp "$src"/ccan/*.h "$inc/ccan/"
cp "$src/util/compiler.h" "$inc/util/"
cp "$src"/COPYING.* "$out/"

# kern-abi.h includes <kernel-abi/ib_user_verbs.h>: rdma-core generates it at build time from
# the kernel header with buildlib/make_abi_structs.py (kernel-headers/CMakeLists.txt,
# rdma_kernel_provider_abi). Run that same script.
python3 "$src/buildlib/make_abi_structs.py" "$src/kernel-headers/rdma/ib_user_verbs.h" \
	"$inc/kernel-abi/ib_user_verbs.h" || die "make_abi_structs.py failed"

# config.h is generated by rdma-core's cmake from buildlib/config.h.in. Only a handful of its
# macros are read by the headers above (ccan's HAVE_*, cmd_ioctl.h/cmd_write.h's
# VERBS_*_ONLY, driver.h's IBVERBS_PABI_VERSION); the values are those of Debian 12's rdma-core
# 44.0 build (64-bit, both ioctl and write command modes, PABI 34, /etc/libibverbs.d).
cat >"$inc/config.h" <<'EOF'
/* Minimal stand-in for rdma-core's generated config.h (buildlib/config.h.in), written by
 * oxrdma's scripts/setup-provider.sh. Values follow Debian 12's rdma-core 44.0 build. */
#ifndef CONFIG_H_IN
#define CONFIG_H_IN

#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_ISBLANK 1
#define HAVE_BUILTIN_CLZ 1
#define HAVE_BUILTIN_CLZL 1

#define PACKAGE_VERSION "44.0"
#define STREAM_CLOEXEC "e"
#define RDMA_CDEV_DIR "/dev/infiniband"
#define IBV_CONFIG_DIR "/etc/libibverbs.d"
#define VERBS_PROVIDER_DIR "/usr/lib/x86_64-linux-gnu/libibverbs"
#define VERBS_PROVIDER_SUFFIX "-rdmav34.so"
#define IBVERBS_PABI_VERSION 34

#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define HAVE_FUNC_ATTRIBUTE_IFUNC 1
#define HAVE_FUNC_ATTRIBUTE_SYMVER 1
#define HAVE_WORKING_IF_H 1
#define HAVE_FULL_SYMBOL_VERSIONS 1

#define SIZEOF_LONG 8

/* IOCTL_MODE "both" */
#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0

#endif
EOF

echo "$STAMP" >"$out/.stamp"
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.new"
mv "$out" "$DEST.new"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
echo "setup-provider: rdma-core v55 headers ready in $DEST"
