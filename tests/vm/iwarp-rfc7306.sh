#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RFC 7306 (immediate data and atomics) on oxiwarp, over rdma_cm, with tests/vm/iwarp/ext.c
# (librdmacm; every result checked). Between two oxiwarp devices in two namespaces, which
# negotiate the extensions in their MPA exchange: RDMA WRITEs with immediate (5000 bytes, 0
# bytes solicited, 1 MiB + 3 bytes) each completing one receive with the WRITE's length and
# the immediate; fetch-and-add and compare-and-swap (taken and not) returning the original
# values, the target's final value and every written byte checked; once with CRCs, once with
# markers too; perftest's ib_atomic_bw (both operations) and ib_atomic_lat over rdma_cm. A fetch-and-add at an address that is not 8-byte aligned is refused when
# posted and leaves memory as it was. Where the extensions are not negotiated (oxiwarp with
# iwarp_ext off; siw, which echoes the request's flags byte in its reply), a WRITE with
# immediate completes at once with a local QP operation error and the connection itself
# works. Nothing is left behind and the module unloads.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"
use_provider
ext=$OX_TMP/ext
# (gcc under TCG takes seconds, and minutes on a loaded debug kernel.)
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$ext" "$OX_ROOT/tests/vm/iwarp/ext.c" \
	-lrdmacm -libverbs

# ext_run LABEL MODE SERVER-NS CLIENT-NS SERVER-IP: one connection of ext.c in MODE.
ext_run() {
	local label=$1 mode=$2 sns=$3 cns=$4 sip=$5
	info "$label"
	cm_pair "$sns" "$cns" 7474 180 "$ext" server "$sip" 7474 "$mode" -- \
		"$ext" client "$sip" 7474 "$mode"
	expect_match "$PAIR_SERVER_OUT" '^server: ok$' "$label: server"
	expect_match "$PAIR_CLIENT_OUT" '^client: ok$' "$label: client"
}

ns_pair
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
expect_match "$(ip netns exec "$NS_A" ibv_devinfo -v -d oxa_i)" 'atomic_cap:[[:space:]]*ATOMIC_GLOB' \
	"oxiwarp offers atomics"

ext_run "oxiwarp to oxiwarp: writes with immediate, atomics" ext "$NS_B" "$NS_A" "$NS_B_IP4"
echo Y >/sys/module/oxrdma/parameters/iwarp_markers
ext_run "the same with markers" ext "$NS_B" "$NS_A" "$NS_B_IP4"
echo N >/sys/module/oxrdma/parameters/iwarp_markers
ext_run "a misaligned atomic" misaligned "$NS_B" "$NS_A" "$NS_B_IP4"
expect_match "$PAIR_CLIENT_OUT" '^client: misaligned fetch and add refused: Invalid argument$' \
	"misaligned atomic: refused when posted"
info "perftest's atomics over rdma_cm"
for op in FETCH_AND_ADD CMP_AND_SWAP; do
	perftest_pair "$NS_B" "$NS_A" 18515 120 ib_atomic_bw -R -F -p 18515 -n 200 -A "$op" -d oxb_i -- \
		ib_atomic_bw -R -F -p 18515 -n 200 -A "$op" -d oxa_i "$NS_B_IP4"
	info "ib_atomic_bw -R -A $op: $(perftest_row ib_atomic_bw 8 200 "$PAIR_CLIENT_OUT")"
done
perftest_pair "$NS_B" "$NS_A" 18515 120 ib_atomic_lat -R -F -p 18515 -n 200 -d oxb_i -- \
	ib_atomic_lat -R -F -p 18515 -n 200 -d oxa_i "$NS_B_IP4"
info "ib_atomic_lat -R: $(perftest_row ib_atomic_lat 8 200 "$PAIR_CLIENT_OUT")"
no_qp_cm_id_left "oxiwarp to oxiwarp"

echo N >/sys/module/oxrdma/parameters/iwarp_ext
expect_match "$(ip netns exec "$NS_A" ibv_devinfo -v -d oxa_i)" 'atomic_cap:[[:space:]]*ATOMIC_NONE' \
	"iwarp_ext off: no atomics offered"
ext_run "iwarp_ext off: nothing negotiated" noext "$NS_B" "$NS_A" "$NS_B_IP4"
expect_match "$PAIR_CLIENT_OUT" '^client: write with immediate refused: local QP operation error$' \
	"iwarp_ext off: refused locally"
echo Y >/sys/module/oxrdma/parameters/iwarp_ext
no_qp_cm_id_left "iwarp_ext off"

root_ns_pair
siw_add siw0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_i oxiwarp "$RN_DEV"
ext_run "oxiwarp to siw: nothing negotiated" noext "" "$RN_NS" "$RN_ROOT_IP4"
expect_match "$PAIR_CLIENT_OUT" '^client: write with immediate refused: local QP operation error$' \
	"siw: refused locally"
no_qp_cm_id_left "siw"

expect_ok rmmod oxrdma
pass
