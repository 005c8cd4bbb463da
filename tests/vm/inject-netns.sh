#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The RoCE v2 packet injector (tests/vm/inject/roce.py, used by the hostile-peer tests) over a
# real path: its host test's Netns class, which needs root and network namespaces and so is
# skipped on the host. Two namespaces joined by a veth pair, over IPv4, IPv6 and IPv6
# link-local: every rxe capture sent from one side arrives byte for byte with its ICRC on the
# other, and nothing answers with an ICMP error.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

expect_ok env ROCE_NETNS_TEST=1 python3 -B "$OX_ROOT/tests/vm/inject/test_roce.py" -v Netns
expect_match "$EXPECT_OUT" 'packets across the veth pair ok$' "test_roce.py Netns"
# "OK" alone: no test skipped.
expect_match "$EXPECT_OUT" '^OK$' "test_roce.py Netns"
pass
