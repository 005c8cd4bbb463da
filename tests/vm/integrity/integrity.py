#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Data integrity over RC: moves a large pseudo-random pattern between two RDMA devices with
RDMA WRITE, RDMA READ and SEND/RECV (also with immediate data), in message sizes that are odd,
smaller and larger than the MTU, and checks every byte on the receiving side; also checks
FETCH_ADD and CMP_SWAP results. One process drives both devices (QP A on DEV_A, QP B on DEV_B).

    integrity.py DEV_A GID_A DEV_B GID_B [MIB [streams]]

Prints one line per phase and "integrity: N bytes checked" at the end; exits 1 on the first
mismatch or error completion.
"""
import os
import random
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verbs import ALL_ACCESS as ACCESS, connect_pair, poll_ok  # noqa: E402

DEPTH = 64
TIMEOUT_S = 120


class Side:
    def __init__(self, dev, gid_index, size):
        self.ctx = Context(name=dev)
        self.gid_index = gid_index
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 4 * DEPTH)
        self.size = size
        self.mr = MR(self.pd, size, ACCESS)
        self.atom = MR(self.pd, 64, ACCESS)
        cap = QPCap(max_send_wr=DEPTH, max_recv_wr=DEPTH, max_send_sge=4, max_recv_sge=4)
        # Completions for the work requests posted signaled only (pyverbs signals all by
        # default).
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap, sq_sig_all=0))
        self.psn = random.getrandbits(24)



def poll(cq, n, what):
    """Polls n successful completions; fails on an error status or after TIMEOUT_S."""
    return poll_ok(cq, n, what, TIMEOUT_S)


def sizes(total, rng):
    """Message sizes covering `total` bytes: 1, odd, sub-MTU, multi-packet, non-MTU multiples."""
    fixed = [1, 3, 255, 1023, 1024, 1025, 4093, 4096, 9001, 65521]
    out, done = [], 0
    while done < total:
        s = fixed[len(out)] if len(out) < len(fixed) else rng.randint(1, 70000)
        s = min(s, total - done)
        out.append(s)
        done += s
    return out


def main():
    dev_a, gid_a, dev_b, gid_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    mib = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    streams = sys.argv[6:7] == ["streams"]
    size = mib << 20
    rng = random.Random(4791)
    a, b = Side(dev_a, gid_a, size), Side(dev_b, gid_b, size)
    connect_pair(a.qp, a.ctx, a.gid_index, b.qp, b.ctx, b.gid_index, psn_a=b.psn, psn_b=a.psn,
                 rd_atomic=8)
    checked = 0

    def rdma_stream(opcode, what):
        """Posts RDMA WRITEs or READs between A's and B's buffers at the same offsets, in the
        sizes of `sizes`, at most DEPTH outstanding; waits for all."""
        off, pending = 0, 0
        for i, s in enumerate(sizes(size, rng)):
            wr = SendWR(wr_id=i, opcode=opcode, num_sge=1,
                        sg=[SGE(a.mr.buf + off, s, a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(b.mr.rkey, b.mr.buf + off)
            if pending == DEPTH:
                poll(a.cq, 1, what)
                pending -= 1
            a.qp.post_send(wr)
            pending += 1
            off += s
        poll(a.cq, pending, what)

    # 1. RDMA WRITE A -> B, then compare B's buffer.
    pattern = rng.randbytes(size)
    a.mr.write(pattern, size, 0)
    b.mr.write(bytes(size), size, 0)
    rdma_stream(e.IBV_WR_RDMA_WRITE, "write")
    if b.mr.read(size, 0) != pattern:
        sys.exit("FAIL: RDMA WRITE: B's buffer differs from the pattern")
    checked += size
    print(f"write: {size} bytes ok", flush=True)

    # 2. RDMA READ: A reads a new pattern from B (into A's buffer), then compare A's buffer.
    pattern = rng.randbytes(size)
    b.mr.write(pattern, size, 0)
    a.mr.write(bytes(size), size, 0)
    rdma_stream(e.IBV_WR_RDMA_READ, "read")
    if a.mr.read(size, 0) != pattern:
        sys.exit("FAIL: RDMA READ: A's buffer differs from B's pattern")
    checked += size
    print(f"read: {size} bytes ok", flush=True)

    # 3. SEND/RECV B -> A in batches: each receive lands at its own offset; even messages carry
    # immediate data; the second half of each message goes through a second SGE.
    pattern = rng.randbytes(size)
    b.mr.write(pattern, size, 0)
    a.mr.write(bytes(size), size, 0)
    msgs = sizes(size, rng)
    off, i = 0, 0
    while i < len(msgs):
        batch = msgs[i:i + DEPTH // 2]
        o = off
        for j, s in enumerate(batch):
            h = s // 2
            sg = [SGE(a.mr.buf + o, h, a.mr.lkey), SGE(a.mr.buf + o + h, s - h, a.mr.lkey)] \
                if h else [SGE(a.mr.buf + o, s, a.mr.lkey)]
            a.qp.post_recv(RecvWR(wr_id=i + j, num_sge=len(sg), sg=sg))
            o += s
        o = off
        for j, s in enumerate(batch):
            imm = (i + j) % 2 == 0
            wr = SendWR(wr_id=i + j,
                        opcode=e.IBV_WR_SEND_WITH_IMM if imm else e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(b.mr.buf + o, s, b.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
            if imm:
                wr.imm_data = 0x12345678 ^ (i + j)
            b.qp.post_send(wr)
            o += s
        poll(b.cq, len(batch), "send")
        for wc in poll(a.cq, len(batch), "recv"):
            s = batch[wc.wr_id - i]
            if wc.byte_len != s:
                sys.exit(f"FAIL: recv {wc.wr_id}: byte_len {wc.byte_len}, sent {s}")
            if (wc.wr_id % 2 == 0) != bool(wc.wc_flags & e.IBV_WC_WITH_IMM):
                sys.exit(f"FAIL: recv {wc.wr_id}: immediate flag wrong ({wc.wc_flags})")
        off = o
        i += len(batch)
    if a.mr.read(size, 0) != pattern:
        sys.exit("FAIL: SEND: A's receive buffers differ from B's pattern")
    checked += size
    print(f"send: {size} bytes in {len(msgs)} messages ok", flush=True)

    # 4. With "streams": streams of small RDMA WRITEs and READs, one in 16 signaled (as
    # perftest's bandwidth tests post): a QP that streams like this sends from its work item,
    # in parallel with the posting, in segmentation offload runs of single-packet messages.
    # Compare as above.
    def small_stream(opcode, what, count, n):
        signaled = 0
        for i in range(count):
            # A group of 16 leaves the send queue with its signaled completion.
            if i % 16 == 0 and signaled == DEPTH // 16:
                poll(a.cq, 1, what)
                signaled -= 1
            last = i % 16 == 15 or i == count - 1
            wr = SendWR(wr_id=i, opcode=opcode, num_sge=1,
                        sg=[SGE(a.mr.buf + i * n, n, a.mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED if last else 0)
            wr.set_wr_rdma(b.mr.rkey, b.mr.buf + i * n)
            a.qp.post_send(wr)
            signaled += last
        poll(a.cq, signaled, what)

    if streams:
        small = 4096 * 64
        for opcode, what, src, dst in ((e.IBV_WR_RDMA_WRITE, "small writes", a, b),
                                       (e.IBV_WR_RDMA_READ, "small reads", b, a)):
            pattern = rng.randbytes(small)
            src.mr.write(pattern, small, 0)
            dst.mr.write(bytes(small), small, 0)
            small_stream(opcode, what, 4096, 64)
            if dst.mr.read(small, 0) != pattern:
                sys.exit(f"FAIL: {what}: the destination buffer differs from the pattern")
        print(f"small: {2 * small} bytes in 8192 messages of 64 bytes ok", flush=True)

    # 5. Atomics: 100 FETCH_ADD then a CMP_SWAP on one counter in B's memory.
    b.atom.write(bytes(64), 64, 0)
    for k in range(100):
        wr = SendWR(wr_id=k, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                    sg=[SGE(a.atom.buf + 8, 8, a.atom.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rkey=b.atom.rkey, addr=b.atom.buf, compare_add=k + 1, swap=0)
        a.qp.post_send(wr)
        poll(a.cq, 1, "fetch_add")
        old = int.from_bytes(a.atom.read(8, 8), sys.byteorder)
        if old != k * (k + 1) // 2:
            sys.exit(f"FAIL: fetch_add {k}: returned {old}, expected {k * (k + 1) // 2}")
    total = int.from_bytes(b.atom.read(8, 0), sys.byteorder)
    if total != 5050:
        sys.exit(f"FAIL: fetch_add: counter {total}, expected 5050")
    wr = SendWR(wr_id=7, opcode=e.IBV_WR_ATOMIC_CMP_AND_SWP, num_sge=1,
                sg=[SGE(a.atom.buf + 16, 8, a.atom.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_atomic(rkey=b.atom.rkey, addr=b.atom.buf, compare_add=5050, swap=0xfeedface)
    a.qp.post_send(wr)
    poll(a.cq, 1, "cmp_swap")
    if int.from_bytes(b.atom.read(8, 0), sys.byteorder) != 0xfeedface:
        sys.exit("FAIL: cmp_swap did not swap")
    print("atomics: 100 fetch_add + cmp_swap ok", flush=True)

    # 6. Fence: an RDMA READ into A's buffer, then a fenced SEND of that buffer to B: the SEND
    # must carry the data the READ brought (it may only start once the READ completed).
    for k in range(20):
        n = 60000 + k
        pattern = rng.randbytes(n)
        b.mr.write(pattern, n, 0)
        a.mr.write(bytes(n), n, 0)
        b.mr.write(bytes(n), n, 1 << 19)
        b.qp.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[SGE(b.mr.buf + (1 << 19), n, b.mr.lkey)]))
        rd = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(a.mr.buf, n, a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        rd.set_wr_rdma(b.mr.rkey, b.mr.buf)
        snd = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.mr.buf, n, a.mr.lkey)],
                     send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_FENCE)
        a.qp.post_send(rd)
        a.qp.post_send(snd)
        poll(a.cq, 2, "read + fenced send")
        poll(b.cq, 1, "fenced recv")
        if b.mr.read(n, 1 << 19) != pattern:
            sys.exit(f"FAIL: fence: the fenced SEND did not carry the READ's data (round {k})")
    print("fence: 20 READ + fenced SEND rounds ok", flush=True)
    print(f"integrity: {checked} bytes checked")


if __name__ == "__main__":
    main()
