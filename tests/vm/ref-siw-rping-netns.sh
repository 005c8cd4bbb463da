#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Reference: siw (iWARP) devices created inside two network namespaces connect through rdma_cm;
# rping from oxa to a server in oxb completes 10 verified pings over IPv4, then over IPv6. Proves
# ns_pair, siw_add -n and run_pair_ns the way the oxiwarp tests will use them.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

count=10

ns_pair
siw_add -n "$NS_A" siwa "$NS_A_DEV"
siw_add -n "$NS_B" siwb "$NS_B_DEV"

# The server binds to its address: with siw devices in two namespaces a wildcard rdma_cm listen
# fails (EADDRINUSE). rping listens on rdma_cm port 7174.
for addr in "$NS_B_IP4" "$NS_B_IP6"; do
	run_pair_ns --port 7174 30 \
		rping -s -a "$addr" -C "$count" -v -V -- \
		rping -c -a "$addr" -C "$count" -v -V
	expect_eq "$(count_matches "$PAIR_CLIENT_OUT" '^ping data: rdma-ping-[0-9]+: ')" "$count" \
		"client ping lines ($addr)"
	expect_eq "$(count_matches "$PAIR_SERVER_OUT" '^server ping data: rdma-ping-[0-9]+: ')" "$count" \
		"server ping lines ($addr)"
	expect_match "$PAIR_CLIENT_OUT" "^ping data: rdma-ping-$((count - 1)): " \
		"client: last ping ($addr)"
	expect_no_match "$PAIR_CLIENT_OUT"$'\n'"$PAIR_SERVER_OUT" 'mismatch|error|fail' "rping output ($addr)"
done

pass
