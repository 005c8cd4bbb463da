#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kernel treats the shared rings of iWARP QPs as hostile, as it does RoCE's
# (roce-hostile-rings.sh): tests/vm/iwarp/hostile-ring.c connects oxiwarp QPs over rdma_cm
# between two namespaces and scribbles over its own rings (SQ producer index beyond the ring, a
# garbage WQE, a bad L_Key, SGEs past their MR and of 4 GiB - 1 bytes, 255 SGEs, inline data
# longer than its slot, a garbage CQ consumer index). Each victim QP gets the error completion
# and/or error state expected; a bystander connection on the same devices carries a SEND both
# ways after each; everything is gone afterwards; the kernel log stays clean (the harness
# fails the test on any splat).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"
use_provider
prog=$OX_TMP/hostile-ring
# (gcc under TCG takes seconds, and minutes on a loaded debug kernel.)
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$prog" "$OX_ROOT/tests/vm/iwarp/hostile-ring.c" \
	-lrdmacm -libverbs -lpthread

ns_pair
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
victims=8
cm_pair "$NS_B" "$NS_A" 7476 240 "$prog" server "$NS_B_IP4" 7476 "$victims" -- \
	"$prog" client "$NS_B_IP4" 7476
info "$(tr '\n' ';' <<<"$PAIR_CLIENT_OUT")"
expect_match "$PAIR_CLIENT_OUT" "^client: $victims scenarios ok\$" "client: all scenarios"
expect_match "$PAIR_SERVER_OUT" '^server: ok$' "server"
no_qp_cm_id_left "hostile rings"
pass
