#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Allocation failures under traffic (issue 14): tests/vm/soak-mixed.sh with SOAK_FAULTS
# (default 2 %) of allocations failing for SOAK_MINUTES (default 1; `make faults` runs 10).
# See soak-mixed.sh for the runs and what is checked.
export SOAK_FAULTS=${SOAK_FAULTS:-2} SOAK_MINUTES=${SOAK_MINUTES:-1}
exec bash "$OX_ROOT/tests/vm/soak-mixed.sh"
