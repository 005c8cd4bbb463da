#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A fuzzing RoCE peer (issue 14; tests/vm/hostile/fuzz.py): FUZZ_PACKETS (default 20000;
# `make fuzz` sends a million) random and adversarial RoCE v2 and v1 packets with valid ICRCs,
# from a raw socket in namespace B, at QPs of oxa_r that fuzz.py keeps making and
# destroying, while two QPs the fuzzer does not know move a verified pattern between oxa_r and
# oxb_r (tests/vm/integrity/integrity.py, over and over). Outcome: no splat (the harness),
# the canary MRs untouched, oxa_r still serving a new QP, every integrity run exact, the
# kernel's unreclaimable slab no larger afterwards than before (within 4 MiB), and the module
# unloads. Prints the packets sent per kind, the device's verdict counters and the memory.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

packets=${FUZZ_PACKETS:-20000}
oxroce_pair
counter() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$1"; }
unreclaimable_kib() { awk '$1 == "SUnreclaim:" {print $2}' /proc/meminfo; }

# One integrity run first: the pair works, and its objects exist once before the baseline.
prog=$OX_ROOT/tests/vm/integrity/integrity.py
OX_CMD_TIMEOUT=400 expect_ok /usr/bin/python3 "$prog" oxa_r "$GID_A" oxb_r "$GID_B" 1
sync; echo 3 >/proc/sys/vm/drop_caches
slab0=$(unreclaimable_kib)
expect_ok rdma statistic show link oxa_r/1
stats0=$EXPECT_OUT

# The protected transfer: integrity runs back to back until the fuzzer is done.
stop=$OX_TMP/stop runs=$OX_TMP/integrity
(
	n=0
	while [ ! -e "$stop" ]; do
		n=$((n + 1))
		if timeout 600 /usr/bin/python3 "$prog" oxa_r "$GID_A" oxb_r "$GID_B" 1 \
			>"$runs.$n" 2>&1; then
			echo "ok $n" >>"$runs"
		else
			echo "FAILED $n" >>"$runs"
		fi
	done
) &
guard=$!

OX_CMD_TIMEOUT=$((600 + packets / 100)) capture ip netns exec "$NS_A" /usr/bin/python3 -B \
	"$OX_ROOT/tests/vm/hostile/fuzz.py" oxa_r "$GID_A" "$NS_A_IP4" "$NS_B" "$NS_B_IP4" \
	"$packets" ${FUZZ_SEED:-}
fuzz_out=$EXPECT_OUT fuzz_rc=$EXPECT_RC
touch "$stop"
wait "$guard" || true
info "$(tr '\n' ';' <<<"$fuzz_out")"
[ "$fuzz_rc" = 0 ] || fail "fuzz.py exit status $fuzz_rc"
sent=$(awk '$1 == "fuzz:" && $3 == "packets" && $4 == "sent" {print $2}' <<<"$fuzz_out")
((${sent:-0} >= packets)) || fail "fuzz.py sent ${sent:-no} packets, not $packets"
expect_match "$fuzz_out" '^fuzz: canaries intact$' "canary MRs untouched"
expect_match "$fuzz_out" '^fuzz: a fresh QP still served$' "oxa_r still serves"

info "integrity runs during the fuzzing: $(tr '\n' ' ' <"$runs")"
if grep -q FAILED "$runs"; then
	n=$(grep -m1 FAILED "$runs" | cut -d' ' -f2)
	_ox_show "integrity run $n" "$(<"$runs.$n")"
	fail "an integrity run failed while the fuzzer ran"
fi
expect_match "$(<"$runs")" '^ok [1-9]' "at least one integrity run, all exact"

expect_ok rdma statistic show link oxa_r/1
stats1=$EXPECT_OUT
verdicts=
for k in rcvd_pkts sent_pkts ack_sent nak_sent send_rnr_err duplicate_request \
	out_of_seq_request icrc_err rx_drop; do
	verdicts+="$k +$(($(counter "$stats1" "$k") - $(counter "$stats0" "$k"))) "
done
info "oxa_r counters during the fuzzing: $verdicts"

# Memory: the victims are gone; what the packets made must be gone too.
sleep 2; sync; echo 3 >/proc/sys/vm/drop_caches
slab1=$(unreclaimable_kib)
info "unreclaimable slab: before $slab0 KiB, after $slab1 KiB"
((slab1 - slab0 < 4096)) || fail "unreclaimable slab grew by $((slab1 - slab0)) KiB"

expect_ok rdma link delete oxa_r
expect_ok rdma link delete oxb_r
expect_ok rmmod oxrdma
pass
