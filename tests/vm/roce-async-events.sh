#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Completion channel events, the SRQ limit event, the CQ overflow event, SQ_DRAINED (RTS ->
# SQD -> RTS), the request error of a READ at a QP without responder resources and the flush of
# receives posted to a QP in the error state, between two oxroce devices in two namespaces
# (tests/vm/events/events.py).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

oxroce_pair
gid_a=$GID_A gid_b=$GID_B
OX_CMD_TIMEOUT=120 capture /usr/bin/python3 "$OX_ROOT/tests/vm/events/events.py" \
	oxa_r "$gid_a" oxb_r "$gid_b"
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "events.py exit status $EXPECT_RC"
expect_match "$EXPECT_OUT" '^events: 6 checks ok$' "all checks"
pass
