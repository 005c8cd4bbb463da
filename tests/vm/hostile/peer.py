#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile RoCE v2 peer (tests/vm/inject/roce.py, packets with valid ICRCs) against live QPs
of an oxroce device: what a responder must refuse once an MR is gone, and request packets out
of the FIRST, MIDDLE, LAST / ONLY order of messages.

    peer.py DEV GID_INDEX DEV_IP PEER_NETNS PEER_IP

DEV (IPv4 address DEV_IP, RoCE v2 GID GID_INDEX) is in this process's namespace; the
injector's sockets are made in PEER_NETNS (address PEER_IP), where nothing owns UDP port 4791. Each scenario connects a fresh RC QP of DEV to
a made-up QP of the peer (its QPN and PSNs are known to the injector) and plays the peer by
hand. Prints one line per scenario and "peer: N scenarios ok"; exits 1 on the first
unexpected outcome.
"""
import ctypes
import mmap
import os
import subprocess
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inject"))
import roce  # noqa: E402
from verbs import ALL_ACCESS, ipv4_gid, poll, qp_state, to_rts, wait_state  # noqa: E402

CLONE_NEWNET = 0x40000000
PEER_QPN = 0x123
RQ_PSN, SQ_PSN = 1000, 5000


def enter_netns(name):
    """Moves this thread into network namespace NAME (sockets made afterwards live there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            sys.exit(f"FAIL: setns({name}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


class Buf:
    """Page-aligned process memory of our own: it stays readable after its MR is gone."""

    def __init__(self, n, fill=0):
        self.m = mmap.mmap(-1, n)
        self.m.write(bytes([fill]) * n)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.m))
        self.n = n

    def bytes(self, off=0, n=None):
        return bytes(self.m[off:off + (self.n - off if n is None else n)])


class Victim:
    """An RC QP of DEV in RTS, connected to the injector's made-up QP."""

    def __init__(self, ctx, gid, peer_gid):
        self.ctx = ctx
        self.pd = PD(ctx)
        self.cq = CQ(ctx, 16)
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        to_rts(self.qp, PEER_QPN, peer_gid, gid, access=ALL_ACCESS | e.IBV_ACCESS_LOCAL_WRITE,
               rq_psn=RQ_PSN, sq_psn=SQ_PSN, rd_atomic=4)
        self.qpn = self.qp.qp_num

    def mr(self, buf, access):
        return MR(self.pd, buf.n, access, address=buf.addr)



def expect_nak(inj, psn, code, what, secs=3):
    """Everything the victim sends within SECS: there must be a NAK CODE at PSN, and no data."""
    got = inj.recv_all(secs)
    data = [p for p in got if p.payload]
    if data:
        fail(f"{what}: the victim sent data: {[(hex(p.opcode), p.psn, len(p.payload)) for p in data]}")
    acks = [p for p in got if p.opcode == roce.RC_ACKNOWLEDGE]
    if not any(roce.nak_code(p) == code and p.psn == psn for p in acks):
        fail(f"{what}: expected NAK {code} at PSN {psn}, got "
             f"{[(roce.opcode_name(p.opcode), p.psn) for p in got]} "
             f"(acknowledges: {[(p.psn, roce.nak_code(p)) for p in acks]})")
    if not all(p.icrc_ok for p in got):
        fail(f"{what}: a packet from the victim has a bad ICRC")


def expect_silence(inj, what, secs=2):
    """The victim sends nothing within SECS."""
    got = inj.recv_all(secs)
    if got:
        fail(f"{what}: expected no answer, got {[(roce.opcode_name(p.opcode), p.psn) for p in got]}")


def expect_error_state(v, what, secs=5, detail=None):
    """Fails unless V's QP reaches the error state within SECS; DETAIL() adds to the
    message."""
    if not wait_state(v.qp, e.IBV_QPS_ERR, secs):
        extra = f"; {detail()}" if detail else ""
        fail(f"{what}: the victim QP is not in the error state ({qp_state(v.qp)}{extra})")


def counters(dev, names=("rcvd_pkts", "sent_pkts", "nak_sent")):
    """DEV's port counters NAMES (None where unreadable)."""
    try:
        words = subprocess.run(["rdma", "statistic", "show", "link", f"{dev}/1"],
                               capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        words = []
    got = dict(zip(words[2::2], words[3::2]))
    return {n: int(got[n]) if got.get(n, "").isdigit() else None for n in names}


def counted(before, after):
    """What changed between two counters() readings, as text."""
    return ", ".join(f"{n} +{after[n] - before[n]}" if None not in (before[n], after[n])
                     else f"{n} ?" for n in before)


def spoofed_ip(ip):
    """Another address in IP's /24: not the victim QP's peer."""
    a = ip.split(".")
    return ".".join(a[:3] + [str((int(a[3]) + 97) % 250 + 1)])


def main():
    dev, gid, my_ip, peer_ns, peer_ip = sys.argv[1:6]
    gid = int(gid)
    ctx = Context(name=dev)
    peer_gid = ipv4_gid(peer_ip)
    enter_netns(peer_ns)
    inj = roce.Injector(peer_ip, my_ip)
    done = 0
    keep = []  # QPs, PDs and buffers stay alive until the end

    def rc(opcode, v, psn, **kw):
        return roce.Pkt(opcode=opcode, dest_qp=v.qpn, psn=psn, **kw)

    # 0. The injector itself: a READ of a live MR returns its bytes (control).
    v = Victim(ctx, gid, peer_gid)
    src = Buf(4096, 0x3c)
    mr = v.mr(src, e.IBV_ACCESS_REMOTE_READ)
    keep += [v, src, mr]
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(src.addr, mr.rkey, 64)))
    r = inj.recv(3)
    if (r is None or r.opcode != roce.RC_RDMA_READ_RESPONSE_ONLY or r.psn != RQ_PSN
            or r.payload != src.bytes(0, 64) or not r.icrc_ok):
        fail(f"control READ: got {r and (hex(r.opcode), r.psn, len(r.payload), r.icrc_ok)}")
    print("control: READ of a live MR answered with its 64 bytes", flush=True)
    done += 1

    # 1. A duplicate READ after its MR was deregistered: no data and no answer (a duplicate may
    #    be stale, overtaken by the requester's later messages); the QP stays up. The
    #    responder kept the MR of the first READ to answer duplicates: it must check it again.
    #    A new READ with the dead key is then refused (remote access NAK, QP in error).
    v = Victim(ctx, gid, peer_gid)
    secret = Buf(4096, 0x5e)
    mr = v.mr(secret, e.IBV_ACCESS_REMOTE_READ)
    keep += [v, secret]
    rkey = mr.rkey
    read = rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(secret.addr, rkey, 2048))
    inj.send(read)
    got = inj.recv_all(2)
    if len([p for p in got if p.payload]) != 2:
        fail(f"READ before dereg: {[(hex(p.opcode), p.psn) for p in got]}")
    mr.close()
    inj.send(read)
    expect_silence(inj, "duplicate READ after dereg_mr")
    if qp_state(v.qp) != e.IBV_QPS_RTS:
        fail(f"duplicate READ after dereg_mr: the QP left RTS ({qp_state(v.qp)})")
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN + 2, reth=(secret.addr, rkey, 64)))
    expect_nak(inj, RQ_PSN + 2, roce.NAK_REMOTE_ACCESS, "new READ after dereg_mr")
    expect_error_state(v, "new READ after dereg_mr")
    print("duplicate READ after dereg_mr: no data, no answer; a new one: remote access NAK",
          flush=True)
    done += 1

    # 2. The same with the duplicate asking for the second response only.
    v = Victim(ctx, gid, peer_gid)
    mr = v.mr(secret, e.IBV_ACCESS_REMOTE_READ)
    keep += [v]
    rkey = mr.rkey
    read = rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(secret.addr, rkey, 2048))
    inj.send(read)
    if len([p for p in inj.recv_all(2) if p.payload]) != 2:
        fail("READ before dereg (2)")
    mr.close()
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN + 1,
                reth=(secret.addr + 1024, rkey, 1024)))
    expect_silence(inj, "partial duplicate READ after dereg_mr")
    if qp_state(v.qp) != e.IBV_QPS_RTS:
        fail(f"partial duplicate READ after dereg_mr: the QP left RTS ({qp_state(v.qp)})")
    print("partial duplicate READ after dereg_mr: no data, no answer", flush=True)
    done += 1

    # 3. A WRITE in progress when its MR is deregistered: the rest is refused and not written.
    v = Victim(ctx, gid, peer_gid)
    dst = Buf(4096, 0)
    mr = v.mr(dst, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    keep += [v, dst]
    inj.send(rc(roce.RC_RDMA_WRITE_FIRST, v, RQ_PSN, ack_req=True,
                reth=(dst.addr, mr.rkey, 2048), payload=b"\xaa" * 1024))
    a = inj.recv(3)
    if a is None or a.opcode != roce.RC_ACKNOWLEDGE or roce.nak_code(a) is not None \
            or a.psn != RQ_PSN:
        fail(f"WRITE_FIRST: expected an ACK of PSN {RQ_PSN}, got {a and (hex(a.opcode), a.psn)}")
    if dst.bytes(0, 1024) != b"\xaa" * 1024:
        fail("WRITE_FIRST: data not placed")
    mr.close()
    inj.send(rc(roce.RC_RDMA_WRITE_LAST, v, RQ_PSN + 1, ack_req=True, payload=b"\xbb" * 1024))
    expect_nak(inj, RQ_PSN + 1, roce.NAK_REMOTE_ACCESS, "WRITE_LAST after dereg_mr")
    if dst.bytes(1024, 1024) != bytes(1024):
        fail("WRITE_LAST after dereg_mr: the deregistered memory was written")
    expect_error_state(v, "WRITE_LAST after dereg_mr")
    print("WRITE_LAST after dereg_mr: remote access NAK, memory untouched", flush=True)
    done += 1

    # 4. A SEND between a WRITE's FIRST and its LAST (with a receive WQE posted, so the SEND
    #    alone would be fine): invalid request NAK, nothing of the SEND placed, and the WRITE's
    #    LAST is not executed either (the QP is in error).
    v = Victim(ctx, gid, peer_gid)
    dst = Buf(4096, 0)
    mr = v.mr(dst, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    keep += [v, dst, mr]
    v.qp.post_recv(RecvWR(sg=[SGE(dst.addr + 2048, 1024, mr.lkey)], num_sge=1))
    inj.send(rc(roce.RC_RDMA_WRITE_FIRST, v, RQ_PSN, ack_req=True,
                reth=(dst.addr, mr.rkey, 2048), payload=b"\xaa" * 1024))
    a = inj.recv(3)
    if a is None or a.opcode != roce.RC_ACKNOWLEDGE or roce.nak_code(a) is not None:
        fail(f"WRITE_FIRST (4): expected an ACK, got {a and (hex(a.opcode), a.psn)}")
    inj.send(rc(roce.RC_SEND_ONLY, v, RQ_PSN + 1, ack_req=True, payload=b"\xcc" * 512))
    expect_nak(inj, RQ_PSN + 1, roce.NAK_INVALID_REQUEST, "SEND inside a WRITE")
    expect_error_state(v, "SEND inside a WRITE")
    inj.send(rc(roce.RC_RDMA_WRITE_LAST, v, RQ_PSN + 2, ack_req=True, payload=b"\xbb" * 1024))
    inj.recv_all(1)
    if dst.bytes(1024, 2048) != bytes(2048):
        fail("SEND inside a WRITE: the SEND or the WRITE's LAST was placed")
    print("SEND between WRITE FIRST and LAST: invalid request NAK, nothing placed", flush=True)
    done += 1

    # 5. A WRITE MIDDLE with no WRITE FIRST before it: invalid request NAK.
    v = Victim(ctx, gid, peer_gid)
    keep += [v]
    inj.send(rc(roce.RC_RDMA_WRITE_MIDDLE, v, RQ_PSN, ack_req=True, payload=b"\xdd" * 1024))
    expect_nak(inj, RQ_PSN, roce.NAK_INVALID_REQUEST, "WRITE MIDDLE without a FIRST")
    expect_error_state(v, "WRITE MIDDLE without a FIRST")
    print("WRITE MIDDLE without a FIRST: invalid request NAK", flush=True)
    done += 1

    # 6, 7. A WRITE from another source address than the QP's peer (the UDP source port is
    #    free, the addresses are not), and one with a foreign P_Key: dropped unexecuted (no
    #    data, the ePSN does not move), so the real peer's WRITE at the same PSN is then ACKed.
    for what, kw in (("spoofed source address", {"src": spoofed_ip(peer_ip)}),
                     ("foreign P_Key", {"pkey": 0x8001})):
        v = Victim(ctx, gid, peer_gid)
        dst = Buf(4096, 0)
        mr = v.mr(dst, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        keep += [v, dst, mr]
        inj.send(rc(roce.RC_RDMA_WRITE_ONLY, v, RQ_PSN, ack_req=True,
                    reth=(dst.addr, mr.rkey, 256), payload=b"\xee" * 256, **kw))
        got = inj.recv_all(2)
        if got or dst.bytes(0, 256) != bytes(256):
            fail(f"{what}: answered ({[str(p) for p in got]}) or written")
        inj.send(rc(roce.RC_RDMA_WRITE_ONLY, v, RQ_PSN, ack_req=True,
                    reth=(dst.addr, mr.rkey, 256), payload=b"\x11" * 256))
        a = inj.recv(3)
        if a is None or a.opcode != roce.RC_ACKNOWLEDGE or roce.nak_code(a) is not None \
                or a.psn != RQ_PSN or dst.bytes(0, 256) != b"\x11" * 256:
            fail(f"{what}: the real WRITE after it: got {a and str(a)}")
        print(f"WRITE with a {what}: dropped unexecuted; the peer's own WRITE then ACKed",
              flush=True)
        done += 1

    # 8. A READ of 320 KiB (320 responses: more than the responder sends in one burst) with a
    #    SEND right behind it: every response, with the MR's bytes, and the SEND's ACK only
    #    after the last response (an acknowledge must not overtake the responses before it in
    #    PSN order: the requester would take it for a NAK of the READ).
    v = Victim(ctx, gid, peer_gid)
    n = 320
    big = Buf(n * 1024, 0x42)
    mr = v.mr(big, e.IBV_ACCESS_REMOTE_READ)
    rbuf = Buf(4096, 0)
    rmr = v.mr(rbuf, e.IBV_ACCESS_LOCAL_WRITE)
    keep += [v, big, mr, rbuf, rmr]
    v.qp.post_recv(RecvWR(sg=[SGE(rbuf.addr, 1024, rmr.lkey)], num_sge=1))
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(big.addr, mr.rkey, n * 1024)))
    inj.send(rc(roce.RC_SEND_ONLY, v, RQ_PSN + n, ack_req=True, payload=b"\x77" * 64))
    got = inj.recv_all(5)
    resp = [p for p in got if p.opcode != roce.RC_ACKNOWLEDGE]
    acks = [i for i, p in enumerate(got) if p.opcode == roce.RC_ACKNOWLEDGE]
    if sorted(p.psn for p in resp) != list(range(RQ_PSN, RQ_PSN + n)) \
            or any(p.payload != b"\x42" * 1024 or not p.icrc_ok for p in resp):
        fail(f"READ of {n} KiB: {len(resp)} responses, PSNs "
             f"{sorted(p.psn for p in resp)[:3]}..., or wrong bytes")
    last = max(i for i, p in enumerate(got) if p.psn == RQ_PSN + n - 1)
    if len(acks) != 1 or got[acks[0]].psn != RQ_PSN + n or roce.nak_code(got[acks[0]]) is not None:
        fail(f"READ then SEND: acknowledges {[(got[i].psn, roce.nak_code(got[i])) for i in acks]}")
    if acks[0] < last:
        fail(f"READ then SEND: the SEND's ACK came before the READ's last response "
             f"(packet {acks[0]} of {len(got)}, the last response {last})")
    if rbuf.bytes(0, 64) != b"\x77" * 64:
        fail("READ then SEND: the SEND's data is not in the receive buffer")
    print(f"READ of {n} KiB then a SEND: all {n} responses, then the SEND's ACK", flush=True)
    done += 1

    # 9. A duplicate READ whose RETH is not the rest of the original's from its PSN on
    #    (another address, a longer or a shorter length): not a retransmission, no data, the
    #    QP stays up; the original's own duplicate is then answered.
    v = Victim(ctx, gid, peer_gid)
    src = Buf(8192, 0x3d)
    mr = v.mr(src, e.IBV_ACCESS_REMOTE_READ)
    keep += [v, src, mr]
    read = rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(src.addr, mr.rkey, 1024))
    inj.send(read)
    if len([p for p in inj.recv_all(2) if p.payload]) != 1:
        fail("READ before the forged duplicates")
    for what, reth in (("another address", (src.addr + 4096, mr.rkey, 1024)),
                       ("a longer length", (src.addr, mr.rkey, 8192)),
                       ("a shorter length", (src.addr, mr.rkey, 512))):
        inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=reth))
        expect_silence(inj, f"duplicate READ with {what}")
    if qp_state(v.qp) != e.IBV_QPS_RTS:
        fail(f"forged duplicate READs: the QP left RTS ({qp_state(v.qp)})")
    inj.send(read)
    got = [p for p in inj.recv_all(2) if p.payload]
    if len(got) != 1 or got[0].payload != src.bytes(0, 1024):
        fail(f"the original's duplicate after the forged ones: {[str(p) for p in got]}")
    print("duplicate READ with another RETH: no data; the real duplicate answered", flush=True)
    done += 1

    # 10. Zero-length RDMA WRITE and READ use no memory, so their R_Key and address are not
    #     checked (IBA 9.4.1.1, 9.4.4): a garbage key and address 0 get an ACK and one empty
    #     READ response, and the QP stays up.
    v = Victim(ctx, gid, peer_gid)
    keep += [v]
    inj.send(rc(roce.RC_RDMA_WRITE_ONLY, v, RQ_PSN, ack_req=True, reth=(0, 0xdead00, 0)))
    a = inj.recv(3)
    if a is None or a.opcode != roce.RC_ACKNOWLEDGE or roce.nak_code(a) is not None \
            or a.psn != RQ_PSN:
        fail(f"zero-length WRITE with a garbage R_Key: got {a and str(a)}")
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN + 1, reth=(0, 0xbeef00, 0)))
    r = inj.recv(3)
    if r is None or r.opcode != roce.RC_RDMA_READ_RESPONSE_ONLY or r.psn != RQ_PSN + 1 \
            or r.payload:
        fail(f"zero-length READ with a garbage R_Key: got {r and str(r)}")
    if qp_state(v.qp) != e.IBV_QPS_RTS:
        fail(f"zero-length RDMA: the QP left RTS ({qp_state(v.qp)})")
    print("zero-length WRITE and READ with a garbage R_Key: ACK, one empty response", flush=True)
    done += 1

    # 11. A READ longer than the largest message (2^31 bytes): an invalid request NAK (not a
    #     remote access one: the length is refused before the key is looked at), the QP in
    #     error.
    v = Victim(ctx, gid, peer_gid)
    keep += [v]
    src = Buf(4096)
    mr = v.mr(src, e.IBV_ACCESS_REMOTE_READ)
    keep += [src, mr]
    inj.send(rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN, reth=(src.addr, mr.rkey, 0xffffffff)))
    expect_nak(inj, RQ_PSN, roce.NAK_INVALID_REQUEST, "READ of 4 GiB - 1")
    expect_error_state(v, "READ of 4 GiB - 1")
    print("READ of 4 GiB - 1 bytes: invalid request NAK", flush=True)
    done += 1

    # 12. More READs at once than the QP's max_dest_rd_atomic (4): the fifth, while the
    #     first's responses are still being sent, is an invalid request (it would take the
    #     first's place and cut it short). The five go as one run, received as one: sent one
    #     by one, the injector may not get the CPU back before the first READ is answered.
    v = Victim(ctx, gid, peer_gid)
    n = 4096
    big = Buf(n * 1024, 0x42)
    mr = v.mr(big, e.IBV_ACCESS_REMOTE_READ)
    keep += [v, big, mr]
    before = counters(dev)
    inj.send_run([rc(roce.RC_RDMA_READ_REQUEST, v, RQ_PSN + i * n,
                     reth=(big.addr, mr.rkey, n * 1024)) for i in range(5)])
    # The responses overflow the injector's socket (the NAK may be lost with them): the
    # QP's state is the verdict; every packet that did arrive is drained before going on.
    expect_error_state(v, "five READs at max_dest_rd_atomic 4",
                       detail=lambda: counted(before, counters(dev)))
    got = inj.recv_all(2)
    while (more := inj.recv_all(1)):
        got += more
    naks = [(p.psn, roce.nak_code(p)) for p in got if p.opcode == roce.RC_ACKNOWLEDGE]
    if any(a != (RQ_PSN + 4 * n, roce.NAK_INVALID_REQUEST) for a in naks):
        fail(f"five READs at max_dest_rd_atomic 4: acknowledges {naks}")
    print(f"five READs of {n} KiB at max_dest_rd_atomic 4: the QP in error "
          f"({len(got) - len(naks)} responses and {len(naks)} invalid request NAK seen)",
          flush=True)
    done += 1

    # 13. A responder that sends a READ response shorter than the path MTU in the middle:
    #     the READ must not complete successfully with part of its buffer never written.
    #     (512 bytes, a multiple of 4: a middle packet with pad bytes is dropped as
    #     malformed before it gets that far.)
    v = Victim(ctx, gid, peer_gid)
    rbuf = Buf(4096, 0)
    rmr = v.mr(rbuf, e.IBV_ACCESS_LOCAL_WRITE)
    keep += [v, rbuf, rmr]
    wr = SendWR(wr_id=13, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                sg=[SGE(rbuf.addr, 3000, rmr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(0x1234, 0x10000)
    v.qp.post_send(wr)
    q = inj.recv(3)
    if q is None or q.opcode != roce.RC_RDMA_READ_REQUEST or q.psn != SQ_PSN:
        fail(f"the victim's READ request: got {q and str(q)}")
    ack = (roce.ack_syndrome(), 1)
    for op, i, size in ((roce.RC_RDMA_READ_RESPONSE_FIRST, 0, 1024),
                        (roce.RC_RDMA_READ_RESPONSE_MIDDLE, 1, 512),
                        (roce.RC_RDMA_READ_RESPONSE_LAST, 2, 952)):
        inj.send(roce.Pkt(opcode=op, dest_qp=v.qpn, psn=SQ_PSN + i, payload=b"\x5a" * size,
                          aeth=None if op == roce.RC_RDMA_READ_RESPONSE_MIDDLE else ack))
    wc = poll(v.cq, 1, 5)
    if len(wc) != 1 or wc[0].wr_id != 13 or wc[0].status != e.IBV_WC_BAD_RESP_ERR:
        fail(f"READ with a short middle response: {[(w.wr_id, w.status) for w in wc]}")
    print("READ answered with a 512-byte middle response: IBV_WC_BAD_RESP_ERR", flush=True)
    done += 1

    # 14. RDMA WRITEs whose MIDDLE and LAST packets come as one UDP segmentation offload
    #     datagram (a run that crossed the veth uncut, received whole and walked packet by
    #     packet): with IPv4 identifications counting up from the first (as the kernel cuts
    #     a run) and with one fixed identification (as receive offload also merges): all
    #     placed, one ACK of the LAST each. Then hostile runs: segments shorter than a BTH
    #     and an ICRC are dropped whole (no answer, nothing placed, the QP stays up); a run
    #     with a bad ICRC in its second packet has its first placed and a sequence error NAK
    #     at the bad one's PSN, nothing after it placed.
    v = Victim(ctx, gid, peer_gid)
    dst = Buf(4 * 5120, 0)
    mr = v.mr(dst, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    keep += [v, dst, mr]

    def write_msg(k, psn, bad=None, fixed=False):
        data = b"".join(bytes([0x10 * (k + 1) + i]) * 1024 for i in range(5))
        inj.send(rc(roce.RC_RDMA_WRITE_FIRST, v, psn, reth=(dst.addr + k * 5120, mr.rkey, 5120),
                    payload=data[:1024]))
        run = [rc(roce.RC_RDMA_WRITE_MIDDLE, v, psn + i, payload=data[i * 1024:(i + 1) * 1024])
               for i in (1, 2, 3)]
        run.append(rc(roce.RC_RDMA_WRITE_LAST, v, psn + 4, ack_req=True, payload=data[4096:]))
        inj.send_run(run, fixed_ids=fixed, bad=bad)
        return data

    for k, fixed in enumerate((False, True)):
        psn = RQ_PSN + 5 * k
        data = write_msg(k, psn, fixed=fixed)
        got = inj.recv_all(2)
        acks = [(p.psn, roce.nak_code(p)) for p in got if p.opcode == roce.RC_ACKNOWLEDGE]
        if acks != [(psn + 4, None)] or dst.bytes(k * 5120, 5120) != data:
            fail(f"WRITE in a run (fixed identification {fixed}): acknowledges {acks}, "
                 f"data {'right' if dst.bytes(k * 5120, 5120) == data else 'WRONG'}")
    inj.send_run([rc(roce.RC_RDMA_WRITE_ONLY, v, RQ_PSN + 10, ack_req=True,
                     reth=(dst.addr, mr.rkey, 64), payload=b"\xee" * 64)], size=8)
    expect_silence(inj, "a run of 8-byte segments")
    if qp_state(v.qp) != e.IBV_QPS_RTS or dst.bytes(0, 64) == b"\xee" * 64:
        fail(f"a run of 8-byte segments: QP {qp_state(v.qp)}, or the memory was written")
    psn = RQ_PSN + 10
    write_msg(2, psn, bad=1)
    expect_nak(inj, psn + 2, roce.NAK_PSN_SEQ_ERROR, "a run with a bad ICRC in its second packet")
    placed = dst.bytes(2 * 5120, 5120)
    if placed[:2048] != bytes([0x30]) * 1024 + bytes([0x31]) * 1024 or placed[2048:] != bytes(3072):
        fail("a run with a bad ICRC in its second packet: placed the wrong part")
    print("WRITEs in runs received whole (identifications counting, fixed): placed, ACKed; "
          "hostile runs: 8-byte segments dropped, a bad ICRC NAKed at its PSN", flush=True)
    done += 1

    inj.close()
    print(f"peer: {done} scenarios ok")


if __name__ == "__main__":
    main()
