#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# An iWARP device, created inside a network namespace: node type RNIC, Ethernet link layer,
# hca_type oxiwarp, one GID holding the netdev's MAC; its port follows the netdev's state.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ns_pair
rdma_link_add -n "$NS_A" oxi0 oxiwarp "$NS_A_DEV"
sys=/sys/class/infiniband/oxi0
expect_eq "$(<$sys/node_type)" "4: RNIC" "node_type"
expect_eq "$(<$sys/hca_type)" "oxiwarp" "hca_type"
expect_eq "$(<$sys/ports/1/link_layer)" "Ethernet" "link_layer"
mac=$(ip -n "$NS_A" -br link show dev "$NS_A_DEV" | awk '{print $3}')
want=$(echo "${mac//:/}00000000000000000000" | sed -E 's/(....)/\1:/g; s/:$//')
expect_eq "$(<$sys/ports/1/gids/0)" "$want" "GID 0 (the MAC)"

state() { cat $sys/ports/1/state; }
is_state() { [[ $(state) == *"$1"* ]]; }
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" down
wait_until 5 is_state DOWN || fail "port not DOWN after the peer went down (carrier loss): $(state)"
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" up
wait_until 5 is_state ACTIVE || fail "port not ACTIVE after the peer came back: $(state)"
expect_ok ip -n "$NS_A" link set "$NS_A_DEV" down
wait_until 5 is_state DOWN || fail "port not DOWN with its netdev admin down: $(state)"
expect_ok ip -n "$NS_A" link set "$NS_A_DEV" up
wait_until 5 is_state ACTIVE || fail "port not ACTIVE after admin up: $(state)"
pass
