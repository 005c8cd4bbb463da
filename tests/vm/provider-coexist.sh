#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# VM test (run as root in the test VM: scripts/vm-run --no-module <this script>): with the
# uninstalled provider loaded first (env.sh), rxe and siw devices, including an rxe device
# whose name does not say "rxe", are still claimed by librxe/libsiw and usable. This is the
# path where libibverbs walks every provider's match table for devices that report a driver
# id (the provider's table must exist, holding only the sentinel).
# Prints PASS/FAIL lines and "provider-coexist: N passed, N failed"; exits 1 on a failure.
set -uo pipefail
here=$OX_ROOT/userspace-provider
passed=0 failed=0
check() { if eval "$2"; then echo "PASS provider-coexist: $1"; passed=$((passed + 1));
	else echo "FAIL provider-coexist: $1"; failed=$((failed + 1)); fi; }

[ -f "$here/out/liboxrdma-rdmav34.so" ] || { echo "FAIL provider-coexist: provider not built"; exit 1; }
if ! modprobe rdma_rxe || ! modprobe siw; then
	echo "FAIL provider-coexist: modprobe rdma_rxe siw"
	exit 1
fi
ip link add oxc0 type veth peer name oxc1 && ip link set oxc0 up && ip link set oxc1 up
rdma link add rxe0 type rxe netdev oxc0
rdma link add lab0 type rxe netdev oxc1
rdma link add siw0 type siw netdev oxc1

# shellcheck source=SCRIPTDIR/../env.sh
. "$here/env.sh"
t=$(mktemp -d)
IBV_SHOW_WARNINGS=1 ibv_devices >"$t/out" 2>"$t/err"
check "ibv_devices succeeds" "[ $? = 0 ]"
check "no libibverbs warnings" "[ ! -s '$t/err' ]"
LD_DEBUG=libs ibv_devices >/dev/null 2>"$t/ld_debug"
check "the provider was loaded" "grep -q 'calling init: $OXRDMA_PROVIDER_SO' '$t/ld_debug'"
for d in rxe0 lab0 siw0; do
	check "$d listed" "grep -qE '^[[:space:]]+${d}[[:space:]]' '$t/out'"
	check "$d opens (ibv_devinfo)" "ibv_devinfo -d $d >/dev/null 2>&1"
done
check "siw0 is iWARP (libsiw)" "ibv_devinfo -d siw0 | grep -q 'transport:.*iWARP'"
rm -rf "$t"
echo "provider-coexist: $passed passed, $failed failed"
[ "$failed" = 0 ]
