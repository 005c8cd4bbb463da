#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma_cm over oxiwarp (MPA/DDP/RDMAP over kernel TCP, through the iw_cm): between two
# namespaces over IPv4 and IPv6, and with siw both ways (across namespaces, and in one
# namespace beside a second oxiwarp device): rping with its data check, ucmatose, perftest's
# -R send/write/read bandwidth (odd sizes, above 1 MiB, sends into an SRQ, writes and reads on
# four QPs at once) and send latency; peer-to-peer mode (RFC 6581) with either
# ready-to-receive message. Then the failures a user meets: nobody listening (the connection
# is refused), a server killed in the middle of a run (the client ends, no hang). Nothing is
# left behind: no QP, no cm_id, and the module unloads.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"
use_provider

# iwarp_tools SERVER-NS SERVER-IP SERVER-DEV CLIENT-NS CLIENT-DEV [rdmacm-only]: with
# rdmacm-only, rping and ucmatose (servers bound to their address) but not perftest, whose
# server listens on the wildcard address. With IWARP_CLIENT_IP set, the clients connect from
# that address (rping -I, ucmatose -b, perftest --source_ip): in one namespace the route to
# the server's address is local and would take the server's own device as the client's.
iwarp_tools() {
	local sns=$1 sip=$2 sdev=$3 cns=$4 cdev=$5 only=${6:-} tool size n row
	local -a rb=() ub=() pb=()
	if [ -n "${IWARP_CLIENT_IP:-}" ]; then
		rb=(-I "$IWARP_CLIENT_IP") ub=(-b "$IWARP_CLIENT_IP") pb=(--source_ip "$IWARP_CLIENT_IP")
	fi
	info "rping -v: $cdev -> $sdev ($sip)"
	cm_pair "$sns" "$cns" 7174 120 rping -p 7174 -s -a "$sip" -v -C 20 -S 1000 -- \
		rping -p 7174 -c -a "$sip" "${rb[@]}" -v -C 20 -S 1000
	check_rping "rping server $sdev" "$PAIR_SERVER_OUT" 20
	check_rping "rping client $cdev" "$PAIR_CLIENT_OUT" 20
	info "ucmatose: $cdev -> $sdev"
	cm_pair "$sns" "$cns" 7471 120 ucmatose -p 7471 -b "$sip" -C 20 -S 4000 -- \
		ucmatose -p 7471 -s "$sip" "${ub[@]}" -C 20 -S 4000
	expect_match "$PAIR_SERVER_OUT" 'return status 0' "ucmatose server"
	expect_match "$PAIR_CLIENT_OUT" 'return status 0' "ucmatose client"
	[ -z "$only" ] || return 0
	for tool in ib_send_bw ib_write_bw ib_read_bw; do
		for size in 33 4099 1048583; do
			n=100
			[ "$size" -lt 100000 ] || n=10
			perftest_pair "$sns" "$cns" 18515 120 "$tool" -R -F -p 18515 -n "$n" -s "$size" -d "$sdev" -- \
				"$tool" -R -F -p 18515 -n "$n" -s "$size" -d "$cdev" "${pb[@]}" "$sip"
			row=$(perftest_row "$tool" "$size" "$n" "$PAIR_CLIENT_OUT")
			info "$tool -R $cdev -> $sdev: $row"
		done
	done
	perftest_pair "$sns" "$cns" 18515 120 ib_send_lat -R -F -p 18515 -n 200 -d "$sdev" -- \
		ib_send_lat -R -F -p 18515 -n 200 -d "$cdev" "${pb[@]}" "$sip"
	row=$(perftest_row ib_send_lat 2 200 "$PAIR_CLIENT_OUT")
	info "ib_send_lat -R $cdev -> $sdev: $row"
}

ns_pair
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
iwarp_tools "$NS_B" "$NS_B_IP4" oxb_i "$NS_A" oxa_i
info "IPv6: rping -v"
cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP6" -v -C 20 -- \
	rping -p 7174 -c -a "$NS_B_IP6" -v -C 20
check_rping "IPv6 rping server" "$PAIR_SERVER_OUT" 20
check_rping "IPv6 rping client" "$PAIR_CLIENT_OUT" 20
# perftest 4.5 hangs with -R, --use-srq and several QPs (siw's too); one QP with an SRQ, and
# several QPs without.
info "SRQ: ib_send_bw -R --use-srq, receives from a shared receive queue"
perftest_pair "$NS_B" "$NS_A" 18515 120 ib_send_bw -R -F --use-srq -p 18515 -n 200 -s 4099 \
	-d oxb_i -- ib_send_bw -R -F --use-srq -p 18515 -n 200 -s 4099 -d oxa_i "$NS_B_IP4"
info "ib_send_bw -R --use-srq: $(perftest_row ib_send_bw 4099 200 "$PAIR_CLIENT_OUT")"
# Four QPs, four connections set up at once, with WRITEs and READs. Not ib_send_bw -q 4:
# over iWARP its server returns receive credits with RDMA WRITEs to the address the client's
# QP of the same index gave, assuming its i-th accepted connection is the client's i-th QP;
# connections set up in parallel may be accepted in another order, and then a credit lands
# at another QP's counter and both ends wait forever (seen about once in 100 runs: a client
# QP that never sent, waiting on a credit that was never its own; siw is exposed the same way).
for tool in ib_write_bw ib_read_bw; do
	info "$tool -R -q 4: four QPs, four connections"
	perftest_pair "$NS_B" "$NS_A" 18515 120 "$tool" -R -F -q 4 -p 18515 -n 200 -s 4099 \
		-d oxb_i -- "$tool" -R -F -q 4 -p 18515 -n 200 -s 4099 -d oxa_i "$NS_B_IP4"
	info "$tool -R -q 4: $(perftest_row "$tool" 4099 800 "$PAIR_CLIENT_OUT")"
done
info "a capture: rping and ib_write_bw oxiwarp to oxiwarp"
capture_start "$NS_A" "$NS_A_DEV" 7174 "$OX_TMP/ox-ox.pcap"
cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP4" -v -C 5 -S 3000 -- \
	rping -p 7174 -c -a "$NS_B_IP4" -v -C 5 -S 3000
perftest_pair "$NS_B" "$NS_A" 7174 120 ib_write_bw -R -F -p 7174 -n 20 -s 5000 -d oxb_i -- \
	ib_write_bw -R -F -p 7174 -n 20 -s 5000 -d oxa_i "$NS_B_IP4"
capture_stop
tshark_check "$OX_TMP/ox-ox.pcap" "oxiwarp to oxiwarp"
no_qp_cm_id_left "after the tools"

# Peer-to-peer mode (RFC 6581): the initiator offers its ready-to-receive messages in the MPA
# request's IRD/ORD words (P, and W or R), the responder picks one in its reply, the
# initiator sends it first (a zero-length RDMA write, or read answered by an empty response)
# and the responder sends nothing before it.
for p2p in 1 2; do
	rtr=write want_ord='[89ab]'
	[ "$p2p" = 1 ] || rtr=read want_ord='[4567]'
	info "peer-to-peer mode, a zero-length RDMA $rtr as the ready-to-receive message"
	echo "$p2p" >/sys/module/oxrdma/parameters/iwarp_p2p
	capture_start "$NS_A" "$NS_A_DEV" 7174 "$OX_TMP/p2p.pcap"
	cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP4" -v -C 10 -S 2000 -- \
		rping -p 7174 -c -a "$NS_B_IP4" -v -C 10 -S 2000
	check_rping "p2p $rtr rping server" "$PAIR_SERVER_OUT" 10
	check_rping "p2p $rtr rping client" "$PAIR_CLIENT_OUT" 10
	capture_stop
	p2p_expect "$OX_TMP/p2p.pcap" "p2p $rtr" '[0-9a-f]' "$want_ord"
	for tool in ib_write_bw ib_read_bw ib_send_bw; do
		perftest_pair "$NS_B" "$NS_A" 18515 120 "$tool" -R -F -p 18515 -n 50 -s 5000 -d oxb_i -- \
			"$tool" -R -F -p 18515 -n 50 -s 5000 -d oxa_i "$NS_B_IP4"
		info "p2p $rtr $tool -R: $(perftest_row "$tool" 5000 50 "$PAIR_CLIENT_OUT")"
	done
done
echo 0 >/sys/module/oxrdma/parameters/iwarp_p2p
no_qp_cm_id_left "after peer-to-peer mode"

info "MPA markers (iwarp_markers on both ends): rping -v, ib_write_bw and ib_read_bw, captured"
echo Y >/sys/module/oxrdma/parameters/iwarp_markers
capture_start "$NS_A" "$NS_A_DEV" 7174 "$OX_TMP/markers.pcap"
cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP4" -v -C 10 -S 3000 -- \
	rping -p 7174 -c -a "$NS_B_IP4" -v -C 10 -S 3000
check_rping "markers: rping server" "$PAIR_SERVER_OUT" 10
check_rping "markers: rping client" "$PAIR_CLIENT_OUT" 10
for tool in ib_write_bw ib_read_bw; do
	perftest_pair "$NS_B" "$NS_A" 7174 120 "$tool" -R -F -p 7174 -n 10 -s 20011 -d oxb_i -- \
		"$tool" -R -F -p 7174 -n 10 -s 20011 -d oxa_i "$NS_B_IP4"
	info "markers: $tool -R: $(perftest_row "$tool" 20011 10 "$PAIR_CLIENT_OUT")"
done
capture_stop
echo N >/sys/module/oxrdma/parameters/iwarp_markers
# Wireshark places markers assuming that each TCP segment starts with an FPDU (its dissector
# says so); oxiwarp sends a stream, not one FPDU per segment, so Wireshark misreads FPDUs that
# straddle segments. Most must read right, with their CRC32C over the markers in place.
out=$(tshark -r "$OX_TMP/markers.pcap" --disable-heuristic rpcrdma_iwarp -V 2>&1) ||
	fail "tshark (markers): $out"
good=$(grep -c 'Good CRC32' <<<"$out" || true)
bad=$(grep -c 'Bad CRC32' <<<"$out" || true)
markers=$(grep -c 'FPDU back pointer' <<<"$out" || true)
info "markers: tshark read $good FPDUs with a good CRC32, $bad with a bad one, $markers markers"
[ "$markers" -gt 0 ] || fail "markers: tshark found none in the capture"
[ "$good" -ge $((9 * (good + bad) / 10)) ] || fail "markers: fewer than 90% of the FPDUs read right"
no_qp_cm_id_left "after markers"

info "no listener: the TCP connection is refused (REJECTED, -ECONNREFUSED)"
capture in_a timeout 30 rping -p 7174 -c -a "$NS_B_IP4" -C 1
[ "$EXPECT_RC" != 0 ] && [ "$EXPECT_RC" != 124 ] ||
	fail "rping without a server: exit status $EXPECT_RC: $EXPECT_OUT"
expect_match "$EXPECT_OUT" 'RDMA_CM_EVENT_REJECTED, error -111' "rping without a server"
no_qp_cm_id_left "after the refused connection"

info "peer gone: the server is killed in the middle of a run"
ip netns exec "$NS_B" rping -p 7174 -s -a "$NS_B_IP4" -C 100000 >"$OX_TMP/killed.server" 2>&1 &
server=$!
sleep 2
in_a timeout 120 rping -p 7174 -c -a "$NS_B_IP4" -C 100000 >"$OX_TMP/killed.client" 2>&1 &
client=$!
sleep 5
kill -0 "$client" 2>/dev/null || fail "the rping client ended early: $(<"$OX_TMP/killed.client")"
kill -KILL "$server"
wait "$server" 2>/dev/null || true
crc=0
wait_until 60 _ox_exited "$client" ||
	fail "the client still runs 60 s after its server died: $(<"$OX_TMP/killed.client")"
wait "$client" || crc=$?
[ "$crc" != 124 ] || fail "rping client: timed out after its server died"
info "client ended (status $crc) after the server was killed: $(tr '\n' ' ' <"$OX_TMP/killed.client" | cut -c1-200)"
no_qp_cm_id_left "after the killed server"

# With siw (root namespace) both ways. A wildcard rdma_cm listen (perftest's server) asks
# every iWARP device to listen, and siw binds its device's address in the listener's
# namespace: from the other namespace that fails, and with it the listen. So perftest runs
# with siw as the server only (its client moves data both ways: send and write to siw, read
# from it); rping and ucmatose, whose servers bind their address, run both ways.
root_ns_pair
siw_add siw0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_i oxiwarp "$RN_DEV"
iwarp_tools "$RN_NS" "$RN_IP4" oxn_i "" siw0 rdmacm-only
iwarp_tools "" "$RN_ROOT_IP4" siw0 "$RN_NS" oxn_i
info "IPv6 with siw: rping -v both ways"
cm_pair "$RN_NS" "" 7174 120 rping -p 7174 -s -a "$RN_IP6" -v -C 10 -- rping -p 7174 -c -a "$RN_IP6" -v -C 10
check_rping "rping server oxn_i" "$PAIR_SERVER_OUT" 10
cm_pair "" "$RN_NS" 7174 120 rping -p 7174 -s -a "$RN_ROOT_IP6" -v -C 10 -- \
	rping -p 7174 -c -a "$RN_ROOT_IP6" -v -C 10
check_rping "rping client oxn_i" "$PAIR_CLIENT_OUT" 10
info "a capture: rping and ib_write_bw between oxiwarp and siw"
capture_start "" "$RN_ROOT_DEV" 7174 "$OX_TMP/ox-siw.pcap"
cm_pair "$RN_NS" "" 7174 120 rping -p 7174 -s -a "$RN_IP4" -v -C 5 -S 3000 -- \
	rping -p 7174 -c -a "$RN_IP4" -v -C 5 -S 3000
perftest_pair "" "$RN_NS" 7174 120 ib_write_bw -R -F -p 7174 -n 20 -s 5000 -d siw0 -- \
	ib_write_bw -R -F -p 7174 -n 20 -s 5000 -d oxn_i "$RN_ROOT_IP4"
capture_stop
tshark_check "$OX_TMP/ox-siw.pcap" "oxiwarp with siw"
no_qp_cm_id_left "after siw"

# oxiwarp and siw in one namespace (the root one: two local addresses, traffic through lo).
# A wildcard listen makes every iWARP device listen on its own addresses, so oxiwarp serves
# perftest with siw as the client too; then two oxiwarp devices of one namespace, both
# listening on the wildcard address's port.
info "oxiwarp and siw in one namespace: everything both ways"
veth_root
rdma_link_add oxr_a oxiwarp "$VETH_A"
siw_add siw1 "$VETH_B"
IWARP_CLIENT_IP=$VETH_B_IP4 iwarp_tools "" "$VETH_A_IP4" oxr_a "" siw1
IWARP_CLIENT_IP=$VETH_A_IP4 iwarp_tools "" "$VETH_B_IP4" siw1 "" oxr_a
link_del siw1
rdma_link_add oxr_b oxiwarp "$VETH_B"
info "two oxiwarp devices in one namespace: wildcard listens side by side"
perftest_pair "" "" 18515 120 ib_write_bw -R -F -p 18515 -n 20 -s 65536 -d oxr_b -- \
	ib_write_bw -R -F -p 18515 -n 20 -s 65536 -d oxr_a --source_ip "$VETH_A_IP4" "$VETH_B_IP4"
info "ib_write_bw -R oxr_a -> oxr_b: $(perftest_row ib_write_bw 65536 20 "$PAIR_CLIENT_OUT")"
perftest_pair "" "" 18515 120 ib_read_bw -R -F -p 18515 -n 20 -s 65536 -d oxr_a -- \
	ib_read_bw -R -F -p 18515 -n 20 -s 65536 -d oxr_b --source_ip "$VETH_B_IP4" "$VETH_A_IP4"
info "ib_read_bw -R oxr_b -> oxr_a: $(perftest_row ib_read_bw 65536 20 "$PAIR_CLIENT_OUT")"
no_qp_cm_id_left "one namespace"

expect_ok rmmod oxrdma
info "rmmod oxrdma: clean"
pass
