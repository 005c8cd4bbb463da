#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kernel treats the shared rings as hostile (tests/vm/hostile/hostile.py): a process
# scribbling over its own SQ, RQ, SRQ and CQ rings gets error completions or an error state on
# its own QP (a corrupt SRQ raises its error event); another QP pair on the same devices keeps
# working; the kernel log stays clean (the harness fails the test on any splat).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

oxroce_pair
gid_a=$GID_A gid_b=$GID_B
OX_CMD_TIMEOUT=300 capture /usr/bin/python3 "$OX_ROOT/tests/vm/hostile/hostile.py" \
	oxa_r "$gid_a" oxb_r "$gid_b"
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "hostile.py exit status $EXPECT_RC"
expect_match "$EXPECT_OUT" '^hostile: 10 scenarios ok$' "all scenarios"
pass
