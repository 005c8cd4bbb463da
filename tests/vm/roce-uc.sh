#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# UC over RoCE v2: ibv_uc_pingpong (SENDs, data checked) between two oxroce devices in two
# namespaces over IPv4 and IPv6 GIDs and across several packets per message, and with rxe in
# both directions; ib_write_bw -c UC each way with rxe. Then UC's point: over a link losing 5 %
# of its packets, ib_write_bw -c UC finishes: a lost packet loses its
# message only, nothing retransmits, nothing hangs, and the receiver counts the dropped rest
# of each broken message (out_of_seq_request).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=300

oxroce_pair
for size in 1 4096 9000; do
	info "ibv_uc_pingpong oxroce <-> oxroce, IPv4, $size bytes"
	run_pair_ns --port 18515 120 \
		ibv_uc_pingpong -d oxb_r -g "$GID_B" -n "$iters" -s "$size" -c -- \
		ibv_uc_pingpong -d oxa_r -g "$GID_A" -n "$iters" -s "$size" -c "$NS_B_IP4"
	check_pingpong server "$PAIR_SERVER_OUT" "$iters"
	check_pingpong client "$PAIR_CLIENT_OUT" "$iters"
done
gid6_a=$(roce_gid_index oxa_r "fd77:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on oxa_r"
gid6_b=$(roce_gid_index oxb_r "fd77:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxb_r"
info "ibv_uc_pingpong oxroce <-> oxroce, IPv6, 3000 bytes"
run_pair_ns --port 18515 120 \
	ibv_uc_pingpong -d oxb_r -g "$gid6_b" -n "$iters" -s 3000 -c -- \
	ibv_uc_pingpong -d oxa_r -g "$gid6_a" -n "$iters" -s 3000 -c "$NS_B_IP4"
check_pingpong "IPv6 server" "$PAIR_SERVER_OUT" "$iters"
check_pingpong "IPv6 client" "$PAIR_CLIENT_OUT" "$iters"

info "UC over a lossy link (netem loss 5% on both ends)"
for ns_dev in "$NS_A:$NS_A_DEV" "$NS_B:$NS_B_DEV"; do
	expect_ok ip netns exec "${ns_dev%%:*}" tc qdisc add dev "${ns_dev#*:}" root netem loss 5%
done
before=$(cat /sys/class/infiniband/oxb_r/ports/1/hw_counters/out_of_seq_request)
run_pair_ns --port 18515 120 \
	ib_write_bw -c UC -F -d oxb_r -x "$GID_B" -n 2000 -s 8192 -- \
	ib_write_bw -c UC -F -d oxa_r -x "$GID_A" -n 2000 -s 8192 "$NS_B_IP4"
row=$(grep -E '^[[:space:]]*8192[[:space:]]+2000[[:space:]]' <<<"$PAIR_CLIENT_OUT" || true)
[[ -n $row ]] || fail "ib_write_bw -c UC over loss: no result row in: $PAIR_CLIENT_OUT"
info "ib_write_bw -c UC, 8 KiB, 5 % loss: $row"
after=$(cat /sys/class/infiniband/oxb_r/ports/1/hw_counters/out_of_seq_request)
((after > before)) || fail "no dropped packets counted over a lossy link ($before -> $after)"
info "receiver dropped $((after - before)) packets of broken messages"
for ns_dev in "$NS_A:$NS_A_DEV" "$NS_B:$NS_B_DEV"; do
	expect_ok ip netns exec "${ns_dev%%:*}" tc qdisc del dev "${ns_dev#*:}" root
done
expect_eq "$(cat /sys/class/infiniband/oxa_r/ports/1/hw_counters/retransmits)" 0 "UC retransmissions"

# With rxe: rxe in the root namespace, oxroce in a namespace on the other end of a veth.
root_ns_pair
rxe_add rxe0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
g_rxe=$(roce_gid_index rxe0 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no IPv4 RoCE v2 GID on rxe0"
g_ox=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "no IPv4 RoCE v2 GID on oxn_r"

# with_rxe SERVER-DEV SERVER-GID SERVER-NS CLIENT-DEV CLIENT-GID CLIENT-NS
with_rxe() {
	local sdev=$1 sgid=$2 sns=$3 cdev=$4 cgid=$5 cns=$6 sip
	sip=$([ -n "$sns" ] && echo "$RN_IP4" || echo "$RN_ROOT_IP4")
	info "ibv_uc_pingpong: server $sdev, client $cdev, 5000 bytes"
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ibv_uc_pingpong -d "$sdev" -g "$sgid" -n "$iters" -s 5000 -c -- \
		ibv_uc_pingpong -d "$cdev" -g "$cgid" -n "$iters" -s 5000 -c "$sip"
	check_pingpong "server $sdev" "$PAIR_SERVER_OUT" "$iters"
	check_pingpong "client $cdev" "$PAIR_CLIENT_OUT" "$iters"
	info "ib_write_bw -c UC: server $sdev, client $cdev"
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ib_write_bw -c UC -F -d "$sdev" -x "$sgid" -n 500 -s 6000 -- \
		ib_write_bw -c UC -F -d "$cdev" -x "$cgid" -n 500 -s 6000 "$sip"
	grep -qE '^[[:space:]]*6000[[:space:]]+500[[:space:]]' <<<"$PAIR_CLIENT_OUT" ||
		fail "ib_write_bw -c UC $cdev -> $sdev: no result row in: $PAIR_CLIENT_OUT"
}
with_rxe oxn_r "$g_ox" "$RN_NS" rxe0 "$g_rxe" ""
with_rxe rxe0 "$g_rxe" "" oxn_r "$g_ox" "$RN_NS"

expect_ok rmmod oxrdma
pass
