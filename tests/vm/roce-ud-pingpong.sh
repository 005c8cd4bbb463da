#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# UD over RoCE v2: ibv_ud_pingpong (address handles from userspace, datagrams up to the path
# MTU, the 40-byte network header in front of each received message) between two oxroce devices
# in two namespaces over IPv4 and IPv6 GIDs, and with rxe in both directions.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=500

oxroce_pair
for size in 1 1024; do
	info "oxroce <-> oxroce, IPv4, $size-byte datagrams"
	run_pair_ns --port 18515 120 \
		ibv_ud_pingpong -d oxb_r -g "$GID_B" -n "$iters" -s "$size" -c -- \
		ibv_ud_pingpong -d oxa_r -g "$GID_A" -n "$iters" -s "$size" -c "$NS_B_IP4"
	check_pingpong server "$PAIR_SERVER_OUT" "$iters"
	check_pingpong client "$PAIR_CLIENT_OUT" "$iters"
done
gid6_a=$(roce_gid_index oxa_r "fd77:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on oxa_r"
gid6_b=$(roce_gid_index oxb_r "fd77:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxb_r"
info "oxroce <-> oxroce, IPv6, 1000-byte datagrams"
run_pair_ns --port 18515 120 \
	ibv_ud_pingpong -d oxb_r -g "$gid6_b" -n "$iters" -s 1000 -c -- \
	ibv_ud_pingpong -d oxa_r -g "$gid6_a" -n "$iters" -s 1000 -c "$NS_B_IP4"
check_pingpong "IPv6 server" "$PAIR_SERVER_OUT" "$iters"
check_pingpong "IPv6 client" "$PAIR_CLIENT_OUT" "$iters"

# With rxe: rxe in the root namespace, oxroce in a namespace on the other end of a veth.
root_ns_pair
rxe_add rxe0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
g_rxe=$(roce_gid_index rxe0 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no IPv4 RoCE v2 GID on rxe0"
g_ox=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "no IPv4 RoCE v2 GID on oxn_r"
g6_rxe=$(roce_gid_index rxe0 "fd79:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on rxe0"
g6_ox=$(roce_gid_index oxn_r "fd79:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxn_r"

# pingpong SERVER-DEV SERVER-GID SERVER-NS CLIENT-DEV CLIENT-GID CLIENT-NS SIZE
pingpong() {
	local sdev=$1 sgid=$2 sns=$3 cdev=$4 cgid=$5 cns=$6 size=$7 sip
	sip=$([ -n "$sns" ] && echo "$RN_IP4" || echo "$RN_ROOT_IP4")
	info "ibv_ud_pingpong: server $sdev, client $cdev, $size bytes"
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ibv_ud_pingpong -d "$sdev" -g "$sgid" -n "$iters" -s "$size" -c -- \
		ibv_ud_pingpong -d "$cdev" -g "$cgid" -n "$iters" -s "$size" -c "$sip"
	check_pingpong "server $sdev" "$PAIR_SERVER_OUT" "$iters"
	check_pingpong "client $cdev" "$PAIR_CLIENT_OUT" "$iters"
}
pingpong oxn_r "$g_ox" "$RN_NS" rxe0 "$g_rxe" "" 1024
pingpong rxe0 "$g_rxe" "" oxn_r "$g_ox" "$RN_NS" 1024
pingpong oxn_r "$g6_ox" "$RN_NS" rxe0 "$g6_rxe" "" 500
pingpong rxe0 "$g6_rxe" "" oxn_r "$g6_ox" "$RN_NS" 500

pass
