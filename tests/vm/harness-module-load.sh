#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The harness's module plumbing: vm-run's module tree lets modprobe load oxrdma.ko, which logs
# its version and declares the rdma-link-oxroce/oxiwarp aliases; it unloads cleanly; and with it
# unloaded, `rdma link add ... type oxroce|oxiwarp` makes the kernel autoload it through them.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

loaded() { [ -d /sys/module/oxrdma ]; }
# shellcheck disable=SC2317  # called through wait_until
unloaded() { [ ! -d /sys/module/oxrdma ]; }

veth_root
if loaded; then
	expect_ok rmmod oxrdma
fi

expect_ok modprobe oxrdma
loaded || fail "/sys/module/oxrdma missing after modprobe oxrdma"
expect_ok modinfo oxrdma
expect_match "$EXPECT_OUT" '^alias:[[:space:]]+rdma-link-oxroce$' "modinfo oxrdma"
expect_match "$EXPECT_OUT" '^alias:[[:space:]]+rdma-link-oxiwarp$' "modinfo oxrdma"
expect_match "$(dmesg)" 'oxrdma 0\.1\.0 loaded' "dmesg"

# The first versions of the module registered the link types but refused to add a device
# (EOPNOTSUPP); later ones create it. Either way the command must come to a verdict (no hang, no
# crash), and a device it creates must go away again before the module unloads.
capture rdma link add oxr0 type oxroce netdev "$VETH_A"
info "rdma link add oxr0 type oxroce: exit status $EXPECT_RC${EXPECT_OUT:+: $EXPECT_OUT}"
if [ "$EXPECT_RC" = 0 ]; then
	[ -e /sys/class/infiniband/oxr0 ] || fail "rdma link add succeeded, but there is no device oxr0"
	link_del oxr0
elif ((EXPECT_RC == 124 || EXPECT_RC == 126 || EXPECT_RC == 127 || EXPECT_RC > 128)); then
	fail "rdma link add oxr0 type oxroce: exit status $EXPECT_RC: $EXPECT_OUT"
fi

expect_ok rmmod oxrdma
wait_until 5 unloaded || fail "/sys/module/oxrdma still exists after rmmod"
expect_match "$(dmesg)" 'oxrdma unloaded' "dmesg"

# Autoload: with the module unloaded, rdma link add asks for rdma-link-<type>. Only the module
# load is checked here, not the command's status.
for type in oxroce oxiwarp; do
	before=$(count_matches "$(dmesg)" 'oxrdma 0\.1\.0 loaded')
	capture rdma link add oxr0 type "$type" netdev "$VETH_A"
	info "rdma link add oxr0 type $type: exit status $EXPECT_RC${EXPECT_OUT:+: $EXPECT_OUT}"
	loaded || fail "rdma link add ... type $type did not autoload oxrdma"
	expect_eq "$(count_matches "$(dmesg)" 'oxrdma 0\.1\.0 loaded')" $((before + 1)) \
		"'oxrdma loaded' messages after autoload via $type"
	[ ! -e /sys/class/infiniband/oxr0 ] || link_del oxr0
	expect_ok rmmod oxrdma
	wait_until 5 unloaded || fail "/sys/module/oxrdma still exists after rmmod"
done

pass
