#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Changes and teardown under RDMA WRITE traffic between two oxroce devices in two namespaces
# (issue 14): the MTU of both veth ends changed back and forth (1500, 9000, 1500) in the
# middle of a transfer, which carries on without an error (the path MTU, 1024, fits both);
# the writer killed with SIGKILL in the middle (its QP, MRs and CQs destroyed under traffic),
# after which a new transfer between the same devices works at once; and the responder's
# whole network namespace deleted in the middle of a transfer: its device goes within
# seconds, and so does the writer's (its veth peer went with the namespace): the writer's
# context gets IBV_EVENT_DEVICE_FATAL and ends at once on SIGKILL; devices on a new veth
# pair work. The kernel log stays clean and nothing leaks (vm-run's checks), and the module
# unloads.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

oxroce_pair

info "MTU changes on both ends under traffic"
roce_writer 18700
for mtu in 9000 1500 9000 1500; do
	expect_ok ip netns exec "$NS_A" ip link set dev "$NS_A_DEV" mtu "$mtu"
	expect_ok ip netns exec "$NS_B" ip link set dev "$NS_B_DEV" mtu "$mtu"
	sleep 1
done
tx_moving "$NS_A" "$NS_A_DEV" 3 || fail "no traffic after the MTU changes"
kill -0 "$CLIENT_PID" || fail "the writer ended after MTU changes: $(<"$OX_TMP/client.18700")"
kill -0 "$SERVER_PID" || fail "the responder ended after MTU changes: $(<"$OX_TMP/server.18700")"
info "ok: the transfer carries on after 4 MTU changes"

info "the writer killed with SIGKILL in the middle"
kill -9 "$CLIENT_PID"
wait "$CLIENT_PID" || true
# The responder's QP sees nothing more; it is stopped too.
kill -9 "$SERVER_PID"
wait "$SERVER_PID" || true
run_pair_ns --port 18701 60 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18701 -n 100 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$GID_A" -p 18701 -n 100 -c "$NS_B_IP4"
check_pingpong "after the kill: server" "$PAIR_SERVER_OUT" 100
check_pingpong "after the kill: client" "$PAIR_CLIENT_OUT" 100

info "the responder's namespace deleted in the middle of a transfer"
roce_writer 18702
ip netns exec "$NS_A" ibv_asyncwatch -d oxa_r >"$OX_TMP/events" 2>&1 &
watcher=$!
sleep 1
t0=$SECONDS
# (A process in a namespace keeps it alive: the responder goes first, at once.)
kill -9 "$SERVER_PID" 2>/dev/null || true
expect_ok ip netns del "$NS_B"
# Its veth goes with it, and so does the other end, in namespace A, with the writer's device.
wait_until 60 _ox_no_dev oxb_r || fail "oxb_r still exists 60 s after its namespace was deleted"
wait_until 60 _ox_no_dev oxa_r || fail "oxa_r still exists 60 s after its veth peer was deleted"
info "ok: oxb_r and oxa_r gone $((SECONDS - t0)) s after the namespace was deleted"
# The writer's context was disassociated: IBV_EVENT_DEVICE_FATAL, and its rings read as
# empty from then on (as with any disassociating driver: ib_write_bw ignores the event and
# keeps polling). Killed, it ends at once.
wait_until 15 grep -q DEVICE_FATAL "$OX_TMP/events" ||
	fail "no IBV_EVENT_DEVICE_FATAL for the writer's device: $(<"$OX_TMP/events")"
info "ok: the writer's device reported IBV_EVENT_DEVICE_FATAL"
kill -9 "$CLIENT_PID" "$watcher" 2>/dev/null || true
wait_until 10 _ox_exited "$CLIENT_PID" || fail "the writer did not end on SIGKILL"
wait "$CLIENT_PID" "$watcher" "$SERVER_PID" 2>/dev/null || true

info "a device on a new veth works at once"
oxroce_pair
run_pair_ns --port 18703 60 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18703 -n 100 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$GID_A" -p 18703 -n 100 -c "$NS_B_IP4"
check_pingpong "new pair: server" "$PAIR_SERVER_OUT" 100
link_del -n "$NS_A" oxa_r
link_del -n "$NS_B" oxb_r
expect_ok rmmod oxrdma
pass
