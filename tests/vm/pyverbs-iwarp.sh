#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own pyverbs tests of the data path (test_qp, test_cq, test_cq_events, test_mr,
# test_atomic, test_qpex, test_cqex) and of rdma_cm (test_rdmacm) against an oxiwarp device and
# against siw in the same run. oxiwarp must pass every test siw passes, fail none, and have no
# error but siw's own and those of the tests that connect RC QPs without rdma_cm: an iWARP QP
# reaches RTS only through its connection (the iw_cm moves it), so moving it there by hand is
# refused with EINVAL, as siw refuses it ("Failed to modify QP state to RTS").
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"
# shellcheck source=tests/vm/pyverbs/run.sh
. "$OX_ROOT/tests/vm/pyverbs/run.sh"

modules=(test_qp test_cq test_cq_events test_mr test_atomic test_qpex test_cqex test_rdmacm)

root_ns_pair
rdma_link_add -n "$RN_NS" oxi0 oxiwarp "$RN_DEV"
siw_add siw0 "$RN_ROOT_DEV"

# The suite looks the device's netdev up with `ip addr show`: run it in oxiwarp's namespace.
py_in_ns=$OX_TMP/python-in-ns
printf '#!/bin/sh\nexec ip netns exec %s /usr/bin/python3 "$@"\n' "$RN_NS" >"$py_in_ns"
chmod +x "$py_in_ns"

declare -A ok=() results=() line=()
for d in siw0 oxi0; do
	rc=0
	py=/usr/bin/python3
	[ "$d" != oxi0 ] || py=$py_in_ns
	PYVERBS_PY=$py pyverbs_run --timeout 900 --per-test 60 --gid 0 "$d" "${modules[@]}" || rc=$?
	[ "$rc" != 2 ] || fail "pyverbs run against $d did not complete (log: $PYVERBS_LOG)"
	ok[$d]=$PYVERBS_OK
	results[$d]=$OX_TMP/results.$d
	cp "$PYVERBS_RESULTS" "${results[$d]}"
	line[$d]="ran $PYVERBS_RAN, ok $PYVERBS_OK, skipped $PYVERBS_SKIPPED, failed $PYVERBS_FAILED, errors $PYVERBS_ERRORS"
	[ "$d" != oxi0 ] || expect_eq "$PYVERBS_FAILED" 0 "oxi0: failed tests"
done
info "siw0 (siw):     ${line[siw0]}"
info "oxi0 (oxiwarp): ${line[oxi0]}"
# Every test siw passes, oxiwarp passes (so at least siw's count).
missing=()
while IFS=$'\t' read -r status test _; do
	[ "$status" = ok ] || continue
	grep -qP "^ok\t\Q$test\E\t" "${results[oxi0]}" || missing+=("$test")
done <"${results[siw0]}"
if ((${#missing[@]})); then
	printf '  %s\n' "${missing[@]}"
	fail "oxiwarp does not pass ${#missing[@]} tests siw passes"
fi
info "oxiwarp passes every test siw passes (${ok[oxi0]} against ${ok[siw0]})"

unexpected=()
while IFS=$'\t' read -r status test detail; do
	[ "$status" = ERROR ] || continue
	if grep -qP "^ERROR\t\Q$test\E\t" "${results[siw0]}"; then
		continue
	fi
	[[ $detail == *"Failed to modify QP state to RTS"* ]] && continue
	unexpected+=("$test: $detail")
done <"${results[oxi0]}"
if ((${#unexpected[@]})); then
	printf '  %s\n' "${unexpected[@]}"
	fail "oxiwarp: ${#unexpected[@]} errors siw does not have and that are not the RTS refusal"
fi
info "every oxiwarp error is siw's too or the refused manual move to RTS"
pass
