#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Devices removed while processes use them: `rdma link delete` of a device a process holds
# open (QP made, waiting for its peer; a process watching its events gets
# IBV_EVENT_DEVICE_FATAL) and of a responder's in the middle of RDMA WRITEs, and `rmmod
# oxrdma` while a process holds a device open, each done within seconds, not waiting for the
# process; the writer ends with an error completion; a new device on the same netdev works
# at once. Then rping over oxiwarp, its server's and then its client's device deleted in the
# middle: the other side ends. The kernel log stays clean and nothing leaks (vm-run's checks).
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"
oxroce_pair

# del_within NS DEV: `rdma link delete DEV` (in NS) returns within 120 s and DEV is gone. (With
# traffic flowing the debug kernel under TCG takes tens of seconds, the CPUs busy with it.)
del_within() {
	local t0=$SECONDS
	OX_CMD_TIMEOUT=120 expect_ok ip netns exec "$1" rdma link delete "$2"
	wait_until 10 _ox_no_dev "$2" || fail "$2 still exists after rdma link delete"
	info "ok: $2 deleted in $((SECONDS - t0)) s while in use"
}

# bg_server NS PORT CMD...: CMD in NS in the background (SERVER_PID), once it listens on TCP
# port PORT (ibv_rc_pingpong's exchange: its QP exists by then).
bg_server() {
	local ns=$1 port=$2
	shift 2
	ip netns exec "$ns" "$@" >"$OX_TMP/bg.$port" 2>&1 &
	SERVER_PID=$!
	wait_until 20 _ox_listening "$SERVER_PID" "$port" "$ns" || fail "$*: did not listen"
	kill -0 "$SERVER_PID" || fail "$*: exited: $(<"$OX_TMP/bg.$port")"
}

info "rdma link delete of a device a process holds open, its QP waiting for a peer"
bg_server "$NS_B" 18601 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18601
ip netns exec "$NS_B" ibv_asyncwatch -d oxb_r >"$OX_TMP/events" 2>&1 &
watcher=$!
sleep 1
kill -0 "$watcher" || fail "ibv_asyncwatch exited: $(<"$OX_TMP/events")"
del_within "$NS_B" oxb_r
wait_until 15 grep -q DEVICE_FATAL "$OX_TMP/events" ||
	fail "no IBV_EVENT_DEVICE_FATAL: $(<"$OX_TMP/events")"
info "ok: the watching process got IBV_EVENT_DEVICE_FATAL"
kill "$SERVER_PID" "$watcher" 2>/dev/null || true
wait "$SERVER_PID" "$watcher" || true

info "a new device on the same netdev works at once"
rdma_link_add -n "$NS_B" oxb_r oxroce "$NS_B_DEV"
GID_B=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")") || fail "no RoCE v2 IPv4 GID on oxb_r"
run_pair_ns --port 18602 60 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18602 -n 100 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$GID_A" -p 18602 -n 100 -c "$NS_B_IP4"
check_pingpong "new device's server" "$PAIR_SERVER_OUT" 100

info "rdma link delete of the responder's device in the middle of RDMA WRITEs"
bg_server "$NS_B" 18603 ib_write_bw -d oxb_r -x "$GID_B" -p 18603 -F -D 600
ip netns exec "$NS_A" stdbuf -oL ib_write_bw -d oxa_r -x "$GID_A" -p 18603 -F -D 600 "$NS_B_IP4" \
	>"$OX_TMP/client" 2>&1 &
client=$!
wait_until 90 grep -q 'BW peak' "$OX_TMP/client" || fail "no transfer: $(<"$OX_TMP/client")"
sleep 2
kill -0 "$client" || fail "the transfer ended early: $(<"$OX_TMP/client")"
del_within "$NS_B" oxb_r
# The writer's QP runs out of retries: an error completion, and ib_write_bw exits with it.
wait_until 120 _ox_exited "$client" || fail "the writer did not end after its peer's device went"
rc=0
wait "$client" || rc=$?
[ "$rc" != 0 ] || fail "the writer exited with status 0: $(<"$OX_TMP/client")"
expect_match "$(<"$OX_TMP/client")" 'Completion with error|Failed status' "the writer's error"
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" || true
rdma_link_add -n "$NS_B" oxb_r oxroce "$NS_B_DEV"
GID_B=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")") || fail "no RoCE v2 IPv4 GID on oxb_r"

info "rmmod oxrdma while a process holds a device open"
bg_server "$NS_B" 18604 ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18604
OX_CMD_TIMEOUT=30 expect_ok rmmod oxrdma
[ ! -d /sys/module/oxrdma ] || fail "oxrdma still loaded after rmmod"
[ ! -e /sys/class/infiniband/oxb_r ] || fail "oxb_r still exists after rmmod"
info "ok: rmmod done while in use"
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" || true

expect_ok modprobe oxrdma
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
_both_rts() {
	rdma res show qp link oxa_i/1 | grep -q 'state RTS' &&
		rdma res show qp link oxb_i/1 | grep -q 'state RTS'
}
# rping_cut SIDE: rping over oxiwarp, and SIDE's device (server or client) deleted in the
# middle of it; the other side's rping ends, the device is made again.
rping_cut() {
	local side=$1 ns dev netdev other
	info "oxiwarp, rdma_cm: the $side's device deleted in the middle of rping"
	ip netns exec "$NS_B" rping -s -a "$NS_B_IP4" -p 7174 -C 100000000 >"$OX_TMP/rps" 2>&1 &
	SERVER_PID=$!
	wait_until 20 _ox_listening "$SERVER_PID" 7174 "$NS_B" || fail "rping did not listen"
	ip netns exec "$NS_A" rping -c -a "$NS_B_IP4" -p 7174 -C 100000000 >"$OX_TMP/rpc" 2>&1 &
	client=$!
	# Connected (both QPs in RTS: the server's side ends only if it was), then ping-ponging.
	wait_until 20 _both_rts || fail "rping did not connect: $(<"$OX_TMP/rpc")"
	sleep 2
	kill -0 "$client" || fail "rping ended early: $(<"$OX_TMP/rpc")"
	if [ "$side" = server ]; then
		ns=$NS_B dev=oxb_i netdev=$NS_B_DEV other=$client
	else
		ns=$NS_A dev=oxa_i netdev=$NS_A_DEV other=$SERVER_PID
	fi
	del_within "$ns" "$dev"
	if ! wait_until 60 _ox_exited "$other"; then
		_ox_show "rping server" "$(<"$OX_TMP/rps")"
		_ox_show "rping client" "$(<"$OX_TMP/rpc")"
		_ox_show "TCP sockets ($NS_A, $NS_B)" "$(ip netns exec "$NS_A" ss -tnia 2>&1
			ip netns exec "$NS_B" ss -tnia 2>&1)"
		_ox_show "rdma res show qp / cm_id" "$(rdma res show qp 2>&1; rdma res show cm_id 2>&1)"
		fail "rping did not end after the $side's device went"
	fi
	kill "$SERVER_PID" "$client" 2>/dev/null || true
	wait "$SERVER_PID" "$client" || true
	rdma_link_add -n "$ns" "$dev" oxiwarp "$netdev"
}
rping_cut server
rping_cut client
link_del -n "$NS_A" oxa_i
link_del -n "$NS_B" oxb_i
expect_ok rmmod oxrdma
info "rmmod oxrdma: clean"
pass
