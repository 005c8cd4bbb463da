#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Lint gates: scripts/lint.sh KERNEL_BUILD_DIR [LOG_DIR]
# Prints one line per gate, "PASS|FAIL<TAB>name<TAB>detail", and exits non-zero on a failure.
#   - the module built with CLIPPY=1 (kernel lints + clippy), zero warnings;
#   - rustfmt with the kernel's .rustfmt.toml over every Rust file of the tree;
#   - checkpatch --strict over the C files (when the kernel source has scripts/checkpatch.pl);
#   - cargo clippy of the host workspace, warnings denied;
#   - the fuzz targets' manifest (rust/wire/fuzz, a workspace of its own that needs nightly and
#     cargo-fuzz to build, so not built here) read by cargo.
set -uo pipefail
. "$(dirname "$0")/lib/env.sh"
kd=${1:?usage: lint.sh KERNEL_BUILD_DIR [LOG_DIR]}
logs=${2:-$(mktemp -d)}
mkdir -p "$logs"
cd "$OX_ROOT"
rc=0
report() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}"; [ "$1" = PASS ] || rc=1; }

# Clippy runs only on crates that are compiled, so force the Rust object to be rebuilt.
rm -f drivers/oxrdma/oxrdma_main.o
if make -C "$kd" M="$OX_ROOT" "${KMAKE_VARS[@]}" CLIPPY=1 modules >"$logs/clippy.log" 2>&1 \
	&& ! grep -qE '^(warning|error)' "$logs/clippy.log"; then
	report PASS "lint: module with CLIPPY=1, zero warnings"
else
	report FAIL "lint: module with CLIPPY=1" "$(grep -cE '^warning' "$logs/clippy.log") warning(s); see $logs/clippy.log"
fi

ksrc=$(readlink -f "$kd/source" 2>/dev/null || true)
[ -f "$ksrc/.rustfmt.toml" ] || ksrc=$(readlink -f "$(dirname "$kd")/src")
mapfile -t rs < <(git ls-files '*.rs' 2>/dev/null; git ls-files --others --exclude-standard '*.rs' 2>/dev/null)
if /usr/bin/rustfmt --check --edition 2021 --config-path "$ksrc/.rustfmt.toml" "${rs[@]}" >"$logs/rustfmt.log" 2>&1; then
	report PASS "lint: rustfmt (kernel .rustfmt.toml), ${#rs[@]} files"
else
	report FAIL "lint: rustfmt" "run: rustfmt --edition 2021 --config-path $ksrc/.rustfmt.toml <files>; see $logs/rustfmt.log"
fi

# The C sources (helpers, the kernel-verbs KUnit test) in kernel style; the userspace test
# programs under tests/vm and the QEMU plugin under scripts/qemu in kernel style too, but with the
# C library's types (uint8_t, not u8).
if [ -f "$ksrc/scripts/checkpatch.pl" ]; then
	mapfile -t cs < <({ git ls-files '*.c' '*.h'; git ls-files --others --exclude-standard '*.c' '*.h'; } 2>/dev/null)
	kern=() user=()
	for f in "${cs[@]}"; do
		case $f in tests/vm/* | scripts/qemu/*) user+=("$f");; *) kern+=("$f");; esac
	done
	cp_run() {
		perl "$ksrc/scripts/checkpatch.pl" --no-tree --strict --terse --show-types "$@"
	}
	if { cp_run -f "${kern[@]}"; ((${#user[@]} == 0)) || cp_run --ignore PREFER_KERNEL_TYPES -f "${user[@]}"; } \
		>"$logs/checkpatch.log" 2>&1 && ! grep -qE ': (ERROR|WARNING|CHECK):' "$logs/checkpatch.log"; then
		report PASS "lint: checkpatch --strict, ${#cs[@]} C files"
	else
		report FAIL "lint: checkpatch --strict" "see $logs/checkpatch.log"
	fi
fi

if cargo clippy --workspace --all-targets --color never -- -D warnings >"$logs/cargo-clippy.log" 2>&1; then
	report PASS "lint: cargo clippy (host workspace), -D warnings"
else
	report FAIL "lint: cargo clippy (host workspace)" "see $logs/cargo-clippy.log"
fi

if cargo metadata --manifest-path rust/wire/fuzz/Cargo.toml --format-version 1 --no-deps \
	--offline >/dev/null 2>"$logs/fuzz-manifest.log"; then
	report PASS "lint: fuzz targets' manifest (rust/wire/fuzz/Cargo.toml)"
else
	report FAIL "lint: fuzz targets' manifest" "see $logs/fuzz-manifest.log"
fi
exit $rc
