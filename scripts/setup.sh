#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install what oxrdma's build and tests need on Debian 12. Idempotent and quiet when
# everything is already present. Called by the Makefile; safe to run by hand.
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"

PKGS=(
	# kernel source and build
	linux-source-6.12 xz-utils make flex bison bc libelf-dev libssl-dev cpio kmod
	clang lld llvm libclang-dev
	# Rust for the kernel (Debian's toolchain ships rust-src; rustup's does not)
	rustc-web rust-web-src rust-web-clippy rustfmt-web cargo-web
	# test VM
	qemu-system-x86
	# RDMA userland and network tools used by the tests
	rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils libibverbs-dev librdmacm-dev
	python3-pyverbs iproute2 iputils-ping tcpdump tshark iperf3 ethtool sockperf nvme-cli fio
)

ensure_debs "${PKGS[@]}"

# bindgen: 6.12 needs >= 0.65.1, Debian has 0.60. Installed into the cache, not the user's PATH.
if ! [ -x "$OX_TOOLS/bin/bindgen" ]; then
	echo "setup: installing bindgen-cli $BINDGEN_VERSION into $OX_TOOLS"
	cargo install --quiet --locked --root "$OX_TOOLS" bindgen-cli --version "$BINDGEN_VERSION"
fi

# rdma-core's private provider headers (not packaged by Debian) for userspace-provider/.
"$(dirname "$0")/setup-provider.sh"
