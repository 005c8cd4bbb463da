#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A hostile RoCE v2 peer (tests/vm/hostile/peer.py, packets with valid ICRCs from a raw socket
# in the other namespace) against live QPs of an oxroce device: a duplicate RDMA READ after its
# MR was deregistered gets no data and no answer (the QP stays up; a new READ with the dead key
# is refused), and the rest of an RDMA WRITE after its MR was deregistered is refused with a
# remote access NAK; neither touches the memory (issue 14, defect 3); a SEND between a
# WRITE's FIRST and LAST, and a WRITE MIDDLE without a FIRST, are invalid requests (defect 4);
# a WRITE from another address than the QP's peer, or with a foreign P_Key, is dropped
# unexecuted (defect 6); a READ longer than one burst of responses followed by a SEND gets
# all its responses before the SEND's ACK (defect 5: responses leave from a bounded pump), and
# a fifth READ while the first of four (max_dest_rd_atomic) is still being answered is an
# invalid request; a duplicate READ whose RETH is not the rest of the original's gets no
# data, zero-length RDMA needs no valid R_Key, a READ of more than 2^31 bytes is an invalid
# request, and a READ response shorter than the path MTU in the middle of a READ fails it
# with IBV_WC_BAD_RESP_ERR (defect 9).
# A READ of a live MR is the injector's control. The harness fails the test on any kernel splat.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

ns_pair
use_provider
rdma_link_add -n "$NS_A" oxa_r oxroce "$NS_A_DEV"
gid_a=$(roce_gid_index oxa_r "$(ipv4_gid "$NS_A_IP4")") || fail "no RoCE v2 IPv4 GID on oxa_r"
# The veth keeps each direction's order, as a wire does: every packet is handed to CPU 0's
# backlog (Receive Packet Steering). Without it a veth delivers each packet from the backlog
# of the CPU that sent it, so two packets a QP sends from two CPUs one right after the other
# (its work item's last READ response, then an ACK from the receive softirq) can reach the
# peer swapped, which the READ-then-SEND scenario would take for an ACK overtaking them.
ip netns exec "$NS_A" sh -c "echo 1 >/sys/class/net/$NS_A_DEV/queues/rx-0/rps_cpus"
ip netns exec "$NS_B" sh -c "echo 1 >/sys/class/net/$NS_B_DEV/queues/rx-0/rps_cpus"
OX_CMD_TIMEOUT=120 capture ip netns exec "$NS_A" /usr/bin/python3 -B "$OX_ROOT/tests/vm/hostile/peer.py" \
	oxa_r "$gid_a" "$NS_A_IP4" "$NS_B" "$NS_B_IP4"
info "$(tr '\n' ';' <<<"$EXPECT_OUT")"
[ "$EXPECT_RC" = 0 ] || fail "peer.py exit status $EXPECT_RC"
expect_match "$EXPECT_OUT" '^peer: 15 scenarios ok$' "all scenarios"
pass
