#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the userspace provider: userspace-provider/out/liboxrdma-rdmav34.so.
#
#   userspace-provider/build.sh              release build (what tests and installs use)
#   userspace-provider/build.sh --debug      debug build, same output name
#   userspace-provider/build.sh install [DESTDIR]
#                                            build, then install the library into libibverbs'
#                                            provider directory and oxrdma.driver into
#                                            /etc/libibverbs.d (under DESTDIR if given)
#
# For an uninstalled build, `. userspace-provider/env.sh` instead of installing.
# Quiet on success apart from cargo's own warnings; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

profile=release
action=build
destdir=
case "${1:-}" in
"") ;;
--debug) profile=debug ;;
install) action=install; destdir=${2:-} ;;
*) echo "usage: $0 [--debug | install [DESTDIR]]" >&2; exit 2 ;;
esac

"$root/scripts/setup-provider.sh"

cargo_args=(build --quiet -p oxrdma-provider --manifest-path "$root/Cargo.toml")
[ "$profile" = release ] && cargo_args+=(--release)
cargo "${cargo_args[@]}"

target_dir=${CARGO_TARGET_DIR:-$root/target}
built="$target_dir/$profile/liboxrdma_provider.so"
[ -f "$built" ] || { echo "build.sh: $built missing after cargo build" >&2; exit 1; }
mkdir -p "$here/out"
# Copy then rename, so a process dlopening the old library never sees a half-written file.
cp "$built" "$here/out/.liboxrdma-rdmav34.so.tmp"
mv -f "$here/out/.liboxrdma-rdmav34.so.tmp" "$here/out/liboxrdma-rdmav34.so"

if [ "$action" = install ]; then
	# libibverbs' provider directory: next to libibverbs.so.1 (Debian: /usr/lib/<multiarch>).
	libdir=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libibverbs\.so\.1 /{print $NF; exit}')")")
	[ -d "$libdir/libibverbs" ] || { echo "build.sh: no libibverbs provider directory in $libdir" >&2; exit 1; }
	install -D -m 0644 "$here/out/liboxrdma-rdmav34.so" "$destdir$libdir/libibverbs/liboxrdma-rdmav34.so"
	install -D -m 0644 "$here/oxrdma.driver" "$destdir/etc/libibverbs.d/oxrdma.driver"
fi
