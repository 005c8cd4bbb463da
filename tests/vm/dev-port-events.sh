#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Port state and MTU as a verbs application sees them (through the userspace provider): a port
# going down and up delivers IBV_EVENT_PORT_ERR and IBV_EVENT_PORT_ACTIVE (ibv_asyncwatch), and
# ibv_devinfo's state and active_mtu follow the netdev (1500 -> 1024, 9000 -> 4096, 2200 -> 2048).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"
# shellcheck source=userspace-provider/env.sh
. "$OX_ROOT/userspace-provider/env.sh"

expect_ok modprobe ib_uverbs
veth_root
rdma_link_add oxr0 oxroce "$VETH_A"

devinfo() { ibv_devinfo -d oxr0 -i 1; }
expect_ok devinfo
expect_match "$EXPECT_OUT" 'state:[[:space:]]+PORT_ACTIVE' "ibv_devinfo"
expect_match "$EXPECT_OUT" 'active_mtu:[[:space:]]+1024' "ibv_devinfo at netdev MTU 1500"
expect_match "$EXPECT_OUT" 'link_layer:[[:space:]]+Ethernet' "ibv_devinfo"

mtu_is() { ibv_devinfo -d oxr0 -i 1 2>/dev/null | grep -Eq "active_mtu:[[:space:]]+$1 "; }
for m in "9000 4096" "2200 2048" "1500 1024"; do
	set -- $m
	expect_ok ip link set "$VETH_A" mtu "$1"
	wait_until 5 mtu_is "$2" || fail "active_mtu is not $2 at netdev MTU $1: $(devinfo | grep mtu)"
	info "netdev MTU $1: active_mtu $2"
done

# Async events: a watcher on the device, then the peer's carrier goes away and comes back.
ibv_asyncwatch -d oxr0 >"$OX_TMP/events" 2>&1 &
watcher=$!
at_exit sh -c "kill $watcher 2>/dev/null || true"
sleep 1
kill -0 "$watcher" 2>/dev/null || fail "ibv_asyncwatch exited: $(cat "$OX_TMP/events")"
expect_ok ip link set "$VETH_B" down
wait_until 15 grep -q PORT_ERR "$OX_TMP/events" || fail "no IBV_EVENT_PORT_ERR: $(cat "$OX_TMP/events")"
expect_ok devinfo
expect_match "$EXPECT_OUT" 'state:[[:space:]]+PORT_DOWN' "ibv_devinfo with the peer down"
expect_ok ip link set "$VETH_B" up
wait_until 15 grep -q PORT_ACTIVE "$OX_TMP/events" || fail "no IBV_EVENT_PORT_ACTIVE: $(cat "$OX_TMP/events")"
info "events: $(tr '\n' ';' <"$OX_TMP/events")"
expect_eq "$(grep -c PORT_ERR "$OX_TMP/events")" 1 "PORT_ERR events for one carrier loss"
pass
