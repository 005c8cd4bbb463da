#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A process that writes garbage into its own shared rings (the kernel must treat them as
hostile): bad indices, garbage WQEs, bad L_Keys and lengths, too many SGEs, an impossible CQ
consumer index, garbage receive WQEs, a corrupt SRQ. Each scenario gets its own QP pair (device A <-> device
B) and CQs; a bystander QP pair on the same devices must keep working throughout.

    hostile.py DEV_A GID_A DEV_B GID_B

The rings are found in /proc/self/maps (mappings of the devices' uverbs files, in creation
order: the CQ ring, then each QP's send and receive rings; an SRQ's ring when it is made). Prints one line per scenario and
"hostile: N scenarios ok"; exits 1 on the first unexpected outcome.
"""
import ctypes
import os
import random
import signal
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verbs import connect_pair, poll, qp_state, wait_state  # noqa: E402

ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
HDR, PROD, CONS = 256, 0, 64
WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR, WC_LOC_PROT_ERR = 1, 2, 4


def maps_of(dev):
    """(start, offset) of every mapping of DEV's uverbs file, in file-offset order."""
    uv = None
    for n in os.listdir("/sys/class/infiniband_verbs"):
        p = f"/sys/class/infiniband_verbs/{n}/ibdev"
        if os.path.exists(p) and open(p).read().strip() == dev:
            uv = f"/dev/infiniband/{n}"
    out = []
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == uv:
            out.append((int(f[2], 16), int(f[0].split("-")[0], 16)))
    return [a for _, a in sorted(out)]


def u32(addr, off, val=None):
    c = ctypes.c_uint32.from_address(addr + off)
    if val is not None:
        c.value = val & 0xffffffff
    return c.value


class Ctx:
    def __init__(self, dev, gid):
        self.dev, self.gid = dev, gid
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, 1 << 16, ACCESS)
        self.nmaps = 0

    def qp(self):
        """A CQ and an RC QP; returns (cq, qp, cq_ring, sq_ring, rq_ring) addresses."""
        cq = CQ(self.ctx, 16)
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=2)
        qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        m = maps_of(self.dev)
        rings = m[self.nmaps:self.nmaps + 3]
        self.nmaps = len(m)
        if len(rings) != 3:
            sys.exit(f"FAIL: {self.dev}: expected 3 new ring mappings, found {len(rings)}")
        return cq, qp, rings


class Pair:
    def __init__(self, a, b):
        self.ca, self.qa, (self.cqr, self.sq, self.rq) = a.qp()
        self.cb, self.qb, (_, _, _) = b.qp()
        self.a, self.b = a, b
        connect_pair(self.qa, a.ctx, a.gid, self.qb, b.ctx, b.gid, access=ACCESS, timeout=10,
                     retry_cnt=2, rnr_retry=2)

    def exchange(self, what):
        """One SEND A -> B and back; both must succeed."""
        for src, dst, scq, dcq, sm, dm in ((self.qa, self.qb, self.ca, self.cb, self.a, self.b),
                                           (self.qb, self.qa, self.cb, self.ca, self.b, self.a)):
            dst.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(dm.mr.buf, 4096, dm.mr.lkey)]))
            src.post_send(SendWR(wr_id=2, num_sge=1, sg=[SGE(sm.mr.buf, 100, sm.mr.lkey)],
                                 send_flags=e.IBV_SEND_SIGNALED))
            w1, w2 = poll(scq), poll(dcq)
            if len(w1) != 1 or len(w2) != 1 or w1[0].status or w2[0].status:
                sys.exit(f"FAIL: {what}: a send on a healthy QP pair did not complete")


def wqe(wr_id, opcode, flags, sges):
    hdr = struct.pack("=QBBBBIQIIQQIIII", wr_id, opcode, flags, len(sges), 0, 0, 0, 0, 0, 0, 0,
                      0, 0, 0, 0)
    return hdr + b"".join(struct.pack("=QII", *s) for s in sges)


def inject_send(p, body, count=1):
    """Writes BODY into the next send slot(s) and publishes the producer index."""
    prod = u32(p.sq, PROD)
    slot_size = 128  # send_slot_size(2 SGEs, inline granted) of this QP: checked below
    for i in range(count):
        ctypes.memmove(p.sq + HDR + ((prod + i) % 8) * slot_size, body, len(body))
    u32(p.sq, PROD, prod + count)


def kick(p, bystander):
    """Makes the kernel look at the victim's rings, as a doorbell would (the test wrote them
    behind the provider's back, so it cannot ring through a post; a doorbell only serves its
    own QP): an RTS->RTS modify queues an engine run over the device's QPs. Then the
    bystander pair must still work."""
    attr = QPAttr()
    attr.min_rnr_timer = 12
    try:
        p.qa.modify(attr, e.IBV_QP_MIN_RNR_TIMER)
    except PyverbsRDMAError:
        # The kernel got there first (a doorbell the test's own post rang) and moved the
        # victim to the error state, where this modify is not allowed: nothing to kick.
        if qp_state(p.qa) != e.IBV_QPS_ERR:
            raise
    bystander.exchange("bystander")


def expect_error_state(p, what, secs=5):
    if not wait_state(p.qa, e.IBV_QPS_ERR, secs):
        sys.exit(f"FAIL: {what}: victim QP is not in the error state ({qp_state(p.qa)})")


class Alarm(Exception):
    """The alarm of `async_events` went off."""


def async_events(ctx, secs, until=None):
    """The types of CTX's asynchronous events (each acknowledged) read within SECS seconds, or
    up to and including the first of type UNTIL. The alarm's signal interrupts the blocking
    read (pyverbs holds the interpreter's lock while it blocks); its handler raises, so an
    alarm between two reads ends the loop too."""
    def ring(*_):
        raise Alarm()
    seen = []
    signal.signal(signal.SIGALRM, ring)
    signal.alarm(secs)
    try:
        while True:
            ev = ctx.get_async_event()
            ev.ack()
            seen.append(ev.event_type)
            if ev.event_type == until:
                break
    except (Alarm, PyverbsRDMAError):
        pass
    finally:
        signal.alarm(0)
    return seen


def only_one(cq, what):
    """The victim posted one WQE: the completion already polled must be its only one (no
    flush of it as well)."""
    extra = poll(cq, 1, secs=1)
    if extra:
        sys.exit(f"FAIL: {what}: another completion after it: "
                 f"{[(w.wr_id, w.status) for w in extra]}")


def main():
    a = Ctx(sys.argv[1], int(sys.argv[2]))
    b = Ctx(sys.argv[3], int(sys.argv[4]))
    bystander = Pair(a, b)
    keep = []  # every victim stays alive: freed mmap offsets would be reused
    bystander.exchange("bystander before")
    rnd = random.Random(7)
    done = 0

    # 1. SQ producer index beyond the ring.
    p = Pair(a, b)
    keep.append(p)
    u32(p.sq, PROD, u32(p.sq, CONS) + 8 + 5)
    kick(p, bystander)
    expect_error_state(p, "sq producer overrun")
    print("sq producer overrun: victim QP in error, bystander fine", flush=True)
    done += 1

    # 2. A garbage WQE.
    p = Pair(a, b)
    keep.append(p)
    inject_send(p, bytes(rnd.getrandbits(8) for _ in range(128)))
    kick(p, bystander)
    wc = poll(p.ca)
    if not wc or wc[0].status != WC_LOC_QP_OP_ERR:
        sys.exit(f"FAIL: garbage WQE: expected LOC_QP_OP_ERR, got {[(w.wr_id, w.status) for w in wc]}")
    only_one(p.ca, "garbage WQE")
    expect_error_state(p, "garbage WQE")
    print(f"garbage WQE: error completion (status {wc[0].status}), QP in error", flush=True)
    done += 1

    # 3. A SEND with an L_Key that does not exist.
    p = Pair(a, b)
    keep.append(p)
    inject_send(p, wqe(33, 2, 1, [(a.mr.buf, 100, 0xdeadbe00)]))
    kick(p, bystander)
    wc = poll(p.ca)
    if not wc or wc[0].status != WC_LOC_PROT_ERR or wc[0].wr_id != 33:
        sys.exit(f"FAIL: bad lkey: expected LOC_PROT_ERR for wr 33, got {[(w.wr_id, w.status) for w in wc]}")
    only_one(p.ca, "bad lkey")
    print("bad L_Key: LOC_PROT_ERR", flush=True)
    done += 1

    # 4. A SEND whose SGE runs past its MR (and one of 4 GiB - 1 bytes).
    for length in (a.mr.length + 1, 0xffffffff):
        p = Pair(a, b)
        keep.append(p)
        inject_send(p, wqe(44, 2, 1, [(a.mr.buf, length, a.mr.lkey)]))
        kick(p, bystander)
        wc = poll(p.ca)
        if not wc or wc[0].status not in (WC_LOC_PROT_ERR, WC_LOC_LEN_ERR):
            sys.exit(f"FAIL: SGE length {length}: got {[(w.wr_id, w.status) for w in wc]}")
        only_one(p.ca, f"SGE length {length}")
        print(f"SGE of {length} bytes on a {a.mr.length}-byte MR: status {wc[0].status}", flush=True)
        done += 1

    # 5. More SGEs than the slot holds / the QP allows.
    p = Pair(a, b)
    keep.append(p)
    inject_send(p, wqe(55, 2, 1, [(a.mr.buf, 1, a.mr.lkey)] * 2)[:10] + b"\xff" + bytes(53))
    kick(p, bystander)
    wc = poll(p.ca)
    if not wc or wc[0].status == e.IBV_WC_SUCCESS:
        sys.exit("FAIL: 255 SGEs: no error completion")
    print(f"255 SGEs: status {wc[0].status}", flush=True)
    done += 1

    # 6. An impossible CQ consumer index: completions are lost (CQ error event), nothing else.
    p = Pair(a, b)
    keep.append(p)
    u32(p.cqr, CONS, u32(p.cqr, PROD) + 12345)
    p.qa.post_send(SendWR(wr_id=66, num_sge=1, sg=[SGE(a.mr.buf, 10, a.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    p.qb.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(b.mr.buf, 4096, b.mr.lkey)]))
    kick(p, bystander)
    time.sleep(0.5)
    print("CQ consumer index garbage: no crash", flush=True)
    done += 1

    # 7. Garbage receive WQEs: the sender sees an error, not the kernel.
    p = Pair(a, b)
    keep.append(p)
    prod = u32(p.rq, PROD)
    for i in range(3):
        ctypes.memmove(p.rq + HDR + ((prod + i) % 8) * 64, struct.pack("=QII", 9, 1000, 0), 16)
    u32(p.rq, PROD, prod + 3)
    p.qb.post_send(SendWR(wr_id=77, num_sge=1, sg=[SGE(b.mr.buf, 10, b.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    wc = poll(p.cb, secs=20)
    if not wc or wc[0].status == e.IBV_WC_SUCCESS:
        sys.exit(f"FAIL: garbage receive WQE: sender got {[(w.wr_id, w.status) for w in wc]}")
    print(f"garbage receive WQEs: sender completes with status {wc[0].status}", flush=True)
    done += 1

    # 8. RQ producer index beyond the ring: the victim QP fails at the next SEND to it, and the
    # sender gets a remote operational error (not RNR NAKs until its retries run out).
    p = Pair(a, b)
    keep.append(p)
    u32(p.rq, PROD, u32(p.rq, CONS) + 8 + 5)
    p.qb.post_send(SendWR(wr_id=88, num_sge=1, sg=[SGE(b.mr.buf, 10, b.mr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED))
    wc = poll(p.cb, secs=20)
    if not wc or wc[0].status != e.IBV_WC_REM_OP_ERR:
        sys.exit(f"FAIL: rq producer overrun: sender got {[(w.wr_id, w.status) for w in wc]}")
    expect_error_state(p, "rq producer overrun")
    print("rq producer overrun: victim QP in error, sender sees a remote operational error",
          flush=True)
    done += 1

    # 9. An SRQ whose producer index is beyond the ring: the SRQ raises IBV_EVENT_SRQ_ERR,
    # the QP taking from it fails, its sender sees a remote operational error. The SRQ stays
    # in error, repaired or not: a second QP on it fails too, without a second SRQ_ERR.
    srq = SRQ(a.pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
    m = maps_of(a.dev)
    if len(m) != a.nmaps + 1:
        sys.exit(f"FAIL: srq: expected 1 new ring mapping, found {len(m) - a.nmaps}")
    srq_ring = m[a.nmaps]
    a.nmaps = len(m)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=2)
    on_srq = []
    for _ in range(2):
        cq = CQ(a.ctx, 16)
        qa = QP(a.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq, cap=cap))
        a.nmaps = len(maps_of(a.dev))
        cb, qb, _ = b.qp()
        connect_pair(qa, a.ctx, a.gid, qb, b.ctx, b.gid, access=ACCESS, timeout=10,
                     retry_cnt=2, rnr_retry=2)
        on_srq.append((cq, qa, cb, qb))
    keep.append((srq, on_srq))
    cons = u32(srq_ring, CONS)
    u32(srq_ring, PROD, cons + 0x10000)
    for n, (_, qa, cb, qb) in enumerate(on_srq):
        what = "srq producer overrun" if n == 0 else "srq repaired after its error"
        qb.post_send(SendWR(wr_id=99, num_sge=1, sg=[SGE(b.mr.buf, 10, b.mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
        wc = poll(cb, secs=20)
        if not wc or wc[0].status != e.IBV_WC_REM_OP_ERR:
            sys.exit(f"FAIL: {what}: sender got {[(w.wr_id, w.status) for w in wc]}")
        if not wait_state(qa, e.IBV_QPS_ERR, 5):
            sys.exit(f"FAIL: {what}: the QP on the SRQ is not in error ({qp_state(qa)})")
        if n == 0:
            seen = async_events(a.ctx, 10, until=e.IBV_EVENT_SRQ_ERR)
            if e.IBV_EVENT_SRQ_ERR not in seen:
                sys.exit(f"FAIL: {what}: no IBV_EVENT_SRQ_ERR within 10 s (read {seen})")
            # Repaired: a sane producer index and a good receive WQE.
            u32(srq_ring, PROD, cons)
            srq.post_recv(RecvWR(wr_id=5, num_sge=1, sg=[SGE(a.mr.buf, 4096, a.mr.lkey)]))
    seen = async_events(a.ctx, 2)
    if e.IBV_EVENT_SRQ_ERR in seen:
        sys.exit(f"FAIL: srq: a second IBV_EVENT_SRQ_ERR (read {seen})")
    print("srq producer overrun: IBV_EVENT_SRQ_ERR once, its QPs in error (also after a repair), "
          "their senders see a remote operational error", flush=True)
    done += 1

    bystander.exchange("bystander after")
    print(f"hostile: {done} scenarios ok")


if __name__ == "__main__":
    main()
