#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: oxroce, rxe and TCP side by side on one veth pair, in one run of the test VM
# (scripts/bench-guest.sh). Prints the table and keeps it in out/bench.txt.
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"
mkdir -p "$OX_ROOT/out"
echo "bench: booting the test VM (QEMU/TCG); this takes a few minutes"
set +e
"$OX_ROOT/scripts/vm-run" --variant "${1:-test}" --timeout 900 "$OX_ROOT/scripts/bench-guest.sh" 2>&1 |
	grep -vE '\] (sysrq: Power Off|reboot: Power down)' | tee "$OX_ROOT/out/bench.log"
rc=${PIPESTATUS[0]}
set -e
sed -n '/^== bench results/,$p' "$OX_ROOT/out/bench.log" >"$OX_ROOT/out/bench.txt"
[ "$rc" = 0 ] && echo "bench: done (out/bench.txt)" || echo "bench: FAILED (exit status $rc)"
exit "$rc"
