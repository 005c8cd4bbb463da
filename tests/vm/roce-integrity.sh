#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Data integrity between two oxroce devices in two namespaces (tests/vm/integrity/integrity.py:
# a 4 MiB pseudo-random pattern moved with RDMA WRITE, RDMA READ and SEND/RECV in odd and
# multi-packet sizes, every byte compared; streams of small writes and reads, mostly
# unsignaled; atomics), first on a clean link, then with netem dropping, duplicating and
# reordering packets on both veth ends: RC must still deliver every byte exactly once.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

oxroce_pair
gid_a=$GID_A gid_b=$GID_B
prog=$OX_ROOT/tests/vm/integrity/integrity.py

run_integrity() {
	local what=$1 mib=$2
	OX_CMD_TIMEOUT=400 capture /usr/bin/python3 "$prog" oxa_r "$gid_a" oxb_r "$gid_b" "$mib" \
		streams
	info "$what: $(tr '\n' ';' <<<"$EXPECT_OUT")"
	[ "$EXPECT_RC" = 0 ] || fail "$what: integrity.py exit status $EXPECT_RC"
	expect_match "$EXPECT_OUT" "^integrity: $((3 * mib * 1048576)) bytes checked$" "$what: all bytes"
	expect_match "$EXPECT_OUT" "^small: 524288 bytes in 8192 messages of 64 bytes ok$" \
		"$what: streams of small messages"
}

run_integrity "clean link" 4

# Loss, duplication and reordering on both directions.
pin_neighbours
expect_ok ip netns exec "$NS_A" tc qdisc add dev "$NS_A_DEV" root netem loss 2% duplicate 1% \
	delay 1ms reorder 10% 50%
expect_ok ip netns exec "$NS_B" tc qdisc add dev "$NS_B_DEV" root netem loss 2% duplicate 1%
run_integrity "netem loss 2%, duplicate 1%, reorder 10%" 1
expect_ok ip netns exec "$NS_A" tc -s qdisc show dev "$NS_A_DEV"
info "netem on $NS_A_DEV: $(grep -oE 'Sent [0-9]+ bytes [0-9]+ pkt \(dropped [0-9]+' <<<"$EXPECT_OUT")"

pass
