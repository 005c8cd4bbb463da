#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The long hardening runs (issue 14), outside `make check`, which runs a short version of each:
#
#   scripts/hardening.sh VARIANT fuzz     tests/vm/roce-fuzz-peer.sh with FUZZ_PACKETS packets
#                                         (default 1000000; FUZZ_SEED for a given sequence),
#                                         then tests/vm/roce-hostile-verbs.sh with VERBS_CALLS
#                                         calls per thread (default 50000; VERBS_SEED)
#   scripts/hardening.sh VARIANT soak     tests/vm/soak-mixed.sh for SOAK_MINUTES (default 30)
#   scripts/hardening.sh VARIANT faults   tests/vm/dev-faults.sh, every fault of device creation
#                                         (check sweeps every 13th after the first 200) in two
#                                         VMs at once, the odd and the even faults after the
#                                         first 200, then tests/vm/soak-faults.sh for
#                                         FAULTS_MINUTES (default 10)
#
# (make fuzz, make soak, make faults; DEBUG=1 for the debug kernel, where these runs count.)
# Logs in out/<run>/. Prints the tests' figures and ends in "N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib/env.sh"
variant=$1 what=$2
cd "$OX_ROOT"
packets=${FUZZ_PACKETS:-1000000} calls=${VERBS_CALLS:-50000} minutes=${SOAK_MINUTES:-30}
fminutes=${FAULTS_MINUTES:-10}
# Each run: NAME TEST SECONDS [VAR=VALUE...], one per line; a run whose line ends in "&"
# starts alongside the next one (each VM keeps about one of the machine's cores busy).
# faults.c sweeps from FAULTS_FIRST the first 200 faults one by one, then every
# FAULTS_STRIDE-th: from 1 and from 2 with a stride of 2, the two runs cover every fault.
case $what in
fuzz) runs="roce-fuzz-peer roce-fuzz-peer $((1800 + packets / 100)) FUZZ_PACKETS=$packets ${FUZZ_SEED:+FUZZ_SEED=$FUZZ_SEED}
roce-hostile-verbs roce-hostile-verbs $((1800 + calls / 10)) VERBS_CALLS=$calls ${VERBS_SEED:+VERBS_SEED=$VERBS_SEED}";;
soak) runs="soak-mixed soak-mixed $((1200 + minutes * 60)) SOAK_MINUTES=$minutes";;
faults) runs="dev-faults-even dev-faults 9000 FAULTS_FIRST=1 FAULTS_STRIDE=2 FAULTS_TIMEOUT=8400 &
dev-faults-odd dev-faults 9000 FAULTS_FIRST=2 FAULTS_STRIDE=2 FAULTS_TIMEOUT=8400
soak-faults soak-faults $((1200 + fminutes * 60)) SOAK_MINUTES=$fminutes";;
*)
	echo "usage: $0 VARIANT fuzz|soak|faults" >&2
	exit 2;;
esac
logs=$OX_ROOT/out/$what
rm -rf "$logs"; mkdir -p "$logs"
passed=0 failed=0
# report NAME START: the figures of run NAME's log and its verdict.
report() {
	local name=$1 start=$2 rc
	rc=$(<"$logs/$name.rc")
	grep -E '^\[ *[0-9.]+\] ' "$logs/$name.log" |
		grep -E 'fuzz:|verbs-fuzz|uverbs-raw|soak:|faults:|SOAK_FAULTS|counters|slab|integrity runs|runs ok|op [a-z_]+ runs' |
		sed 's/^/  /'
	if [ "$rc" = 0 ]; then
		passed=$((passed + 1))
		echo "PASS $name ($((SECONDS - start)) s)"
	else
		failed=$((failed + 1))
		echo "FAIL $name (exit $rc, $((SECONDS - start)) s; log: out/$what/$name.log)"
		grep -vE '^\[ *[0-9.]+\]' "$logs/$name.log" | tail -15 | sed 's/^/    /'
	fi
}
batch=()
start=$SECONDS
while read -r name test limit vars; do
	alongside=0
	if [ "${vars##* }" = "&" ]; then
		alongside=1 vars=${vars%&} vars=${vars% }
	fi
	echo "== $what: $name on the $variant kernel $vars"
	# shellcheck disable=SC2086
	("$OX_ROOT/scripts/vm-run" --variant "$variant" --timeout "$limit" --out "$logs/$name" -- \
		env $vars bash "$OX_ROOT/tests/vm/$test.sh" >"$logs/$name.log" 2>&1 </dev/null
	 echo $? >"$logs/$name.rc") &
	batch+=("$name")
	[ "$alongside" = 1 ] && continue
	wait
	for name in "${batch[@]}"; do
		report "$name" "$start"
	done
	batch=() start=$SECONDS
done <<<"$runs"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
