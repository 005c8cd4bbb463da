#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in a bench VM (scripts/bench.sh): iWARP, oxiwarp against siw, over rdma_cm (perftest
# -R), and single-stream TCP for reference. Systems, all on the root veth pair oxv0/oxv1:
#   oxiwarp        iw_a <-> iw_b, oxiwarp, MPA CRCs on (its default);
#   oxiwarp_nocrc  the same with iwarp_crc=0: no CRCs, like siw by default;
#   siw            iw_a <-> iw_b, siw (no CRCs);
# in the root namespace, so TCP runs between two local addresses, through lo: siw cannot
# listen from another namespace (a wildcard rdma_cm listen asks every iWARP device, and siw
# creates its listening socket in the caller's namespace). And oxiwarp's own deployment path:
#   oxiwarp_ns     oxa_i <-> oxb_i on oxa0/oxb0 in namespaces oxa and oxb (TCP over veth).
# Only one system's devices exist at a time. Each round measures all, in an order that
# rotates; results go to $OX_OUT/raw.txt as "ROUND iw.SYSTEM.KEY VALUE" lines for
# scripts/bench-report.py, TCP over each path as iw.tcp_veth and iw.tcp_lo.
#   OX_BENCH_ROUNDS (5), OX_BENCH_BW_ITERS (4000), OX_BENCH_LAT_ITERS (2000)
# Bandwidth runs count iterations rather than time: perftest's duration mode (-D) reports
# 0 MB/s now and then for iWARP reads and sends (siw's as well as oxiwarp's).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ROUNDS=${OX_BENCH_ROUNDS:-5}
DUR=${OX_BENCH_SECONDS:-3}
BW_ITERS=${OX_BENCH_BW_ITERS:-4000}
LAT_ITERS=${OX_BENCH_LAT_ITERS:-2000}
RAW=$OX_OUT/raw.txt
: >"$RAW"
round=0

record() { echo "$round iw.$1 $2" >>"$RAW"; }

sys_args() {
	case $1 in
	oxiwarp_ns) SNS=$NS_B CNS=$NS_A SDEV=oxb_i CDEV=oxa_i SIP=$NS_B_IP4;;
	*) SNS= CNS= SDEV=iw_b CDEV=iw_a SIP=$VETH_B_IP4;;
	esac
}

devs_up() {
	local crc=Y
	case $1 in
	oxiwarp_ns)
		rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
		rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
		;;
	oxiwarp | oxiwarp_nocrc)
		[ "$1" = oxiwarp ] || crc=N
		echo "$crc" >/sys/module/oxrdma/parameters/iwarp_crc
		rdma_link_add iw_a oxiwarp "$VETH_A"
		rdma_link_add iw_b oxiwarp "$VETH_B"
		;;
	siw) siw_add iw_a "$VETH_A"; siw_add iw_b "$VETH_B";;
	esac
}

devs_down() {
	case $1 in
	oxiwarp_ns) link_del -n "$NS_A" oxa_i; link_del -n "$NS_B" oxb_i;;
	*) link_del iw_a; link_del iw_b;;
	esac
	echo Y >/sys/module/oxrdma/parameters/iwarp_crc
}

# bw SYSTEM TOOL SIZE: bandwidth over rdma_cm, MB/s (2^20).
bw() {
	local sys=$1 tool=$2 size=$3 row mbs
	sys_args "$sys"
	run_pair --port 18515 --server-ns "$SNS" --client-ns "$CNS" 120 \
		"$tool" -R -F -n "$BW_ITERS" -s "$size" -d "$SDEV" -- \
		"$tool" -R -F -n "$BW_ITERS" -s "$size" -d "$CDEV" "$SIP"
	row=$(grep -E "^[[:space:]]*$size[[:space:]]+$BW_ITERS[[:space:]]" <<<"$PAIR_CLIENT_OUT" | tail -1) ||
		fail "$sys $tool $size: no result row: $PAIR_CLIENT_OUT"
	mbs=$(awk '{print $4}' <<<"$row")
	# ib_send_bw now and then reports 0.00 on the sending side; the receiving side counted
	# what arrived (as in bench-guest.sh).
	if awk -v m="$mbs" 'BEGIN { exit !(m == 0) }'; then
		row=$(grep -E "^[[:space:]]*$size[[:space:]]+$BW_ITERS[[:space:]]" <<<"$PAIR_SERVER_OUT" | tail -1) || true
		[ -z "$row" ] || mbs=$(awk '{print $4}' <<<"$row")
	fi
	record "$sys.$tool.$size" "$mbs"
	info "$sys $tool $size: $mbs MB/s"
}

# lat SYSTEM TOOL: median and 99th percentile latency of 2-byte messages, us.
lat() {
	local sys=$1 tool=$2 row
	sys_args "$sys"
	run_pair --port 18515 --server-ns "$SNS" --client-ns "$CNS" 120 \
		"$tool" -R -F -n "$LAT_ITERS" -s 2 -d "$SDEV" -- \
		"$tool" -R -F -n "$LAT_ITERS" -s 2 -d "$CDEV" "$SIP"
	row=$(grep -E "^[[:space:]]*2[[:space:]]+$LAT_ITERS[[:space:]]" <<<"$PAIR_CLIENT_OUT") ||
		fail "$sys $tool: no result row: $PAIR_CLIENT_OUT"
	record "$sys.$tool.p50" "$(awk '{print $5}' <<<"$row")"
	record "$sys.$tool.p99" "$(awk '{print $8}' <<<"$row")"
	info "$sys $tool: $(awk '{print "p50 " $5 " us, p99 " $8 " us"}' <<<"$row")"
}

measure() {
	local sys=$1
	devs_up "$sys"
	bw "$sys" ib_write_bw 65536
	bw "$sys" ib_read_bw 65536
	bw "$sys" ib_send_bw 65536
	lat "$sys" ib_send_lat
	devs_down "$sys"
}

# tcp KEY SERVER-NS CLIENT-NS SERVER-IP: iperf3, one stream (MB/s).
tcp() {
	local key=$1 sns=$2 cns=$3 ip=$4 mbits
	run_pair --port 5201 --server-ns "$sns" --client-ns "$cns" 60 \
		iperf3 -s -1 -B "$ip" -- iperf3 -c "$ip" -t "$DUR" -l 64K -P 1 -f m
	mbits=$(awk '/[0-9] +sec.*receiver/ {v = $(NF - 2)} END {print v}' <<<"$PAIR_CLIENT_OUT")
	[ -n "$mbits" ] || fail "iperf3: no receiver line: $PAIR_CLIENT_OUT"
	record "$key" "$(awk -v m="$mbits" 'BEGIN { printf "%.2f", m * 1000000 / 8 / 1048576 }')"
}

modprobe rdma_ucm
modprobe oxrdma
use_provider
veth_root
ns_pair
for round in $(seq 1 "$ROUNDS"); do
	info "== round $round of $ROUNDS"
	order=(oxiwarp oxiwarp_nocrc siw oxiwarp_ns)
	order=("${order[@]:round % 4}" "${order[@]:0:round % 4}")
	for sys in "${order[@]}"; do measure "$sys"; done
	tcp tcp_veth "$NS_B" "$NS_A" "$NS_B_IP4"
	tcp tcp_lo "" "" "$VETH_B_IP4"
done
info "raw results: $(wc -l <"$RAW") lines"
pass
