#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A hostile local process (issue 14; tests/vm/hostile/verbs-fuzz.c): VERBS_CALLS (default
# 3000; `make fuzz` makes 50000) random calls per thread, from 4 threads sharing one context,
# of every verb oxrdma implements, with random and boundary arguments (unmapped, kernel and
# wrapping addresses, counts near 0, the device's maximum and UINT32_MAX, random QP
# attributes and masks, random WRs and SGEs, mmap of the command file at random offsets,
# fork() with registered memory, objects destroyed while a transfer uses them), while an
# ibv_rc_pingpong pair on another device checks its data. Outcome: the fuzzer ends on its own
# (no hang; a crash of the process is a failure too), the bystander pair completes with its
# buffers right, no object is left behind, the module unloads; the harness fails the test on
# any splat. Prints the calls and errors per verb.
# At the same time, tests/vm/hostile/uverbs-raw.c writes as many raw uverbs commands per
# thread on its own context of the same device: handles of the wrong type or stale, bad and
# short response buffers, WR lists on a process's QPs, random words everywhere.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

calls=${VERBS_CALLS:-3000}
oxroce_pair
veth_root
rdma_link_add oxr_f oxroce "$VETH_A"
gid_f=$(roce_gid_index oxr_f "$(ipv4_gid "$VETH_A_IP4")") || fail "no RoCE v2 IPv4 GID on oxr_f"
bin=$OX_TMP/verbs-fuzz
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$bin" "$OX_ROOT/tests/vm/hostile/verbs-fuzz.c" \
	-libverbs -lpthread
raw=$OX_TMP/uverbs-raw
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$raw" "$OX_ROOT/tests/vm/hostile/uverbs-raw.c" \
	-libverbs -lpthread

# The bystander: a verified ping-pong between the other two devices, as long as the fuzzer runs.
iters=$((calls / 2 + 200))
timeout 1800 ip netns exec "$NS_B" ibv_rc_pingpong -d oxb_r -g "$GID_B" -n "$iters" -s 4096 -c \
	>"$OX_TMP/pp.server" 2>&1 &
spid=$!
wait_until 30 _ox_listening "$spid" 18515 "$NS_B" || true
timeout 1800 ip netns exec "$NS_A" ibv_rc_pingpong -d oxa_r -g "$GID_A" -n "$iters" -s 4096 -c \
	"$NS_B_IP4" >"$OX_TMP/pp.client" 2>&1 &
cpid=$!

seed=${VERBS_SEED:-$RANDOM}
timeout $((600 + calls / 10)) "$raw" oxr_f "$calls" 4 "$seed" >"$OX_TMP/raw.out" 2>&1 &
rawpid=$!
OX_CMD_TIMEOUT=$((600 + calls / 10)) capture "$bin" oxr_f "$gid_f" "$calls" 4 "$seed"
info "seed $seed: $(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "verbs-fuzz exit status $EXPECT_RC$(_ox_rc_note "$EXPECT_RC")"
expect_match "$EXPECT_OUT" "^verbs-fuzz: [0-9]+ calls" "the fuzzer's summary"
rrc=0
wait "$rawpid" || rrc=$?
info "$(tr '\n' ';' <"$OX_TMP/raw.out")"
[ "$rrc" = 0 ] || fail "uverbs-raw exit status $rrc$(_ox_rc_note "$rrc")"
expect_match "$(<"$OX_TMP/raw.out")" "^uverbs-raw: [0-9]+ calls" "the raw fuzzer's summary"

crc=0 src=0
wait "$cpid" || crc=$?
wait "$spid" || src=$?
expect_eq "$crc/$src" 0/0 "bystander ping-pong exit status (client/server)"
check_pingpong "bystander server" "$(<"$OX_TMP/pp.server")" "$iters"
check_pingpong "bystander client" "$(<"$OX_TMP/pp.client")" "$iters"

# Everything the fuzzer made is gone with it.
left() { rdma res show "$1" dev oxr_f 2>/dev/null | grep -cE 'comm (verbs-fuzz|uverbs-raw)' || true; }
for r in qp cq mr pd; do
	expect_eq "$(left "$r")" 0 "the fuzzer's ${r}s left"
done
for d in oxr_f oxa_r oxb_r; do expect_ok rdma link delete "$d"; done
expect_ok rmmod oxrdma
pass
