#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fault injection (issue 14): tests/vm/faults/faults.c makes the 1st, 2nd, 3rd, ... slab or
# page allocation of each operation fail (/proc/thread-self/fail-nth, allocations that may
# sleep included), one run per fault, until a run has nothing left to fail: device creation
# over netlink, opening the device, PD, MR, CQ, SRQ, RC and UD QPs, AH, an RC QP's way to
# RTS, and an RDMA WRITE's doorbell. Device creation has some 3600 faults (7100 on the debug
# kernel): the first 200 are swept one by one, then every FAULTS_STRIDE-th (default 13;
# `make faults`: the odd ones in one VM, the even ones in another).
# Every failed run must end in an error return or an error completion, never a hang. Then,
# without faults, 300 fresh RC pairs each post a WRITE the moment they are connected (a WQE
# published just as the kernel ended a run of the queue once stayed in the ring for good).
# Afterwards the netdev the devices were made on is deleted at once (no reference left
# behind: a device whose ib_core allocation failed once kept two), the devices still move
# data, ibv_rc_pingpong runs between them; the QP creation sweep runs once more on an oxiwarp
# device, and the module unloads. On the debug kernel
# kmemleak checks that the failed runs leaked nothing (the harness fails the test on any
# report).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

fi_dir=/sys/kernel/debug
[ -d "$fi_dir/failslab" ] || mount -t debugfs none "$fi_dir" 2>/dev/null || true
[ -d "$fi_dir/failslab" ] || fail "the kernel has no failslab (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS)"
# Fail allocations that may sleep too, pages of every order, without a report per fault
# (a stack dump per injected fault would read as a kernel problem).
for f in failslab fail_page_alloc; do
	echo N >"$fi_dir/$f/ignore-gfp-wait"
	echo 0 >"$fi_dir/$f/verbose"
done
echo N >"$fi_dir/fail_page_alloc/ignore-gfp-highmem"
echo 0 >"$fi_dir/fail_page_alloc/min-order"

oxroce_pair
veth_root
bin=$OX_TMP/faults
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$bin" "$OX_ROOT/tests/vm/faults/faults.c" -libverbs

export FAULTS_STRIDE=${FAULTS_STRIDE:-13}
# FAULTS_TIMEOUT: every fault on the debug kernel takes more than an hour.
OX_CMD_TIMEOUT=${FAULTS_TIMEOUT:-3000} capture "$bin" oxa_r "$GID_A" oxb_r "$GID_B" "$VETH_A"
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "faults exit status $EXPECT_RC"
for op in link_add open_device alloc_pd reg_mr create_cq create_srq create_qp_rc create_qp_ud \
	create_ah modify_qp_to_rts; do
	expect_match "$EXPECT_OUT" "^op $op runs [0-9]+ failed [1-9][0-9]* errnos [0-9,-]+ done 1$" \
		"$op: runs that failed, then one with nothing left to fail"
done
# The transmit path retries what it could not allocate: its WRITEs may all succeed.
expect_match "$EXPECT_OUT" "^op rdma_write runs [1-9][0-9]* failed [0-9]+ errnos [0-9,-]+ done 1$" \
	"rdma_write: faults injected until none was left"
expect_match "$EXPECT_OUT" '^fresh pairs 300 ok$' "every fresh pair's first WRITE completed"
expect_match "$EXPECT_OUT" '^final write ok$' "a WRITE without faults afterwards"
expect_match "$EXPECT_OUT" '^faults: [1-9][0-9]* injected, 0 hung$' "faults injected, none hung"
[ ! -e /sys/class/infiniband/oxfault0 ] || fail "oxfault0 is left after the sweep"
# A netdev reference left behind makes its deletion wait forever ("waiting for DEV to become
# free"): the deletion must end.
ip link del "$VETH_A" &
del=$!
wait_until 30 _ox_exited "$del" || fail "deleting $VETH_A still waits after 30 s: a reference to it was leaked"

info "ibv_rc_pingpong between the devices afterwards"
run_pair_ns --port 18515 120 \
	ibv_rc_pingpong -d oxb_r -g "$GID_B" -n 100 -s 4096 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$GID_A" -n 100 -s 4096 -c "$NS_B_IP4"
check_pingpong server "$PAIR_SERVER_OUT" 100
check_pingpong client "$PAIR_CLIENT_OUT" 100
expect_ok rdma link delete oxa_r
expect_ok rdma link delete oxb_r

# An iWARP device's QPs also enter the adapter's index for the iw_cm (iw_get_qp): the same
# QP creation sweep there, so a failed insertion unwinds the created QP too.
info "QP creation sweep on an oxiwarp device"
expect_ok ip link add oxfdum0 type dummy
expect_ok ip link set oxfdum0 up
rdma_link_add oxw_f oxiwarp oxfdum0
FAULTS_ONLY=create_qp_rc FAULTS_SWEEP_ONLY=1 OX_CMD_TIMEOUT=${FAULTS_TIMEOUT:-3000} \
	capture "$bin" oxw_f 0 oxw_f 0 oxfdum0
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "oxiwarp faults exit status $EXPECT_RC"
expect_match "$EXPECT_OUT" "^op create_qp_rc runs [0-9]+ failed [1-9][0-9]* errnos [0-9,-]+ done 1$" \
	"oxiwarp create_qp_rc: runs that failed, then one with nothing left to fail"
expect_match "$EXPECT_OUT" '^faults: [1-9][0-9]* injected, 0 hung$' "oxiwarp: faults injected, none hung"
expect_ok rdma link delete oxw_f
expect_ok ip link del oxfdum0
expect_ok rmmod oxrdma
pass
