#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# oxiwarp when the network misbehaves, between two namespaces. Under netem loss, reordering and
# delay on both veth ends, TCP recovers and every byte arrives right: rping's data check with
# 4000- and 65000-byte messages (RDMA READs and WRITEs of many segments), with CRCs and,
# at MTU 9000, without (payload then sent from the process's pages: SEND buffers overwritten
# as soon as they complete never reach the peer). (perftest is not run
# there: its closing handshake races with the peer's disconnect, which on iWARP, siw's too,
# flushes the QP.) The peer's link going down in the middle of a run ends the connection within
# the dead-peer timeout (30 s of unacknowledged data, or keepalive): both sides see their QP
# fail, nothing hangs, nothing is left behind. An RDMA WRITE to an STag the target never
# registered is refused with a TERMINATE (RDMAP, remote protection, invalid STag): both QPs
# fail and flush their receives.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

modprobe rdma_ucm || fail "modprobe rdma_ucm"
use_provider

ns_pair
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"

info "netem: loss 5%, reorder 10% 50%, delay 1 ms on both ends"
pin_neighbours
expect_ok ip netns exec "$NS_A" tc qdisc add dev "$NS_A_DEV" root netem loss 5% reorder 10% 50% delay 1ms
expect_ok ip netns exec "$NS_B" tc qdisc add dev "$NS_B_DEV" root netem loss 5% reorder 10% 50% delay 1ms
cm_pair "$NS_B" "$NS_A" 7174 240 rping -p 7174 -s -a "$NS_B_IP4" -v -C 50 -S 4000 -- \
	rping -p 7174 -c -a "$NS_B_IP4" -v -C 50 -S 4000
check_rping "netem rping server" "$PAIR_SERVER_OUT" 50
check_rping "netem rping client" "$PAIR_CLIENT_OUT" 50
# Larger messages (rping's largest buffer is 64 KiB): many segments each, verified.
cm_pair "$NS_B" "$NS_A" 7174 240 rping -p 7174 -s -a "$NS_B_IP4" -v -C 20 -S 65000 -- \
	rping -p 7174 -c -a "$NS_B_IP4" -v -C 20 -S 65000
check_rping "netem rping 65000 server" "$PAIR_SERVER_OUT" 20
check_rping "netem rping 65000 client" "$PAIR_CLIENT_OUT" 20
# Without CRCs, FPDUs with 4 KiB of payload or more (MTU 9000: 8.9 KiB) leave without a copy:
# TCP sends (and resends) their payload from the process's pages, and a SEND completes only
# once the peer acknowledged it, so a buffer overwritten the moment its completion arrives is
# never what reaches the peer.
info "netem, MTU 9000, streams without CRCs: payload sent from the pages themselves"
expect_ok ip netns exec "$NS_A" ip link set "$NS_A_DEV" mtu 9000
expect_ok ip netns exec "$NS_B" ip link set "$NS_B_DEV" mtu 9000
echo N >/sys/module/oxrdma/parameters/iwarp_crc
echo 3 >/sys/module/oxrdma/parameters/iwarp_zcopy
cm_pair "$NS_B" "$NS_A" 7174 240 rping -p 7174 -s -a "$NS_B_IP4" -v -C 20 -S 65000 -- \
	rping -p 7174 -c -a "$NS_B_IP4" -v -C 20 -S 65000
check_rping "netem zero-copy rping server" "$PAIR_SERVER_OUT" 20
check_rping "netem zero-copy rping client" "$PAIR_CLIENT_OUT" 20
cm_pair "$NS_B" "$NS_A" 7472 240 \
	python3 "$OX_ROOT/tests/vm/iwarp/reuse-after-send.py" server "$NS_B_IP4" 7472 40 65536 -- \
	python3 "$OX_ROOT/tests/vm/iwarp/reuse-after-send.py" client "$NS_B_IP4" 7472 40 65536
expect_match "$PAIR_SERVER_OUT" '^server: ok 40$' "reused send buffers: every message right"
expect_match "$PAIR_CLIENT_OUT" '^client: ok 40$' "reused send buffers: every send completed"
echo Y >/sys/module/oxrdma/parameters/iwarp_crc
echo 1 >/sys/module/oxrdma/parameters/iwarp_zcopy
expect_ok ip netns exec "$NS_A" ip link set "$NS_A_DEV" mtu 1500
expect_ok ip netns exec "$NS_B" ip link set "$NS_B_DEV" mtu 1500
expect_ok ip netns exec "$NS_A" tc qdisc del dev "$NS_A_DEV" root
expect_ok ip netns exec "$NS_B" tc qdisc del dev "$NS_B_DEV" root
no_qp_cm_id_left "after netem"

info "an RDMA WRITE to an STag the target never registered: TERMINATE, both QPs fail"
mark=$(dmesg | wc -l)
cm_pair "$NS_B" "$NS_A" 7471 60 python3 "$OX_ROOT/tests/vm/iwarp/bad-write.py" server "$NS_B_IP4" 7471 -- \
	python3 "$OX_ROOT/tests/vm/iwarp/bad-write.py" client "$NS_B_IP4" 7471
# Each side's posted receive is flushed (IBV_WC_WR_FLUSH_ERR, 5).
expect_match "$PAIR_SERVER_OUT" '^recv status 5$' "bad write: the target's receive"
expect_match "$PAIR_CLIENT_OUT" '^recv status 5$' "bad write: the writer's receive"
log=$(dmesg | tail -n +"$((mark + 1))")
expect_match "$log" 'iWARP Write refused: RDMAP error type 1 code 0x00' "bad write: the target's log"
expect_match "$log" 'the peer terminated the connection: RDMAP error type 1 code 0x00' \
	"bad write: the writer's log"
no_qp_cm_id_left "after the bad write"

info "the peer's link goes down in the middle of a run"
ip netns exec "$NS_B" rping -p 7174 -s -a "$NS_B_IP4" -C 100000 -S 4000 >"$OX_TMP/down.server" 2>&1 &
server=$!
sleep 2
in_a timeout 150 rping -p 7174 -c -a "$NS_B_IP4" -C 100000 -S 4000 >"$OX_TMP/down.client" 2>&1 &
client=$!
sleep 4
kill -0 "$client" 2>/dev/null || fail "the rping client ended early: $(<"$OX_TMP/down.client")"
expect_ok ip netns exec "$NS_B" ip link set "$NS_B_DEV" down
start=$SECONDS
crc=0
wait_until 90 _ox_exited "$client" ||
	fail "the client still runs 90 s after its peer's link went down: $(<"$OX_TMP/down.client")"
wait "$client" || crc=$?
[ "$crc" != 124 ] || fail "rping client: timed out after its peer's link went down"
info "client ended (status $crc) $((SECONDS - start)) s after the link went down: $(tr '\n' ' ' <"$OX_TMP/down.client" | cut -c1-160)"
wait_until 90 _ox_exited "$server" ||
	fail "the server still runs 90 s after its link went down: $(<"$OX_TMP/down.server")"
wait "$server" 2>/dev/null || true
info "server ended: $(tr '\n' ' ' <"$OX_TMP/down.server" | cut -c1-160)"
expect_ok ip netns exec "$NS_B" ip link set "$NS_B_DEV" up
no_qp_cm_id_left "after the link went down"

info "and the connection works again"
cm_pair "$NS_B" "$NS_A" 7174 120 rping -p 7174 -s -a "$NS_B_IP4" -v -C 10 -- rping -p 7174 -c -a "$NS_B_IP4" -v -C 10
check_rping "rping server after" "$PAIR_SERVER_OUT" 10
check_rping "rping client after" "$PAIR_CLIENT_OUT" 10
no_qp_cm_id_left "at the end"

expect_ok rmmod oxrdma
info "rmmod oxrdma: clean"
pass
