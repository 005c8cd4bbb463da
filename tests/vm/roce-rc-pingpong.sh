#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RC over RoCE v2 between two oxroce devices in two network namespaces: ibv_rc_pingpong with its
# buffer check (-c), over IPv4 and over IPv6 GIDs, several message sizes (one packet, several
# packets, not a multiple of the MTU), and ibv_srq_pingpong (4 QPs on one SRQ); the device
# counters agree (and show segmentation offload runs, none with roce_gso=0). rxe cannot do
# this on 6.12 (init_net only).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=200

oxroce_pair
gid_a=$GID_A gid_b=$GID_B

check_side() {
	local side=$1 out=$2 n=$3
	[[ $out =~ (^|$'\n')([0-9]+)\ bytes\ in\ [0-9.]+\ seconds ]] ||
		fail "$side: no 'N bytes in S seconds' line in: $out"
	[[ $out =~ (^|$'\n')([0-9]+)\ iters\ in\ [0-9.]+\ seconds ]] ||
		fail "$side: no 'N iters in S seconds' line in: $out"
	expect_eq "${BASH_REMATCH[2]}" "$n" "$side: completed iterations"
	expect_no_match "$out" 'invalid data' "$side: buffer check"
}

for size in 1 4096 9000; do
	info "IPv4, $size-byte messages"
	run_pair_ns --port 18515 120 \
		ibv_rc_pingpong -d oxb_r -g "$gid_b" -n "$iters" -s "$size" -c -- \
		ibv_rc_pingpong -d oxa_r -g "$gid_a" -n "$iters" -s "$size" -c "$NS_B_IP4"
	check_side server "$PAIR_SERVER_OUT" "$iters"
	check_side client "$PAIR_CLIENT_OUT" "$iters"
	info "server: $(grep -E 'bytes in|iters in' <<<"$PAIR_SERVER_OUT" | tr '\n' ' ')"
done

info "ibv_srq_pingpong: 4 QPs sharing one SRQ on each side"
run_pair_ns --port 18515 120 \
	ibv_srq_pingpong -d oxb_r -g "$gid_b" -n "$iters" -q 4 -s 2000 -- \
	ibv_srq_pingpong -d oxa_r -g "$gid_a" -n "$iters" -q 4 -s 2000 "$NS_B_IP4"
check_side "srq server" "$PAIR_SERVER_OUT" "$iters"
check_side "srq client" "$PAIR_CLIENT_OUT" "$iters"

# IPv6 GIDs (global addresses of the namespaces).
gid6_a=$(roce_gid_index oxa_r "fd77:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on oxa_r"
gid6_b=$(roce_gid_index oxb_r "fd77:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxb_r"
info "IPv6, 5000-byte messages (GIDs $gid6_a, $gid6_b)"
run_pair_ns --port 18515 120 \
	ibv_rc_pingpong -d oxb_r -g "$gid6_b" -n "$iters" -s 5000 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$gid6_a" -n "$iters" -s 5000 -c "$NS_B_IP4"
check_side "IPv6 server" "$PAIR_SERVER_OUT" "$iters"
check_side "IPv6 client" "$PAIR_CLIENT_OUT" "$iters"
expect_match "$PAIR_CLIENT_OUT" 'remote address: .* GID fd77::2$' "IPv6 peer GID"

# The device counters (rdma statistic, as rxe's): every packet sent arrived (at a QP, or after
# its QP was destroyed: rx_drop), none was corrupted or failed to leave.
counter() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$1"; }
expect_ok rdma statistic show link oxa_r/1
stats_a=$EXPECT_OUT
expect_ok rdma statistic show link oxb_r/1
stats_b=$EXPECT_OUT
info "oxa_r: $stats_a"
sent_a=$(counter "$stats_a" sent_pkts) rcvd_b=$(counter "$stats_b" rcvd_pkts)
[ -n "$sent_a" ] && [ "$sent_a" -gt 1000 ] || fail "oxa_r sent_pkts: '$sent_a'"
expect_eq "$((rcvd_b + $(counter "$stats_b" rx_drop)))" "$sent_a" "packets oxb_r got, oxa_r sent"
expect_eq "$(($(counter "$stats_a" rcvd_pkts) + $(counter "$stats_a" rx_drop)))" \
	"$(counter "$stats_b" sent_pkts)" "packets oxa_r got, oxb_r sent"
for k in icrc_err send_err; do
	expect_eq "$(counter "$stats_a" "$k")$(counter "$stats_b" "$k")" 00 "$k on a clean link"
done
# Multi-packet messages leave in runs of UDP segmentation offload, which cross the veth uncut
# and are received as one datagram, walked packet by packet (the counts above include them):
# every packet sent in a run arrived in one.
gso_a=$(counter "$stats_a" sent_gso_pkts)
[ -n "$gso_a" ] && [ "$gso_a" -gt 1000 ] || fail "oxa_r sent_gso_pkts: '$gso_a'"
info "oxa_r: $gso_a of $sent_a packets sent in segmentation offload runs"
expect_eq "$(counter "$stats_b" rcvd_gso_pkts)" "$gso_a" "packets oxb_r got in runs, oxa_r sent"
expect_eq "$(counter "$stats_a" rcvd_gso_pkts)" "$(counter "$stats_b" sent_gso_pkts)" \
	"packets oxa_r got in runs, oxb_r sent"
# roce_gso=0: every packet alone, the data still right.
echo 0 >/sys/module/oxrdma/parameters/roce_gso
run_pair_ns --port 18515 120 \
	ibv_rc_pingpong -d oxb_r -g "$gid_b" -n "$iters" -s 9000 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$gid_a" -n "$iters" -s 9000 -c "$NS_B_IP4"
check_side "roce_gso=0 server" "$PAIR_SERVER_OUT" "$iters"
check_side "roce_gso=0 client" "$PAIR_CLIENT_OUT" "$iters"
expect_ok rdma statistic show link oxa_r/1
expect_eq "$(counter "$EXPECT_OUT" sent_gso_pkts)" "$gso_a" "no runs with roce_gso=0"
echo 1 >/sys/module/oxrdma/parameters/roce_gso

# After traffic (cached routes, open UDP tunnels), deleting a namespace removes its device and
# releases its netdev at once.
expect_ok ip netns del "$NS_A"
wait_until 15 _ox_no_dev oxa_r || fail "oxa_r still exists 15 s after its namespace was deleted"
sleep 1
expect_no_match "$(dmesg)" 'waiting for .* to become free' "netdev released"
info "namespace $NS_A deleted: oxa_r gone, netdev released"

# Unloading with a device left that carried traffic (open tunnel, cached routes, timers).
expect_ok rmmod oxrdma
expect_eq "$(ls /sys/class/infiniband 2>/dev/null | grep -c .)" 0 "RDMA devices after rmmod"
info "rmmod oxrdma with oxb_r present: clean"

pass
