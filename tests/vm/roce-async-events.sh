#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Completion channel events, the SRQ limit event and the CQ overflow event between two oxroce
# devices in two namespaces (tests/vm/events/events.py).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ns_pair
use_provider
rdma_link_add -n "$NS_A" oxa_r oxroce "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_r oxroce "$NS_B_DEV"
gid_a=$(roce_gid_index oxa_r "$(ipv4_gid "$NS_A_IP4")") || fail "no RoCE v2 IPv4 GID on oxa_r"
gid_b=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")") || fail "no RoCE v2 IPv4 GID on oxb_r"
OX_CMD_TIMEOUT=120 capture /usr/bin/python3 "$OX_ROOT/tests/vm/events/events.py" \
	oxa_r "$gid_a" oxb_r "$gid_b"
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "events.py exit status $EXPECT_RC"
expect_match "$EXPECT_OUT" '^events: 3 checks ok$' "all checks"
pass
