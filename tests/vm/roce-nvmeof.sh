#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics over oxroce: the nvmet-rdma target exports a namespace backed by a file in
# RAM, the nvme-rdma host connects to it through rdma_cm, and fio writes and reads back with a
# checksum (direct I/O, several block sizes, concurrent jobs). Then the teardowns: nvme
# disconnect while idle and under I/O, and the target's port removed under I/O (the host's I/O
# fails, its controller goes away after ctrl_loss_tmo). No QP but the GSI QP stays, and the
# modules unload.
#
# Both ends run in the initial namespace: nvmet-rdma and nvme-rdma create their rdma_cm IDs
# there, whatever namespace a device is in. So host and target use the one oxroce device that
# holds the target's address (rdma_cm's choice for a local destination), and the traffic loops
# back through the loopback device: this checks the kernel ULP path (fast registration, remote
# invalidation, RDMA READ/WRITE of the data), not the wire (roce-rdmacm.sh does that).
#
# Device counters, ib_cm's message counters and the loopback device's drops are printed at the
# end (a silent disconnect shows as a DREQ there: nvme-rdma logs it only at debug level).
#
# The loopback device drops thousands of packets per run here (its per-CPU backlog overflows
# under the READ response bursts), so this also runs RC retransmission and duplicate handling
# hard: a stale duplicate READ arriving after the target invalidated the host's MR once sent
# the host through error recovery about once a second, and a CI run into retry exhaustion.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"
# shellcheck source=tests/vm/nvmeof/lib.sh
. "$OX_ROOT/tests/vm/nvmeof/lib.sh"

# fio under TCG: tens of seconds per run, more on a busy host. The debug kernel (KASAN,
# lockdep) moves data about twenty times slower: it verifies a quarter of the data.
OX_CMD_TIMEOUT=300
job_mib=32
[[ $(uname -r) != *-debug ]] || job_mib=8

NQN=oxrdma-test

# A stalled I/O fails the test (fio's timeout) long before nvme's own I/O timeout resets the
# controller, so that what is stuck can still be seen (the exit hook below prints it).
modprobe nvme_core io_timeout=600 || fail "modprobe nvme_core"
nvmeof_setup

veth_root
rdma_link_add oxt0 oxroce "$VETH_A"
# The device's counters, ib_cm's message counters (a DREQ or REJ explains a silent error
# recovery: nvme-rdma logs disconnects only at debug level) and the loopback device's drops,
# whatever the outcome, while the device is there.
diag() {
	[ -e /sys/class/infiniband/oxt0 ] || return 0
	rdma res show qp -d
	rdma statistic show link oxt0/1
	grep -E '^ *lo:' /proc/net/dev
	grep -r . /sys/class/infiniband/oxt0/ports/1/cm_* | grep -v ':0$' || true
}
at_exit diag

connect() {
	expect_ok nvme connect -t rdma -a "$VETH_A_IP4" -s 4420 -n "$NQN" -i 2 \
		--ctrl-loss-tmo=5 --reconnect-delay=1
	wait_until 30 _nvme_dev || fail "no live controller for $NQN after nvme connect"
	# A namespace of size 0 (an LBA format the host refuses): show what the host received.
	if ! wait_until 10 _nvme_has_size; then
		_ox_show "nvme id-ns $NVME_DEV" "$(timeout 20 nvme id-ns "$NVME_DEV" 2>&1 | head -40)"
		_ox_show "nvme list" "$(timeout 20 nvme list 2>&1)"
		fail "$NVME_DEV has 0 sectors after connecting"
	fi
	info "connected: $NVME_DEV ($(cat "/sys/block/${NVME_DEV#/dev/}/size") sectors)"
}

_only_gsi() {
	[ -z "$(rdma res show qp | grep -v ' type GSI ' || true)" ]
}

nothing_left() {
	local what=$1 qps
	wait_until 20 _only_gsi || true
	qps=$(rdma res show qp | grep -v ' type GSI ' || true)
	expect_eq "$qps" "" "$what: QPs left (other than GSI)"
}

target_up
connect
info "QPs: $(rdma res show qp | grep -v ' type GSI ' | awk '{print $2}' | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"

# Data integrity: write with a checksum per block, read back and verify, direct I/O; four jobs
# on disjoint regions of $job_mib MiB at once.
for bs in 4k 64k 1m; do
	info "fio: $bs blocks, 4 jobs, write then verify"
	expect_ok fio --name="verify-$bs" --filename="$NVME_DEV" --direct=1 --ioengine=libaio \
		--iodepth=8 --rw=randwrite --bs="$bs" --size=${job_mib}M --offset_increment=${job_mib}M --numjobs=4 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --group_reporting
	expect_no_match "$EXPECT_OUT" 'verify: bad|err= *[1-9]' "fio $bs: no verify or I/O error"
	info "fio $bs: $(grep -E '^ *(WRITE|READ):' <<<"$EXPECT_OUT" | tr -s ' ' | tr '\n' ' ')"
done
# Mixed sizes in one run, reads and writes interleaved.
expect_ok fio --name=mixed --filename="$NVME_DEV" --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bsrange=4k-256k --size=$((2 * job_mib))M --verify=crc32c \
	--do_verify=1 --verify_fatal=1
info "fio mixed 4 KiB - 256 KiB (the namespace has 4 KiB blocks): verified"

info "nvme disconnect while idle"
expect_ok nvme disconnect -n "$NQN"
wait_until 20 _no_controller || fail "controller still present after nvme disconnect"
nothing_left "after disconnect (idle)"

info "nvme disconnect under I/O"
connect
fio --name=load --filename="$NVME_DEV" --direct=1 --ioengine=libaio --iodepth=16 --rw=randrw \
	--bs=64k --size=128M --time_based --runtime=60 >"$OX_TMP/fio-load1.log" 2>&1 &
fio_pid=$!
sleep 3
kill -0 "$fio_pid" || fail "fio ended early: $(cat "$OX_TMP/fio-load1.log")"
expect_ok timeout 60 nvme disconnect -n "$NQN"
wait_until 60 _ox_exited "$fio_pid" || fail "fio still running 60 s after the disconnect"
wait "$fio_pid" || true
wait_until 20 _no_controller || fail "controller still present after nvme disconnect"
nothing_left "after disconnect under I/O"

info "target port removed under I/O"
connect
fio --name=load --filename="$NVME_DEV" --direct=1 --ioengine=libaio --iodepth=16 --rw=randrw \
	--bs=64k --size=128M --time_based --runtime=60 >"$OX_TMP/fio-load2.log" 2>&1 &
fio_pid=$!
sleep 3
kill -0 "$fio_pid" || fail "fio ended early: $(cat "$OX_TMP/fio-load2.log")"
rm "$NVMET_CFG/ports/1/subsystems/$NQN"
rmdir "$NVMET_CFG/ports/1"
# The host reconnects every second and gives up after ctrl_loss_tmo (5 s); then the I/O fails.
wait_until 90 _ox_exited "$fio_pid" || fail "fio still running 90 s after the target went away"
wait "$fio_pid" || true
wait_until 60 _no_controller || fail "controller still present 60 s after the target went away"
expect_match "$(cat "$OX_TMP/fio-load2.log")" 'err=|error' "fio saw the I/O fail"
nothing_left "after the target went away"

target_down
diag
for m in nvme_rdma nvmet_rdma; do
	expect_ok rmmod "$m"
done
expect_ok rmmod oxrdma
info "rmmod nvme_rdma nvmet_rdma oxrdma: clean"
pass
