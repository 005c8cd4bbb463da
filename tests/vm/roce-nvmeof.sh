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

_only_gsi() {
	[ -z "$(rdma res show qp | grep -v ' type GSI ' || true)" ]
}

nothing_left() {
	local what=$1 qps
	wait_until 20 _only_gsi || true
	qps=$(rdma res show qp | grep -v ' type GSI ' || true)
	expect_eq "$qps" "" "$what: QPs left (other than GSI)"
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
