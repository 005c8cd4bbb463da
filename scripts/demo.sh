#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make demo: boot the test VM and show oxrdma working there (scripts/demo-guest.sh).
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"
echo "demo: booting the test VM (QEMU/TCG, about 10 s)"
exec "$OX_ROOT/scripts/vm-run" --variant "${1:-test}" --timeout 300 "$OX_ROOT/scripts/demo-guest.sh" 2>&1 \
	| grep -vE '^(\x1b|SeaBIOS|iPXE|Press Ctrl-B|Booting from ROM|$)'
