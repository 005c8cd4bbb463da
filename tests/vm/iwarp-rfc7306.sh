#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RFC 7306 (immediate data and atomics) on oxiwarp, over rdma_cm, with tests/vm/iwarp/ext.c
# (librdmacm; every result checked). Between two oxiwarp devices in two namespaces, which
# negotiate the extensions in their MPA exchange: RDMA WRITEs with immediate (5000 bytes, 0
# bytes solicited, 1 MiB + 3 bytes) each completing one receive with the WRITE's length and
# the immediate; fetch-and-add and compare-and-swap (taken and not) returning the original
# values, the target's final value and every written byte checked; once with CRCs, once with
# markers too; perftest's ib_atomic_bw (both operations) and ib_atomic_lat over rdma_cm; a
# capture that Wireshark reads (CRCs good, nothing malformed, the atomics named).
# A scripted peer (tests/vm/iwarp/mpa-peer.py, MPA over a plain TCP socket) checks the wire:
# the negotiation bits, an atomic response's queue, sequence number, identifier and value,
# and the TERMINATE each hostile message gets (an atomic response nobody asked for, an
# unknown STag, a reserved atomic opcode, a misaligned target, immediate data without
# RFC 7306), the server's QP failing each time and the kernel staying clean. A fetch-and-add at an address that is not 8-byte aligned is refused when
# posted and leaves memory as it was. Where the extensions are not negotiated (oxiwarp with
# devices created with iwarp_ext off; siw, which echoes the request's flags byte in its
# reply), a WRITE with
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

capture_start "$NS_A" "$NS_A_DEV" 7474 "$OX_TMP/ext.pcap"
ext_run "oxiwarp to oxiwarp: writes with immediate, atomics" ext "$NS_B" "$NS_A" "$NS_B_IP4"
capture_stop
# Wireshark dissects the atomics (its names for opcodes 10 and 11, and their AOpCodes) and
# shows immediate data (8, 9) as unknown opcodes, without calling anything malformed.
tshark_check "$OX_TMP/ext.pcap" "RFC 7306 traffic"
expect_eq "$(grep -c 'OpCode: Atomic Request (0xa)' <<<"$TSHARK_OUT" || true)" 3 \
	"tshark: atomic requests"
expect_eq "$(grep -c 'OpCode: Atomic Response (0xb)' <<<"$TSHARK_OUT" || true)" 3 \
	"tshark: atomic responses"
expect_eq "$(grep -c 'OpCode: CmpSwap (2)' <<<"$TSHARK_OUT" || true)" 2 "tshark: compare-and-swaps"
expect_eq "$(grep -cE 'OpCode: Unknown \(0x[89]\)' <<<"$TSHARK_OUT" || true)" 3 \
	"tshark: immediate data messages"
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

# peer_case CASE: one connection of the scripted peer to ext.c's server.
peer_case() {
	local c=$1 spid out
	ip netns exec "$NS_B" "$ext" server "$NS_B_IP4" 7475 noext >"$OX_TMP/server.$c" 2>&1 &
	spid=$!
	wait_until 10 _ox_listening "$spid" 7475 "$NS_B" || fail "peer $c: the server does not listen"
	out=$(ip netns exec "$NS_A" timeout 60 python3 "$OX_ROOT/tests/vm/iwarp/mpa-peer.py" \
		"$NS_B_IP4" 7475 "$c" 2>&1) || true
	printf '%s\n' "$out"
	expect_match "$out" "^mpa-peer $c: ok$" "scripted peer: $c"
	wait_until 30 _ox_exited "$spid" || fail "peer $c: the server did not end"
	wait "$spid" || true
	if [ "$c" = good ]; then
		expect_match "$(<"$OX_TMP/server.$c")" '^server: ok$' "scripted peer: $c: the server's view"
	else
		expect_match "$(<"$OX_TMP/server.$c")" 'completion status' \
			"scripted peer: $c: the server's QP failed"
	fi
}
echo N >/sys/module/oxrdma/parameters/iwarp_crc
for c in good no-offer stray-resp bad-stag bad-aopcode misaligned; do
	peer_case "$c"
done
echo Y >/sys/module/oxrdma/parameters/iwarp_crc
no_qp_cm_id_left "scripted peer"

# The parameter counts for devices created after it changed.
echo N >/sys/module/oxrdma/parameters/iwarp_ext
expect_match "$(ip netns exec "$NS_A" ibv_devinfo -v -d oxa_i)" 'atomic_cap:[[:space:]]*ATOMIC_GLOB' \
	"iwarp_ext off: a device created before keeps its attributes"
link_del -n "$NS_A" oxa_i
link_del -n "$NS_B" oxb_i
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
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
