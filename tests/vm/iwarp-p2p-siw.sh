#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Peer-to-peer mode (RFC 6581) between oxiwarp and another implementation: siw. Linux 6.12's
# siw has it behind a constant (peer_to_peer, false); scripts/check.sh builds the kernel's own
# siw with its constants as module parameters (tests/vm/capture/capture-siw.sh --build-siw)
# and scripts/vm-run hands it over as $OX_OUT/modroot/siw-params/siw.ko. With peer_to_peer=Y, an
# oxiwarp device and a siw device on the two ends of the root veth pair (TCP between two
# local addresses, over lo) connect both ways: oxiwarp initiating with a zero-length RDMA
# write, then read, as its ready-to-receive message (iwarp_p2p=1, 2), siw initiating with
# what it offers. Each connection: the MPA request and reply as captured (the reply takes
# peer-to-peer mode with one message type), rping's data check, and perftest -R writes,
# reads and sends.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

siw_ko=$OX_OUT/modroot/siw-params/siw.ko
[ -f "$siw_ko" ] ||
	fail "no $siw_ko: scripts/check.sh builds it (tests/vm/capture/capture-siw.sh --build-siw)"
modprobe rdma_ucm || fail "modprobe rdma_ucm"
use_provider
expect_ok insmod "$siw_ko"
expect_ok sh -c 'echo Y >/sys/module/siw/parameters/peer_to_peer'
veth_root
modprobe oxrdma || fail "modprobe oxrdma"
rdma_link_add oxr_a oxiwarp "$VETH_A"
siw_add siw1 "$VETH_B"

# p2p_run LABEL SERVER-IP SERVER-DEV CLIENT-IP CLIENT-DEV REQUEST-ORD REPLY-ORD: one rping
# connection from CLIENT-IP (so from the device that has it: the route to a local address
# would otherwise pick the server's own device) captured and checked (the top nibbles of the
# request's and the reply's ORD words match REQUEST-ORD and REPLY-ORD), then perftest -R.
p2p_run() {
	local label=$1 sip=$2 sdev=$3 cip=$4 cdev=$5 wreq=$6 want=$7 tool
	info "$label: rping -v, $cdev -> $sdev"
	tcpdump -i lo -s 0 -U -w "$OX_TMP/p2p.pcap" tcp port 7174 >"$OX_TMP/p2p.log" 2>&1 &
	local td=$!
	wait_until 20 grep -q 'listening on' "$OX_TMP/p2p.log" || fail "tcpdump did not start"
	cm_pair "" "" 7174 120 rping -p 7174 -s -a "$sip" -v -C 10 -S 2000 -- \
		rping -p 7174 -c -a "$sip" -I "$cip" -v -C 10 -S 2000
	check_rping "$label rping server" "$PAIR_SERVER_OUT" 10
	check_rping "$label rping client" "$PAIR_CLIENT_OUT" 10
	sleep 1
	kill -INT "$td"
	wait "$td" 2>/dev/null || true
	p2p_expect "$OX_TMP/p2p.pcap" "$label" "$wreq" "$want"
	for tool in ib_write_bw ib_read_bw ib_send_bw; do
		perftest_pair "" "" 18515 120 "$tool" -R -F -p 18515 -n 50 -s 5000 -d "$sdev" -- \
			"$tool" -R -F -p 18515 -n 50 -s 5000 -d "$cdev" --source_ip "$cip" "$sip"
		info "$label $tool -R: $(perftest_row "$tool" 5000 50 "$PAIR_CLIENT_OUT")"
	done
}

# The reply's ORD word: 0x8000 a zero-length RDMA write, 0x4000 a read, 0x2000 a send.
echo 1 >/sys/module/oxrdma/parameters/iwarp_p2p
p2p_run "oxiwarp to siw, RDMA write" "$VETH_B_IP4" siw1 "$VETH_A_IP4" oxr_a 8 8
echo 2 >/sys/module/oxrdma/parameters/iwarp_p2p
p2p_run "oxiwarp to siw, RDMA read" "$VETH_B_IP4" siw1 "$VETH_A_IP4" oxr_a 4 4
echo 0 >/sys/module/oxrdma/parameters/iwarp_p2p
p2p_run "siw to oxiwarp" "$VETH_A_IP4" oxr_a "$VETH_B_IP4" siw1 '[c-f]' 8

wait_until 20 test -z "$(rdma res show qp)" || true
expect_eq "$(rdma res show qp)" "" "QPs left"
expect_ok rmmod oxrdma
pass
