#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# VM test of the device path against oxrdma.ko (run as root in the test VM:
# scripts/vm-run <this script>): matching by hca_type with user-chosen names, context
# allocation (ALLOC_UCONTEXT response check), query device/port, PD alloc/dealloc, for a
# RoCE and an iWARP device.
# Prints PASS/FAIL lines and "provider-device: N passed, N failed"; exits 1 on a failure.
set -uo pipefail
here=$OX_ROOT/userspace-provider
passed=0 failed=0
check() { if eval "$2"; then echo "PASS provider-device: $1"; passed=$((passed + 1));
	else echo "FAIL provider-device: $1"; failed=$((failed + 1)); fi; }

[ -f "$here/out/liboxrdma-rdmav34.so" ] || { echo "FAIL provider-device: provider not built"; exit 1; }
modprobe oxrdma || { echo "FAIL provider-device: modprobe oxrdma"; exit 1; }
ip link add oxd0 type veth peer name oxd1 && ip link set oxd0 up && ip link set oxd1 up
rdma link add lab-roce type oxroce netdev oxd0
rdma link add w7 type oxiwarp netdev oxd1

t=$(mktemp -d)
IBV_SHOW_WARNINGS=1 ibv_devices >"$t/without.out" 2>"$t/without.err"
check "without the provider, the devices are unclaimed" \
	"grep -q 'driver found for lab-roce' '$t/without.err' && grep -q 'driver found for w7' '$t/without.err'"

# shellcheck source=SCRIPTDIR/../env.sh
. "$here/env.sh"
IBV_SHOW_WARNINGS=1 ibv_devices >"$t/out" 2>"$t/err"
check "ibv_devices: no warnings" "[ ! -s '$t/err' ]"
for d in lab-roce w7; do
	check "$d listed" "grep -qE '^[[:space:]]+${d}[[:space:]]' '$t/out'"
	ibv_devinfo -v -d "$d" >"$t/$d" 2>&1
	check "$d: ibv_devinfo (open, query device, query port)" "[ $? = 0 ]"
	check "$d: port 1 active, Ethernet link layer" \
		"grep -q 'state:.*PORT_ACTIVE' '$t/$d' && grep -q 'link_layer:.*Ethernet' '$t/$d'"
	check "$d: fw_ver formatted" "grep -qE 'fw_ver:[[:space:]]+[0-9]+\.[0-9]+\.[0-9]+$' '$t/$d'"
done
check "lab-roce is InfiniBand transport (RoCE)" "grep -q 'transport:.*InfiniBand' '$t/lab-roce'"
check "w7 is iWARP transport" "grep -q 'transport:.*iWARP' '$t/w7'"

python3 - >"$t/pd" 2>&1 <<'PY'
import pyverbs.device as d
from pyverbs.pd import PD
for name in ("lab-roce", "w7"):
    ctx = d.Context(name=name)
    pds = [PD(ctx) for _ in range(4)]
    assert len({p.handle for p in pds}) == 4, "PD handles not distinct"
    for p in pds:
        p.close()
    ctx.close()
    print(name, "ok")
PY
check "PD alloc/dealloc on both devices (pyverbs)" "[ $? = 0 ]"
[ "$failed" = 0 ] || for f in "$t"/*; do echo "--- $f"; cat "$f"; done
rm -rf "$t"
echo "provider-device: $passed passed, $failed failed"
[ "$failed" = 0 ]
