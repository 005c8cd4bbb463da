#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in a bench VM (scripts/bench.sh): NVMe over Fabrics throughput over oxroce and over rxe.
# The nvmet-rdma target exports a 256 MiB file on a tmpfs, the nvme-rdma host connects to it on
# the same device (kernel rdma_cm users live in the initial namespace, so host and target share
# the device holding the target's address and the traffic loops back through lo, as in
# tests/vm/roce-nvmeof.sh), and fio measures direct I/O on the namespace: 128 KiB sequential
# writes and reads (MB/s, 2^20 bytes) and 4 KiB random reads (kIOPS), iodepth 16, one job.
# rxe and oxroce cannot both own UDP port 4791 in the initial namespace: each round loads,
# measures and unloads one, then the other (the order rotates between rounds). Results go to
# $OX_OUT/raw.txt as "ROUND nvme.SYSTEM.TEST VALUE" lines for scripts/bench-report.py.
#   OX_BENCH_ROUNDS (5), OX_BENCH_SECONDS (3)
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ROUNDS=${OX_BENCH_ROUNDS:-5}
DUR=${OX_BENCH_SECONDS:-3}
RAW=$OX_OUT/raw.txt
: >"$RAW"
OX_CMD_TIMEOUT=120
NQN=oxrdma-bench
# shellcheck source=tests/vm/nvmeof/lib.sh
. "$OX_ROOT/tests/vm/nvmeof/lib.sh"

record() { echo "$round $1 $2" >>"$RAW"; }

nvmeof_setup
veth_root
at_exit nvme disconnect -n "$NQN"

# fio_job SYSTEM TEST RW BS UNIT: one time-based fio job on the namespace, recorded as
# nvme.SYSTEM.TEST in MB/s (UNIT mbs) or thousands of I/Os per second (UNIT kiops).
fio_job() {
	local sys=$1 test=$2 rw=$3 bs=$4 unit=$5 v
	expect_ok fio --name="$test" --filename="$NVME_DEV" --direct=1 --ioengine=libaio \
		--iodepth=16 --rw="$rw" --bs="$bs" --size=128M --time_based --runtime="$DUR" \
		--output-format=json
	case $unit in
	mbs) v=$(python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
print("%.2f" % ((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1048576))' <<<"$EXPECT_OUT");;
	kiops) v=$(python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
print("%.2f" % ((j["read"]["iops"] + j["write"]["iops"]) / 1000))' <<<"$EXPECT_OUT");;
	esac
	record "nvme.$sys.$test" "$v"
	info "$sys $test: $v $([ "$unit" = mbs ] && echo MB/s || echo kIOPS)"
}

# Packets the loopback device dropped so far (its backlog overflowing).
lo_drops() {
	awk '/^ *lo:/ { print $5 }' /proc/net/dev
}

# measure SYSTEM: a device of SYSTEM on the veth, the target, the host, three fio jobs, and
# everything taken down again (the rxe module too: it holds port 4791 while loaded).
measure() {
	local sys=$1 dev
	case $sys in
	oxroce) dev=oxt0; rdma_link_add oxt0 oxroce "$VETH_A";;
	rxe) dev=rxe0; rxe_add rxe0 "$VETH_A";;
	esac
	target_up
	expect_ok nvme connect -t rdma -a "$VETH_A_IP4" -s 4420 -n "$NQN" -i 2
	wait_until 30 _nvme_dev || fail "$sys: no live controller for $NQN"
	wait_until 10 _nvme_has_size || fail "$sys: $NVME_DEV has 0 sectors"
	local d0
	d0=$(lo_drops)
	fio_job "$sys" write_128k write 128k mbs
	fio_job "$sys" read_128k read 128k mbs
	fio_job "$sys" randread_4k randread 4k kiops
	record "nvme.$sys.lo_drops" $(($(lo_drops) - d0))
	info "$sys: lo dropped $(($(lo_drops) - d0)) packets; device counters:" \
		"$(rdma statistic show link "$dev/1" 2>/dev/null | tr -s ' ' | cut -d' ' -f3- || true)"
	expect_ok nvme disconnect -n "$NQN"
	wait_until 30 _no_controller || fail "$sys: the controller stays after nvme disconnect"
	target_down
	case $sys in
	oxroce) link_del oxt0;;
	rxe)
		link_del rxe0
		wait_until 20 modprobe -r rdma_rxe || fail "rdma_rxe does not unload"
		;;
	esac
}

for round in $(seq 1 "$ROUNDS"); do
	info "== NVMe-oF round $round of $ROUNDS"
	if ((round % 2)); then order=(oxroce rxe); else order=(rxe oxroce); fi
	for sys in "${order[@]}"; do measure "$sys"; done
done
info "raw results: $(wc -l <"$RAW") lines"
pass
