#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: oxroce, rxe, TCP and a UDP round trip side by side, on the bench kernel
# (configs/bench.config), in two topologies:
#   1. one VM (2 vCPUs), two network namespaces joined by veth (scripts/bench-guest.sh),
#      NVMe over Fabrics over each device in a second run of that VM
#      (scripts/bench-nvmeof-guest.sh), and oxiwarp against siw in a third
#      (scripts/bench-iwarp-guest.sh);
#   2. two VMs (1 vCPU each, their own kernels) joined by a virtio-net link
#      (scripts/bench-2vm-guest.sh).
# Every figure is the median of OX_BENCH_ROUNDS (5) interleaved rounds, with its range.
# Writes out/bench.txt (the table), out/bench.svg (bandwidth against message size) and
# out/bench-raw-*.txt (every measurement). OX_BENCH_QUICK=1: one round, fewer sizes, no two-VM
# part (a smoke run).
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"
variant=${1:-bench}
out=$OX_ROOT/out
mkdir -p "$out"
export OX_BENCH_ROUNDS=${OX_BENCH_ROUNDS:-5}
[ "${OX_BENCH_QUICK:-0}" = 1 ] && export OX_BENCH_ROUNDS=1
env_args=(OX_BENCH_ROUNDS="$OX_BENCH_ROUNDS" OX_BENCH_QUICK="${OX_BENCH_QUICK:-0}"
	OX_BENCH_SECONDS="${OX_BENCH_SECONDS:-3}")

# one_vm NAME SCRIPT WHAT: one run of the bench VM (2 vCPUs) with SCRIPT; its raw results join
# the report, and a failure ends the bench.
raws=()
one_vm() {
	local name=$1 script=$2 what=$3 rc=0
	echo "bench: $what"
	"$OX_ROOT/scripts/vm-run" --variant "$variant" --timeout 5400 --out "$out/bench-$name" -- \
		env "${env_args[@]}" bash "$OX_ROOT/scripts/$script" >"$out/bench-$name.log" 2>&1 || rc=$?
	cp "$out/bench-$name/raw.txt" "$out/bench-raw-$name.txt" 2>/dev/null || true
	if [ "$rc" != 0 ]; then
		tail -20 "$out/bench-$name.log"
		echo "bench: the $name part FAILED (exit status $rc)"
		exit "$rc"
	fi
	raws+=("$out/bench-raw-$name.txt")
}

one_vm 1vm bench-guest.sh "one VM, two namespaces ($OX_BENCH_ROUNDS rounds; QEMU/TCG, this takes a while)"
one_vm nvmeof bench-nvmeof-guest.sh "NVMe over Fabrics, one VM"
one_vm iwarp bench-iwarp-guest.sh "iWARP: oxiwarp and siw, one VM"

if [ "${OX_BENCH_QUICK:-0}" != 1 ]; then
	echo "bench: two VMs joined by virtio-net"
	port=$((20000 + RANDOM % 20000))
	"$OX_ROOT/scripts/vm-run" --variant "$variant" --cpus 1 --link "listen:$port" --timeout 3600 \
		--out "$out/bench-2vm-server" -- env "${env_args[@]}" \
		bash "$OX_ROOT/scripts/bench-2vm-guest.sh" server >"$out/bench-2vm-server.log" 2>&1 &
	server=$!
	sleep 2
	rc=0
	"$OX_ROOT/scripts/vm-run" --variant "$variant" --cpus 1 --link "connect:$port" --timeout 3600 \
		--out "$out/bench-2vm-client" -- env "${env_args[@]}" \
		bash "$OX_ROOT/scripts/bench-2vm-guest.sh" client >"$out/bench-2vm-client.log" 2>&1 || rc=$?
	src=0
	wait "$server" || src=$?
	cp "$out/bench-2vm-client/raw.txt" "$out/bench-raw-2vm.txt" 2>/dev/null || true
	if [ "$rc" != 0 ] || [ "$src" != 0 ]; then
		tail -20 "$out/bench-2vm-client.log"
		echo "bench: the two-VM part FAILED (client exit status $rc, server $src)"
		exit 1
	fi
	raws+=("$out/bench-raw-2vm.txt")
fi
python3 "$OX_ROOT/scripts/bench-report.py" --svg "$out/bench.svg" "${raws[@]}" | tee "$out/bench.txt"
echo "bench: done (out/bench.txt, out/bench.svg)"
