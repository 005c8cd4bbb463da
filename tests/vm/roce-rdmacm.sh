#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# rdma_cm over oxroce (the GSI QP carries ib_cm's MADs): between two namespaces over IPv4 and
# IPv6, and with rxe both ways: rping with its data check, ucmatose (RC), udaddy (UD, SIDR),
# rdma_server/rdma_client, perftest's -R. Then the failures a user meets, with the errors
# librdmacm documents: no listener (REJECTED, IB_CM_REJ_INVALID_SERVICE_ID = 8), no such host
# (ADDR_ERROR, -ETIMEDOUT), a server killed mid-run (the client ends, no hang), a peer whose
# device went away (UNREACHABLE, -ETIMEDOUT, after ib_cm's retries). Nothing is left behind:
# no QP but the GSI QPs, no cm_id, and the module unloads.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"

check_status0() {
	local what=$1 out=$2
	expect_match "$out" 'return status 0' "$what"
}

# all_tools SERVER-NS SERVER-IP SERVER-DEV CLIENT-NS CLIENT-DEV
all_tools() {
	local sns=$1 sip=$2 sdev=$3 cns=$4 cdev=$5 row tool
	info "rping -v: $cdev -> $sdev ($sip)"
	cm_pair "$sns" "$cns" 7174 120 rping -p 7174 -s -a "$sip" -v -C 20 -S 1000 -- \
		rping -p 7174 -c -a "$sip" -v -C 20 -S 1000
	check_rping "rping server $sdev" "$PAIR_SERVER_OUT" 20
	check_rping "rping client $cdev" "$PAIR_CLIENT_OUT" 20
	info "ucmatose: $cdev -> $sdev"
	cm_pair "$sns" "$cns" 7471 120 ucmatose -p 7471 -b "$sip" -C 20 -S 4000 -- \
		ucmatose -p 7471 -s "$sip" -C 20 -S 4000
	check_status0 "ucmatose server" "$PAIR_SERVER_OUT"
	check_status0 "ucmatose client" "$PAIR_CLIENT_OUT"
	info "udaddy: $cdev -> $sdev"
	cm_pair "$sns" "$cns" 7174 120 udaddy -b "$sip" -C 20 -S 500 -- \
		udaddy -s "$sip" -C 20 -S 500
	check_status0 "udaddy server" "$PAIR_SERVER_OUT"
	check_status0 "udaddy client" "$PAIR_CLIENT_OUT"
	info "rdma_server / rdma_client: $cdev -> $sdev"
	cm_pair "$sns" "$cns" 7471 120 rdma_server -p 7471 -s "$sip" -- rdma_client -p 7471 -s "$sip"
	expect_match "$PAIR_SERVER_OUT" 'rdma_server: end 0' "rdma_server"
	expect_match "$PAIR_CLIENT_OUT" 'rdma_client: end 0' "rdma_client"
	for tool in ib_send_bw ib_write_bw; do
		perftest_pair "$sns" "$cns" 18515 120 "$tool" -R -F -p 18515 -n 200 -s 6000 -d "$sdev" -- \
			"$tool" -R -F -p 18515 -n 200 -s 6000 -d "$cdev" "$sip"
		row=$(grep -E '^[[:space:]]*6000[[:space:]]+200[[:space:]]' <<<"$PAIR_CLIENT_OUT" || true)
		[[ -n $row ]] || fail "$tool -R $cdev -> $sdev: no result row in: $PAIR_CLIENT_OUT"
		info "$tool -R: $row"
	done
	perftest_pair "$sns" "$cns" 18515 120 ib_read_lat -R -F -p 18515 -n 200 -d "$sdev" -- \
		ib_read_lat -R -F -p 18515 -n 200 -d "$cdev" "$sip"
	row=$(grep -E '^[[:space:]]*2[[:space:]]+200[[:space:]]' <<<"$PAIR_CLIENT_OUT" || true)
	[[ -n $row ]] || fail "ib_read_lat -R $cdev -> $sdev: no result row in: $PAIR_CLIENT_OUT"
	info "ib_read_lat -R: $row"
}

# Nothing but the GSI QPs, no cm_id.
nothing_left() {
	local what=$1 qps
	qps=$(rdma res show qp | grep -v ' type GSI ' || true)
	expect_eq "$qps" "" "$what: QPs left (other than GSI)"
	expect_eq "$(rdma res show cm_id)" "" "$what: cm_ids left"
}

# cm_error PATTERN WHAT CMD...: CMD fails (rping exits 255 on an rdma_cm error; a timeout is
# not the failure expected) and prints PATTERN.
cm_error() {
	local pattern=$1 what=$2
	shift 2
	capture "$@"
	if [ "$EXPECT_RC" = 0 ] || [ "$EXPECT_RC" = 124 ]; then
		_ox_show "output of: $(_ox_cmdline "$@")" "$EXPECT_OUT"
		fail "$what: expected an rdma_cm error, got exit status $EXPECT_RC"
	fi
	expect_match "$EXPECT_OUT" "$pattern" "$what"
}

nothing_left_quiet() {
	[ -z "$(rdma res show qp | grep -v ' type GSI ')" ] && [ -z "$(rdma res show cm_id)" ]
}

oxroce_pair
all_tools "$NS_B" "$NS_B_IP4" oxb_r "$NS_A" oxa_r
info "IPv6: rping -v, 20000-byte pings (READ and WRITE in segmentation offload runs), -V"
cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP6" -v -C 20 -S 20000 -- \
	rping -p 7174 -c -a "$NS_B_IP6" -v -V -C 20 -S 20000
check_rping "IPv6 rping server" "$PAIR_SERVER_OUT" 20
check_rping "IPv6 rping client" "$PAIR_CLIENT_OUT" 20
nothing_left "after the tools"

info "no listener: REJECTED, status 8 (invalid service ID)"
cm_error 'RDMA_CM_EVENT_REJECTED, error 8' "rping without a server" \
	in_a timeout 30 rping -p 7174 -c -a "$NS_B_IP4" -C 1
info "no such host: ADDR_ERROR, -ETIMEDOUT"
cm_error 'RDMA_CM_EVENT_ADDR_ERROR, error -110' "rping to nobody" \
	in_a timeout 30 rping -p 7174 -c -a 10.77.0.99 -C 1

info "peer gone: the server is killed in the middle of a run"
# (Neither `timeout` nor a shell function in front: `ip netns exec` execs rping, so $! is its pid.)
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
wait_until 20 nothing_left_quiet || true
nothing_left "after the killed server"

info "peer device gone: the connection request times out (ib_cm retries: about a minute)"
expect_ok ip netns exec "$NS_B" rdma link delete oxb_r
cm_error 'RDMA_CM_EVENT_UNREACHABLE, error -110' "rping to a host without RDMA" \
	in_a timeout 200 rping -p 7174 -c -a "$NS_B_IP4" -C 1
rdma_link_add -n "$NS_B" oxb_r oxroce "$NS_B_DEV"
nothing_left "after the timeout"

# With rxe (root namespace) both ways.
root_ns_pair
rxe_add rxe0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
all_tools "$RN_NS" "$RN_IP4" oxn_r "" rxe0
all_tools "" "$RN_ROOT_IP4" rxe0 "$RN_NS" oxn_r
info "IPv6 with rxe: rping -v both ways, 20000-byte pings, -V"
cm_pair "$RN_NS" "" 7174 120 rping -p 7174 -s -a "$RN_IP6" -v -C 10 -S 20000 -- \
	rping -p 7174 -c -a "$RN_IP6" -v -V -C 10 -S 20000
check_rping "rping server oxn_r" "$PAIR_SERVER_OUT" 10
cm_pair "" "$RN_NS" 7174 120 rping -p 7174 -s -a "$RN_ROOT_IP6" -v -C 10 -S 20000 -- \
	rping -p 7174 -c -a "$RN_ROOT_IP6" -v -V -C 10 -S 20000
check_rping "rping client oxn_r" "$PAIR_CLIENT_OUT" 10
nothing_left "after rxe"

expect_ok rmmod oxrdma
info "rmmod oxrdma: clean"
pass
