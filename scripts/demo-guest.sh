#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# What `make demo` shows, run inside the test VM: oxrdma loaded, two network namespaces joined
# by a veth pair, an oxrdma device on each end, and data moving between them.
set -euo pipefail
. "$OX_ROOT/tests/vm/lib.sh"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@" 2>&1 | sed 's/^/  /'; }

say "The oxrdma module"
expect_ok modprobe oxrdma
show sh -c "dmesg | grep -o 'oxrdma [0-9.]* loaded.*'"
show sh -c "lsmod | grep -E '^(oxrdma|ib_core)'"

say "Two hosts: network namespaces $NS_A and $NS_B joined by a veth pair"
ns_pair >/dev/null
show ip -n "$NS_A" -br addr show dev "$NS_A_DEV"
show ip -n "$NS_B" -br addr show dev "$NS_B_DEV"
show ip netns exec "$NS_A" ping -c 1 -W 2 "$NS_B_IP4"

say "An oxrdma RoCE device in each namespace (rdma link add ... type oxroce)"
rdma_link_add -n "$NS_A" oxr0 oxroce "$NS_A_DEV" >/dev/null
rdma_link_add -n "$NS_B" oxr1 oxroce "$NS_B_DEV" >/dev/null
show rdma link show
show rdma dev show

say "oxr0's GID table: a RoCE v1 and a RoCE v2 entry for every address of $NS_A_DEV"
for f in /sys/class/infiniband/oxr0/ports/1/gid_attrs/types/*; do
	i=${f##*/}
	t=$(cat "$f" 2>/dev/null) || continue
	printf '  GID %-3s %s  %s\n' "$i" "$(cat /sys/class/infiniband/oxr0/ports/1/gids/"$i")" "$t"
done

say "Data moving: ibv_rc_pingpong (RC, RoCE v2, kernel bypass), 4 KiB x 1000, data checked"
use_provider >/dev/null
ga=$(roce_gid_index oxr0 "$(ipv4_gid "$NS_A_IP4")") || fail "no RoCE v2 GID on oxr0"
gb=$(roce_gid_index oxr1 "$(ipv4_gid "$NS_B_IP4")") || fail "no RoCE v2 GID on oxr1"
run_pair --port 18515 --server-ns "$NS_B" --client-ns "$NS_A" 120 \
	ibv_rc_pingpong -d oxr1 -g "$gb" -n 1000 -s 4096 -c -- \
	ibv_rc_pingpong -d oxr0 -g "$ga" -n 1000 -s 4096 -c "$NS_B_IP4" >/dev/null
grep -E 'bytes in|iters in' <<<"$PAIR_CLIENT_OUT" | sed 's/^/  client: /'

say "rdma_cm: rping -v (the data of every ping is verified), from $NS_A to $NS_B"
modprobe rdma_ucm
run_pair --port 7174 --server-ns "$NS_B" --client-ns "$NS_A" 120 \
	rping -s -a "$NS_B_IP4" -p 7174 -v -C 5 -- rping -c -a "$NS_B_IP4" -p 7174 -v -C 5 >/dev/null
sed 's/^/  client: /' <<<"$PAIR_CLIENT_OUT"

say "perftest over rdma_cm: ib_write_bw -R, 64 KiB writes"
run_pair --port 18515 --server-ns "$NS_B" --client-ns "$NS_A" 120 \
	ib_write_bw -R -F -d oxr1 -s 65536 -n 500 -- \
	ib_write_bw -R -F -d oxr0 -s 65536 -n 500 "$NS_B_IP4" >/dev/null
grep -E '#bytes|^ *65536 ' <<<"$PAIR_CLIENT_OUT" | sed 's/^/  /'
show rdma statistic show link oxr0/1

say "An iWARP device too (type oxiwarp), and the port following its netdev"
rdma_link_add -n "$NS_A" oxi0 oxiwarp "$NS_A_DEV" >/dev/null
show cat /sys/class/infiniband/oxi0/node_type /sys/class/infiniband/oxi0/ports/1/state
ip -n "$NS_B" link set "$NS_B_DEV" down
wait_until 5 grep -q DOWN /sys/class/infiniband/oxi0/ports/1/state || true
show sh -c "echo 'peer down:'; cat /sys/class/infiniband/oxi0/ports/1/state"
ip -n "$NS_B" link set "$NS_B_DEV" up
wait_until 5 grep -q ACTIVE /sys/class/infiniband/oxi0/ports/1/state || true
show sh -c "echo 'peer up:  '; cat /sys/class/infiniband/oxi0/ports/1/state"

say "Removing everything: rmmod with devices present"
show rmmod oxrdma
show rdma dev show
echo
echo "More in Documentation/admin-guide.rst."
