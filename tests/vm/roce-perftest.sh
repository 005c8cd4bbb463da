#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# perftest between two oxroce devices in two network namespaces (RoCE v2, IPv4 GIDs): the
# bandwidth and latency tests of send, RDMA write, RDMA read and atomics, each with message
# sizes that are odd, not a multiple of the MTU and span several packets. Every run must exit
# 0 and print its result line; the figures are informational here (see `make bench`).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

oxroce_pair
gid_a=$GID_A gid_b=$GID_B

# run_perf TOOL SIZE ITERS: one perftest pair; checks the result line of both sides.
run_perf() {
	local tool=$1 size=$2 iters=$3
	local common=(-F -n "$iters" -s "$size")
	run_pair_ns --port 18515 120 \
		"$tool" -d oxb_r -x "$gid_b" "${common[@]}" -- \
		"$tool" -d oxa_r -x "$gid_a" "${common[@]}" "$NS_B_IP4"
	# The result row starts with the message size in bytes.
	local row
	row=$(grep -E "^[[:space:]]*$size[[:space:]]+$iters[[:space:]]" <<<"$PAIR_CLIENT_OUT" || true)
	[[ -n $row ]] || fail "$tool -s $size: no result row in: $PAIR_CLIENT_OUT"
	info "$tool -s $size: $row"
}

for size in 1 1000 4093 9001; do
	run_perf ib_send_bw "$size" 200
	run_perf ib_write_bw "$size" 200
	run_perf ib_read_bw "$size" 200
	run_perf ib_send_lat "$size" 200
	run_perf ib_write_lat "$size" 200
	run_perf ib_read_lat "$size" 200
done
run_perf ib_atomic_bw 8 200
run_perf ib_atomic_lat 8 200

pass
