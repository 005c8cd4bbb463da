#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The link and the addresses under traffic (issue 14), between oxroce devices in two namespaces
# with ib_write_bw running, and between oxiwarp devices with rping: the peer's link down for a
# moment (200 ms) and up again: the RoCE transfer carries on (its retries cover the gap), and
# so does the iWARP one after 2 s down (TCP's). Down for 10 s (ib_write_bw's retries, their
# timeout doubling, last about 5 s): the RoCE writer's QP exhausts its retries and
# ib_write_bw ends on a RETRY_EXC_ERR completion (status 12); once the link is up a
# new connection works at once. The responder's address removed: the same error for the
# writer, and with the address back (a new GID), a new connection works at once. The writer's
# own address removed: the same error. The kernel log stays clean and nothing leaks (vm-run's
# checks), and the module unloads.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ns_pair
use_provider
modprobe rdma_ucm || fail "modprobe rdma_ucm"
# rdma_cm (rping) binds an address to the first registered device that has it.
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
oxroce_devices

# carries_on PORT WHAT: the writer on PORT still runs and moves data.
carries_on() {
	tx_moving "$NS_A" "$NS_A_DEV" 3 || fail "no traffic after $2"
	kill -0 "$CLIENT_PID" || fail "the writer ended after $2: $(<"$OX_TMP/client.$1")"
	kill -0 "$SERVER_PID" || fail "the responder ended after $2: $(<"$OX_TMP/server.$1")"
}

# retry_exceeded PORT WHAT: the writer on PORT ends within 60 s on a RETRY_EXC_ERR completion
# (its responder, which hears nothing more, is stopped).
retry_exceeded() {
	local t0=$SECONDS
	wait_until 60 _ox_exited "$CLIENT_PID" || fail "the writer still runs 60 s after $2"
	wait "$CLIENT_PID" && fail "the writer succeeded after $2: $(<"$OX_TMP/client.$1")"
	grep -q 'Failed status 12:' "$OX_TMP/client.$1" ||
		fail "the writer ended without RETRY_EXC_ERR after $2: $(<"$OX_TMP/client.$1")"
	info "ok: the writer ended on RETRY_EXC_ERR (status 12) $((SECONDS - t0)) s after $2"
	kill -9 "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
}

# works PORT WHAT: a new RC connection between the devices moves 100 messages each way.
works() {
	run_pair_ns --port "$1" 60 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p "$1" -n 100 -c -- \
		ibv_rc_pingpong -d oxa_r -g "$GID_A" -p "$1" -n 100 -c "$NS_B_IP4"
	check_pingpong "$2: server" "$PAIR_SERVER_OUT" 100
	check_pingpong "$2: client" "$PAIR_CLIENT_OUT" 100
}

info "RoCE: the peer's link down for 200 ms under traffic"
roce_writer 18720
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" down
sleep 0.2
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" up
wait_until 10 _ox_port_active oxa_r || fail "oxa_r's port is not ACTIVE again"
carries_on 18720 "a 200 ms link flap"
info "ok: the transfer carries on"

info "RoCE: the peer's link down for 10 s under traffic"
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" down
sleep 10
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" up
retry_exceeded 18720 "10 s with the peer's link down"
wait_until 10 _ox_port_active oxa_r || fail "oxa_r's port is not ACTIVE again"
works 18721 "after the link came back"

info "RoCE: the responder's address removed under traffic"
roce_writer 18722
expect_ok ip -n "$NS_B" addr del "$NS_B_IP4/24" dev "$NS_B_DEV"
retry_exceeded 18722 "the responder's address was removed"
roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")" >/dev/null &&
	fail "oxb_r still has the GID of the removed address"
expect_ok ip -n "$NS_B" addr add "$NS_B_IP4/24" dev "$NS_B_DEV"
wait_until 10 roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")" ||
	fail "no GID on oxb_r for the address added back"
GID_B=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")")
works 18723 "with the address back"

info "RoCE: the writer's own address removed under traffic"
roce_writer 18724
expect_ok ip -n "$NS_A" addr del "$NS_A_IP4/24" dev "$NS_A_DEV"
retry_exceeded 18724 "the writer's address was removed"

info "iWARP: the peer's link down for 2 s under an rping run"
expect_ok ip -n "$NS_A" addr add "$NS_A_IP4/24" dev "$NS_A_DEV"
ip netns exec "$NS_B" rping -p 7175 -s -a "$NS_B_IP4" -V -C 100000 -S 4000 \
	>"$OX_TMP/rping.server" 2>&1 &
server=$!
cm_listens() { [ -n "$(cm_listener_dev 7175)" ]; }
wait_until 30 cm_listens || fail "rping did not listen"
on=$(cm_listener_dev 7175)
[ "$on" = oxb_i/1 ] || fail "rping's server listens on ${on:-no device}, not on oxb_i/1"
ip netns exec "$NS_A" rping -p 7175 -c -a "$NS_B_IP4" -V -C 100000 -S 4000 \
	>"$OX_TMP/rping.client" 2>&1 &
client=$!
tx_moving "$NS_A" "$NS_A_DEV" 3 || fail "rping moves nothing: $(<"$OX_TMP/rping.client")"
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" down
sleep 2
expect_ok ip -n "$NS_B" link set "$NS_B_DEV" up
# TCP retransmits with a backoff: the first retransmission after the gap may take seconds.
wait_until 30 tx_moving "$NS_A" "$NS_A_DEV" 1 || fail "rping moves nothing after the link came back"
kill -0 "$client" || fail "the rping client ended after the flap: $(<"$OX_TMP/rping.client")"
kill -0 "$server" || fail "the rping server ended after the flap: $(<"$OX_TMP/rping.server")"
info "ok: the rping run carries on"
kill -9 "$client" "$server" 2>/dev/null || true
wait "$client" "$server" 2>/dev/null || true
# (The oxroce devices' GSI QPs stay.)
iw_gone() { [ -z "$(rdma res show qp | grep -v 'type GSI')$(rdma res show cm_id)" ]; }
wait_until 20 iw_gone || fail "QPs or cm_ids left: $(rdma res show qp; rdma res show cm_id)"

for d in oxa_r oxa_i; do link_del -n "$NS_A" "$d"; done
for d in oxb_r oxb_i; do link_del -n "$NS_B" "$d"; done
expect_ok rmmod oxrdma
pass
