#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build (once, then cached) the test kernel: scripts/build-kernel.sh [test|debug]
# Prints nothing when the cached build is complete.
set -euo pipefail
. "$(dirname "$0")/lib/env.sh"

variant=${1:-test}
case $variant in test|debug|bench) ;; *) echo "usage: $0 [test|debug|bench]" >&2; exit 2;; esac
kdir=$(kernel_dir "$variant")
[ -f "$kdir/.oxrdma-built" ] && exit 0

mkdir -p "$OX_CACHE/kernel"
exec 9>"$OX_CACHE/kernel/.lock"
flock 9
[ -f "$kdir/.oxrdma-built" ] && exit 0

# One unpacked source tree per Debian source version, shared by the variants (built with O=).
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
src=$OX_CACHE/src/linux-$srcver
if ! [ -f "$src/.oxrdma-unpacked" ]; then
	echo "kernel: unpacking $KVER_SRC"
	rm -rf "$src.tmp"; mkdir -p "$src.tmp"
	tar -C "$src.tmp" --strip-components=1 -xf "$KVER_SRC"
	rm -rf "$src"; mv "$src.tmp" "$src"
	touch "$src/.oxrdma-unpacked"
fi

mkdir -p "$kdir/build"
ln -sfn "$src" "$kdir/src"
km=(make -C "$src" O="$kdir/build" "${KMAKE_VARS[@]}")
frags=("$OX_ROOT/configs/test-kernel.config")
[ "$variant" = test ] || frags+=("$OX_ROOT/configs/$variant.config")

log=$kdir/build.log
echo "kernel: building $variant kernel in $kdir (about 10 minutes; log: $log)"
{
	"${km[@]}" tinyconfig
	cat "$src/kernel/configs/kvm_guest.config" "${frags[@]}" \
		<(echo "CONFIG_LOCALVERSION=\"-oxrdma-$variant\"") >"$kdir/fragment.config"
	"$src/scripts/kconfig/merge_config.sh" -m -O "$kdir/build" "$kdir/build/.config" "$kdir/fragment.config"
	"${km[@]}" olddefconfig
} >"$log" 2>&1 || { tail -30 "$log"; exit 1; }

# Kconfig drops an option whose dependencies are missing without a word: refuse that here.
bad=0
while IFS= read -r line; do
	case $line in CONFIG_*=*) ;; *) continue;; esac
	name=${line%%=*} want=${line#*=}
	if [ "$want" = n ]; then
		grep -qx "$name=[ym]" "$kdir/build/.config" && { echo "kernel: $name is set, wanted n" >&2; bad=1; }
	elif ! grep -qxF "$line" "$kdir/build/.config"; then
		echo "kernel: $line did not survive olddefconfig (got: $(grep "^$name=" "$kdir/build/.config" || echo unset))" >&2
		bad=1
	fi
done < <(cat "${frags[@]}")
[ $bad = 0 ] || exit 1

start=$SECONDS
if ! "${km[@]}" -j"$(nproc)" bzImage modules >>"$log" 2>&1; then
	grep -E 'error|Error' "$log" | head -30; exit 1
fi
# A module tree the VM's modprobe can read (installed into the build dir, never the host).
rm -rf "$kdir/modroot"
"${km[@]}" INSTALL_MOD_PATH="$kdir/modroot" INSTALL_MOD_STRIP=1 DEPMOD=/sbin/depmod modules_install >>"$log" 2>&1
echo "kernel: built in $((SECONDS - start)) s"
touch "$kdir/.oxrdma-built"
