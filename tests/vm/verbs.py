# SPDX-License-Identifier: GPL-2.0
"""What the VM tests' pyverbs scripts share: connecting QPs and polling completions.

    import os, sys
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import verbs

Runs under Debian's /usr/bin/python3 with python3-pyverbs; nothing here is oxrdma-specific,
so the same scripts run against rxe.
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.qp import QPAttr

PORT = 1
ALL_ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
              | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)


def ipv4_gid(addr):
    """The IPv4-mapped GID of a dotted-quad address."""
    return GID("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x"
               % tuple(int(x) for x in addr.split(".")))


def to_rts(qp, dest_qpn, dgid, sgid_index, access=ALL_ACCESS, rq_psn=0, sq_psn=0,
           rd_atomic=1, min_rnr_timer=1, timeout=14, retry_cnt=7, rnr_retry=7,
           mtu=e.IBV_MTU_1024, hop_limit=64, traffic_class=0, flow_label=0, rc=True):
    """Moves an RC (or, with rc=False, UC) QP through INIT and RTR to RTS, connected to QP
    `dest_qpn` at GID `dgid`. The defaults are perftest's and ibv_rc_pingpong's (67 ms ACK
    timeout, 7 retries)."""
    gr = GlobalRoute(dgid=dgid, sgid_index=sgid_index, hop_limit=hop_limit,
                     traffic_class=traffic_class, flow_label=flow_label)
    a = QPAttr(port_num=PORT)
    a.qp_access_flags = access
    a.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=gr, dlid=0)
    a.path_mtu = mtu
    a.dest_qp_num = dest_qpn
    a.rq_psn, a.sq_psn = rq_psn, sq_psn
    if rc:
        a.max_rd_atomic = a.max_dest_rd_atomic = rd_atomic
        a.min_rnr_timer, a.timeout, a.retry_cnt, a.rnr_retry = (min_rnr_timer, timeout,
                                                                retry_cnt, rnr_retry)
    qp.to_rts(a)


def connect_pair(qa, ctx_a, gid_a, qb, ctx_b, gid_b, psn_a=0, psn_b=0, **kw):
    """Connects QP `qa` of context `ctx_a` (GID index `gid_a`) and QP `qb` of `ctx_b` to each
    other; A sends from `psn_a`, B from `psn_b`. Other keywords go to `to_rts`."""
    to_rts(qa, qb.qp_num, ctx_b.query_gid(PORT, gid_b), gid_a, rq_psn=psn_b, sq_psn=psn_a,
           **kw)
    to_rts(qb, qa.qp_num, ctx_a.query_gid(PORT, gid_a), gid_b, rq_psn=psn_a, sq_psn=psn_b,
           **kw)


def poll(cq, n=1, secs=10):
    """Up to `n` completions of `cq`, polling for at most `secs` seconds."""
    out, end = [], time.monotonic() + secs
    while len(out) < n:
        got, wcs = cq.poll(n - len(out))
        if got > 0:
            out += wcs[:got]
        elif time.monotonic() > end:
            break
        else:
            time.sleep(0.0005)
    return out


def poll_ok(cq, n, what, secs=120):
    """Exactly `n` successful completions of `cq` within `secs` seconds; exits the process
    with "FAIL: <what>: ..." on an error status or a timeout."""
    wcs = poll(cq, n, secs)
    for wc in wcs:
        if wc.status != e.IBV_WC_SUCCESS:
            sys.exit(f"FAIL: {what}: completion status {wc.status} (wr_id {wc.wr_id})")
    if len(wcs) < n:
        sys.exit(f"FAIL: {what}: {len(wcs)} of {n} completions after {secs} s")
    return wcs


def qp_state(qp):
    """The QP's current state (IBV_QPS_*)."""
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def wait_state(qp, state, secs=5):
    """Whether the QP reaches `state` within `secs` seconds."""
    end = time.monotonic() + secs
    while qp_state(qp) != state:
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True
