#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Run rdma-core's own pyverbs test suite (Debian python3-pyverbs ships it as documentation in
# /usr/share/doc/rdma-core/tests/, partly gzip-compressed) against one RDMA device, in the test VM.
#
#	tests/vm/pyverbs/run.sh [--gid IDX] [--timeout S] [--per-test S] DEV [NAME...]
#
# or, from a test, `. "$OX_ROOT/tests/vm/pyverbs/run.sh"` and then
#
#	pyverbs_run [--gid IDX] [--timeout S] [--per-test S] DEV [NAME...]
#	pyverbs_roce_v2_ipv4_gid DEV     print the index of DEV's first RoCE v2 IPv4 GID (port 1)
#
# NAMEs are test modules or single tests relative to the suite ("test_pd",
# "test_device.DeviceTest.test_query_port"); none means the whole suite. --gid defaults to the
# RoCE v2 IPv4 GID if DEV has one, else 0. --timeout bounds the whole run (default 240 s),
# --per-test each test (default 60 s; an overrun is an ERROR).
#
# What it does: copies the suite to tmpfs once per boot ($PYVERBS_DIR, default /tmp/ox-pyverbs),
# gunzips it and applies patch-netdev.py (base.py's netdev lookup, for the rdmacm tests of
# software devices; see that file); loads ib_uverbs, mounts a tmpfs on /dev/shm if there is none
# (the VM has none; Python's multiprocessing, which the rdmacm tests use, needs it) and uses the
# uninstalled oxrdma provider (userspace-provider/env.sh); runs the selection with Debian's /usr/bin/python3 through
# runner.py (run_tests.py's argument parsing plus a per-test record). It prints one line per
# test ("ok", "skip", "FAIL", "ERROR", the test, the skip reason or error), unittest's own
# summary, and
#
#	pyverbs <dev>: ran N, ok N, skipped N, failed N, errors N
#
# The full unittest log goes to $OX_OUT/pyverbs-<dev>.log (and $OX_TMP or /tmp if there is no
# $OX_OUT), the per-test records to pyverbs-<dev>.tsv next to it (STATUS<TAB>TEST<TAB>DETAIL).
# After pyverbs_run, PYVERBS_RAN/_OK/_SKIPPED/_FAILED/_ERRORS hold the counts and
# PYVERBS_LOG/PYVERBS_RESULTS the two files. Status: 0 all tests ok or skipped, 1 some failed
# or had errors, 2 the run itself did not complete (timeout, crash, nothing ran).

PYVERBS_SRC=${PYVERBS_SRC:-/usr/share/doc/rdma-core/tests}
PYVERBS_DIR=${PYVERBS_DIR:-/tmp/ox-pyverbs}
PYVERBS_PY=${PYVERBS_PY:-/usr/bin/python3}
_PYVERBS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

_pyverbs_err() {
	echo "pyverbs: $*" >&2
}

# The suite in $PYVERBS_DIR/tests, prepared once.
pyverbs_prepare() {
	local d=$PYVERBS_DIR/tests
	[ ! -f "$d/.ox-prepared" ] || return 0
	[ -f "$PYVERBS_SRC/run_tests.py" ] || { _pyverbs_err "no test suite in $PYVERBS_SRC (python3-pyverbs)"; return 2; }
	"$PYVERBS_PY" -c 'import pyverbs.device' 2>/dev/null ||
		{ _pyverbs_err "$PYVERBS_PY cannot import pyverbs"; return 2; }
	rm -rf "$d" && mkdir -p "$d" && cp -r "$PYVERBS_SRC/." "$d/" || return 2
	gunzip -f "$d"/*.gz || { _pyverbs_err "gunzip failed in $d"; return 2; }
	"$PYVERBS_PY" "$_PYVERBS_HERE/patch-netdev.py" "$d/base.py" || return 2
	cp "$_PYVERBS_HERE/runner.py" "$d/ox_runner.py" || return 2
	: >"$d/.ox-prepared"
}

# ib_uverbs (no udev in the VM to load it), /dev/shm (multiprocessing's Barrier and Queue, used by
# the rdmacm tests, need it; the VM's devtmpfs /dev has none) and the uninstalled provider.
_pyverbs_env() {
	[ -d /sys/module/ib_uverbs ] || modprobe ib_uverbs || { _pyverbs_err "modprobe ib_uverbs failed"; return 2; }
	if [ ! -d /dev/shm ]; then
		if ! { mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm; }; then
			_pyverbs_err "cannot mount a tmpfs on /dev/shm"
			return 2
		fi
	fi
	# shellcheck source=SCRIPTDIR/../../../userspace-provider/env.sh
	. "$OX_ROOT/userspace-provider/env.sh" || return 2
	[ -f "$OXRDMA_PROVIDER_SO" ] || { _pyverbs_err "provider not built: $OXRDMA_PROVIDER_SO"; return 2; }
}

# One grep reads every type file (unused entries fail with EINVAL and are left out). No process
# substitution: the VM has no /dev/fd.
pyverbs_roce_v2_ipv4_gid() {
	local dir=/sys/class/infiniband/$1/ports/1 types i t g
	types=$(cd "$dir/gid_attrs/types" 2>/dev/null && grep -H . -- * 2>/dev/null | sort -n) || true
	while IFS=: read -r i t; do
		[ "$t" = "RoCE v2" ] || continue
		read -r g <"$dir/gids/$i" || continue
		if [[ $g == 0000:0000:0000:0000:0000:ffff:* ]]; then
			echo "$i"
			return 0
		fi
	done <<<"$types"
	return 1
}

pyverbs_run() {
	local gid='' limit=240 per_test=60
	while [ $# -gt 0 ]; do
		case $1 in
		--gid) gid=$2; shift 2;;
		--timeout) limit=$2; shift 2;;
		--per-test) per_test=$2; shift 2;;
		-*) _pyverbs_err "unknown option $1"; return 2;;
		*) break;;
		esac
	done
	[ $# -ge 1 ] || { _pyverbs_err "usage: pyverbs_run [--gid IDX] [--timeout S] [--per-test S] DEV [NAME...]"; return 2; }
	local dev=$1 outdir=${OX_OUT:-${OX_TMP:-/tmp}}
	shift
	PYVERBS_LOG=$outdir/pyverbs-$dev.log PYVERBS_RESULTS=$outdir/pyverbs-$dev.tsv
	PYVERBS_RAN=0 PYVERBS_OK=0 PYVERBS_SKIPPED=0 PYVERBS_FAILED=0 PYVERBS_ERRORS=0
	rm -f "$PYVERBS_LOG" "$PYVERBS_RESULTS"
	[ -e "/sys/class/infiniband/$dev" ] || { _pyverbs_err "no RDMA device $dev"; return 2; }
	[ -n "$gid" ] || gid=$(pyverbs_roce_v2_ipv4_gid "$dev") || gid=0
	pyverbs_prepare || return 2
	_pyverbs_env || return 2
	local what=${*:-the whole suite} gtype rc=0 t0=${EPOCHREALTIME//[!0-9]/} t1
	gtype=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$gid" 2>/dev/null) || gtype='?'
	echo "pyverbs $dev: gid $gid ($gtype), running $what"
	{
		echo "# $PYVERBS_PY ox_runner.py --dev $dev --gid $gid -v $* (in $PYVERBS_DIR/tests)"
		echo "# RDMAV_DRIVERS=$RDMAV_DRIVERS"
	} >"$PYVERBS_LOG"
	# The suite's tests open files relative to nothing in particular; run from the copy.
	(cd "$PYVERBS_DIR/tests" && exec timeout -k 5 "$limit" "$PYVERBS_PY" ox_runner.py \
		"$PYVERBS_DIR/tests" "$PYVERBS_RESULTS" "$per_test" -- --dev "$dev" --gid "$gid" -v "$@") \
		</dev/null >>"$PYVERBS_LOG" 2>&1 || rc=$?
	t1=$((${EPOCHREALTIME//[!0-9]/} - t0))

	local status test detail line summary=''
	if [ -f "$PYVERBS_RESULTS" ]; then
		while IFS=$'\t' read -r status test detail; do
			PYVERBS_RAN=$((PYVERBS_RAN + 1))
			case $status in
			ok) PYVERBS_OK=$((PYVERBS_OK + 1));;
			skip) PYVERBS_SKIPPED=$((PYVERBS_SKIPPED + 1));;
			FAIL) PYVERBS_FAILED=$((PYVERBS_FAILED + 1));;
			*) PYVERBS_ERRORS=$((PYVERBS_ERRORS + 1));;
			esac
			printf '  %-5s %s%s\n' "$status" "${test#tests.}" "${detail:+: $detail}"
		done <"$PYVERBS_RESULTS"
	fi
	# unittest's own summary: "Ran N tests in Xs" and "OK (skipped=N)" / "FAILED (...)".
	while IFS= read -r line; do
		[[ $line =~ ^(Ran\ [0-9]+\ tests?\ in|OK$|OK\ \(|FAILED\ \() ]] && summary+="${summary:+; }$line"
	done <"$PYVERBS_LOG"
	echo "pyverbs $dev: unittest: ${summary:-no summary} ($((t1 / 1000000)).$((t1 / 100000 % 10)) s wall)"
	echo "pyverbs $dev: ran $PYVERBS_RAN, ok $PYVERBS_OK, skipped $PYVERBS_SKIPPED, failed $PYVERBS_FAILED, errors $PYVERBS_ERRORS"

	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		_pyverbs_err "$dev: the run exceeded ${limit} s and was killed (log: $PYVERBS_LOG)"
		return 2
	fi
	if [ ! -f "$PYVERBS_RESULTS" ] || [ "$PYVERBS_RAN" = 0 ] || [[ $summary != "Ran $PYVERBS_RAN test"* ]]; then
		_pyverbs_err "$dev: the run did not complete (exit status $rc); end of $PYVERBS_LOG:"
		tail -n 20 "$PYVERBS_LOG" | sed 's/^/    /' >&2
		return 2
	fi
	((PYVERBS_FAILED + PYVERBS_ERRORS == 0)) || return 1
	return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	if ! grep -qs 'OX_MODROOT=' /proc/cmdline || [ "$(id -u)" != 0 ]; then
		echo "pyverbs: runs only as root in the test VM: scripts/vm-run $0 ..." >&2
		exit 2
	fi
	OX_ROOT=${OX_ROOT:-$(cd "$_PYVERBS_HERE/../../.." && pwd)}
	pyverbs_run "$@"
fi
