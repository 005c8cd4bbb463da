#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# What `make demo` shows, run inside the test VM: oxrdma loaded, two network namespaces joined
# by a veth pair, and an oxrdma device on each end. It grows as the driver does.
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
echo "Data transfer between the two devices is the next step; see Documentation/admin-guide.rst."
