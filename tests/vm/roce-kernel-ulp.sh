#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Kernel verbs, the way kernel ULPs (NVMe/RDMA, NFS/RDMA, iSER) use a RoCE device: the KUnit
# suite oxrdma_kverbs of tests/kmod/oxrdma_kverbs_test.ko (kernel PDs, CQs, RC QPs, SRQ, SEND
# from DMA-mapped memory with the local_dma_lkey, FRMR registration with RDMA WRITE/READ and
# atomics, LOCAL_INV, SEND_WITH_INV, flush on drain) runs when the module is loaded with two
# device names; its KTAP results in the kernel log are checked case by case.
#
# Parts (arguments; all three by default):
#   rxe      the reference: both ends on one rxe device in the root namespace (loopback), then
#            rxe0 <-> rxe1 on the two ends of a veth pair in the root namespace
#   oxroce   oxa_r <-> oxb_r, oxroce devices in two namespaces (oxroce_pair), driven by one
#            module load in the root namespace
#   interop  an oxroce device in netns oxn <-> rxe2 in the root namespace, each side once as
#            dev_a (requester) and once as dev_b (FRMR owner, responder)
# e.g. scripts/vm-run tests/vm/roce-kernel-ulp.sh oxroce
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

MODULE=oxrdma_kverbs_test
SUITE=oxrdma_kverbs
CASES=8 # cases in the suite: a result line is expected for each

# ---------------------------------------------------------------------------------------------
# Running the suite

# The kernel log after the last line containing MARK, without timestamps.
_log_since() {
	dmesg | sed -E 's/^\[[ 0-9.]+\] //' | awk -v m="$1" 'index($0, m) { buf = ""; next } { buf = buf $0 "\n" } END { printf "%s", buf }'
}

# kverbs_run LABEL WANT MODPROBE-ARGS...: load the module (KUnit runs the suite during the
# load), check its KTAP and unload it. WANT is "ok" (every case passes) or "skip" (every case
# is skipped). Prints one line per case; a run that does not meet WANT is shown and added to
# FAILED_RUNS (the test fails at the end, after the other runs).
FAILED_RUNS=()
kverbs_run() {
	local label=$1 want=$2 mark ktap line name res plan='' n=0 n_ok=0 n_skip=0 n_fail=0
	shift 2
	mark="oxrdma-kverbs-run $label $EPOCHREALTIME"
	echo "$mark" >/dev/kmsg
	info "$label: modprobe $MODULE $*"
	# A case waits at most timeout_ms (5 s) per completion: even a device that completes
	# nothing finishes the suite in a few minutes.
	OX_CMD_TIMEOUT=400 expect_ok modprobe "$MODULE" "$@"
	ktap=$(_log_since "$mark")
	expect_ok rmmod "$MODULE"

	# The suite's block: "    # Subtest: SUITE", "    1..N", one "    ok|not ok I NAME" per
	# case (diagnostics in between), then the unindented suite result line.
	local in=0 block=''
	while IFS= read -r line; do
		if [ "$in" = 0 ]; then
			[ "$line" = "    # Subtest: $SUITE" ] && in=1
			continue
		fi
		block+=$line$'\n'
		if [[ $line =~ ^(not\ )?ok\ [0-9]+\ $SUITE ]]; then
			break
		elif [[ $line =~ ^\ \ \ \ 1\.\.([0-9]+)$ ]]; then
			plan=${BASH_REMATCH[1]}
		elif [[ $line =~ ^\ \ \ \ (not\ )?ok\ [0-9]+\ ([a-z0-9_]+)(\ #\ SKIP.*)?$ ]]; then
			name=${BASH_REMATCH[2]}
			n=$((n + 1))
			if [ -n "${BASH_REMATCH[3]}" ]; then
				res=SKIP n_skip=$((n_skip + 1))
			elif [ -z "${BASH_REMATCH[1]}" ]; then
				res=PASS n_ok=$((n_ok + 1))
			else
				res=FAIL n_fail=$((n_fail + 1))
			fi
			info "$label: $res $SUITE.$name"
		fi
	done <<<"$ktap"
	[ "$in" = 1 ] || { _ox_show "kernel log" "$ktap"; fail "$label: no KTAP for suite $SUITE in the kernel log"; }
	info "$label: $n_ok passed, $n_fail failed, $n_skip skipped of $n (plan 1..${plan:-?})"
	if [ "$n_fail" != 0 ] || { [ "$want" = ok ] && [ "$n_skip" != 0 ]; } ||
		{ [ "$want" = skip ] && [ "$n_skip" != "$n" ]; } ||
		[ "$plan" != "$CASES" ] || [ "$n" != "$CASES" ]; then
		_ox_show "KTAP of $SUITE ($label)" "$block"
		echo "FAIL: $label: $n_fail failed, $n_skip skipped, $n of $CASES cases reported" >&2
		FAILED_RUNS+=("$label")
	fi
}

# ---------------------------------------------------------------------------------------------
# The parts

part_rxe() {
	info "== rxe: dev_a = dev_b = rxe0 (loopback on one device), then rxe0 <-> rxe1"
	veth_root
	rxe_add rxe0 "$VETH_A"
	local g0 g1
	g0=$(roce_gid_index rxe0 "$(ipv4_gid "$VETH_A_IP4")") || fail "no IPv4 RoCE v2 GID on rxe0"
	# Without devices every case is skipped (and nothing is left behind).
	kverbs_run "no devices" skip
	kverbs_run "rxe0<->rxe0" ok dev_a=rxe0 dev_b=rxe0 gid_a="$g0" gid_b="$g0"
	rxe_add rxe1 "$VETH_B"
	g1=$(roce_gid_index rxe1 "$(ipv4_gid "$VETH_B_IP4")") || fail "no IPv4 RoCE v2 GID on rxe1"
	kverbs_run "rxe0<->rxe1" ok dev_a=rxe0 dev_b=rxe1 gid_a="$g0" gid_b="$g1"
	# The module holds no device: both links go away.
	link_del rxe1
	link_del rxe0
}

part_oxroce() {
	info "== oxroce: dev_a = oxa_r (netns $NS_A), dev_b = oxb_r (netns $NS_B)"
	oxroce_pair
	kverbs_run "oxa_r<->oxb_r" ok dev_a=oxa_r dev_b=oxb_r gid_a="$GID_A" gid_b="$GID_B"
}

# rxe works only in the root namespace and holds UDP port 4791 there, so the oxroce device is in
# netns $RN_NS.
part_interop() {
	info "== interop: oxn_r (oxroce, netns $RN_NS) <-> rxe2 (root namespace)"
	root_ns_pair
	rxe_add rxe2 "$RN_ROOT_DEV"
	rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
	local g_rxe g_ox
	g_rxe=$(roce_gid_index rxe2 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no IPv4 RoCE v2 GID on rxe2"
	g_ox=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "no IPv4 RoCE v2 GID on oxn_r"
	kverbs_run "oxn_r->rxe2" ok dev_a=oxn_r dev_b=rxe2 gid_a="$g_ox" gid_b="$g_rxe"
	kverbs_run "rxe2->oxn_r" ok dev_a=rxe2 dev_b=oxn_r gid_a="$g_rxe" gid_b="$g_ox"
}

[ -d "/sys/module/$MODULE" ] && expect_ok rmmod "$MODULE"
modinfo "$MODULE" >/dev/null 2>&1 || fail "$MODULE.ko is not in the module tree (make modules)"

parts=("$@")
[ ${#parts[@]} != 0 ] || parts=(rxe oxroce interop)
for p in "${parts[@]}"; do
	case $p in
	rxe) part_rxe ;;
	oxroce) part_oxroce ;;
	interop) part_interop ;;
	*) fail "unknown part '$p' (rxe, oxroce, interop)" ;;
	esac
done

[ ${#FAILED_RUNS[@]} = 0 ] || fail "suite $SUITE failed in: ${FAILED_RUNS[*]}"
pass
