# SPDX-License-Identifier: GPL-2.0
# Shared settings for oxrdma's scripts. Sourced, not run.

OX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Build products that outlive a clone (kernel trees, tools) live here.
OX_CACHE=${OX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oxrdma}
OX_TOOLS=$OX_CACHE/tools
BINDGEN_VERSION=0.70.1
KVER_SRC=/usr/src/linux-source-6.12.tar.xz

# Debian's rustc-web (has rust-src); rustup's rustc comes first in PATH and cannot build the kernel.
KMAKE_VARS=(LLVM=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc "BINDGEN=$OX_TOOLS/bin/bindgen"
	RUSTFMT=/usr/bin/rustfmt CLIPPY_DRIVER=/usr/bin/clippy-driver)

# The test kernel's build directory for a variant ("test", "debug" or "bench"), keyed by the Debian
# source package version, the toolchain and the config fragments, so clones share one build.
kernel_key() {
	local variant=$1 files=("$OX_ROOT/configs/test-kernel.config")
	[ "$variant" = test ] || files+=("$OX_ROOT/configs/$variant.config")
	{
		dpkg-query -W -f='${Version}\n' linux-source-6.12 2>/dev/null || echo none
		/usr/bin/rustc --version 2>/dev/null; clang --version 2>/dev/null | head -1
		cat "${files[@]}"
	} | sha256sum | cut -c1-12
}
kernel_dir() {
	echo "$OX_CACHE/kernel/$1-$(kernel_key "$1")"
}

# Installs the Debian packages named that are not installed yet (quietly when none is missing).
ensure_debs() {
	local p missing=() sudo=
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	echo "setup: installing ${missing[*]}"
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq || return 1
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}
