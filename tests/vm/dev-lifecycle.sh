#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# How devices end, and bad requests: a second link of one type on a netdev is EEXIST, a missing
# netdev ENODEV, a non-Ethernet netdev EINVAL for RoCE, a taken name fails; none of them leaves
# anything behind. Devices go with `rdma link delete`, with their netdev, with their network
# namespace, and with `rmmod oxrdma` while several exist; no warning or leak in the kernel log.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

veth_root
ndevs() { rdma dev show 2>/dev/null | grep -c ': ox' || true; }

rdma_link_add oxr0 oxroce "$VETH_A"
rdma_link_add oxi0 oxiwarp "$VETH_A"

expect_fail rdma link add oxr9 type oxroce netdev "$VETH_A"
expect_match "$EXPECT_OUT" 'File exists' "second oxroce link on $VETH_A"
expect_fail rdma link add oxi9 type oxiwarp netdev "$VETH_A"
expect_match "$EXPECT_OUT" 'File exists' "second oxiwarp link on $VETH_A"
expect_fail rdma link add oxr9 type oxroce netdev nosuchdev
expect_match "$EXPECT_OUT" 'No such device' "link on a missing netdev"
expect_fail rdma link add oxr9 type oxroce netdev lo
expect_match "$EXPECT_OUT" 'Invalid argument' "RoCE link on loopback"
expect_fail rdma link add oxr0 type oxroce netdev "$VETH_B"
expect_eq "$(ndevs)" 2 "devices after the refused requests"
[ ! -e /sys/class/infiniband/oxr9 ] || fail "a refused request left device oxr9"

# rdma link delete
link_del oxi0
expect_eq "$(ndevs)" 1 "devices after deleting oxi0"

# The netdev goes away: so does its device.
rdma_link_add oxr1 oxroce "$VETH_B"
expect_ok ip link add oxd0 type dummy
expect_ok ip link set oxd0 up
rdma_link_add oxr2 oxroce oxd0
expect_ok ip link del oxd0
wait_until 10 _ox_no_dev oxr2 || fail "oxr2 still exists after its netdev was deleted"
info "oxr2 went away with its netdev"

# The namespace goes away (and with it the veth end inside it): so does the device.
ns_pair
rdma_link_add -n "$NS_A" oxr3 oxroce "$NS_A_DEV"
expect_ok ip netns del "$NS_A"
wait_until 10 _ox_no_dev oxr3 || fail "oxr3 still exists after its namespace was deleted"
info "oxr3 went away with its namespace"

# rmmod with devices present removes them all.
expect_eq "$(ndevs)" 2 "devices before rmmod (oxr0, oxr1)"
expect_ok rmmod oxrdma
expect_eq "$(ndevs)" 0 "devices after rmmod"
[ ! -d /sys/module/oxrdma ] || fail "oxrdma still loaded after rmmod"
# The netdevs are still usable and free of references (deleting them does not hang).
expect_ok ip link del "$VETH_A"
expect_no_match "$(dmesg)" 'unregister_netdevice: waiting' "kernel log"
pass
