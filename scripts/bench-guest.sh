#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in the test VM (scripts/bench.sh). One veth pair carries, in turn:
#   1. rxe: two rxe devices, both veth ends in the root namespace (rxe works only there);
#   2. oxroce: the same two veth ends moved into namespaces oxa and oxb, an oxroce device on each;
#   3. TCP: iperf3 between the two namespaces over the same ends.
# RDMA figures are perftest's: ib_write_bw at 64 KiB (average MB/s over a timed run) and
# ib_send_lat at 2 bytes (typical latency, us). Everything runs under QEMU TCG: the absolute
# numbers mean little, the ratios between the columns are the point.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

DUR=${OX_BENCH_SECONDS:-4}
LAT_ITERS=${OX_BENCH_LAT_ITERS:-2000}
declare -A res=()

# perf KEY SERVER-NS SERVER-DEV SERVER-GID CLIENT-NS CLIENT-DEV CLIENT-GID SERVER-IP
perf() {
	local key=$1 sns=$2 sdev=$3 sgid=$4 cns=$5 cdev=$6 cgid=$7 sip=$8 row
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ib_write_bw -F -D "$DUR" -s 65536 -d "$sdev" -x "$sgid" -- \
		ib_write_bw -F -D "$DUR" -s 65536 -d "$cdev" -x "$cgid" "$sip"
	row=$(grep -E '^[[:space:]]*65536[[:space:]]' <<<"$PAIR_CLIENT_OUT") ||
		fail "$key ib_write_bw: no result row: $PAIR_CLIENT_OUT"
	res[$key,bw]=$(awk '{print $4}' <<<"$row")
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ib_send_lat -F -n "$LAT_ITERS" -s 2 -d "$sdev" -x "$sgid" -- \
		ib_send_lat -F -n "$LAT_ITERS" -s 2 -d "$cdev" -x "$cgid" "$sip"
	row=$(grep -E "^[[:space:]]*2[[:space:]]+$LAT_ITERS[[:space:]]" <<<"$PAIR_CLIENT_OUT") ||
		fail "$key ib_send_lat: no result row: $PAIR_CLIENT_OUT"
	res[$key,lat]=$(awk '{print $5}' <<<"$row")
	info "$key: ib_write_bw 64K ${res[$key,bw]} MB/s, ib_send_lat 2B ${res[$key,lat]} us"
}

modprobe ib_uverbs
use_provider

# 1. rxe on the root-namespace veth pair.
veth_root
rxe_add rxe0 "$VETH_A"
rxe_add rxe1 "$VETH_B"
g0=$(roce_gid_index rxe0 "$(ipv4_gid "$VETH_A_IP4")") || fail "rxe0: no RoCE v2 IPv4 GID"
g1=$(roce_gid_index rxe1 "$(ipv4_gid "$VETH_B_IP4")") || fail "rxe1: no RoCE v2 IPv4 GID"
perf rxe "" rxe1 "$g1" "" rxe0 "$g0" "$VETH_B_IP4"
link_del rxe0
link_del rxe1
expect_ok rmmod rdma_rxe

# 2. oxroce: the same veth ends, each in its own namespace.
for ns in "$NS_A" "$NS_B"; do
	_ox_netns_gone "$ns" || fail "cannot delete the old netns $ns"
	at_exit _ox_netns_gone "$ns"
	expect_ok ip netns add "$ns"
done
expect_ok ip link set "$VETH_A" netns "$NS_A"
expect_ok ip link set "$VETH_B" netns "$NS_B"
expect_ok ip -n "$NS_A" addr add "$NS_A_IP4/24" dev "$VETH_A"
expect_ok ip -n "$NS_B" addr add "$NS_B_IP4/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do
	expect_ok ip -n "$ns" link set lo up
done
expect_ok ip -n "$NS_A" link set "$VETH_A" up
expect_ok ip -n "$NS_B" link set "$VETH_B" up
wait_until 5 _ox_lower_up "$NS_A" "$VETH_A" || fail "$VETH_A has no carrier"
wait_until 5 _ox_lower_up "$NS_B" "$VETH_B" || fail "$VETH_B has no carrier"
rdma_link_add -n "$NS_A" oxa_r oxroce "$VETH_A"
rdma_link_add -n "$NS_B" oxb_r oxroce "$VETH_B"
ga=$(roce_gid_index oxa_r "$(ipv4_gid "$NS_A_IP4")") || fail "oxa_r: no RoCE v2 IPv4 GID"
gb=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")") || fail "oxb_r: no RoCE v2 IPv4 GID"
perf oxroce "$NS_B" oxb_r "$gb" "$NS_A" oxa_r "$ga" "$NS_B_IP4"

# 3. TCP over the same ends.
run_pair --port 5201 --server-ns "$NS_B" --client-ns "$NS_A" 60 \
	iperf3 -s -1 -B "$NS_B_IP4" -- iperf3 -c "$NS_B_IP4" -t "$DUR" -l 64K -f m
res[tcp,bw]=$(awk '/receiver/ {print $7}' <<<"$PAIR_CLIENT_OUT")
[ -n "${res[tcp,bw]}" ] || fail "iperf3: no receiver line: $PAIR_CLIENT_OUT"
# MB/s as perftest counts (2^20 bytes): Mbit/s * 10^6 / 8 / 2^20.
res[tcp,bw]=$(awk -v m="${res[tcp,bw]}" 'BEGIN { printf "%.2f", m * 1000000 / 8 / 1048576 }')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
echo "== bench results (QEMU TCG, 2 vCPUs; one veth pair; ${DUR} s bandwidth runs, $LAT_ITERS latency iterations)"
printf '%-34s %12s %12s %12s %16s\n' "" oxroce rxe TCP "oxroce / rxe"
printf '%-34s %12s %12s %12s %16s\n' "ib_write_bw 64 KiB, MB/s (higher)" \
	"${res[oxroce,bw]}" "${res[rxe,bw]}" "${res[tcp,bw]}" "$(ratio "${res[oxroce,bw]}" "${res[rxe,bw]}")"
printf '%-34s %12s %12s %12s %16s\n' "ib_send_lat 2 B, typical us (lower)" \
	"${res[oxroce,lat]}" "${res[rxe,lat]}" "-" "$(ratio "${res[oxroce,lat]}" "${res[rxe,lat]}")"
pass
