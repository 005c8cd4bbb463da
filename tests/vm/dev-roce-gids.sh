#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A RoCE device created inside a network namespace: node type CA, Ethernet link layer, node GUID
# = EUI-64 of the netdev's MAC, and a GID table with an "IB/RoCE v1" and a "RoCE v2" entry for
# every address of that netdev (link-local, IPv4-mapped, global IPv6), following address changes.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ns_pair
rdma_link_add -n "$NS_A" oxr0 oxroce "$NS_A_DEV"
sys=/sys/class/infiniband/oxr0

expect_eq "$(<$sys/node_type)" "1: CA" "node_type"
expect_eq "$(<$sys/hca_type)" "oxroce" "hca_type"
expect_eq "$(<$sys/ports/1/link_layer)" "Ethernet" "link_layer"

# Node GUID: the modified EUI-64 of the MAC (universal/local bit flipped, ff:fe in the middle).
mac=$(ip -n "$NS_A" -br link show dev "$NS_A_DEV" | awk '{print $3}')
IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
guid=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
expect_eq "$(<$sys/node_guid)" "$guid" "node_guid from MAC $mac"

# "<gid> <type>" for every valid entry of the table. One grep reads all 128 type files (an unused
# entry fails with EINVAL and is skipped): forks are slow under TCG.
gids() {
	local i t g
	{ (cd "$sys/ports/1/gid_attrs/types" && grep -H . -- * 2>/dev/null) || true; } | while IFS=: read -r i t; do
		read -r g <"$sys/ports/1/gids/$i"
		echo "$g $t"
	done
}
# The 128-bit GID of an address, as sysfs prints it.
v4gid() { printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ }; }
v6gid() { python3 -c 'import ipaddress,sys; h=ipaddress.ip_address(sys.argv[1]).exploded.replace(":",""); print(":".join(h[i:i+4] for i in range(0,32,4)))' "$1"; }
lladdr=$(ip -n "$NS_A" -6 -br addr show dev "$NS_A_DEV" scope link | awk '{print $3}')
lladdr=${lladdr%/*}

has_both() {
	local g=$1 table
	table=$(gids)
	grep -qx "$g IB/RoCE v1" <<<"$table" && grep -qx "$g RoCE v2" <<<"$table"
}
has_none() { ! gids | grep -q "^$1 "; }

for a in "$(v4gid "$NS_A_IP4")" "$(v6gid "$NS_A_IP6")" "$(v6gid "$lladdr")"; do
	wait_until 5 has_both "$a" || { _ox_show gids "$(gids)"; fail "GID $a: want a RoCE v1 and a v2 entry"; }
done
n=$(gids | wc -l)
expect_eq "$n" 6 "number of GID entries (3 addresses x 2 types)"
info "GID table: $(gids | tr '\n' ';')"

# Addresses come and go: so do their GIDs.
expect_ok ip -n "$NS_A" addr add 10.77.9.9/24 dev "$NS_A_DEV"
wait_until 5 has_both "$(v4gid 10.77.9.9)" || fail "GIDs for an added address did not appear"
expect_ok ip -n "$NS_A" addr del 10.77.9.9/24 dev "$NS_A_DEV"
wait_until 5 has_none "$(v4gid 10.77.9.9)" || fail "GIDs for a removed address did not go away"

# The device is not tied to the namespace's other devices: oxb's addresses are not in it.
has_none "$(v4gid "$NS_B_IP4")" || fail "GID table holds the peer namespace's address"
pass
