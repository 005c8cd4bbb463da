#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# ibv_rc_pingpong over a lossy, reordering link (netem loss 5%, reorder 10% 50%, delay 1 ms on
# both veth ends), RUNS times in one VM boot. Every run must end on both sides within its time
# limit: a side that gets neither its completions nor an error until it is killed is the
# failure this test is for.
#
# Each run ends either with both sides done (every iteration, buffer check clean), or with one
# side done and the other failing with "transport retry counter exceeded": ibv_rc_pingpong
# exits, destroying its QP, once its own completions are in; if the ACK of the peer's last
# SEND was lost, the peer's retransmissions reach no QP any more and its retries run out (as
# with rxe and hardware). Anything else fails the test.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

runs=${RUNS:-8}
iters=200
limit=90
port=18515

oxroce_pair
gid_a=$GID_A gid_b=$GID_B
pin_neighbours
for side in "$NS_A $NS_A_DEV" "$NS_B $NS_B_DEV"; do
	read -r ns dev <<<"$side"
	expect_ok ip netns exec "$ns" tc qdisc add dev "$dev" root netem loss 5% reorder 10% 50% delay 1ms
done

# done OUT: whether a pingpong output reports every iteration, buffer check clean.
done_all() {
	[[ $1 =~ (^|$'\n')([0-9]+)\ iters\ in\ [0-9.]+\ seconds ]] &&
		[ "${BASH_REMATCH[2]}" = "$iters" ] && [[ $1 != *"invalid data"* ]]
}

both=0 one=0
for run in $(seq 1 "$runs"); do
	slog=$OX_TMP/netem$run.server clog=$OX_TMP/netem$run.client
	src=0 crc=0
	timeout -k 2 "$limit" ip netns exec "$NS_B" \
		ibv_rc_pingpong -d oxb_r -g "$gid_b" -n "$iters" -s 8192 -c -p "$port" \
		</dev/null >"$slog" 2>&1 &
	spid=$!
	wait_until 20 _ox_listening "$spid" "$port" "$NS_B" || fail "run $run: server not listening"
	timeout -k 2 "$limit" ip netns exec "$NS_A" \
		ibv_rc_pingpong -d oxa_r -g "$gid_a" -n "$iters" -s 8192 -c -p "$port" "$NS_B_IP4" \
		</dev/null >"$clog" 2>&1 || crc=$?
	wait "$spid" || src=$?
	sout=$(<"$slog") cout=$(<"$clog")
	if [ "$src" = 124 ] || [ "$crc" = 124 ]; then
		_ox_show "server (exit status $src)" "$sout"
		_ox_show "client (exit status $crc)" "$cout"
		fail "run $run: a side neither completed nor failed within ${limit}s"
	fi
	if [ "$src" = 0 ] && [ "$crc" = 0 ] && done_all "$sout" && done_all "$cout"; then
		both=$((both + 1))
	elif { [ "$src" = 0 ] && done_all "$sout" && [[ $cout == *"retry counter exceeded"* ]]; } ||
		{ [ "$crc" = 0 ] && done_all "$cout" && [[ $sout == *"retry counter exceeded"* ]]; }; then
		one=$((one + 1))
		info "run $run: one side done, the other's retries ran out after it left"
	else
		_ox_show "server (exit status $src)" "$sout"
		_ox_show "client (exit status $crc)" "$cout"
		fail "run $run: unexpected outcome"
	fi
done
info "$runs runs: $both with both sides done, $one with the peer gone before its last ACK"
expect_eq "$((both + one))" "$runs" "runs that ended"
# The counters saw the loss: retransmissions, sequence gaps.
for dev in oxa_r oxb_r; do
	expect_ok rdma statistic show link "$dev/1"
	info "$dev: $EXPECT_OUT"
	expect_match "$EXPECT_OUT" ' retransmits [1-9]' "$dev retransmissions under loss"
	expect_match "$EXPECT_OUT" ' out_of_seq_request [1-9]' "$dev sequence gaps under loss"
done
for side in "$NS_A $NS_A_DEV" "$NS_B $NS_B_DEV"; do
	read -r ns dev <<<"$side"
	expect_ok ip netns exec "$ns" tc -s qdisc show dev "$dev"
	info "netem on $dev: $(grep -oE 'Sent [0-9]+ bytes [0-9]+ pkt \(dropped [0-9]+' <<<"$EXPECT_OUT" | head -1)"
done
pass
