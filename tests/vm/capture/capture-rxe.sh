#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Capture real RoCE v2 traffic of the reference soft-RoCE driver (rxe) for oxrdma-wire's fixtures.
#
#	scripts/vm-run --no-module --timeout 300 --out DIR tests/vm/capture/capture-rxe.sh
#
# Not a test (nothing is judged): a tool, run by hand in the test VM. Two rxe devices on the
# root-namespace veth pair (rxe0 on oxv0, rxe1 on oxv1). tcpdump records `udp port 4791` on oxv0
# (every packet of both directions crosses it) with a full snaplen while these run, over the
# RoCE v2 IPv4 GID unless noted. "IPv6" is the RoCE v2 GID of the veth's link-local IPv6
# address: with ULA addresses (fd78::1, fd78::2) added to the veths, rxe sent nothing at all over
# their GIDs (not even on lo: both ends are local addresses of the root namespace), while a
# link-local destination, which needs the output interface, goes out of the veth as it should.
#	ibv_rc_pingpong  -s 1, 33, 4100 (path MTU 1024: FIRST/MIDDLE/LAST); over IPv6 -s 33
#	ibv_uc_pingpong -s 33, ibv_ud_pingpong -s 33
#	ib_send_bw / ib_write_bw / ib_read_bw -n 5 with -s 33 and 3000 (MTU 1024), ib_atomic_bw -n 5
#	with -A CMP_AND_SWAP and FETCH_AND_ADD
#	rxe-ops.py (pyverbs, see there): immediates, zero-length operations, RNR NAK, NAKs, send
#	with invalidate (only and last), UC writes and sends, UD send with immediate, a non-zero
#	traffic class; over IPv4 and over IPv6
# Output in $OX_OUT: rxe.pcap (all of it), rxe-any.pcap (the same on every interface, for
# diagnosis), gids.txt, and one log per step. tests/vm/capture/extract-fixtures.py turns
# rxe.pcap into rust/wire/fixtures/rxe-roce-v2.txt.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OX_OUT:?no OX_OUT: run this through scripts/vm-run}
OX_CMD_TIMEOUT=60

veth_root
rxe_add rxe0 "$VETH_A"
rxe_add rxe1 "$VETH_B"
[ -d /sys/module/ib_uverbs ] || expect_ok modprobe ib_uverbs

# The GID table: index, type, GID. One grep reads every type file (unused entries fail with
# EINVAL and are left out; the table has hundreds). Pick rxe0's RoCE v2 IPv4 and link-local IPv6
# entries (rxe1's indexes are the same: the veths were set up alike).
gid4='' gid6=''
: >"$out/gids.txt"
for dev in rxe0 rxe1; do
	dir=/sys/class/infiniband/$dev/ports/1
	types=$(cd "$dir/gid_attrs/types" && grep -H . -- * 2>/dev/null | sort -n) || true
	while IFS=: read -r i t; do
		read -r g <"$dir/gids/$i" || continue
		echo "$dev $i $t $g" >>"$out/gids.txt"
		if [ "$dev" != rxe0 ] || [ "$t" != "RoCE v2" ]; then
			continue
		fi
		case $g in
		0000:0000:0000:0000:0000:ffff:*) [ -n "$gid4" ] || gid4=$i;;
		fe80:*) [ -n "$gid6" ] || gid6=$i;;
		esac
	done <<<"$types"
done
cat "$out/gids.txt"
[ -n "$gid4" ] || fail "rxe0 has no RoCE v2 IPv4 GID"
info "GID index: IPv4 $gid4, IPv6 ${gid6:-none}"

# tcpdump: -U writes each packet at once, -Z root keeps the right to write into $OX_OUT.
tcpdump -i "$VETH_A" -s 0 -U -Z root -w "$out/rxe.pcap" udp port 4791 >"$out/tcpdump.log" 2>&1 &
dump_pid=$!
tcpdump -i any -s 0 -U -Z root -w "$out/rxe-any.pcap" udp port 4791 >"$out/tcpdump-any.log" 2>&1 &
dump_any_pid=$!
# shellcheck disable=SC2317  # called through wait_until
_listening() { grep -q 'listening on' "$1"; }
wait_until 20 _listening "$out/tcpdump.log" || fail "tcpdump did not start: $(<"$out/tcpdump.log")"
wait_until 20 _listening "$out/tcpdump-any.log" || true

n=0
# One client/server pair; its output goes to $out/NN-NAME.log. A failure is logged, not fatal.
pair() {
	local name=$1
	shift
	n=$((n + 1))
	local log
	log=$(printf '%s/%02d-%s.log' "$out" "$n" "$name")
	if (run_pair --port 18515 60 "$@") >"$log" 2>&1; then
		info "ok: $name"
	else
		info "FAILED (see ${log##*/}): $name"
	fi
}

pp() { # pp NAME TOOL GID SIZE [ITERS]: an ibv_*_pingpong exchange
	local name=$1 tool=$2 g=$3 s=$4 iters=${5:-2}
	pair "$name" "$tool" -d rxe1 -g "$g" -s "$s" -n "$iters" -- \
		"$tool" -d rxe0 -g "$g" -s "$s" -n "$iters" "$VETH_B_IP4"
}
pp rc-pingpong-s1 ibv_rc_pingpong "$gid4" 1
pp rc-pingpong-s33 ibv_rc_pingpong "$gid4" 33
pp rc-pingpong-s4100 ibv_rc_pingpong "$gid4" 4100
pp uc-pingpong-s33 ibv_uc_pingpong "$gid4" 33
pp ud-pingpong-s33 ibv_ud_pingpong "$gid4" 33
[ -z "$gid6" ] || pp rc-pingpong-ipv6-s33 ibv_rc_pingpong "$gid6" 33

pt() { # pt NAME TOOL SIZE [ARGS...]: a perftest exchange with 5 iterations, path MTU 1024
	local name=$1 tool=$2 s=$3
	shift 3
	pair "$name" "$tool" -d rxe1 -x "$gid4" -m 1024 -n 5 -s "$s" "$@" -- \
		"$tool" -d rxe0 -x "$gid4" -m 1024 -n 5 -s "$s" "$@" "$VETH_B_IP4"
}
pt send-bw-s33 ib_send_bw 33
pt send-bw-s3000 ib_send_bw 3000
pt write-bw-s33 ib_write_bw 33
pt write-bw-s3000 ib_write_bw 3000
pt read-bw-s33 ib_read_bw 33
pt read-bw-s3000 ib_read_bw 3000
pt atomic-bw-cas ib_atomic_bw 8 -A CMP_AND_SWAP
pt atomic-bw-faa ib_atomic_bw 8 -A FETCH_AND_ADD

ops() { # ops NAME GID: rxe-ops.py
	local name=$1 g=$2 log
	n=$((n + 1))
	log=$(printf '%s/%02d-%s.log' "$out" "$n" "$name")
	if timeout -k 2 120 /usr/bin/python3 "$here/rxe-ops.py" rxe0 rxe1 "$g" >"$log" 2>&1; then
		info "ok: $name"
	else
		info "FAILED (see ${log##*/}): $name"
	fi
}
ops ops-ipv4 "$gid4"
[ -z "$gid6" ] || ops ops-ipv6 "$gid6"

sleep 1
kill -INT "$dump_pid" "$dump_any_pid" 2>/dev/null || true
wait "$dump_pid" "$dump_any_pid" 2>/dev/null || true
cat "$out/tcpdump.log" "$out/tcpdump-any.log"
info "capture: $(stat -c %s "$out/rxe.pcap") bytes in rxe.pcap, $(stat -c %s "$out/rxe-any.pcap") in rxe-any.pcap"
pass
