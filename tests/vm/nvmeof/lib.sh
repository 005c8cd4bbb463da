# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics helpers for VM scripts (tests/vm/roce-nvmeof.sh, scripts/bench-nvmeof-guest.sh),
# sourced after tests/vm/lib.sh: an nvmet-rdma target exporting a file in RAM on the address
# $VETH_A_IP4 (veth_root), and the nvme-rdma host's view of it. Set NQN before sourcing.

NVMET_CFG=/sys/kernel/config/nvmet

# nvmeof_setup: the modules, configfs, and the 256 MiB backing file on a tmpfs of its own:
# nvmet takes the namespace's block size from the file's inode, and under an overlay (the VM's
# /tmp when the source tree is a clone in /tmp, as in CI) that is 0 bits, which the host
# refuses (a namespace of 0 sectors). Load nvme_core first to give it parameters.
nvmeof_setup() {
	local m
	for m in nvme_core nvmet nvmet_rdma nvme_rdma rdma_ucm; do
		modprobe "$m" || fail "modprobe $m"
	done
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
		fail "configfs"
	mkdir -p "$OX_TMP/ns" && mount -t tmpfs -o size=300M tmpfs "$OX_TMP/ns" ||
		fail "tmpfs for the namespace"
	at_exit umount -l "$OX_TMP/ns"
	NVMEOF_IMG=$OX_TMP/ns/ns1.img
	truncate -s 256M "$NVMEOF_IMG"
	at_exit target_down
}

target_up() {
	local s=$NVMET_CFG/subsystems/$NQN p=$NVMET_CFG/ports/1
	mkdir -p "$s/namespaces/1" "$p"
	echo 1 >"$s/attr_allow_any_host"
	echo "$NVMEOF_IMG" >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable"
	echo rdma >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$VETH_A_IP4" >"$p/addr_traddr"
	echo 4420 >"$p/addr_trsvcid"
	ln -s "$s" "$p/subsystems/$NQN"
}

target_down() {
	local s=$NVMET_CFG/subsystems/$NQN
	rm -f "$NVMET_CFG/ports/1/subsystems/$NQN"
	rmdir "$NVMET_CFG/ports/1" 2>/dev/null || true
	if [ -d "$s" ]; then
		echo 0 >"$s/namespaces/1/enable" || true
		rmdir "$s/namespaces/1" "$s" || true
	fi
}

# The block device of the connected controller (NVME_DEV), once it shows up.
NVME_DEV=
_nvme_dev() {
	local c b
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] && [ "$(<"$c/subsysnqn")" = "$NQN" ] || continue
		[ "$(<"$c/state")" = live ] || continue
		for b in "$c"/nvme*n1; do
			[ -e "$b" ] || continue
			NVME_DEV=/dev/${b##*/}
			[ -b "$NVME_DEV" ] && return 0
		done
	done
	return 1
}

_nvme_has_size() {
	[ "$(cat "/sys/block/${NVME_DEV#/dev/}/size")" != 0 ]
}

_no_controller() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] && [ "$(<"$c/subsysnqn")" = "$NQN" ] && return 1
	done
	return 0
}

# nvme_connect: the host connects to the target and finds its namespace (NVME_DEV).
nvme_connect() {
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

# nvmeof_checks: the target goes up, the host connects; fio writes and verifies with several
# block sizes and mixed ones; then nvme disconnect while idle and under I/O, and the target's
# port removed under I/O. The caller defines nothing_left WHAT (no QP of the connections is
# left) and sets job_mib.
nvmeof_checks() {
	target_up
	nvme_connect
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
	nvme_connect
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
	nvme_connect
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
}
