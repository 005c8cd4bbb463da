#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Reference: two soft-RoCE (rxe) devices on the root-namespace veth pair complete an RC
# ping-pong over RoCE v2/IPv4 (GID index 1) with ibv_rc_pingpong's buffer check (-c). Proves
# veth_root, rxe_add and run_pair the way the oxroce tests will use them.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=500

veth_root
rxe_add rxe0 "$VETH_A"
rxe_add rxe1 "$VETH_B"

expect_ok ibv_devinfo -d rxe0
expect_match "$EXPECT_OUT" '^[[:space:]]+state:[[:space:]]+PORT_ACTIVE' "ibv_devinfo -d rxe0"
# GID index 1 is the RoCE v2 GID of the IPv4 address (::ffff:10.78.0.1).
expect_eq "$(</sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1)" "RoCE v2" "rxe0 GID 1 type"
expect_eq "$(</sys/class/infiniband/rxe0/ports/1/gids/1)" \
	"0000:0000:0000:0000:0000:ffff:0a4e:0001" "rxe0 GID 1"

# ibv_rc_pingpong exchanges QP numbers over TCP port 18515: the server listens there.
run_pair --port 18515 30 \
	ibv_rc_pingpong -d rxe1 -g 1 -n "$iters" -c -- \
	ibv_rc_pingpong -d rxe0 -g 1 -n "$iters" -c "$VETH_B_IP4"

check_side() {
	local side=$1 out=$2 peer=$3
	expect_match "$out" "^[[:space:]]+remote address: .* GID ::ffff:$peer\$" \
		"$side: RoCE v2 IPv4 peer GID"
	[[ $out =~ (^|$'\n')([0-9]+)\ iters\ in\ [0-9.]+\ seconds ]] ||
		fail "$side: no 'N iters in S seconds' line in: $out"
	expect_eq "${BASH_REMATCH[2]}" "$iters" "$side: completed iterations"
	# With -c the server checks the received buffer and prints "invalid data in page N" on a
	# mismatch (without changing its exit status).
	expect_no_match "$out" 'invalid data' "$side: buffer check"
}
check_side server "$PAIR_SERVER_OUT" "$VETH_A_IP4"
check_side client "$PAIR_CLIENT_OUT" "$VETH_B_IP4"

pass
