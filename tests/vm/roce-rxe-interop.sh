#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Wire compatibility with the kernel's soft-RoCE (rxe): an rxe device in the root namespace and
# an oxroce device on the other end of a veth (in a namespace: rxe holds UDP port 4791 of the
# root namespace), RC in both directions: ibv_rc_pingpong with its buffer check and perftest
# send/write/read/atomic with sizes that span several packets and are not MTU multiples,
# over IPv4 and IPv6 GIDs.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

root_ns_pair
use_provider
rxe_add rxe0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
g_rxe=$(roce_gid_index rxe0 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no IPv4 RoCE v2 GID on rxe0"
g_ox=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "no IPv4 RoCE v2 GID on oxn_r"
g6_rxe=$(roce_gid_index rxe0 "fd79:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on rxe0"
g6_ox=$(roce_gid_index oxn_r "fd79:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxn_r"

check_pp() {
	local side=$1 out=$2 n=$3
	[[ $out =~ (^|$'\n')([0-9]+)\ iters\ in\ [0-9.]+\ seconds ]] ||
		fail "$side: no 'N iters in S seconds' line in: $out"
	expect_eq "${BASH_REMATCH[2]}" "$n" "$side: completed iterations"
	expect_no_match "$out" 'invalid data' "$side: buffer check"
}

# pingpong SERVER-DEV SERVER-GID SERVER-NS CLIENT-DEV CLIENT-GID CLIENT-NS SIZE
pingpong() {
	local sdev=$1 sgid=$2 sns=$3 cdev=$4 cgid=$5 cns=$6 size=$7 sip
	sip=$([ -n "$sns" ] && echo "$RN_IP4" || echo "$RN_ROOT_IP4")
	info "ibv_rc_pingpong: server $sdev, client $cdev, $size bytes"
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		ibv_rc_pingpong -d "$sdev" -g "$sgid" -n 200 -s "$size" -c -- \
		ibv_rc_pingpong -d "$cdev" -g "$cgid" -n 200 -s "$size" -c "$sip"
	check_pp "server $sdev" "$PAIR_SERVER_OUT" 200
	check_pp "client $cdev" "$PAIR_CLIENT_OUT" 200
}

for size in 1 4096 10000; do
	pingpong oxn_r "$g_ox" "$RN_NS" rxe0 "$g_rxe" "" "$size"
	pingpong rxe0 "$g_rxe" "" oxn_r "$g_ox" "$RN_NS" "$size"
done
pingpong oxn_r "$g6_ox" "$RN_NS" rxe0 "$g6_rxe" "" 3000
pingpong rxe0 "$g6_rxe" "" oxn_r "$g6_ox" "$RN_NS" 3000

# perf SERVER-DEV SERVER-GID SERVER-NS CLIENT-DEV CLIENT-GID CLIENT-NS TOOL SIZE
perf() {
	local sdev=$1 sgid=$2 sns=$3 cdev=$4 cgid=$5 cns=$6 tool=$7 size=$8 sip row
	sip=$([ -n "$sns" ] && echo "$RN_IP4" || echo "$RN_ROOT_IP4")
	run_pair --port 18515 --server-ns "$sns" --client-ns "$cns" 120 \
		"$tool" -F -n 100 -s "$size" -d "$sdev" -x "$sgid" -- \
		"$tool" -F -n 100 -s "$size" -d "$cdev" -x "$cgid" "$sip"
	row=$(grep -E "^[[:space:]]*$size[[:space:]]+100[[:space:]]" <<<"$PAIR_CLIENT_OUT" || true)
	[[ -n $row ]] || fail "$tool $cdev -> $sdev: no result row in: $PAIR_CLIENT_OUT"
	info "$tool client $cdev -> server $sdev -s $size: $row"
}

for tool in ib_send_bw ib_write_bw ib_read_bw; do
	perf oxn_r "$g_ox" "$RN_NS" rxe0 "$g_rxe" "" "$tool" 6001
	perf rxe0 "$g_rxe" "" oxn_r "$g_ox" "$RN_NS" "$tool" 6001
done
perf oxn_r "$g_ox" "$RN_NS" rxe0 "$g_rxe" "" ib_atomic_bw 8
perf rxe0 "$g_rxe" "" oxn_r "$g_ox" "$RN_NS" ib_atomic_bw 8

pass
