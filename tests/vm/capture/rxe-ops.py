# SPDX-License-Identifier: GPL-2.0
"""Drive two rxe devices through the verbs that ibv_*_pingpong and perftest do not use.

    /usr/bin/python3 rxe-ops.py DEV_A DEV_B GID_INDEX

Used by capture-rxe.sh (in the test VM) while tcpdump records the RoCE v2 traffic. In one
process it opens DEV_A (requester side) and DEV_B (responder side) and connects pairs of QPs
over GID_INDEX (the same index on both devices), then posts, per pair:

  RC pair 1 (traffic class 0x62, hop limit 17, flow label 0x12345):
    SEND with immediate (5 and 2500 bytes: SEND_ONLY_WITH_IMMEDIATE; FIRST/MIDDLE/LAST_WITH_IMM),
    zero-length SEND, RDMA WRITE with immediate (7 and 2100 bytes), zero-length RDMA WRITE,
    RDMA WRITE of 1030 bytes (LAST with 2 pad bytes), RDMA READ of 2 and 2050 bytes,
    CMP_AND_SWP and FETCH_AND_ADD, a SEND the responder has no receive for yet (RNR NAKs until
    it posts one), and a 64-byte SEND into a 16-byte receive buffer (a NAK: rxe says remote
    operational error; the pair is in error afterwards)
  RC pair 2: RDMA WRITE with a wrong R_Key (NAK remote access error)
  RC pairs 3 and 4: SEND with invalidate of an R_Key, 1100 bytes (FIRST, LAST_WITH_INVALIDATE)
    and 10 bytes (rxe refuses to invalidate a user MR: the responder's QP fails, each time)
  UC pair: RDMA WRITE with immediate (3 bytes), RDMA WRITE of 1100 bytes, SEND with immediate
    (5 bytes), SEND of 1500 bytes
  UD pair: SEND with immediate (9 bytes)

Each step is bounded (completions are polled for at most a few seconds) and reported on stdout;
a failing step is reported and the script goes on. The path MTU is 1024. Exit status 0 once all
steps ran, whatever they completed with: the point is the packets, not the results; 1 at once if
the very first SEND does not complete (no traffic at all over that GID).
"""

import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verbs import connect_pair  # noqa: E402

PORT = 1
MR_SIZE = 1 << 16
QKEY = 0x11111111
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
          e.IBV_ACCESS_REMOTE_ATOMIC)


def log(msg):
    print(msg, flush=True)


class Side:
    """One device's PD, CQ and MR."""

    missing = 0  # completions that never came, over all sides

    def __init__(self, name):
        self.ctx = Context(name=name)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256)
        self.mr = MR(self.pd, MR_SIZE, ACCESS)
        self.mr.write(bytes((i * 7 + 3) & 0xFF for i in range(MR_SIZE)), MR_SIZE)

    def qp(self, qp_type):
        cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap)
        if qp_type == e.IBV_QPT_UD:
            attr = QPAttr(port_num=PORT)
            attr.qkey = QKEY
            return QP(self.pd, init, attr)
        return QP(self.pd, init)

    def sge(self, offset, length):
        return SGE(self.mr.buf + offset, length, self.mr.lkey)

    def post_recv(self, qp, length, offset=0):
        qp.post_recv(RecvWR(num_sge=1, sg=[self.sge(offset, length)]))

    def poll(self, what, n=1, limit=5.0):
        """Poll n completions (or until limit seconds pass); log their statuses."""
        got = []
        end = time.monotonic() + limit
        while len(got) < n and time.monotonic() < end:
            npolled, wcs = self.cq.poll(n - len(got))
            got.extend(wcs[:npolled])
            if not npolled:
                time.sleep(0.002)
        for wc in got:
            log(f"  {what}: wc status {wc.status} opcode {wc.opcode} len {wc.byte_len}")
        if len(got) < n:
            log(f"  {what}: {n - len(got)} completion(s) missing after {limit} s")
            Side.missing += n - len(got)
        return got


def connect(a, qa, b, qb, gid_index, qp_type, tclass=0, hop=64, flow=0):
    """Bring an RC/UC pair to RTS, each QP pointing at the other; b's PSNs start near the 2^24
    wrap."""
    connect_pair(qa, a.ctx, gid_index, qb, b.ctx, gid_index, psn_a=0x10, psn_b=0xFFFFFE,
                 access=ACCESS, rd_atomic=4, min_rnr_timer=24,  # 40.96 ms
                 hop_limit=hop, traffic_class=tclass, flow_label=flow,
                 rc=qp_type == e.IBV_QPT_RC)


def step(name, fn):
    log(f"step: {name}")
    try:
        fn()
    except Exception as ex:  # keep going: every step's packets are wanted
        log(f"  {name}: failed: {ex!r}")


def send_wr(side, opcode, length, offset=0, imm=None):
    wr = SendWR(opcode=opcode, num_sge=1, sg=[side.sge(offset, length)],
                send_flags=e.IBV_SEND_SIGNALED)
    if imm is not None:
        wr.imm_data = imm
    return wr


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: rxe-ops.py DEV_A DEV_B GID_INDEX")
    gid = int(sys.argv[3])
    a, b = Side(sys.argv[1]), Side(sys.argv[2])

    # --- RC pair 1: the normal operations.
    qa, qb = a.qp(e.IBV_QPT_RC), b.qp(e.IBV_QPT_RC)
    connect(a, qa, b, qb, gid, e.IBV_QPT_RC, tclass=0x62, hop=17, flow=0x12345)
    log(f"rc pair 1: qpn {qa.qp_num:#x} -> {qb.qp_num:#x}")

    def send_imm(length, imm):
        def run():
            b.post_recv(qb, 4096)
            qa.post_send(send_wr(a, e.IBV_WR_SEND_WITH_IMM, length, imm=imm))
            a.poll("send")
            b.poll("recv")
        return run

    step("SEND_WITH_IMM 5", send_imm(5, 0x01020304))
    if Side.missing:
        sys.exit("rxe-ops: the first SEND did not complete: no traffic over this GID")
    step("SEND_WITH_IMM 2500", send_imm(2500, 0xA1B2C3D4))

    def send0():
        b.post_recv(qb, 64)
        qa.post_send(send_wr(a, e.IBV_WR_SEND, 0))
        a.poll("send")
        b.poll("recv")
    step("SEND 0", send0)

    def write(length, imm=None, rkey=None, qp=qa, peer_qp=qb):
        def run():
            op = e.IBV_WR_RDMA_WRITE if imm is None else e.IBV_WR_RDMA_WRITE_WITH_IMM
            if imm is not None:
                b.post_recv(peer_qp, 64)
            wr = send_wr(a, op, length, imm=imm)
            wr.set_wr_rdma(b.mr.rkey if rkey is None else rkey, b.mr.buf + 8192)
            qp.post_send(wr)
            a.poll("write")
            if imm is not None:
                b.poll("recv")
        return run

    step("RDMA_WRITE_WITH_IMM 7", write(7, imm=0x0BADF00D))
    step("RDMA_WRITE_WITH_IMM 2100", write(2100, imm=0x7E57DA7A))
    step("RDMA_WRITE 0", write(0))
    step("RDMA_WRITE 1030", write(1030))

    def read(length):
        def run():
            wr = send_wr(a, e.IBV_WR_RDMA_READ, length, offset=16384)
            wr.set_wr_rdma(b.mr.rkey, b.mr.buf + 100)
            qa.post_send(wr)
            a.poll("read")
        return run

    step("RDMA_READ 2", read(2))
    step("RDMA_READ 2050", read(2050))

    def atomic(op, cmp_add, swap):
        def run():
            wr = send_wr(a, op, 8, offset=24576)
            wr.set_wr_atomic(rkey=b.mr.rkey, addr=b.mr.buf + 32768,
                             compare_add=cmp_add, swap=swap)
            qa.post_send(wr)
            a.poll("atomic")
        return run

    b.mr.write((0x1122334455667788).to_bytes(8, "little"), 8, 32768)
    step("CMP_AND_SWP", atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, 0x1122334455667788,
                               0x0102030405060708))
    step("FETCH_AND_ADD", atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, 0x10, 0))

    def rnr():
        qa.post_send(send_wr(a, e.IBV_WR_SEND, 12))
        time.sleep(0.15)
        b.post_recv(qb, 64)
        a.poll("send")
        b.poll("recv")
    step("SEND into an empty RQ (RNR NAK)", rnr)

    def too_long():
        b.post_recv(qb, 16)
        qa.post_send(send_wr(a, e.IBV_WR_SEND, 64))
        a.poll("send")
        b.poll("recv")
    step("SEND 64 into a 16-byte receive (NAK invalid request)", too_long)

    # --- RC pair 2: a wrong R_Key.
    qa2, qb2 = a.qp(e.IBV_QPT_RC), b.qp(e.IBV_QPT_RC)
    connect(a, qa2, b, qb2, gid, e.IBV_QPT_RC)
    step("RDMA_WRITE with a bad R_Key (NAK remote access error)",
         write(16, rkey=b.mr.rkey ^ 0x5A5A00, qp=qa2, peer_qp=qb2))

    # --- RC pairs 3 and 4: send with invalidate; each leaves the responder's QP in error.
    def send_inv(length):
        def run():
            qa3, qb3 = a.qp(e.IBV_QPT_RC), b.qp(e.IBV_QPT_RC)
            connect(a, qa3, b, qb3, gid, e.IBV_QPT_RC)
            b.post_recv(qb3, 4096)
            qa3.post_send(send_wr(a, e.IBV_WR_SEND_WITH_INV, length, imm=b.mr.rkey))
            a.poll("send_inv")
            b.poll("recv")
        return run
    step("SEND_WITH_INV 1100", send_inv(1100))
    step("SEND_WITH_INV 10", send_inv(10))

    # --- UC pair.
    ua, ub = a.qp(e.IBV_QPT_UC), b.qp(e.IBV_QPT_UC)
    connect(a, ua, b, ub, gid, e.IBV_QPT_UC)
    step("UC RDMA_WRITE_WITH_IMM 3", write(3, imm=0xC0FFEE00, qp=ua, peer_qp=ub))
    step("UC RDMA_WRITE 1100", write(1100, qp=ua, peer_qp=ub))

    def uc_send(length, imm=None):
        def run():
            b.post_recv(ub, 4096)
            op = e.IBV_WR_SEND if imm is None else e.IBV_WR_SEND_WITH_IMM
            ua.post_send(send_wr(a, op, length, imm=imm))
            a.poll("send")
            b.poll("recv")
        return run
    step("UC SEND_WITH_IMM 5", uc_send(5, imm=0x55C0))
    step("UC SEND 1500", uc_send(1500))

    # --- UD pair.
    da, db = a.qp(e.IBV_QPT_UD), b.qp(e.IBV_QPT_UD)

    def ud_send():
        gr = GlobalRoute(dgid=b.ctx.query_gid(PORT, gid), sgid_index=gid, hop_limit=64)
        ah = AH(a.pd, attr=AHAttr(port_num=PORT, is_global=1, gr=gr))
        b.post_recv(db, 64 + 40)
        wr = send_wr(a, e.IBV_WR_SEND_WITH_IMM, 9, imm=0x00C0FFEE)
        wr.set_wr_ud(ah, db.qp_num, QKEY)
        da.post_send(wr)
        a.poll("send")
        b.poll("recv")
    step("UD SEND_WITH_IMM 9", ud_send)
    log("rxe-ops: done")


if __name__ == "__main__":
    main()
