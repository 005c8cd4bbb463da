#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Asynchronous events of the data path, as a verbs program sees them:

* SRQ limit: an SRQ armed with a limit raises IBV_EVENT_SRQ_LIMIT_REACHED once fewer receive
  WQEs than the limit remain, and disarms itself (query shows limit 0);
* CQ overflow: a CQ that the process does not poll overflows and raises IBV_EVENT_CQ_ERR;
* completion events: ibv_req_notify_cq + ibv_get_cq_event for the next completion;
* SQD: IBV_EVENT_SQ_DRAINED;
* an RDMA READ at a QP granted no responder resources (max_dest_rd_atomic 0): the reader
  completes with IBV_WC_REM_INV_REQ_ERR, the target QP raises IBV_EVENT_QP_REQ_ERR and is in
  the error state;
* a receive posted to a QP already in the error state completes with IBV_WC_WR_FLUSH_ERR
  and a completion event (rping's server waits for exactly that when its peer vanishes).

    events.py DEV_A GID_A DEV_B GID_B
"""
import os
import signal
import sys
import threading

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verbs import connect_pair, qp_state, to_rts, wait_state  # noqa: E402

ACCESS = e.IBV_ACCESS_LOCAL_WRITE


def bounded(what, fn, secs=20):
    """Runs a blocking call in a thread; exits the process if it does not return in time."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(secs)
    if not out:
        print(f"FAIL: {what}: nothing within {secs} s", flush=True)
        os._exit(1)
    return out[0]


def cq_event(what, channel, cq, secs=10):
    """Waits for a completion event of `cq` on `channel` (ibv_get_cq_event), at most `secs`
    seconds: the alarm's signal interrupts the read (pyverbs holds the interpreter's lock
    while it blocks, so `bounded` could not end it)."""
    signal.signal(signal.SIGALRM, lambda *_: None)
    signal.alarm(secs)
    try:
        channel.get_cq_event(cq)
    except Exception as ex:  # pylint: disable=broad-except
        print(f"FAIL: {what}: no completion event within {secs} s ({ex})", flush=True)
        os._exit(1)
    finally:
        signal.alarm(0)
    cq.ack_events(1)


def poll_one(cq):
    """Busy-polls one completion (callers bound it with `bounded`)."""
    while True:
        n, wcs = cq.poll(1)
        if n > 0:
            return n, wcs


def main():
    dev_a, gid_a, dev_b, gid_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    ca, cb = Context(name=dev_a), Context(name=dev_b)
    pa, pb = PD(ca), PD(cb)
    ma, mb = MR(pa, 1 << 16, ACCESS), MR(pb, 1 << 16, ACCESS)
    cha = CompChannel(ca)
    cqa = CQ(ca, 64, None, cha, 0)
    cqb = CQ(cb, 64)
    srq = SRQ(pb, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
    qa = QP(pa, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqa, rcq=cqa, cap=cap))
    qb = QP(pb, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqb, rcq=cqb, srq=srq, cap=cap))
    connect_pair(qa, ca, gid_a, qb, cb, gid_b, access=ACCESS)

    # Completion event: arm, send, wait for the event, then the completion is there.
    for i in range(8):
        srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mb.buf + 64 * i, 64, mb.lkey)]))
    srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
    cqa.req_notify()
    qa.post_send(SendWR(wr_id=100, num_sge=1, sg=[SGE(ma.buf, 10, ma.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED))
    cq_event("completion event", cha, cqa, 20)
    n, wcs = cqa.poll(1)
    if n != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
        sys.exit("FAIL: completion event without a good completion")
    print("completion channel: event for the next completion", flush=True)

    # SRQ limit: 8 posted, limit 4; after 5 receives 3 remain: the event fires once.
    for i in range(4):
        qa.post_send(SendWR(wr_id=101 + i, num_sge=1, sg=[SGE(ma.buf, 10, ma.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    ev = bounded("SRQ limit event", cb.get_async_event, 20)
    if ev.event_type != e.IBV_EVENT_SRQ_LIMIT_REACHED:
        sys.exit(f"FAIL: expected SRQ_LIMIT_REACHED, got event {ev.event_type}")
    ev.ack()
    if srq.query().srq_limit != 0:
        sys.exit("FAIL: the SRQ limit did not disarm after its event")
    print("SRQ limit: IBV_EVENT_SRQ_LIMIT_REACHED once below the limit, then disarmed", flush=True)

    # CQ overflow: a 2-entry CQ that nobody polls.
    small = CQ(ca, 2)
    q2 = QP(pa, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=small, rcq=small, cap=cap))
    q2b = QP(pb, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqb, rcq=cqb, srq=srq, cap=cap))
    connect_pair(q2, ca, gid_a, q2b, cb, gid_b, access=ACCESS)
    for i in range(8):
        srq.post_recv(RecvWR(wr_id=200 + i, num_sge=1, sg=[SGE(mb.buf, 64, mb.lkey)]))
    for i in range(small.cqe + 2):
        q2.post_send(SendWR(wr_id=300 + i, num_sge=1, sg=[SGE(ma.buf, 10, ma.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    ev = bounded("CQ overflow event", ca.get_async_event, 20)
    if ev.event_type != e.IBV_EVENT_CQ_ERR:
        sys.exit(f"FAIL: expected CQ_ERR, got event {ev.event_type}")
    ev.ack()
    print(f"CQ overflow: IBV_EVENT_CQ_ERR after {small.cqe + 2} completions into {small.cqe} entries",
          flush=True)

    # SQD: moving an idle QP to SQD with en_sqd_async_notify raises SQ_DRAINED; back to RTS,
    # it sends again.
    sqd = QPAttr(qp_state=e.IBV_QPS_SQD)
    sqd.en_sqd_async_notify = 1
    qa.modify(sqd, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
    ev = bounded("SQ drained event", ca.get_async_event, 20)
    if ev.event_type != e.IBV_EVENT_SQ_DRAINED:
        sys.exit(f"FAIL: expected SQ_DRAINED, got event {ev.event_type}")
    ev.ack()
    qa.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
    srq.post_recv(RecvWR(wr_id=400, num_sge=1, sg=[SGE(mb.buf, 64, mb.lkey)]))
    qa.post_send(SendWR(wr_id=401, num_sge=1, sg=[SGE(ma.buf, 10, ma.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED))
    # The four sends of the SRQ check completed earlier into the same CQ; then 401.
    for want in (101, 102, 103, 104, 401):
        n, wcs = bounded("send after SQD", lambda: poll_one(cqa), 20)
        if wcs[0].status != e.IBV_WC_SUCCESS or wcs[0].wr_id != want:
            sys.exit(f"FAIL: after SQD -> RTS: completion {wcs[0].wr_id} status {wcs[0].status}, "
                     f"expected {want}")
    print("SQD: IBV_EVENT_SQ_DRAINED, then RTS again and a send completes", flush=True)

    # No responder resources: a READ is an invalid request (IBA 9.4.4; rxe does the same),
    # though the QP and the MR allow it.
    rd = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ
    mrb = MR(pb, 4096, rd)
    cq3 = CQ(ca, 4)
    q3 = QP(pa, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq3, rcq=cq3, cap=cap))
    q3b = QP(pb, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqb, rcq=cqb, cap=cap))
    to_rts(q3, q3b.qp_num, cb.query_gid(1, gid_b), gid_a, access=rd, rd_atomic=1)
    to_rts(q3b, q3.qp_num, ca.query_gid(1, gid_a), gid_b, access=rd, rd_atomic=0)
    wr = SendWR(wr_id=500, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(ma.buf, 64, ma.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(mrb.rkey, mrb.buf)
    q3.post_send(wr)
    n, wcs = bounded("READ without responder resources", lambda: poll_one(cq3), 20)
    if wcs[0].status != e.IBV_WC_REM_INV_REQ_ERR:
        sys.exit(f"FAIL: READ at max_dest_rd_atomic 0: status {wcs[0].status}, "
                 f"expected REM_INV_REQ_ERR")
    ev = bounded("QP request error event", cb.get_async_event, 20)
    if ev.event_type != e.IBV_EVENT_QP_REQ_ERR:
        sys.exit(f"FAIL: expected QP_REQ_ERR, got event {ev.event_type}")
    ev.ack()
    if not wait_state(q3b, e.IBV_QPS_ERR, 5):
        sys.exit(f"FAIL: READ at max_dest_rd_atomic 0: target QP in state {qp_state(q3b)}")
    print("max_dest_rd_atomic 0: READ gets REM_INV_REQ_ERR, target QP_REQ_ERR and in error",
          flush=True)

    # A receive posted after the QP went to the error state (and after the flush of what it
    # held then): flushed too, with the completion event the CQ was armed for.
    qa.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    while cqa.poll(1)[0] > 0:
        pass
    for i in range(3):
        cqa.req_notify()
        qa.post_recv(RecvWR(wr_id=600 + i, num_sge=1, sg=[SGE(ma.buf, 64, ma.lkey)]))
        cq_event(f"receive {i} posted in the error state", cha, cqa)
        n, wcs = bounded("flushed receive", lambda: poll_one(cqa), 10)
        if wcs[0].wr_id != 600 + i or wcs[0].status != e.IBV_WC_WR_FLUSH_ERR:
            sys.exit(f"FAIL: receive posted in the error state: completion {wcs[0].wr_id} "
                     f"status {wcs[0].status}, expected {600 + i} WR_FLUSH_ERR")
    print("error state: receives posted then complete with WR_FLUSH_ERR and an event",
          flush=True)
    print("events: 6 checks ok")


if __name__ == "__main__":
    main()
