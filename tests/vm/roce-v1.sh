#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# RoCE v1 (GRH on Ethernet, ethertype 0x8915) between two oxroce devices in two namespaces,
# picked by the source GID's type ("IB/RoCE v1"): ibv_rc_pingpong (with its data check) and
# ibv_ud_pingpong over IPv4- and IPv6-based GIDs, and rdma_cm with its default RoCE mode set to
# v1 through configfs (rping -v). rxe has no RoCE v1, hence oxroce against oxroce. Every frame
# captured on the wire is a RoCE v1 packet with a correct ICRC (checked by roce-v1/check-pcap.py,
# which recomputes it independently), tshark dissects them as InfiniBand without errors, no
# RoCE v2 packet is sent meanwhile, and neither device counts an ICRC error.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

iters=200

# tshark's output without its warnings (it warns on stderr when run as root).
tshark_q() {
	tshark "$@" 2>/dev/null
}

oxroce_pair
v1a=$(roce_gid_index oxa_r "$(ipv4_gid "$NS_A_IP4")" "IB/RoCE v1") || fail "no RoCE v1 IPv4 GID on oxa_r"
v1b=$(roce_gid_index oxb_r "$(ipv4_gid "$NS_B_IP4")" "IB/RoCE v1") || fail "no RoCE v1 IPv4 GID on oxb_r"
v16a=$(roce_gid_index oxa_r "fd77:0000:0000:0000:0000:0000:0000:0001" "IB/RoCE v1") ||
	fail "no RoCE v1 IPv6 GID on oxa_r"
v16b=$(roce_gid_index oxb_r "fd77:0000:0000:0000:0000:0000:0000:0002" "IB/RoCE v1") ||
	fail "no RoCE v1 IPv6 GID on oxb_r"
info "RoCE v1 GIDs: oxa_r $v1a (IPv4) $v16a (IPv6), oxb_r $v1b $v16b"

# Kept with the run's output for inspection.
v1_pcap=$OX_OUT/roce-v1.pcap
v2_pcap=$OX_OUT/roce-v1-udp4791.pcap
ip netns exec "$NS_A" tcpdump -i "$NS_A_DEV" -U -s 0 -w "$v1_pcap" ether proto 0x8915 2>/dev/null &
dump1=$!
ip netns exec "$NS_A" tcpdump -i "$NS_A_DEV" -U -s 0 -w "$v2_pcap" udp port 4791 2>/dev/null &
dump2=$!
at_exit sh -c "kill $dump1 $dump2 2>/dev/null || true"
wait_until 10 test -s "$v1_pcap" || fail "tcpdump did not start"
wait_until 10 test -s "$v2_pcap" || fail "tcpdump did not start"
sleep 1

for size in 1 4096 9000; do
	info "RC, IPv4-based v1 GIDs, $size-byte messages"
	run_pair_ns --port 18515 120 \
		ibv_rc_pingpong -d oxb_r -g "$v1b" -n "$iters" -s "$size" -c -- \
		ibv_rc_pingpong -d oxa_r -g "$v1a" -n "$iters" -s "$size" -c "$NS_B_IP4"
	check_pingpong server "$PAIR_SERVER_OUT" "$iters"
	check_pingpong client "$PAIR_CLIENT_OUT" "$iters"
done
info "RC, IPv6-based v1 GIDs, 5000-byte messages"
run_pair_ns --port 18515 120 \
	ibv_rc_pingpong -d oxb_r -g "$v16b" -n "$iters" -s 5000 -c -- \
	ibv_rc_pingpong -d oxa_r -g "$v16a" -n "$iters" -s 5000 -c "$NS_B_IP4"
check_pingpong "IPv6 server" "$PAIR_SERVER_OUT" "$iters"
check_pingpong "IPv6 client" "$PAIR_CLIENT_OUT" "$iters"
info "UD, IPv4-based v1 GIDs, 1000-byte datagrams"
run_pair_ns --port 18515 120 \
	ibv_ud_pingpong -d oxb_r -g "$v1b" -n "$iters" -s 1000 -c -- \
	ibv_ud_pingpong -d oxa_r -g "$v1a" -n "$iters" -s 1000 -c "$NS_B_IP4"
check_pingpong "UD server" "$PAIR_SERVER_OUT" "$iters"
check_pingpong "UD client" "$PAIR_CLIENT_OUT" "$iters"

info "rdma_cm with default_roce_mode 'IB/RoCE v1' (configfs): rping -v"
modprobe rdma_ucm || fail "modprobe rdma_ucm"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
	fail "cannot mount configfs"
for d in oxa_r oxb_r; do
	mkdir -p "/sys/kernel/config/rdma_cm/$d"
	echo "IB/RoCE v1" >"/sys/kernel/config/rdma_cm/$d/ports/1/default_roce_mode"
	expect_eq "$(cat "/sys/kernel/config/rdma_cm/$d/ports/1/default_roce_mode")" "IB/RoCE v1" \
		"$d: rdma_cm default RoCE mode"
done
run_pair --port 7174 --server-ns "$NS_B" --client-ns "$NS_A" 120 \
	rping -p 7174 -s -a "$NS_B_IP4" -v -C 20 -S 1000 -- rping -p 7174 -c -a "$NS_B_IP4" -v -C 20 -S 1000
got=$(grep -c 'ping data: rdma-ping-' <<<"$PAIR_CLIENT_OUT" || true)
expect_eq "$got" 20 "rping client over RoCE v1: verified pings"
for d in oxa_r oxb_r; do
	rmdir "/sys/kernel/config/rdma_cm/$d"
done

sleep 1
kill -INT "$dump1" "$dump2"
wait "$dump1" "$dump2" || true

expect_ok python3 "$OX_ROOT/tests/vm/roce-v1/check-pcap.py" "$v1_pcap"
info "the wire: $EXPECT_OUT"
frames=$(sed -n 's/^frames \([0-9]*\),.*/\1/p' <<<"$EXPECT_OUT")
((frames > 4 * iters)) || fail "only $frames RoCE v1 frames captured"
capture tshark_q -r "$v2_pcap"
expect_eq "$EXPECT_RC" 0 "tshark exit status"
expect_eq "$EXPECT_OUT" "" "RoCE v2 packets sent meanwhile"
capture tshark_q -r "$v1_pcap" -Y infiniband -T fields -e frame.number
expect_eq "$EXPECT_RC" 0 "tshark exit status"
ib=$(grep -c . <<<"$EXPECT_OUT" || true)
expect_eq "$ib" "$frames" "frames tshark dissects as InfiniBand"
# (Without RPC-over-RDMA's heuristic dissector, which takes pingpong's SEND payloads for its
# own and calls them malformed.)
capture tshark_q -r "$v1_pcap" --disable-protocol rpcordma \
	-Y '_ws.malformed || _ws.expert.severity >= 8388608' \
	-T fields -e frame.number -e _ws.expert.message
expect_eq "$EXPECT_RC" 0 "tshark exit status"
expect_eq "$(head -5 <<<"$EXPECT_OUT")" "" "frames tshark finds malformed or in error (the first 5)"
for d in oxa_r oxb_r; do
	expect_eq "$(cat "/sys/class/infiniband/$d/ports/1/hw_counters/icrc_err")" 0 "$d: ICRC errors"
done
expect_ok rmmod oxrdma
pass
