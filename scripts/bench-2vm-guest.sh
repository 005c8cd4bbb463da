#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in each of the two bench VMs (scripts/bench.sh): one vCPU each, their own kernels,
# joined by a virtio-net link (QEMU dgram netdev: UDP on the host), so nothing can lean on the
# peer being in the same kernel. The server VM (10.80.0.2) serves, the client VM (10.80.0.1)
# measures and writes "ROUND KEY VALUE" lines to $OX_OUT/raw.txt. They stay in step by the
# client retrying each test until its server listens.
#   bench-2vm-guest.sh server|client
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

role=$1
ROUNDS=${OX_BENCH_ROUNDS:-5}
DUR=${OX_BENCH_SECONDS:-3}
LAT_ITERS=${OX_BENCH_LAT_ITERS:-2000}
SERVER_IP=10.80.0.2 CLIENT_IP=10.80.0.1
RAW=$OX_OUT/raw.txt
: >"$RAW"

modprobe ib_uverbs
use_provider
me=$([ "$role" = server ] && echo "$SERVER_IP" || echo "$CLIENT_IP")
expect_ok ip link set eth0 up
expect_ok ip addr add "$me/24" dev eth0
expect_ok ip link set lo up
peer=$([ "$role" = server ] && echo "$CLIENT_IP" || echo "$SERVER_IP")
wait_until 60 ping -c1 -W1 "$peer" || fail "no link to $peer"

# The devices of a system on eth0 (one at a time: rxe and oxroce each want UDP 4791).
use_system() {
	if [ -e /sys/class/infiniband/dev0 ]; then
		link_del dev0
	fi
	case $1 in
	rxe) rxe_add dev0 eth0;;
	# rxe keeps UDP 4791 while it is loaded.
	oxroce) rmmod rdma_rxe 2>/dev/null || true; rdma_link_add dev0 oxroce eth0;;
	esac
	GID=$(roce_gid_index dev0 "$(ipv4_gid "$me")") || fail "dev0: no GID"
}

# step NAME SERVER-CMD... -- CLIENT-CMD...: the server side runs its command once; the client
# side retries its command (the server may not listen yet) and returns its output in OUT.
step() {
	local name=$1 cmd=() i
	shift
	if [ "$role" = server ]; then
		while [ "$1" != -- ]; do cmd+=("$1"); shift; done
		timeout 120 "${cmd[@]}" >/dev/null 2>&1 || info "server $name: exit status $?"
	else
		while [ "$1" != -- ]; do shift; done
		shift
		for i in $(seq 1 100); do
			OUT=$(timeout 120 "$@" 2>&1) && return 0
			sleep 0.5
		done
		fail "client $name: $OUT"
	fi
}

for round in $(seq 1 "$ROUNDS"); do
	if ((round % 2)); then order=(oxroce rxe); else order=(rxe oxroce); fi
	for sys in "${order[@]}"; do
		use_system "$sys"
		# Both sides must have their device before either measures: a throwaway step.
		step "$sys ready" sleep 2 -- true
		step "$sys write_bw" ib_write_bw -F -D "$DUR" -s 65536 -d dev0 -x "$GID" -- \
			ib_write_bw -F -D "$DUR" -s 65536 -d dev0 -x "$GID" "$SERVER_IP"
		if [ "$role" = client ]; then
			# A BW average of 0.00 is perftest's, not the link's (perftest_mbs).
			row=$(awk '$1 == 65536' <<<"$OUT" | tail -1)
			mbs=$(perftest_mbs "$row" 65536 "$DUR")
			if [ -n "$row" ] && [ "$(awk '{print $4}' <<<"$row")" = 0.00 ]; then
				info "$sys write_bw: perftest printed 0.00 MB/s; from its iterations: $mbs"
			fi
			echo "$round 2vm.$sys.ib_write_bw.65536 $mbs" >>"$RAW"
		fi
		step "$sys send_lat" ib_send_lat -F -n "$LAT_ITERS" -s 2 -d dev0 -x "$GID" -- \
			ib_send_lat -F -n "$LAT_ITERS" -s 2 -d dev0 -x "$GID" "$SERVER_IP"
		if [ "$role" = client ]; then
			row=$(grep -E "^[[:space:]]*2[[:space:]]+$LAT_ITERS[[:space:]]" <<<"$OUT")
			echo "$round 2vm.$sys.ib_send_lat.p50 $(awk '{print $5}' <<<"$row")" >>"$RAW"
			echo "$round 2vm.$sys.ib_send_lat.p99 $(awk '{print $8}' <<<"$row")" >>"$RAW"
		fi
	done
	link_del dev0
	step "tcp" iperf3 -s -1 -B "$SERVER_IP" -- iperf3 -c "$SERVER_IP" -t "$DUR" -l 64K -f m
	if [ "$role" = client ]; then
		mbits=$(awk '/receiver/ {print $(NF - 2)}' <<<"$OUT")
		echo "$round 2vm.tcp.1 $(awk -v m="$mbits" 'BEGIN { printf "%.2f", m * 1000000 / 8 / 1048576 }')" >>"$RAW"
	fi
	step "udp" timeout $((DUR + 8)) sockperf server -i "$SERVER_IP" -p 11111 -- \
		bash -c "sleep 2; sockperf ping-pong -i $SERVER_IP -p 11111 -m 14 -t $DUR"
	if [ "$role" = client ]; then
		echo "$round 2vm.udp.p50 $(awk '/percentile 50.000 =/ {print $NF}' <<<"$OUT")" >>"$RAW"
		echo "$round 2vm.udp.p99 $(awk '/percentile 99.000 =/ {print $NF}' <<<"$OUT")" >>"$RAW"
	fi
	info "round $round done"
done
pass
