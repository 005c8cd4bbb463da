#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in the bench VM (scripts/bench.sh): one VM, 2 vCPUs, three veth pairs:
#   rxe     rxe0 <-> rxe1 on oxv0/oxv1, both in the root namespace (rxe works only there);
#   oxroce  oxa_r <-> oxb_r on oxa0/oxb0, in namespaces oxa and oxb;
#   mixed   oxroce in namespace oxn (oxn0) <-> rxe2 on oxr0 in the root namespace;
# TCP (iperf3) and the UDP round trip (sockperf) run over oxa0/oxb0. One ib_write_bw and one
# TCP run per round are repeated with RPS on every veth (set_rps).
# Each round measures every system once, in an order that rotates between rounds; results go
# to $OX_OUT/raw.txt as "ROUND KEY VALUE" lines for scripts/bench-report.py.
#   OX_BENCH_ROUNDS (5), OX_BENCH_SECONDS (3), OX_BENCH_LAT_ITERS (2000), OX_BENCH_QUICK=1
#   (one size, no MTU 9000 and QP sweeps: a smoke run).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ROUNDS=${OX_BENCH_ROUNDS:-5}
DUR=${OX_BENCH_SECONDS:-3}
LAT_ITERS=${OX_BENCH_LAT_ITERS:-2000}
QUICK=${OX_BENCH_QUICK:-0}
RAW=$OX_OUT/raw.txt
: >"$RAW"
round=0

record() { echo "$round $1 $2" >>"$RAW"; }

# Busy and total jiffies of all CPUs (/proc/stat), for CPU time per GB.
cpu_jiffies() {
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}

# sys_args SYSTEM: server and client placement of a system, as variables.
sys_args() {
	case $1 in
	oxroce) SNS=$NS_B CNS=$NS_A SDEV=oxb_r CDEV=oxa_r SGID=$G_OXB CGID=$G_OXA SIP=$NS_B_IP4;;
	rxe) SNS= CNS= SDEV=rxe1 CDEV=rxe0 SGID=$G_RXE1 CGID=$G_RXE0 SIP=$VETH_B_IP4;;
	mixed) SNS= CNS=$RN_NS SDEV=rxe2 CDEV=oxn_r SGID=$G_RXE2 CGID=$G_OXN SIP=$RN_ROOT_IP4;;
	esac
}

# bw SYSTEM TOOL SIZE TAG [PERFTEST OPTIONS...]: bandwidth (MB/s, perftest's 2^20) and CPU
# seconds per GB moved, recorded as SYSTEM.TOOL.SIZE[TAG] and ....cpu_per_gb.
bw() {
	local sys=$1 tool=$2 size=$3 tag=$4 row mbs j0 j1 busy
	shift 4
	sys_args "$sys"
	read -r j0 _ < <(cpu_jiffies)
	run_pair --port 18515 --server-ns "$SNS" --client-ns "$CNS" 120 \
		"$tool" -F -D "$DUR" -s "$size" -d "$SDEV" -x "$SGID" "$@" -- \
		"$tool" -F -D "$DUR" -s "$size" -d "$CDEV" -x "$CGID" "$@" "$SIP"
	read -r j1 _ < <(cpu_jiffies)
	row=$(grep -E "^[[:space:]]*$size[[:space:]]" <<<"$PAIR_CLIENT_OUT" | tail -1) ||
		fail "$sys $tool $size$tag: no result row: $PAIR_CLIENT_OUT"
	# A printed 0.00 is taken from the iterations (perftest_mbs), for one QP only: how
	# perftest counts several was not checked (nan, which the report counts as not measured).
	local dirs=1
	[[ " $* " == *" -b "* ]] && dirs=2
	[[ " $* " == *" -q "* ]] && dirs=0
	mbs=$(perftest_mbs "$row" "$size" "$DUR" "$dirs")
	if awk '{ exit !($4 == 0) }' <<<"$row"; then
		info "$sys $tool $size$tag: perftest printed 0.00 MB/s; from its $(awk '{print $2}' <<<"$row") iterations: $mbs"
	fi
	busy=$((j1 - j0))
	record "$sys.$tool.$size$tag" "$mbs"
	# CPU seconds (USER_HZ jiffies / 100) per 2^30 bytes moved in DUR seconds.
	record "$sys.$tool.$size$tag.cpu_per_gb" \
		"$(awk -v b="$busy" -v m="$mbs" -v d="$DUR" 'BEGIN { if (m > 0) printf "%.2f", (b / 100) / (m * d / 1024); else print "nan" }')"
	info "$sys $tool $size$tag: $mbs MB/s"
}

# lat SYSTEM TOOL: typical (median) and 99th percentile latency of 2-byte messages, us.
lat() {
	local sys=$1 tool=$2 row
	sys_args "$sys"
	run_pair --port 18515 --server-ns "$SNS" --client-ns "$CNS" 120 \
		"$tool" -F -n "$LAT_ITERS" -s 2 -d "$SDEV" -x "$SGID" -- \
		"$tool" -F -n "$LAT_ITERS" -s 2 -d "$CDEV" -x "$CGID" "$SIP"
	row=$(grep -E "^[[:space:]]*2[[:space:]]+$LAT_ITERS[[:space:]]" <<<"$PAIR_CLIENT_OUT") ||
		fail "$sys $tool: no result row: $PAIR_CLIENT_OUT"
	record "$sys.$tool.p50" "$(awk '{print $5}' <<<"$row")"
	record "$sys.$tool.p99" "$(awk '{print $8}' <<<"$row")"
	info "$sys $tool: $(awk '{print "p50 " $5 " us, p99 " $8 " us"}' <<<"$row")"
}

# tcp STREAMS TAG: iperf3 between the namespaces.
tcp() {
	local n=$1 tag=$2 mbits j0 j1
	read -r j0 _ < <(cpu_jiffies)
	run_pair --port 5201 --server-ns "$NS_B" --client-ns "$NS_A" 60 \
		iperf3 -s -1 -B "$NS_B_IP4" -- iperf3 -c "$NS_B_IP4" -t "$DUR" -l 64K -P "$n" -f m
	read -r j1 _ < <(cpu_jiffies)
	mbits=$(awk '/SUM.*receiver|[0-9] +sec.*receiver/ {v = $(NF - 2)} END {print v}' <<<"$PAIR_CLIENT_OUT")
	[ -n "$mbits" ] || fail "iperf3: no receiver line: $PAIR_CLIENT_OUT"
	local mbs
	mbs=$(awk -v m="$mbits" 'BEGIN { printf "%.2f", m * 1000000 / 8 / 1048576 }')
	record "tcp.$n$tag" "$mbs"
	record "tcp.$n$tag.cpu_per_gb" \
		"$(awk -v b="$((j1 - j0))" -v m="$mbs" -v d="$DUR" 'BEGIN { if (m > 0) printf "%.2f", (b / 100) / (m * d / 1024); else print "nan" }')"
	info "tcp $n stream(s)$tag: $mbs MB/s"
}

# udp_rtt: sockperf ping-pong of small datagrams between the namespaces; one-way latency
# (half the round trip, as perftest reports), median and 99th percentile, us.
udp_rtt() {
	local out
	ip netns exec "$NS_B" sockperf server -i "$NS_B_IP4" -p 11111 >/dev/null 2>&1 &
	local spid=$!
	sleep 1
	out=$(timeout 60 ip netns exec "$NS_A" sockperf ping-pong -i "$NS_B_IP4" -p 11111 -m 14 \
		-t "$DUR" 2>&1) || fail "sockperf: $out"
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	record udp.p50 "$(awk '/percentile 50.000 =/ {print $NF}' <<<"$out")"
	record udp.p99 "$(awk '/percentile 99.000 =/ {print $NF}' <<<"$out")"
	info "udp round trip: $(grep -E 'percentile (50|99)\.000' <<<"$out" | tr -s ' ' | tr '\n' ';')"
}

# counters DEV TAG: oxroce counters after a round, as SYSTEM.counter.NAME.
counters() {
	local dev=$1 ns=$2 k v
	read -r -a kv < <(ip netns exec "$ns" rdma statistic show link "$dev/1" | sed 's/^link [^ ]* //')
	for ((i = 0; i + 1 < ${#kv[@]}; i += 2)); do
		k=${kv[i]} v=${kv[i + 1]}
		record "oxroce.counter.$dev.$k" "$v"
	done
}

set_mtu() {
	local m=$1
	ip link set "$VETH_A" mtu "$m"; ip link set "$VETH_B" mtu "$m"
	ip -n "$NS_A" link set "$NS_A_DEV" mtu "$m"; ip -n "$NS_B" link set "$NS_B_DEV" mtu "$m"
	sleep 1
}

# set_rps MASK: Receive Packet Steering on every veth of the bench (hex CPU mask; 0: off).
# A veth delivers on the transmitting CPU; with RPS each flow's packets are handed to a CPU
# chosen by their flow hash, so a receiver can run beside its sender.
set_rps() {
	local nd ns
	for nd in ":$VETH_A" ":$VETH_B" ":$RN_ROOT_DEV" "$NS_A:$NS_A_DEV" "$NS_B:$NS_B_DEV" \
		"$RN_NS:$RN_DEV"; do
		ns=${nd%%:*}
		${ns:+ip netns exec "$ns"} sh -c "echo $1 >/sys/class/net/${nd#*:}/queues/rx-0/rps_cpus"
	done
}

modprobe ib_uverbs
use_provider
veth_root
ns_pair
root_ns_pair
rxe_add rxe0 "$VETH_A"
rxe_add rxe1 "$VETH_B"
rxe_add rxe2 "$RN_ROOT_DEV"
rdma_link_add -n "$NS_A" oxa_r oxroce "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_r oxroce "$NS_B_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
G_RXE0=$(roce_gid_index rxe0 "$(ipv4_gid "$VETH_A_IP4")") || fail "rxe0: no GID"
G_RXE1=$(roce_gid_index rxe1 "$(ipv4_gid "$VETH_B_IP4")") || fail "rxe1: no GID"
G_RXE2=$(roce_gid_index rxe2 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "rxe2: no GID"
G_OXA=$(roce_gid_index oxa_r "$(ipv4_gid "$NS_A_IP4")") || fail "oxa_r: no GID"
G_OXB=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")") || fail "oxb_r: no GID"
G_OXN=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "oxn_r: no GID"

if [ "$QUICK" = 1 ]; then
	sizes=(65536)
else
	sizes=(64 1024 4096 65536 1048576)
fi
for round in $(seq 1 "$ROUNDS"); do
	info "== round $round of $ROUNDS"
	if ((round % 2)); then order=(oxroce rxe); else order=(rxe oxroce); fi
	for s in "${sizes[@]}"; do
		for sys in "${order[@]}"; do bw "$sys" ib_write_bw "$s" ""; done
	done
	for sys in "${order[@]}"; do
		bw "$sys" ib_read_bw 65536 ""
		bw "$sys" ib_send_bw 65536 ""
		bw "$sys" ib_write_bw 65536 .bidir -b
		lat "$sys" ib_send_lat
		lat "$sys" ib_write_lat
	done
	if [ "$QUICK" != 1 ]; then
		for q in 4 16; do
			for sys in "${order[@]}"; do bw "$sys" ib_write_bw 65536 ".q$q" -q "$q"; done
		done
	fi
	bw mixed ib_write_bw 65536 ""
	lat mixed ib_send_lat
	tcp 1 ""
	tcp 2 ""
	udp_rtt
	set_rps "$(printf %x $(((1 << $(nproc)) - 1)))"
	for sys in "${order[@]}"; do bw "$sys" ib_write_bw 65536 .rps; done
	tcp 1 .rps
	set_rps 0
	if [ "$QUICK" != 1 ]; then
		set_mtu 9000
		for sys in "${order[@]}"; do bw "$sys" ib_write_bw 65536 .mtu9000 -m 4096; done
		tcp 1 .mtu9000
		set_mtu 1500
	fi
done
round=0
counters oxa_r "$NS_A"
counters oxb_r "$NS_B"
info "raw results: $(wc -l <"$RAW") lines"
pass
