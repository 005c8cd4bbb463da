#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in a VM started by scripts/insn-count (QEMU with the insn-count plugin): for each of
# SYSTEMS (oxiwarp, siw), a 2-byte ib_send_lat over rdma_cm between two local addresses (TCP
# over lo, root namespace; oxiwarp without MPA CRCs, as siw runs), with the plugin's counts
# taken at two moments while it runs ($OX_OUT/counts-WHAT-a.txt and -b.txt) and the kernel's
# symbols ($OX_OUT/kallsyms-WHAT.txt) for scripts/insn-count-report.py.
#   insn-count-guest.sh [SYSTEMS...]
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=${OX_ITERS:-200000} window=${OX_WINDOW:-4}
modprobe rdma_ucm
modprobe oxrdma
modprobe siw
use_provider
veth_root
echo 0 >/sys/module/oxrdma/parameters/iwarp_crc
echo 0 >/proc/sys/kernel/kptr_restrict

# snap NAME: asks the plugin for its counts; waits until it took them.
snap() {
	(: >"$OX_OUT/snap-$1") 2>/dev/null || true
	wait_until 20 test ! -e "$OX_OUT/snap-$1" || fail "the plugin took no snapshot $1"
}

systems=("$@")
[ ${#systems[@]} -gt 0 ] || systems=(oxiwarp siw)
for what in "${systems[@]}"; do
	case $what in
	siw) siw_add iw_a "$VETH_A"; siw_add iw_b "$VETH_B" ;;
	oxiwarp) rdma_link_add iw_a oxiwarp "$VETH_A"; rdma_link_add iw_b oxiwarp "$VETH_B" ;;
	*) fail "usage: insn-count-guest.sh [oxiwarp|siw]..." ;;
	esac
	ib_send_lat -R -F -n "$iters" -s 2 -d iw_b >"$OX_TMP/server" 2>&1 &
	server=$!
	wait_until 20 _ox_listening "$server" 18515 "" || fail "$what: the server does not listen"
	sleep 1
	ib_send_lat -R -F -n "$iters" -s 2 -d iw_a "$VETH_B_IP4" >"$OX_TMP/client" 2>&1 &
	client=$!
	sleep 4
	kill -0 "$client" 2>/dev/null || fail "$what: the client ended early: $(cat "$OX_TMP/client")"
	snap "$what-a"
	sleep "$window"
	snap "$what-b"
	kill -0 "$client" 2>/dev/null || fail "$what: the client ended inside the window; raise OX_ITERS"
	cat /proc/kallsyms >"$OX_OUT/kallsyms-$what.txt"
	wait "$client" || fail "$what client: $(cat "$OX_TMP/client")"
	wait "$server" || true
	info "$what: $(grep -E '^[[:space:]]*2[[:space:]]+' "$OX_TMP/client" | tail -1)"
	if [ "$what" = siw ]; then
		rdma link delete iw_a
		rdma link delete iw_b
	else
		link_del iw_a
		link_del iw_b
	fi
done
pass "insn-count: ${systems[*]}"
