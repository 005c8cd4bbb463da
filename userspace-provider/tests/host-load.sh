#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Host test of the built provider, no kernel module needed: links and symbols of
# out/liboxrdma-rdmav34.so, then libibverbs loading it through userspace-provider/env.sh and
# matching devices of a fake sysfs tree.
#
# libibverbs loads providers only when some device is unclaimed, so the load test needs
# devices. When the kernel has no RDMA netlink (no ib_core loaded, as on the build host),
# libibverbs enumerates devices from sysfs under $SYSFS_PATH; each also needs
# /dev/infiniband/uverbsN to exist, which a private mount namespace provides (an overlay on
# /dev, root only). Those checks are skipped (SKIP lines) where this is impossible.
#
# Prints PASS/FAIL/SKIP lines and "provider-host: N passed, N failed"; exits 1 on a failure.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
so=$here/out/liboxrdma-rdmav34.so

if [ "${1:-}" = --inner ]; then
	# In the private mount namespace: make /dev/infiniband/uverbsN stat()-able, then run
	# ibv_devices against the fake sysfs without and with the uninstalled provider.
	t=$2
	mkdir -p "$t/up" "$t/work"
	mount -t overlay overlay -o "lowerdir=/dev,upperdir=$t/up,workdir=$t/work" /dev || exit 3
	mkdir -p /dev/infiniband
	for u in "$t"/sys/class/infiniband_verbs/uverbs*; do : >"/dev/infiniband/${u##*/}"; done
	export SYSFS_PATH=$t/sys IBV_SHOW_WARNINGS=1
	env -u RDMAV_DRIVERS ibv_devices >"$t/without.out" 2>"$t/without.err"
	# shellcheck source=SCRIPTDIR/../env.sh
	. "$here/env.sh"
	ibv_devices >"$t/with.out" 2>"$t/with.err"
	LD_DEBUG=libs ibv_devices >/dev/null 2>"$t/ld_debug.err"
	exit 0
fi

passed=0 failed=0
pass() { echo "PASS provider-host: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL provider-host: $1"; failed=$((failed + 1)); }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }
finish() {
	echo "provider-host: $passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

"$here/build.sh" || { fail "build.sh"; finish; }

# --- the library itself ------------------------------------------------------------------
libibverbs=$(readlink -f "$(ldconfig -p | awk '/libibverbs\.so\.1 /{print $NF; exit}')")
check "ldd resolves every dependency" "! ldd '$so' | grep -q 'not found'"
check "links libibverbs.so.1" "readelf -d '$so' | grep -q 'NEEDED.*\[libibverbs\.so\.1\]'"
check "soname is liboxrdma-rdmav34.so" "readelf -d '$so' | grep -q 'SONAME.*\[liboxrdma-rdmav34\.so\]'"
check "imports verbs_register_driver_34@IBVERBS_PRIVATE_34" \
	"nm -D '$so' | grep -qE '^ +U verbs_register_driver_34@IBVERBS_PRIVATE_34$'"
check "exports no symbols (registration is by constructor)" \
	"[ -z \"\$(nm -D --defined-only '$so')\" ]"
check "has an ELF constructor (.init_array)" "readelf -d '$so' | grep -q INIT_ARRAY"
# Every private symbol used must be exported by the installed libibverbs (not v55-only).
missing=$(comm -23 \
	<(nm -D "$so" | sed -n 's/^ *U \(.*\)@IBVERBS_PRIVATE_34$/\1/p' | sort -u) \
	<(objdump -T "$libibverbs" | awk 'NF > 1 && $(NF-1) == "IBVERBS_PRIVATE_34" {print $NF}' | sort -u))
check "all IBVERBS_PRIVATE_34 imports exist in $libibverbs${missing:+ (missing: $missing)}" \
	"[ -z '$missing' ]"

# --- loading and matching through libibverbs ---------------------------------------------
if ! command -v ibv_devices >/dev/null; then
	echo "SKIP provider-host: load test (ibv_devices not installed: Debian ibverbs-utils)"
	finish
fi
if python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 20)' 2>/dev/null; then
	echo "SKIP provider-host: load test (kernel has RDMA netlink; libibverbs would ignore SYSFS_PATH)"
	finish
fi
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
	echo "SKIP provider-host: load test (needs root and unshare for a private /dev/infiniband)"
	finish
fi

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
sys=$t/sys
mkdir -p "$sys/class/infiniband_verbs"
echo 6 >"$sys/class/infiniband_verbs/abi_version"
n=0
# fake_dev NAME UVERBS_ABI NODE_TYPE [HCA_TYPE]
fake_dev() {
	local u=$sys/class/infiniband_verbs/uverbs$n d=$sys/class/infiniband/$1
	mkdir -p "$u" "$d"
	echo "$1" >"$u/ibdev"
	echo "231:$((192 + n))" >"$u/dev"
	echo "$2" >"$u/abi_version"
	echo "$3" >"$d/node_type"
	printf '0002:c9ff:fe00:%04x\n' "$n" >"$d/node_guid"
	[ $# -lt 4 ] || printf '%s\n' "$4" >"$d/hca_type"
	n=$((n + 1))
}
fake_dev oxr0 1 "1: CA" oxroce
fake_dev lab-iw 1 "4: RNIC" oxiwarp
fake_dev chip0 1 "1: CA" MT4099
fake_dev plain0 1 "4: RNIC"
fake_dev oxnext 2 "1: CA" oxroce

if ! unshare -m --propagation private "$0" --inner "$t"; then
	echo "SKIP provider-host: load test (no private mount namespace with an overlay on /dev)"
	finish
fi

# shellcheck disable=SC2317 # called through check/eval
listed() { grep -qE "^[[:space:]]+$2[[:space:]]+[0-9a-f]{16}$" "$t/$1.out"; }
check "without the provider, oxr0 is unclaimed" \
	"! listed without oxr0 && grep -q 'no userspace device-specific driver found for oxr0' '$t/without.err'"
check "no 'couldn't load driver' warning with env.sh" "! grep -q \"couldn't load driver\" '$t/with.err'"
check "libibverbs ran the provider's constructor (LD_DEBUG=libs)" \
	"grep -q 'calling init: $so' '$t/ld_debug.err'"
check "claims oxr0 (hca_type oxroce)" "listed with oxr0"
check "claims lab-iw (hca_type oxiwarp, any name)" "listed with lab-iw"
check "leaves chip0 (foreign hca_type) unclaimed" \
	"! listed with chip0 && grep -q 'driver found for chip0' '$t/with.err'"
check "leaves plain0 (no hca_type) unclaimed" \
	"! listed with plain0 && grep -q 'driver found for plain0' '$t/with.err'"
check "refuses oxnext (uverbs ABI 2) with libibverbs' ABI warning" \
	"! listed with oxnext && grep -q 'Driver oxrdma does not support the kernel ABI of 2 (supports 1 to 1)' '$t/with.err'"
if [ "$failed" != 0 ]; then
	for f in without.out without.err with.out with.err; do echo "--- $f"; cat "$t/$f"; done
fi
finish
