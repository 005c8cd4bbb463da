#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make demo: boot the test VM and show oxrdma working there (scripts/demo-guest.sh).
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"
echo "demo: booting the test VM (QEMU/TCG, about 10 s)"
set +e
"$OX_ROOT/scripts/vm-run" --variant "${1:-test}" --timeout 300 "$OX_ROOT/scripts/demo-guest.sh" 2>&1 |
	grep -vE '\] (sysrq: Power Off|reboot: Power down)'
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && echo "demo: done" || echo "demo: FAILED (exit status $rc)"
exit "$rc"
