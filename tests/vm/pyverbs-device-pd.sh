#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own pyverbs tests of the device and PD verbs (modules test_device and test_pd: device
# list, open, query device/device_ex/port/pkey/gid/gid_ex/gid_table including their bad flows, PD
# alloc/dealloc) pass through the oxrdma provider on an oxroce device (with its RoCE v2 IPv4 GID)
# and an oxiwarp device: no failure, no error, and every skip is one the reference drivers share
# for the same reason (device memory, a hardware feature; an iWARP port's single GID) or one
# that needs a data path feature the device lacks (EOPNOTSUPP). rxe and siw devices run
# the same modules for comparison; their results are shown, not judged.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"
# shellcheck source=tests/vm/pyverbs/run.sh
. "$OX_ROOT/tests/vm/pyverbs/run.sh"

modules=(test_device test_pd)
# Under test, then the references: name, kind, netdev. Each veth end carries one RoCE and one
# iWARP device.
devs=(oxr0 oxi0 rxe0 siw0)
declare -A kind=([oxr0]=oxroce [oxi0]=oxiwarp [rxe0]=rxe [siw0]=siw)
declare -A netdev=([oxr0]=$VETH_A [oxi0]=$VETH_B [rxe0]=$VETH_B [siw0]=$VETH_A)
declare -A gid=()

veth_root
# rxe first: its module takes UDP port 4791 of the namespace when it loads, and an oxroce
# device takes it as soon as ib_mad starts its GSI QP (then rxe would not load). Here the
# oxroce device's GSI QP cannot start (ib_mad says so in the log); these tests need no MADs.
rxe_add rxe0 "${netdev[rxe0]}"
siw_add siw0 "${netdev[siw0]}"
rdma_link_add oxr0 oxroce "${netdev[oxr0]}"
rdma_link_add oxi0 oxiwarp "${netdev[oxi0]}"

# RoCE devices run with their RoCE v2 IPv4 GID (the GID the traffic tests will use), iWARP
# devices with their only one, 0. test_device and test_pd do not use it, but it is the suite's
# configuration.
for d in oxr0 rxe0; do
	gid[$d]=$(pyverbs_roce_v2_ipv4_gid "$d") || fail "$d has no RoCE v2 IPv4 GID"
	info "$d: GID ${gid[$d]} = $(<"/sys/class/infiniband/$d/ports/1/gids/${gid[$d]}") ($(<"/sys/class/infiniband/$d/ports/1/gid_attrs/types/${gid[$d]}"))"
done
gid[oxi0]=0 gid[siw0]=0

# Skip reason -> category; dm, iwarp-one-gid and data-path are expected, other is not.
skip_category() {
	local k=$1 reason=$2 c=other
	shopt -s nocasematch
	if [[ $reason == *"Device memory is not supported"* ]]; then
		c=dm
	elif [[ $reason == *"All gid indices populated"* ]]; then
		[[ $k != oxiwarp && $k != siw ]] || c=iwarp-one-gid
	elif [[ $reason =~ (^|[^a-z])(qps?|cqs?|cq_ex|mrs?|srq|ah|mw|wq|xrcd?)([^a-z]|$) ||
		$reason =~ queue\ pair|completion\ queue|memory\ (region|window)|address\ handle|player\ with ]]; then
		c=data-path
	fi
	shopt -u nocasematch
	echo "$c"
}
declare -A what=(
	[dm]="device memory (ibv_alloc_dm) is a hardware feature: max_dm_size is 0, as on rxe and siw"
	[iwarp-one-gid]="the bad-flow gid_ex query needs an empty GID index; an iWARP port has one GID (the MAC), as on siw"
	[data-path]="needs a QP/CQ/MR/... feature the device does not offer (EOPNOTSUPP)"
	[other]="UNEXPECTED: a device or PD feature the oxrdma device path should support"
)

declare -A cnt=() skips=() results=()
problems=()
for d in "${devs[@]}"; do
	rc=0
	pyverbs_run --timeout 60 --per-test 30 --gid "${gid[$d]}" "$d" "${modules[@]}" || rc=$?
	[ "$rc" != 2 ] || fail "pyverbs run against $d (${kind[$d]}) did not complete (log: $PYVERBS_LOG)"
	results[$d]=$PYVERBS_RESULTS
	cnt[$d,ran]=$PYVERBS_RAN cnt[$d,ok]=$PYVERBS_OK cnt[$d,skip]=$PYVERBS_SKIPPED
	cnt[$d,FAIL]=$PYVERBS_FAILED cnt[$d,ERROR]=$PYVERBS_ERRORS
	while IFS=$'\t' read -r status test detail; do
		test=${test#tests.}
		m=${test%%.*}
		cnt[$d,$m,$status]=$((${cnt[$d,$m,$status]:-0} + 1))
		if [ "$status" = skip ]; then
			c=$(skip_category "${kind[$d]}" "$detail")
			skips[$d,$c]+="      $test: $detail"$'\n'
			cnt[$d,cat,$c]=$((${cnt[$d,cat,$c]:-0} + 1))
		fi
	done <"$PYVERBS_RESULTS"
	case $d in
	ox*)
		if ((PYVERBS_FAILED + PYVERBS_ERRORS > 0)); then
			problems+=("$d (${kind[$d]}): $PYVERBS_FAILED failed, $PYVERBS_ERRORS errors")
			_ox_show "$d: failures and errors ($PYVERBS_LOG)" "$(sed -n '/^======/,/^Ran /p' "$PYVERBS_LOG")"
		fi
		[ -z "${skips[$d,other]:-}" ] ||
			problems+=("$d (${kind[$d]}): ${cnt[$d,cat,other]} skips a device/PD path should not have")
		;;
	esac
done

echo
echo "Skip reasons by category:"
for d in "${devs[@]}"; do
	for c in dm iwarp-one-gid data-path other; do
		[ -n "${skips[$d,$c]:-}" ] || continue
		echo "  $d (${kind[$d]}) $c: ${cnt[$d,cat,$c]} - ${what[$c]}"
		# The tests themselves for oxrdma's devices (and anything unexpected).
		[[ $d != ox* && $c != other ]] || printf '%s' "${skips[$d,$c]}"
	done
done

echo
echo "Side by side (${modules[*]}):"
row() {
	local label=$1 key=$2 d line
	printf -v line '  %-22s' "$label"
	for d in "${devs[@]}"; do
		printf -v line '%s %8s' "$line" "${cnt[$d,$key]:-0}"
	done
	echo "$line"
}
printf -v hdr '  %-22s' ''
for d in "${devs[@]}"; do
	printf -v hdr '%s %8s' "$hdr" "${kind[$d]}"
done
echo "$hdr"
for s in ran ok skip FAIL ERROR; do
	row "$s" "$s"
done
for m in "${modules[@]}"; do
	for s in ok skip FAIL ERROR; do
		row "$m $s" "$m,$s"
	done
done

# Every device ran the same tests.
for d in "${devs[@]:1}"; do
	expect_eq "${cnt[$d,ran]}" "${cnt[oxr0,ran]}" "tests run on $d (as on oxr0)"
done
# What the references pass that oxrdma does not (all of it must be in an expected category).
for pair in oxr0:rxe0 oxi0:siw0; do
	d=${pair%:*} r=${pair#*:}
	missing=$(awk -F'\t' 'FILENAME == ARGV[1] && $1 == "ok" { ref[$2] = 1; next }
		$1 != "ok" && ($2 in ref) { printf "%s%s (%s)", sep, $2, $1; sep = ", " }' \
		"${results[$r]}" "${results[$d]}")
	if [ -z "$missing" ]; then
		info "$d (${kind[$d]}) passes every test $r (${kind[$r]}) passes"
	else
		info "$d (${kind[$d]}) does not pass, while $r (${kind[$r]}) does: $missing"
	fi
done

if ((${#problems[@]} > 0)); then
	printf '  %s\n' "${problems[@]}" >&2
	fail "rdma-core's ${modules[*]} on oxrdma devices: ${#problems[@]} problem(s); logs in \$OX_OUT/pyverbs-<dev>.log"
fi
pass
