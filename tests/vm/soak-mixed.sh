#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A soak (issue 14): SOAK_MINUTES (default 3; `make soak` runs 30) of mixed, verified
# traffic on a link that loses, duplicates, reorders and delays packets (netem on both veth
# ends), both transports at once on the same netdevs: RC WRITE, READ, SEND, SEND with
# immediate and atomics between two oxroce devices (integrity: tests/vm/integrity/integrity.py,
# every byte compared), ibv_rc_pingpong -c -s 8192 -n 200 over oxroce (pingpong: each side
# checks its completions and buffers) and rping -v over oxiwarp (rping: every ping's data
# compared); SOAK_KINDS picks them. Each runs back to back in its own loop; every run must
# succeed, none may hang (each is bounded). ibv_rc_pingpong has no closing handshake: when
# the final ACK of its last message is lost, the side that sent it has already destroyed its
# QP, and the other side's last SEND ends in "transport retry counter exceeded" (as it must,
# about 5 s later). That one case is told apart and counted, not failed: the other side did
# all 200 iterations, and the driver logged the failing QP's retries as exhausted with only
# its 200th message unacknowledged. rdma_cm binds an address to the first registered device
# that has it, so the oxiwarp devices are made before the oxroce ones, and every rping run
# checks that its server listens on oxb_i. An rping server that has not ended 60 s (under
# SOAK_FAULTS 120 s) after its client fails the run, with the connection's state recorded.
# Outcome also: the kernel's unreclaimable slab no larger at the end than after the first
# round (within 4 MiB), and the module unloads; the harness fails the test on any splat.
# Prints the runs, the bytes verified and the memory per minute.
# SOAK_FAULTS=P (tests/vm/soak-faults.sh): socket buffer allocations fail too, anywhere
# (softirq too: requests, ACKs, READ responses, TCP segments), with probability P % (failslab
# on the skb slab caches), during the whole soak. A run may then end in an error; never with
# a wrong byte or by its timeout. Afterwards, with no faults, a run of each kind must succeed
# at once.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

minutes=${SOAK_MINUTES:-3}
faults=${SOAK_FAULTS:-0}
modprobe rdma_ucm || fail "modprobe rdma_ucm"
ns_pair
use_provider
rdma_link_add -n "$NS_A" oxa_i oxiwarp "$NS_A_DEV"
rdma_link_add -n "$NS_B" oxb_i oxiwarp "$NS_B_DEV"
oxroce_devices
unreclaimable_kib() { awk '$1 == "SUnreclaim:" {print $2}' /proc/meminfo; }

netem="loss 1% duplicate 1% delay 1ms reorder 10% 50%"
info "netem on both ends: $netem"
pin_neighbours
# shellcheck disable=SC2086
expect_ok ip netns exec "$NS_A" tc qdisc add dev "$NS_A_DEV" root netem $netem
# shellcheck disable=SC2086
expect_ok ip netns exec "$NS_B" tc qdisc add dev "$NS_B_DEV" root netem $netem

log=$OX_TMP/soak
mkdir -p "$log"
integrity=$OX_ROOT/tests/vm/integrity/integrity.py

# listening NS PORT: a TCP listener on PORT in NS.
listening() {
	[ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]
}

# client_over PID OUT: rping's client has ended, or said that its connect failed.
client_over() {
	_ox_exited "$1" || grep -q '^connect error' "$2"
}

# rping_dev: the device rping's server listens on, in $on (asked again while rdma's netlink
# dump meets the injected allocation failures).
rping_dev() {
	on=$(cm_listener_dev 7180)
	[ -n "$on" ]
}

# last_ack_lost DONE FAILED: ibv_rc_pingpong's teardown case (above): output DONE did 200
# iterations; output FAILED's QP (its "local address" QPN and first PSN) exhausted its retries
# with only packets of its 200th message (8 packets from PSN + 1592) unacknowledged.
last_ack_lost() {
	local qpn psn last una sent
	grep -q '^200 iters in' "$1" && grep -q 'transport retry counter exceeded' "$2" || return 1
	read -r qpn psn < <(awk '/local address:/ {
		for (i = 1; i < NF; i++) { if ($i == "QPN") q = $(i + 1); if ($i == "PSN") p = $(i + 1) }
	} END { print q, p }' "$2" | tr -d ,)
	[ -n "$psn" ] || return 1
	# The driver prints the QPN without ibv_rc_pingpong's zero padding.
	read -r una sent < <(dmesg | sed -n "s/.*QP $(printf '%#x' $((qpn))): transport retries exhausted: unacknowledged from PSN \(0x[0-9a-f]*\), sent up to \(0x[0-9a-f]*\),.*/\1 \2/p" | tail -1)
	[ -n "$sent" ] || return 1
	last=$(((psn + 199 * 8) & 0xffffff))
	((((una - last) & 0xffffff) < 8 && sent == ((last + 8) & 0xffffff)))
}

fs=/sys/kernel/debug/failslab
skb_caches=()
fault_budget=1000000000

# faults_on: failslab fails SOAK_FAULTS % of the allocations from the socket buffer caches,
# in any context. (A task filter would miss softirq, and the runs' processes' own failures
# break the VM's 9p root.)
faults_on() {
	local c
	[ -d "$fs" ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
	[ -d "$fs" ] || fail "SOAK_FAULTS: no $fs (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS)"
	for c in skbuff_head_cache skbuff_small_head skbuff_fclone_cache; do
		echo 1 2>/dev/null >"/sys/kernel/slab/$c/failslab" && skb_caches+=("$c")
	done
	((${#skb_caches[@]} == 3)) ||
		fail "SOAK_FAULTS: failslab switches for ${skb_caches[*]:-no cache} only (SLUB_TINY, merged caches?)"
	echo 1 >"$fs/interval"
	echo 0 >"$fs/space"
	echo 0 >"$fs/verbose"
	echo N >"$fs/ignore-gfp-wait"
	echo N >"$fs/task-filter"
	echo Y >"$fs/cache-filter"
	echo "$fault_budget" >"$fs/times"
	echo "$faults" >"$fs/probability"
	info "SOAK_FAULTS: $faults % of the allocations from ${skb_caches[*]} fail"
}

faults_off() {
	local c
	echo 0 >"$fs/probability"
	for c in "${skb_caches[@]}"; do echo 0 >"/sys/kernel/slab/$c/failslab"; done
	info "SOAK_FAULTS: $((fault_budget - $(<"$fs/times"))) allocations failed"
}

# server_done PID CLIENT_STATUS: under SOAK_FAULTS, a server whose client failed (an allocation
# failure may come before it ever connects) gets 20 s, not its whole timeout.
server_done() {
	if ((faults)) && [ "$2" != 0 ] && ! wait_until 20 _ox_exited "$1"; then
		kill -TERM "$1" 2>/dev/null || true
	fi
}

# run_one KIND N: one run of KIND; its output in $log/KIND.N; status 0 when it checked out.
run_one() {
	local kind=$1 n=$2 out=$log/$1.$2 spid src=0 crc=0
	case $kind in
	integrity)
		timeout 300 /usr/bin/python3 "$integrity" oxa_r "$GID_A" oxb_r "$GID_B" 1 >"$out" 2>&1 ||
			crc=$?
		echo "exit $crc" >>"$out"
		[ "$crc" = 0 ] && grep -q "^integrity: $((3 * 1048576)) bytes checked$" "$out"
		return;;
	pingpong)
		timeout 180 ip netns exec "$NS_B" ibv_rc_pingpong -d oxb_r -g "$GID_B" -p 18600 \
			-s 8192 -n 200 -c >"$out.server" 2>&1 &
		spid=$!
		wait_until 30 listening "$NS_B" 18600 || true
		timeout 180 ip netns exec "$NS_A" ibv_rc_pingpong -d oxa_r -g "$GID_A" -p 18600 \
			-s 8192 -n 200 -c "$NS_B_IP4" >"$out.client" 2>&1 || crc=$?
		server_done "$spid" "$crc"
		wait "$spid" || src=$?
		cat "$out.client" "$out.server" >"$out"
		echo "client exit $crc, server exit $src" >>"$out"
		if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
			[ "$(grep -c '^200 iters in' "$out")" = 2 ]
		elif { [ "$crc" = 0 ] && last_ack_lost "$out.client" "$out.server"; } ||
			{ [ "$src" = 0 ] && last_ack_lost "$out.server" "$out.client"; }; then
			echo "last ACK lost at teardown" >>"$log/pingpong.lost"
		else
			return 1
		fi
		return;;
	rping)
		timeout 180 ip netns exec "$NS_B" rping -s -a "$NS_B_IP4" -p 7180 -v -C 20 -S 4000 \
			>"$out.server" 2>&1 &
		spid=$!
		local on=
		wait_until 30 rping_dev || true
		if [ "${on%/*}" != oxb_i ]; then
			# A server that ended before it listened because rdma-core's device list (read
			# over netlink, whose messages injected allocation failures may take) missed
			# oxb_i ("rdma_bind_addr: No such device") or every device ("No RDMA devices
			# were detected") failed on its own: an error, not a wrong byte. One that
			# listens elsewhere, not at all, or ended for any other reason is wrong.
			if [ -z "$on" ] && _ox_exited "$spid" &&
				grep -qE 'No such device|No RDMA devices were detected' "$out.server"; then
				echo "rping's server ended before it listened" >"$out"
			else
				echo "rping's server listens on ${on:-no device}, not on oxb_i" >"$out"
			fi
			kill -TERM "$spid" 2>/dev/null || true
			wait "$spid" || src=$?
			{
				echo "server exit $src; server said:"
				tail -8 "$out.server"
				rdma res show cm_id
			} >>"$out" 2>&1
			return 1
		fi
		timeout 180 ip netns exec "$NS_A" rping -c -a "$NS_B_IP4" -p 7180 -v -C 20 -S 4000 \
			>"$out" 2>&1 &
		local cpid=$!
		# After a failed connect (an allocation failure), rping's client waits for its CQ
		# thread, which only a flush ends, and nothing flushes a QP that never connected
		# (its rdma_disconnect asks for SQD, refused from INIT; siw ignores it): it is
		# stopped 5 s after saying so, and its error stands.
		if wait_until 180 client_over "$cpid" "$out" && ! _ox_exited "$cpid"; then
			sleep 5
			kill -TERM "$cpid" 2>/dev/null && echo "client stopped after its connect error" >>"$out"
		fi
		wait "$cpid" || crc=$?
		# The server hears of the disconnect at once, unless the client's FIN was lost to
		# an allocation failure: TCP does not send it again (tcp_send_fin gives up), the
		# client's socket ends 60 s later (FIN-WAIT-2 timeout), and the server's next
		# keepalive probe meets a reset.
		local grace=60
		((faults == 0)) || grace=120
		if [ "$crc" = 0 ] && ! wait_until "$grace" _ox_exited "$spid"; then
			# The client is done, the server never heard of the disconnect: record the
			# connection's state.
			{
				echo "client done; the server never saw the disconnect ($grace s)"
				ip netns exec "$NS_A" ss -tanoi "sport = :7180 or dport = :7180"
				ip netns exec "$NS_B" ss -tanoi "sport = :7180 or dport = :7180"
				rdma res show cm_id
				rdma res show qp link oxb_i/1
				# Where the server waits: for an rdma_cm event, or for its CQ thread.
				local t
				for t in /proc/$(pgrep -P "$spid" | head -1)/task/*; do
					echo "server thread $(<"$t/comm"): $(<"$t/wchan")"
				done
			} >>"$out" 2>&1
			kill -TERM "$spid" 2>/dev/null || true
			wait "$spid" || true
			return 1
		fi
		server_done "$spid" "$crc"
		wait "$spid" || src=$?
		# rping's server may exit 255 on its own teardown race (see run_pair in lib.sh);
		# its pings are checked all the same.
		local pc ps
		pc=$(grep -c 'ping data: rdma-ping-' "$out")
		ps=$(grep -c 'ping data: rdma-ping-' "$out.server")
		{
			echo "client exit $crc, $pc pings; server exit $src, $ps pings; server said:"
			grep -v 'ping data: rdma-ping-' "$out.server" | tail -8
		} >>"$out"
		[ "$crc" = 0 ] && { [ "$src" = 0 ] || [ "$src" = 255 ]; } && [ "$pc" = 20 ] && [ "$ps" = 20 ]
		return;;
	esac
	return 1
}

# wrong KIND N: run N of KIND failed in a way no error of the network or of an allocation
# excuses: bytes wrong, or a process that never ended (killed by its timeout: exit 124; a
# server is let off when its client failed).
wrong() {
	grep -qE "^exit 124|client exit 124|never saw the disconnect|not on oxb_i|differs|byte_len|immediate flag|returned|did not|completions after|invalid data|mismatch|bogus" \
		"$log/$1.$2"
}

# loop KIND END: runs of KIND until END (epoch seconds); "ok N", "FAILED N" lines (and, under
# SOAK_FAULTS, "ERROR N" for a run that ended in an error without a wrong byte).
loop() {
	local kind=$1 end=$2 n=0 rc
	while (($(date +%s) < end)); do
		n=$((n + 1))
		rc=0
		run_one "$kind" "$n" || rc=$?
		if [ "$rc" = 0 ]; then
			echo "ok $n"
		elif ((faults)) && ! wrong "$kind" "$n"; then
			echo "ERROR $n"
		else
			echo "FAILED $n"
			rdma statistic show >>"$log/$kind.$n"
		fi >>"$log/$kind"
	done
}

read -r -a kinds <<<"${SOAK_KINDS:-integrity pingpong rping}"
info "a first round of each, then the baseline"
for k in "${kinds[@]}"; do
	rc=0
	run_one "$k" 0 || rc=$?
	[ "$rc" = 0 ] ||
		{ _ox_show "$k, first round" "$(<"$log/$k.0")"; fail "$k: first round failed"; }
done
sync; echo 3 >/proc/sys/vm/drop_caches
slab0=$(unreclaimable_kib)

((faults == 0)) || faults_on
end=$(($(date +%s) + minutes * 60))
pids=()
for k in "${kinds[@]}"; do
	loop "$k" "$end" &
	pids+=($!)
done
mem=
while (($(date +%s) < end)); do
	sleep 60
	mem+="$(unreclaimable_kib) "
done
for p in "${pids[@]}"; do wait "$p" || true; done
info "unreclaimable slab (KiB) per minute: $mem"

failed=0
for k in "${kinds[@]}"; do
	ok=$(grep -c '^ok' "$log/$k" || true)
	ko=$(grep -c '^FAILED' "$log/$k" || true)
	err=$(grep -c '^ERROR' "$log/$k" || true)
	info "$k: $ok runs ok, $ko failed$( ((faults == 0)) || echo ", $err ended in an error")"
	for n in $(awk '$1 == "FAILED" {print $2}' "$log/$k" | head -3); do
		_ox_show "$k run $n" "$(grep -v 'ping data: rdma-ping-' "$log/$k.$n" | tail -24)"
	done
	# The first run that ended in an error, for the record.
	for n in $(awk '$1 == "ERROR" {print $2}' "$log/$k" | head -1); do
		# (Its first line, which says what ended it, and its last 7.)
		_ox_show "$k run $n (an error)" "$(grep -v 'ping data: rdma-ping-' "$log/$k.$n" |
			awk 'NR == 1 { print; next } { l[NR] = $0 }
				END { for (i = NR - 6; i <= NR; i++) if (i > 1) print l[i] }')"
	done
	((ok > 0 || faults > 0)) || fail "$k: no run completed in $minutes min"
	failed=$((failed + ko))
done
if ((faults)); then
	faults_off
	# Allocations may fail no more: each kind works again at once.
	for k in "${kinds[@]}"; do
		rc=0
		run_one "$k" after || rc=$?
		[ "$rc" = 0 ] ||
			{ _ox_show "$k, after the faults" "$(<"$log/$k.after")"; fail "$k: failed after the faults"; }
	done
	info "after the faults: a run of each kind ok"
fi
runs_int=$(grep -c '^ok' "$log/integrity" 2>/dev/null || true)
runs_pp=$(grep -c '^ok' "$log/pingpong" 2>/dev/null || true)
lost=$(grep -c . "$log/pingpong.lost" 2>/dev/null || true)
[ ! -e "$log/pingpong" ] || info "pingpong: ${lost:-0} of its runs lost their last ACK at teardown (counted ok)"
runs_rp=$(grep -c '^ok' "$log/rping" 2>/dev/null || true)
# A run that lost its last ACK verified 199 messages on one side.
bytes=$(((runs_int * 3 * 1048576) + (runs_pp * 2 * 200 * 8192) - (${lost:-0} * 8192) +
	(runs_rp * 2 * 20 * 4000)))
info "soak: $minutes min, $((runs_int + runs_pp + runs_rp)) runs, $bytes bytes verified, $failed failed"
expect_eq "$failed" 0 "failed runs"

expect_ok ip netns exec "$NS_A" tc qdisc del dev "$NS_A_DEV" root
expect_ok ip netns exec "$NS_B" tc qdisc del dev "$NS_B_DEV" root
sleep 2; sync; echo 3 >/proc/sys/vm/drop_caches
slab1=$(unreclaimable_kib)
info "unreclaimable slab: after the first round $slab0 KiB, at the end $slab1 KiB"
((slab1 - slab0 < 4096)) || fail "unreclaimable slab grew by $((slab1 - slab0)) KiB"
for d in oxa_r oxb_r oxa_i oxb_i; do expect_ok rdma link delete "$d"; done
expect_ok rmmod oxrdma
pass
