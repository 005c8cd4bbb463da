# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Source this file (`. userspace-provider/env.sh`) to make libibverbs use the uninstalled
# provider in userspace-provider/out/ (build it first with userspace-provider/build.sh).
#
# libibverbs (rdma-core 44, dynamic_driver.c load_driver) treats an RDMAV_DRIVERS entry that
# starts with '/' as a path and dlopens "<entry>-rdmav34.so"; RDMAV_DRIVERS providers are
# loaded before those named in /etc/libibverbs.d, so they get the first look at each device.
# The config directory itself (/etc/libibverbs.d) is compiled in and cannot be redirected.
# RDMAV_DRIVERS is ignored in setuid programs. libibverbs loads providers only when it finds
# a device no loaded provider claims; with no RDMA device at all, nothing is loaded.

OXRDMA_PROVIDER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/out
OXRDMA_PROVIDER_SO=$OXRDMA_PROVIDER_DIR/liboxrdma-rdmav34.so
export OXRDMA_PROVIDER_DIR OXRDMA_PROVIDER_SO

case ":${RDMAV_DRIVERS:-}:" in
*":$OXRDMA_PROVIDER_DIR/liboxrdma:"*) ;;
*) export RDMAV_DRIVERS="$OXRDMA_PROVIDER_DIR/liboxrdma${RDMAV_DRIVERS:+:$RDMAV_DRIVERS}" ;;
esac

[ -f "$OXRDMA_PROVIDER_SO" ] ||
	echo "env.sh: warning: $OXRDMA_PROVIDER_SO not built (run userspace-provider/build.sh)" >&2
true
