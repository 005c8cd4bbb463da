#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The resource limits a process meets on an oxrdma device (tests/vm/limits/limits.c):
# the device's own object counts (max_srq SRQs at once, ENOSPC beyond, a destroyed one's
# place free again), entry counts (max_cqe, max_qp_wr: EINVAL beyond), pinned memory
# (RLIMIT_MEMLOCK, for a process without CAP_IPC_LOCK: ENOMEM), the rdma cgroup's object
# count (rdma.max), and the memory cgroup: a process's rings are charged to it (its
# memory.current grows by each CQ's ring) and its memory.max ends the creates with ENOMEM,
# without waking the cgroup's OOM killer. The module unloads afterwards.
set -euo pipefail
# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

use_provider
veth_root
rdma_link_add oxr_l oxroce "$VETH_A"
lim=$OX_TMP/limits
# (gcc under TCG takes seconds, and minutes on a loaded debug kernel.)
OX_CMD_TIMEOUT=300 expect_ok gcc -O2 -Wall -o "$lim" "$OX_ROOT/tests/vm/limits/limits.c" \
	-libverbs

# val KEY TEXT: the value on TEXT's line "KEY value".
val() {
	awk -v k="$1" '$1 == k {print $2}' <<<"$2"
}

info "max_srq: SRQs until one is refused"
max_srq=$(ibv_devinfo -v -d oxr_l | awk '$1 == "max_srq:" {print $2}')
[ -n "$max_srq" ] || fail "ibv_devinfo -v shows no max_srq"
OX_CMD_TIMEOUT=300 expect_ok "$lim" oxr_l srqs
expect_eq "$(val created "$EXPECT_OUT")" "$max_srq" "SRQs made at once"
expect_eq "$(val errno "$EXPECT_OUT")" 28 "errno of the one beyond (ENOSPC)"
expect_eq "$(val again "$EXPECT_OUT")" 0 "errno of one made after one was destroyed"

info "entries: a CQ of max_cqe + 1 entries, a QP of max_qp_wr + 1 send WRs"
expect_ok "$lim" oxr_l entries
expect_eq "$(val cq "$EXPECT_OUT")" 22 "errno of the CQ (EINVAL)"
expect_eq "$(val qp "$EXPECT_OUT")" 22 "errno of the QP (EINVAL)"

info "RLIMIT_MEMLOCK of 1 MiB, without CAP_IPC_LOCK: MRs of 512 KiB and 8 MiB"
nolock=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock prlimit --memlock=1048576)
expect_ok "${nolock[@]}" "$lim" oxr_l mr 524288
expect_eq "$(val mr "$EXPECT_OUT")" 0 "errno of the 512 KiB MR"
expect_ok "${nolock[@]}" "$lim" oxr_l mr 8388608
expect_eq "$(val mr "$EXPECT_OUT")" 12 "errno of the 8 MiB MR (ENOMEM)"

# The cgroup v2 hierarchy with the rdma and memory controllers for a child group.
cg=/sys/fs/cgroup
grep -q " $cg cgroup2 " /proc/mounts || expect_ok mount -t cgroup2 none "$cg"
expect_ok sh -c "echo '+memory +rdma' >$cg/cgroup.subtree_control"
grp=$cg/oxlim
mkdir -p "$grp"
at_exit rmdir "$grp"

# in_group CMD...: CMD run as a member of the group (and its only one).
in_group() {
	sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$grp" "$@"
}

info "rdma cgroup: hca_object=5, then PDs until one is refused"
expect_ok sh -c "echo 'oxr_l hca_object=5' >$grp/rdma.max"
expect_ok in_group "$lim" oxr_l objects 20
expect_eq "$(val created "$EXPECT_OUT")" 5 "PDs made"
expect_eq "$(val errno "$EXPECT_OUT")" 11 "errno of the sixth (EAGAIN, the rdma cgroup's)"
expect_ok sh -c "echo 'oxr_l hca_object=max' >$grp/rdma.max"

info "memory cgroup: memory.max 24 MiB, then CQs of 65535 entries (4 MiB rings) until refused"
expect_ok sh -c "echo $((24 << 20)) >$grp/memory.max"
oom0=$(awk '$1 == "oom_kill" {print $2}' "$grp/memory.events")
expect_ok in_group "$lim" oxr_l cqs 64 65535 "$grp/memory.current"
out=$EXPECT_OUT
made=$(val created "$out")
info "memory cgroup: $made CQs made; memory.current: $(val before "$out") before," \
	"$(val after-0 "$out") after the first, $(val "after-$((made - 1))" "$out") after the last"
((made >= 1 && made < 6)) || fail "memory cgroup: $made CQs of 4 MiB fit in 24 MiB"
expect_eq "$(val errno "$out")" 12 "errno of the CQ beyond the limit (ENOMEM)"
if ((made >= 2)); then
	grew=$(($(val after-1 "$out") - $(val after-0 "$out")))
	# memory.current moves in per-CPU batches of 64 pages (MEMCG_CHARGE_BATCH), and the
	# process's other charges come and go: the 4 MiB ring shows as at least 4 MiB - 256 KiB.
	((grew >= (4 << 20) - 64 * 4096)) ||
		fail "memory cgroup: the second CQ charged $grew bytes, not its ring"
	info "ok: the second CQ charged $grew bytes"
fi
expect_eq "$(awk '$1 == "oom_kill" {print $2}' "$grp/memory.events")" "$oom0" \
	"OOM kills in the group"
expect_ok sh -c "echo max >$grp/memory.max"

link_del oxr_l
expect_ok rmmod oxrdma
info "rmmod oxrdma: clean"
pass
