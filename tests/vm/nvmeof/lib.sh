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
