#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# oxrdma's whole test suite: scripts/check.sh [test|debug]  (make check [DEBUG=1])
#
#   1. host: cargo test of the pure crates (every test counted);
#   2. build: the module with zero warnings, CLIPPY=1 and rustfmt (scripts/lint.sh);
#   3. KUnit: the module's suites run at load in the test VM (every case counted);
#   4. VM: each tests/vm/*.sh in its own VM boot (each file counted).
#
# Logs go to out/check/. The last line is "N passed, N failed"; the exit status is non-zero
# if anything failed. ONLY=host|lint|kunit|vm runs one part; VMTESTS="a b" picks VM tests.
set -uo pipefail
. "$(dirname "$0")/lib/env.sh"
variant=${1:-test}
cd "$OX_ROOT"
logs=$OX_ROOT/out/check
rm -rf "$logs"; mkdir -p "$logs/vm"
passed=0 failed=0 failures=()

ok() { passed=$((passed + 1)); echo "PASS $1"; }
ko() { failed=$((failed + 1)); failures+=("$1"); echo "FAIL $1${2:+ ($2)}"; }
want() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }

# 1. Host tests. Each libtest line "test NAME ... ok|FAILED" is one test.
if want host; then
	echo "== host: cargo test"
	cargo test --workspace --no-fail-fast --color never >"$logs/cargo-test.log" 2>&1
	crc=$?
	n_ok=$(grep -cE '^test .* \.\.\. ok$' "$logs/cargo-test.log")
	n_ko=$(grep -cE '^test .* \.\.\. FAILED$' "$logs/cargo-test.log")
	passed=$((passed + n_ok)); failed=$((failed + n_ko))
	grep -E '^test .* \.\.\. FAILED$' "$logs/cargo-test.log" | sed 's/^test /FAIL host: /; s/ \.\.\. FAILED$//'
	while read -r t; do failures+=("host: $t"); done < <(grep -E '^test .* \.\.\. FAILED$' "$logs/cargo-test.log" | sed 's/^test //; s/ \.\.\. FAILED$//')
	echo "host: $n_ok passed, $n_ko failed"
	if [ $crc != 0 ] && [ "$n_ko" = 0 ]; then
		ko "host: cargo test did not run (see out/check/cargo-test.log)"
		tail -20 "$logs/cargo-test.log"
	fi
fi

# The RoCE v2 packet injector the hostile-peer VM tests use: its own host test against the
# rxe captures (ICRC, masks, byte-exact rebuilds).
if want host; then
	echo "== host: injector"
	if python3 -B "$OX_ROOT/tests/vm/inject/test_roce.py" >"$logs/inject-test.log" 2>&1; then
		ok "host: RoCE v2 injector builds and parses the rxe captures byte for byte"
	else
		ko "host: injector test" "see out/check/inject-test.log"; tail -20 "$logs/inject-test.log"
	fi
fi

# The userspace provider: built for the VM tests, loaded into the host's libibverbs here.
if want host || want vm; then
	echo "== provider"
	if "$OX_ROOT/userspace-provider/build.sh" >"$logs/provider-build.log" 2>&1; then
		ok "build: liboxrdma-rdmav34.so"
		if want host; then
			if bash "$OX_ROOT/userspace-provider/tests/host-load.sh" >"$logs/provider-host-load.log" 2>&1; then
				ok "host: provider loads into libibverbs and claims only oxrdma devices"
			else
				ko "host: provider load test" "see out/check/provider-host-load.log"
				grep FAIL "$logs/provider-host-load.log" | head -10
			fi
		fi
	else
		ko "build: liboxrdma-rdmav34.so" "see out/check/provider-build.log"; tail -20 "$logs/provider-build.log"
	fi
fi

# 2. Build hygiene. The module must also be built for the VM parts below.
if want lint || want kunit || want vm; then
	echo "== build"
	if make -s -C "$OX_ROOT" modules DEBUG=$([ "$variant" = debug ] && echo 1 || echo 0) >"$logs/build.log" 2>&1 \
		&& ! grep -q 'warning' "$logs/build.log"; then
		ok "build: oxrdma.ko, no warnings"
	else
		ko "build: oxrdma.ko" "see out/check/build.log"; grep -E 'error|warning' "$logs/build.log" | head -20
	fi
fi
if want lint; then
	# make install into a staging directory puts the three files where the system looks.
	stage=$(mktemp -d)
	if make -s -C "$OX_ROOT" install DESTDIR="$stage" DEBUG=$([ "$variant" = debug ] && echo 1 || echo 0) >"$logs/install.log" 2>&1 \
		&& [ -n "$(find "$stage/lib/modules" -path '*/updates/oxrdma.ko')" ] \
		&& [ -n "$(find "$stage" -path '*/libibverbs/liboxrdma-rdmav34.so')" ] \
		&& grep -qx 'driver oxrdma' "$stage/etc/libibverbs.d/oxrdma.driver"; then
		ok "build: make install (module, provider, driver file)"
	else
		ko "build: make install" "see out/check/install.log"
	fi
	rm -rf "$stage"
	kd=$(kernel_dir "$variant")/build
	while IFS=$'\t' read -r res name detail; do
		if [ "$res" = PASS ]; then ok "$name"; else ko "$name" "$detail"; fi
	done < <("$OX_ROOT/scripts/lint.sh" "$kd" "$logs")
fi

# 3. KUnit: load the module in the VM; KUnit runs its suites and prints KTAP to the kernel log.
if want kunit; then
	echo "== kunit"
	kout=$logs/kunit
	"$OX_ROOT/scripts/vm-run" --variant "$variant" --timeout 300 --out "$kout" -- \
		bash -c 'modprobe oxrdma && rmmod oxrdma' >"$logs/kunit.log" 2>&1
	vrc=$?
	if [ -f "$kout/dmesg.txt" ]; then
		# Case lines are indented under "# Subtest: <suite>"; suite lines are not.
		ktap=$(sed -E 's/^\[[ 0-9.]+\] //' "$kout/dmesg.txt" | awk '
			/^    # Subtest: / { suite = $3; next }
			/^    (not )?ok [0-9]+ / && suite != "" {
				res = ($1 == "ok") ? "PASS" : "FAIL"
				name = ($1 == "ok") ? $3 : $4
				if ($0 ~ /# SKIP/) res = "SKIP"
				print res "\tkunit: " suite "." name
			}')
	else
		ktap=
	fi
	if [ -z "$ktap" ]; then
		ko "kunit: no KTAP results (vm-run exit $vrc; see out/check/kunit.log)"
	else
		while IFS=$'\t' read -r res name; do
			case $res in PASS) ok "$name";; SKIP) echo "SKIP $name";; *) ko "$name";; esac
		done <<<"$ktap"
	fi
	[ $vrc = 0 ] || ko "kunit: module load/unload in the VM" "vm-run exit $vrc; see out/check/kunit.log"
fi

# 4. VM integration tests: one boot per test file.
if want vm; then
	echo "== vm"
	# siw with parameters (peer-to-peer mode on), for iwarp-p2p-siw: built once per kernel.
	kd=$(kernel_dir "$variant")
	if [ ! -f "$kd/siw-params/siw.ko" ]; then
		bash "$OX_ROOT/tests/vm/capture/capture-siw.sh" --build-siw "$kd" "$variant" \
			>"$logs/siw-params.log" 2>&1 || ko "build: siw with parameters" "see out/check/siw-params.log"
	fi
	tests=()
	if [ -n "${VMTESTS:-}" ]; then
		for t in $VMTESTS; do tests+=("tests/vm/${t%.sh}.sh"); done
	else
		for t in tests/vm/*.sh; do [ "$(basename "$t")" = lib.sh ] || tests+=("$t"); done
	fi
	# The debug kernel (KASAN, lockdep, kmemleak) runs the same tests several times slower:
	# iwarp-rdmacm took 675 s there against 186 s on the test kernel (2026-11-28).
	vm_timeout=600
	[ "$variant" = debug ] && vm_timeout=1500
	for t in "${tests[@]}"; do
		name=$(basename "$t" .sh)
		start=$SECONDS
		"$OX_ROOT/scripts/vm-run" --variant "$variant" --timeout "$vm_timeout" \
			--out "$logs/vm/$name" "$t" \
			>"$logs/vm/$name.log" 2>&1
		vrc=$?
		if [ $vrc = 0 ]; then
			ok "vm: $name ($((SECONDS - start)) s)"
		else
			ko "vm: $name" "exit $vrc, $((SECONDS - start)) s; log: out/check/vm/$name.log"
			grep -vE '^\[ *[0-9.]+\]' "$logs/vm/$name.log" | tail -15 | sed 's/^/    /'
		fi
	done
fi

if [ ${#failures[@]} -gt 0 ]; then
	echo; echo "Failed:"; printf '  %s\n' "${failures[@]}"
fi
echo
echo "check: $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
