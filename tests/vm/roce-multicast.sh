#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Multicast over RoCE v2. Every QP attached to a group gets every datagram sent to it: several
# QPs of one process, a receiver on the other end of the veth, and one on the sending device
# itself (the IP layer loops the host's own sends back to the device's group membership).
# * librdmacm's mckey (rdma_join_multicast attaches the UD QP, sends go to QPN 0xffffff through
#   the group's AH) between two namespaces and from oxroce to rxe; rdma_cm joins IPv4 groups
#   only on RoCE v2. mckey counts completions without checking them; the device counters
#   confirm the datagrams arrived.
# * mcast-ud.c, plain verbs (ibv_attach_mcast, ibv_detach_mcast): IPv4 and IPv6 groups, each
#   datagram's content, length, GRH flag and destination address checked, detach twice
#   (EINVAL); rxe sends to IPv4 and IPv6 groups that oxroce receives (rxe itself joins no IP
#   group, so without rdma_cm it receives none).
# At the end no group is left joined on the netdevs.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

count=40
size=1000

# hw_counter DEV NAME: the value of DEV's port counter NAME.
hw_counter() {
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"
}

# group_run SECONDS READY DONE SENDER-NS SENDER-CMD -- "NS RECEIVER-CMD"...: start each receiver
# (in namespace NS, "-" for the root namespace), wait until its output matches READY, run the
# sender, and expect every receiver to exit 0 with output matching DONE. The commands are
# split at spaces.
group_run() {
	local limit=$1 ready=$2 done_re=$3 sns=$4 scmd=$5
	shift 6
	[ "$sns" != - ] || sns=
	local -a pids=() logs=()
	local spec ns log i=0 rc
	for spec in "$@"; do
		ns=${spec%% *}
		[ "$ns" != - ] || ns=
		log=$OX_TMP/group-recv-$i
		i=$((i + 1))
		info "receiver ${ns:-(root namespace)}: ${spec#* }"
		# shellcheck disable=SC2086  # the command's words
		timeout -k 2 "$limit" ${ns:+ip netns exec "$ns"} ${spec#* } </dev/null >"$log" 2>&1 &
		pids+=("$!")
		logs+=("$log")
	done
	for i in "${!logs[@]}"; do
		wait_until 60 grep -q "$ready" "${logs[$i]}" || {
			_ox_show "receiver $i" "$(<"${logs[$i]}")"
			fail "receiver $i did not get ready (no '$ready')"
		}
	done
	info "sender ${sns:-(root namespace)}: $scmd"
	rc=0
	# shellcheck disable=SC2086  # the command's words
	timeout -k 2 "$limit" ${sns:+ip netns exec "$sns"} $scmd </dev/null >"$OX_TMP/group-send" 2>&1 ||
		rc=$?
	[ "$rc" = 0 ] || {
		_ox_show "sender" "$(<"$OX_TMP/group-send")"
		fail "sender exit status $rc"
	}
	for i in "${!pids[@]}"; do
		rc=0
		wait "${pids[$i]}" || rc=$?
		if [ "$rc" != 0 ]; then
			_ox_show "receiver $i" "$(<"${logs[$i]}")"
			fail "receiver $i: exit status $rc$(_ox_rc_note "$rc")"
		fi
		expect_match "$(<"${logs[$i]}")" "$done_re" "receiver $i: all $count datagrams"
	done
}

# mckey_run SECONDS SENDER-NS SENDER-IP GROUP -- "NS IP QPS"...: mckey receivers with QPS QPs
# each, then a mckey sender of $count datagrams of $size bytes. mckey's output is made
# line-buffered: the test waits for its "receiving" line.
mckey_run() {
	local limit=$1 sns=$2 sip=$3 group=$4 spec ns ip qps
	shift 5
	local -a recv=()
	for spec in "$@"; do
		read -r ns ip qps <<<"$spec"
		recv+=("$ns stdbuf -oL mckey -m $group -b $ip -c $qps -C $count -S $size")
	done
	group_run "$limit" "receiving data transfers" "data transfers complete" "$sns" \
		"mckey -m $group -s -b $sip -C $count -S $size" -- "${recv[@]}"
	expect_match "$(<"$OX_TMP/group-send")" "joined dgid" "sender joined $group"
}

# mcast_ud_run SECONDS SENDER-NS SENDER-DEV SENDER-GID GROUP -- "NS DEV GID-INDEX QPS"...: the
# same with mcast-ud.c (plain verbs, every datagram checked).
mcast_ud_run() {
	local limit=$1 sns=$2 sdev=$3 sgid=$4 group=$5 spec ns dev gid qps
	shift 6
	local -a recv=()
	for spec in "$@"; do
		read -r ns dev gid qps <<<"$spec"
		recv+=("$ns $mcast_ud recv $dev $gid $group $qps $count $size")
	done
	group_run "$limit" "^attached" "all correct" "$sns" \
		"$mcast_ud send $sdev $sgid $group $count $size" -- "${recv[@]}"
}

mcast_ud=$OX_TMP/mcast-ud
# (gcc under TCG takes seconds, and minutes on a loaded debug kernel.)
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$mcast_ud" "$OX_ROOT/tests/vm/roce-multicast/mcast-ud.c" \
	-libverbs

oxroce_pair
rb0=$(hw_counter oxb_r rcvd_pkts)
ra0=$(hw_counter oxa_r rcvd_pkts)

info "mckey, IPv4 group 239.1.2.3: sender on oxa_r; receivers on oxb_r (2 QPs) and on oxa_r itself"
mckey_run 90 "$NS_A" "$NS_A_IP4" 239.1.2.3 -- "$NS_B $NS_B_IP4 2" "$NS_A $NS_A_IP4 1"
rb=$(($(hw_counter oxb_r rcvd_pkts) - rb0))
ra=$(($(hw_counter oxa_r rcvd_pkts) - ra0))
info "datagrams received: oxb_r $rb, oxa_r $ra (each of $count sent reaches every device once)"
((rb >= count)) || fail "oxb_r received $rb packets, expected at least $count"
((ra >= count)) || fail "oxa_r received $ra packets (its own sends looped back), expected at least $count"

info "mckey: sender on oxb_r, receiver on oxa_r (3 QPs)"
mckey_run 90 "$NS_B" "$NS_B_IP4" 239.1.2.9 -- "$NS_A $NS_A_IP4 3"

gid6_a=$(roce_gid_index oxa_r "fd77:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on oxa_r"
gid6_b=$(roce_gid_index oxb_r "fd77:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxb_r"
info "verbs, IPv6 group ff0e::77:1: sender on oxa_r; receivers on oxb_r (2 QPs) and oxa_r"
mcast_ud_run 90 "$NS_A" oxa_r "$gid6_a" ff0e::77:1 -- "$NS_B oxb_r $gid6_b 2" "$NS_A oxa_r $gid6_a 1"
info "verbs, IPv4 group 239.1.2.7: sender on oxb_r; receiver on oxa_r (4 QPs)"
mcast_ud_run 90 "$NS_B" oxb_r "$GID_B" 239.1.2.7 -- "$NS_A oxa_r $GID_A 4"

# Attachments are gone with the processes: nothing left joined on the netdevs.
for g in 239.1.2.3 239.1.2.9 239.1.2.7 ff0e::77:1; do
	expect_no_match "$(in_a ip maddr show dev "$NS_A_DEV")" "[[:space:]]$g([[:space:]]|$)" "oxa0 left $g"
	expect_no_match "$(in_b ip maddr show dev "$NS_B_DEV")" "[[:space:]]$g([[:space:]]|$)" "oxb0 left $g"
done

# With rxe (root namespace).
root_ns_pair
rxe_add rxe0 "$RN_ROOT_DEV"
rdma_link_add -n "$RN_NS" oxn_r oxroce "$RN_DEV"
g4_rxe=$(roce_gid_index rxe0 "$(ipv4_gid "$RN_ROOT_IP4")") || fail "no IPv4 GID on rxe0"
g4_ox=$(roce_gid_index oxn_r "$(ipv4_gid "$RN_IP4")") || fail "no IPv4 GID on oxn_r"
g6_rxe=$(roce_gid_index rxe0 "fd79:0000:0000:0000:0000:0000:0000:0001") || fail "no IPv6 GID on rxe0"
g6_ox=$(roce_gid_index oxn_r "fd79:0000:0000:0000:0000:0000:0000:0002") || fail "no IPv6 GID on oxn_r"
info "mckey: oxn_r sends, rxe0 receives"
mckey_run 90 "$RN_NS" "$RN_IP4" 239.1.2.5 -- "- $RN_ROOT_IP4 1"
# rxe sends a UD WR from a work item after ibv_post_send returns; mckey destroys its QP right
# after posting, unsignaled, so rxe may never send: the verbs sender waits for each completion.
info "verbs: rxe0 sends to IPv4 group 239.1.2.4, oxn_r receives (2 QPs)"
mcast_ud_run 90 - rxe0 "$g4_rxe" 239.1.2.4 -- "$RN_NS oxn_r $g4_ox 2"
info "verbs: rxe0 sends to IPv6 group ff0e::79:1, oxn_r receives (2 QPs)"
mcast_ud_run 90 - rxe0 "$g6_rxe" ff0e::79:1 -- "$RN_NS oxn_r $g6_ox 2"

pass
