#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics over oxiwarp: the nvmet-rdma target exports a namespace backed by a file in
# RAM, the nvme-rdma host connects to it through rdma_cm and the iw_cm, and fio writes and
# reads back with a checksum (direct I/O, several block sizes, concurrent jobs). Then the
# teardowns: nvme disconnect while idle and under I/O, and the target's port removed under
# I/O (the host's I/O fails, its controller goes away after ctrl_loss_tmo). No QP stays, and
# the modules unload.
#
# As in roce-nvmeof.sh, both ends run in the initial namespace on the one oxiwarp device that
# holds the target's address: the TCP connections loop back through the loopback device. This
# checks the kernel ULP path over iWARP: fast registration, RDMA READ with invalidate (which
# rdma_rw uses on iWARP), RDMA WRITE, send with invalidate.
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
rdma_link_add oxt0 oxiwarp "$VETH_A"
# The device's QPs, whatever the outcome, while the device is there.
diag() {
	[ -e /sys/class/infiniband/oxt0 ] || return 0
	rdma res show qp -d
}
at_exit diag

_no_qp() {
	[ -z "$(rdma res show qp)" ]
}

nothing_left() {
	local what=$1
	wait_until 20 _no_qp || true
	expect_eq "$(rdma res show qp)" "" "$what: QPs left"
}

nvmeof_checks
target_down
diag
for m in nvme_rdma nvmet_rdma; do
	expect_ok rmmod "$m"
done
expect_ok rmmod oxrdma
info "rmmod nvme_rdma nvmet_rdma oxrdma: clean"
pass
