#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own pyverbs tests of the data path (test_qp, test_cq, test_cq_events, test_mr,
# test_atomic, test_qpex, test_cqex: RC, UC and UD) and of rdma_cm (test_rdmacm) against an
# oxroce device: no failure, no error, and every skip is for a feature oxrdma does not claim
# (listed below with the reason). rxe runs the same modules for comparison; its results are
# shown, not judged. oxroce sits in a namespace (rxe holds UDP port 4791 of the root
# namespace); the tests talk to the device's own address.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"
# shellcheck source=tests/vm/pyverbs/run.sh
. "$OX_ROOT/tests/vm/pyverbs/run.sh"

modules=(test_qp test_cq test_cq_events test_mr test_atomic test_qpex test_cqex test_rdmacm)

# Skips oxroce may have, as an ERE matched against "TEST: REASON" -> why oxrdma does not
# claim the feature. (pyverbs reports any EOPNOTSUPP of an extended QP as "Extended QP is not
# supported", so those are told apart by the test's name.)
declare -A allowed=(
	['Create Raw Packet QP|QP type 8 is not supported']="raw packet QPs: not implemented"
	['Create MW|memory window|test_qp_ex_rc_bind_mw: ']="memory windows: not implemented"
	['Resize CQ is not supported']="ibv_resize_cq: not implemented"
	['test_qp_ex_rc_atomic_write: ']="RDMA ATOMIC WRITE (IBA 1.5 extension): not implemented"
	['Rereg MR is not supported']="ibv_rereg_mr: not implemented"
	['Create XRCD is not supported']="XRC: not implemented"
	['Device memory is not supported']="device memory is a hardware feature (rxe has none either)"
	['dmabuf']="dma-buf MRs need a dma-buf exporter (the VM has none)"
)

root_ns_pair
rdma_link_add -n "$RN_NS" oxr0 oxroce "$RN_DEV"
rxe_add rxe0 "$RN_ROOT_DEV"
gid_ox=$(roce_gid_index oxr0 "$(ipv4_gid "$RN_IP4")") || fail "no RoCE v2 IPv4 GID on oxr0"
gid_rxe=$(roce_gid_index rxe0 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no RoCE v2 IPv4 GID on rxe0"

# The suite looks the device's netdev up with `ip addr show`: run it in oxroce's namespace.
py_in_ns=$(mktemp)
printf '#!/bin/sh\nexec ip netns exec %s /usr/bin/python3 "$@"\n' "$RN_NS" >"$py_in_ns"
chmod +x "$py_in_ns"

declare -A line=()
problems=()
for d in oxr0 rxe0; do
	g=$([ "$d" = oxr0 ] && echo "$gid_ox" || echo "$gid_rxe")
	rc=0
	py=/usr/bin/python3
	[ "$d" != oxr0 ] || py=$py_in_ns
	PYVERBS_PY=$py pyverbs_run --timeout 900 --per-test 60 --gid "$g" "$d" "${modules[@]}" || rc=$?
	[ "$rc" != 2 ] || fail "pyverbs run against $d did not complete (log: $PYVERBS_LOG)"
	line[$d]="ran $PYVERBS_RAN, ok $PYVERBS_OK, skipped $PYVERBS_SKIPPED, failed $PYVERBS_FAILED, errors $PYVERBS_ERRORS"
	[ "$d" = oxr0 ] || continue
	if ((PYVERBS_FAILED + PYVERBS_ERRORS > 0)); then
		problems+=("oxr0: $PYVERBS_FAILED failed, $PYVERBS_ERRORS errors")
		_ox_show "oxr0: failures and errors ($PYVERBS_LOG)" "$(sed -n '/^======/,/^Ran /p' "$PYVERBS_LOG")"
	fi
	declare -A used=()
	while IFS=$'\t' read -r status test detail; do
		[ "$status" = skip ] || continue
		hit=
		for re in "${!allowed[@]}"; do
			if [[ "${test#tests.}: $detail" =~ $re ]]; then
				hit=$re
				break
			fi
		done
		if [ -z "$hit" ]; then
			problems+=("oxr0: unexpected skip: ${test#tests.}: $detail")
		else
			used[$hit]=$((${used[$hit]:-0} + 1))
		fi
	done <"$PYVERBS_RESULTS"
	echo "oxroce skips by reason:"
	for re in "${!used[@]}"; do
		echo "  ${used[$re]} x ${allowed[$re]}"
	done
done

echo "side by side (${modules[*]}):"
echo "  oxroce: ${line[oxr0]}"
echo "  rxe:    ${line[rxe0]}"
((${#problems[@]} == 0)) || fail "$(printf '%s; ' "${problems[@]}")"
pass
