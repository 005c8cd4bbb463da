#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs in a VM (scripts/vm-run [--variant bench] -- bash scripts/profile-guest.sh WHAT):
# where the CPU time of one ib_write_bw run goes, for
# oxroce (two namespaces) or rxe (root namespace) on one veth pair, or oxiwarp or siw (root
# namespace, two local addresses: TCP through lo; over rdma_cm). perf samples every CPU
# (cpu-clock; TCG has no hardware counters) while the transfer runs; the flat profile (own
# time per function, every CPU, all contexts) is written to $OX_OUT/profile-<dev>.txt.
#   profile-guest.sh oxroce|rxe|oxiwarp|siw [SIZE]
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

what=${1:-oxroce} size=${2:-65536}
modprobe ib_uverbs
use_provider
case $what in
rxe)
	veth_root
	rxe_add rxe0 "$VETH_A"
	rxe_add rxe1 "$VETH_B"
	ga=$(roce_gid_index rxe0 "$(ipv4_gid "$VETH_A_IP4")") || fail "rxe0: no GID"
	gb=$(roce_gid_index rxe1 "$(ipv4_gid "$VETH_B_IP4")") || fail "rxe1: no GID"
	sx=() cx=() sdev=rxe1 cdev=rxe0 sip=$VETH_B_IP4 sopt=(-x "$gb") copt=(-x "$ga")
	;;
oxroce)
	oxroce_pair
	sopt=(-x "$GID_B") copt=(-x "$GID_A")
	sx=(ip netns exec "$NS_B") cx=(ip netns exec "$NS_A") sdev=oxb_r cdev=oxa_r sip=$NS_B_IP4
	;;
oxiwarp | siw)
	modprobe rdma_ucm
	veth_root
	if [ "$what" = siw ]; then
		siw_add iw_a "$VETH_A"
		siw_add iw_b "$VETH_B"
	else
		rdma_link_add iw_a oxiwarp "$VETH_A"
		rdma_link_add iw_b oxiwarp "$VETH_B"
	fi
	sopt=(-R) copt=(-R) sx=() cx=() sdev=iw_b cdev=iw_a sip=$VETH_B_IP4
	;;
*) fail "usage: profile-guest.sh oxroce|rxe|oxiwarp|siw [SIZE]" ;;
esac
"${sx[@]}" ib_write_bw -F -D 8 -s "$size" -d "$sdev" "${sopt[@]}" >"$OX_TMP/server" 2>&1 &
server=$!
sleep 1
"${cx[@]}" ib_write_bw -F -D 8 -s "$size" -d "$cdev" "${copt[@]}" "$sip" >"$OX_TMP/client" 2>&1 &
client=$!
sleep 3
perf record -a -F 499 -o "$OX_TMP/perf.data" -- sleep 4 >/dev/null 2>&1 || fail "perf record failed"
wait "$client" || fail "client: $(cat "$OX_TMP/client")"
wait "$server" || true
info "$what: $(grep -E "^[[:space:]]*$size[[:space:]]" "$OX_TMP/client" | awk '{print $4 " MB/s"}')"
perf report -i "$OX_TMP/perf.data" --stdio --no-children --sort sym --percent-limit 0.5 \
	2>/dev/null | grep -v '^#' | grep -v '^$' >"$OX_OUT/profile-$what.txt"
head -40 "$OX_OUT/profile-$what.txt"
pass
