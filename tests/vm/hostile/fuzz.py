#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A RoCE packet fuzzer (issue 14): random and adversarial RoCE v2 and v1 packets with valid
ICRCs (tests/vm/inject/roce.py) at live QPs of an oxroce device.

    fuzz.py DEV GID_INDEX DEV_IP PEER_NETNS PEER_IP PACKETS [SEED]

DEV (IPv4 address DEV_IP, RoCE v2 GID GID_INDEX) is in this process's namespace; the packets
leave from raw sockets made in PEER_NETNS, whose address is PEER_IP. The victims are QPs of DEV
that this process makes: RC, UC and UD QPs connected to made-up QPs at PEER_IP (their QPNs,
PSNs, R_Keys and Q_Key known to the fuzzer), each with an MR the peer may use, an MR of
another PD, the R_Key of a deregistered MR, and canary MRs that nothing the device may accept
can reach (writes from another source address, or with the other PD's key). Victims are
destroyed and made again while packets fly, so some packets hit QPs being destroyed.

Packets: every opcode (and unknown ones), PSNs in and around the window and random, RETH and
AtomicETH with valid, huge, zero, wrapping and unaligned addresses and lengths, valid, stale,
foreign and guessed R_Keys, pad counts that do not fit, payloads over the MTU, truncated
headers, foreign P_Keys and source addresses, READ floods, SENDs at empty receive queues
(RNR), UD sends with wrong Q_Keys, random QPNs, RoCE v1 frames (ethertype 0x8915).

Checks: the canaries are intact; DEV still serves (a READ at a fresh QP is answered with
its bytes at the end). The kernel side (no splat, no leak, no hang) is the harness's. Prints
"fuzz: N packets sent" with a count per kind and "fuzz: canaries intact"; exits 1 on a
failed check.
"""
import ctypes
import os
import random
import socket
import struct
import sys
import time
import zlib

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "inject"))
sys.path.insert(0, HERE)
import roce  # noqa: E402
from peer import PEER_QPN, RQ_PSN, SQ_PSN, Buf, enter_netns, fail, spoofed_ip  # noqa: E402
from verbs import ALL_ACCESS, ipv4_gid, qp_state, to_rts  # noqa: E402

MR_LEN = 65536
QKEY = 0x11111111
CHURN_EVERY = 2000          # packets between a victim's destruction and its replacement
RC_OPCODES = [op for op in roce.OPCODE_HEADERS if op < 0x20]
UC_OPCODES = [op for op in roce.OPCODE_HEADERS if 0x20 <= op < 0x40]
ETH_P_ROCE_V1 = 0x8915
ACCESS = ALL_ACCESS | e.IBV_ACCESS_LOCAL_WRITE


class Victim:
    """A QP of DEV (RC, UC or UD) with its MRs, connected to a made-up peer QP."""

    def __init__(self, ctx, gid, peer_gid, kind):
        self.kind = kind
        self.pd = PD(ctx)
        self.cq = CQ(ctx, 64)
        cap = QPCap(max_send_wr=4, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        qpt = {"rc": e.IBV_QPT_RC, "uc": e.IBV_QPT_UC, "ud": e.IBV_QPT_UD}[kind]
        self.qp = QP(self.pd, QPInitAttr(qp_type=qpt, scq=self.cq, rcq=self.cq, cap=cap))
        if kind == "ud":
            a = QPAttr(port_num=1)
            a.qkey = QKEY
            self.qp.to_rts(a)
        else:
            to_rts(self.qp, PEER_QPN, peer_gid, gid, access=ACCESS, rq_psn=RQ_PSN,
                   sq_psn=SQ_PSN, rd_atomic=4, rc=kind == "rc")
        self.qpn = self.qp.qp_num
        self.psn = RQ_PSN
        self.buf = Buf(MR_LEN, 0x11)
        self.mr = MR(self.pd, MR_LEN, ACCESS, address=self.buf.addr)
        self.rbuf = Buf(MR_LEN, 0)
        self.rmr = MR(self.pd, MR_LEN, e.IBV_ACCESS_LOCAL_WRITE, address=self.rbuf.addr)
        # Canary: reachable with a valid key, but only ever targeted from another address.
        self.canary = Buf(4096, 0xca)
        self.canary_mr = MR(self.pd, 4096, ACCESS, address=self.canary.addr)
        # Another PD's MR: its key must never work on this QP.
        self.other_pd = PD(ctx)
        self.foreign = Buf(4096, 0xcb)
        self.foreign_mr = MR(self.other_pd, 4096, ACCESS, address=self.foreign.addr)
        dead = MR(self.pd, 4096, ACCESS, address=self.buf.addr)
        self.stale_rkey = dead.rkey
        dead.close()
        self.refill()

    def refill(self):
        """Completions drained, receives posted again (fewer than the RQ holds: RNR too)."""
        try:
            while self.cq.poll(16)[0] > 0:
                pass
            for i in range(random.randint(0, 4)):
                self.qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                                         sg=[SGE(self.rbuf.addr, 4096, self.rmr.lkey)]))
        except Exception:       # a QP in the error state, a full RQ: fine for a victim
            pass

    def intact(self):
        return (self.canary.bytes() == b"\xca" * 4096
                and self.foreign.bytes() == b"\xcb" * 4096)

    def close(self):
        for o in (self.qp, self.mr, self.rmr, self.canary_mr, self.foreign_mr, self.cq,
                  self.pd, self.other_pd):
            o.close()


class Fuzzer:
    def __init__(self, dev_ip, peer_ip, seed):
        self.rng = random.Random(seed)
        self.dev_ip, self.peer_ip = dev_ip, peer_ip
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        self.l2 = None
        self.counts = {}
        self.ip_id = 1

    def open_l2(self, dev_ip):
        """An AF_PACKET socket on the interface towards DEV_IP, for RoCE v1 frames."""
        ifname = None
        for line in os.popen("ip -o route get " + dev_ip):
            w = line.split()
            ifname = w[w.index("dev") + 1]
        link = os.popen(f"ip -o link show dev {ifname}").read().split()
        mac_src = link[link.index("link/ether") + 1]
        neigh = os.popen(f"ip neigh show {dev_ip} dev {ifname}").read().split()
        if "lladdr" not in neigh:
            os.system(f"ping -c1 -W1 {dev_ip} >/dev/null 2>&1")
            neigh = os.popen(f"ip neigh show {dev_ip} dev {ifname}").read().split()
        if "lladdr" not in neigh:
            return
        mac_dst = neigh[neigh.index("lladdr") + 1]
        self.l2 = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.l2.bind((ifname, 0))
        self.eth = (bytes.fromhex(mac_dst.replace(":", "")) + bytes.fromhex(mac_src.replace(":", ""))
                    + struct.pack("!H", ETH_P_ROCE_V1))

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def send(self, p, kind, icrc=True, cut=None):
        """Sends P (ICRC valid unless ICRC is an int); CUT truncates the RoCE part first and
        puts a valid ICRC on what is left."""
        p.src = p.src or self.peer_ip
        p.dst = self.dev_ip
        p.ip_id = self.ip_id
        self.ip_id = self.ip_id % 0xffff + 1
        if cut is None:
            data = roce.build(p, icrc)
        else:
            data = roce.build(p, icrc=False)
            data = data[:max(20 + 8 + roce.BTH_LEN, len(data) - cut)]
            data = (data[:2] + struct.pack("!H", len(data) + 4) + data[4:])
            data = (data[:24] + struct.pack("!H", len(data) + 4 - 20) + data[26:])
            data += roce.icrc(data).to_bytes(4, "little")
        try:
            self.tx.sendto(data, (self.dev_ip, 0))
        except OSError:
            self.count("send-error")
            return
        self.count(kind)

    def send_v1(self, p, kind):
        """P as a RoCE v1 frame: GRH (IPv4-mapped GIDs), BTH and the rest, v1 ICRC."""
        if self.l2 is None:
            return
        p.src = p.src or self.peer_ip
        p.dst = self.dev_ip
        roce_part = roce.build(p, icrc=False)[28:]       # BTH onwards, from the v2 build
        sgid = bytes(10) + b"\xff\xff" + socket.inet_aton(p.src)
        dgid = bytes(10) + b"\xff\xff" + socket.inet_aton(self.dev_ip)
        grh = struct.pack("!IHBB", 6 << 28, len(roce_part) + 4, 0x1b, 64) + sgid + dgid
        masked = bytearray(grh)
        masked[0] |= 0x0f
        masked[1:4] = b"\xff\xff\xff"
        masked[7] = 0xff
        body = bytearray(roce_part)
        body[4] = 0xff
        crc = zlib.crc32(b"\xff" * 8 + bytes(masked) + bytes(body)) & 0xffffffff
        try:
            self.l2.send(self.eth + grh + roce_part + crc.to_bytes(4, "little"))
        except OSError:
            self.count("send-error")
            return
        self.count(kind)

    # ---- field generators

    def psn(self, v):
        r = self.rng.random()
        if r < 0.5:
            return (v.psn + self.rng.randint(0, 3)) & 0xffffff
        if r < 0.7:
            return (v.psn - self.rng.randint(1, 64)) & 0xffffff
        if r < 0.8:
            return (v.psn + (1 << 23) + self.rng.randint(-2, 2)) & 0xffffff
        return self.rng.getrandbits(24)

    def rkey(self, v):
        return self.rng.choice([v.mr.rkey, v.mr.rkey, v.mr.rkey, v.stale_rkey, v.foreign_mr.rkey,
                                v.mr.rkey ^ 0xff, self.rng.getrandbits(32), 0])

    def va_len(self, v):
        base = v.buf.addr
        r = self.rng.randrange(9)
        if r == 0:
            return base, self.rng.randint(1, 4096)
        if r == 1:
            return base + self.rng.randint(0, MR_LEN - 1), self.rng.randint(0, MR_LEN)
        if r == 2:
            return base, 0
        if r == 3:
            return base + MR_LEN - 8, 16                        # across the end
        if r == 4:
            return (1 << 64) - self.rng.randint(1, 4096), 8192   # wraps
        if r == 5:
            return base + self.rng.randint(1, 7), 8              # unaligned (atomics)
        if r == 6:
            return base, (1 << 31) + self.rng.randint(0, 1 << 31)  # over the IBA's 2 GiB
        if r == 7:
            return self.rng.getrandbits(64), self.rng.getrandbits(32)
        return base, MR_LEN

    def headers(self, op, v):
        h = {}
        for name in roce.OPCODE_HEADERS.get(op, ()):
            if name == "reth":
                va, n = self.va_len(v)
                h["reth"] = (va, self.rkey(v), n)
            elif name == "atomic_eth":
                va, _ = self.va_len(v)
                h["atomic_eth"] = (va, self.rkey(v), self.rng.getrandbits(64),
                                   self.rng.getrandbits(64))
            elif name == "aeth":
                h["aeth"] = (self.rng.getrandbits(8), self.rng.getrandbits(24))
            elif name == "atomic_ack":
                h["atomic_ack"] = self.rng.getrandbits(64)
            elif name == "deth":
                h["deth"] = (self.rng.choice([QKEY, QKEY, self.rng.getrandbits(32)]),
                             self.rng.getrandbits(24))
            else:
                h[name] = self.rng.getrandbits(32)
        return h

    def payload(self):
        r = self.rng.randrange(6)
        n = [0, self.rng.randint(1, 64), 1024, 1025, self.rng.randint(1, 1400), 4096][r]
        return self.rng.randbytes(n) if n <= 1400 else bytes(1400)

    # ---- packet kinds

    def request(self, v):
        """A request of V's transport, mostly well-formed, at V."""
        ops = {"rc": RC_OPCODES, "uc": UC_OPCODES, "ud": [roce.UD_SEND_ONLY,
                                                        roce.UD_SEND_ONLY_IMM]}[v.kind]
        op = self.rng.choice(ops)
        p = roce.Pkt(opcode=op, dest_qp=v.qpn, psn=self.psn(v), ack_req=self.rng.random() < 0.3,
                     payload=self.payload(), **self.headers(op, v))
        r = self.rng.random()
        if r < 0.05:
            p.pad = self.rng.randint(0, 3)                       # a pad that does not fit
            self.send(p, "bad-pad")
        elif r < 0.10:
            self.send(p, "truncated", cut=self.rng.randint(1, 40))
        elif r < 0.13:
            p.pkey = self.rng.getrandbits(16)
            self.send(p, "foreign-pkey")
        elif r < 0.16:
            p.tver = self.rng.randint(1, 15)
            self.send(p, "bad-tver")
        elif r < 0.20:
            self.send_v1(p, "roce-v1")
        else:
            self.send(p, f"{v.kind}-request")
        if p.psn == v.psn:
            v.psn = (v.psn + 1) & 0xffffff

    def read_flood(self, v):
        """READ requests of the whole MR, back to back (amplification)."""
        for _ in range(8):
            p = roce.Pkt(opcode=roce.RC_RDMA_READ_REQUEST, dest_qp=v.qpn, psn=v.psn,
                         reth=(v.buf.addr, v.mr.rkey, MR_LEN))
            self.send(p, "read-flood")
            if self.rng.random() < 0.5:
                v.psn = (v.psn + MR_LEN // 1024) & 0xffffff

    def rnr(self, v):
        """SENDs at a receive queue kept short: RNR NAKs."""
        for _ in range(4):
            self.send(roce.Pkt(opcode=roce.RC_SEND_ONLY, dest_qp=v.qpn, psn=v.psn,
                               payload=b"r" * 64), "rnr-send")
            v.psn = (v.psn + 1) & 0xffffff

    def spoofed(self, v):
        """A well-formed WRITE into the canary from another source address: dropped."""
        p = roce.Pkt(opcode=roce.RC_RDMA_WRITE_ONLY if v.kind == "rc" else roce.UC_RDMA_WRITE_ONLY,
                     dest_qp=v.qpn, psn=v.psn,
                     reth=(v.canary.addr, v.canary_mr.rkey, 64), payload=b"\x66" * 64,
                     src=spoofed_ip(self.peer_ip))
        self.send(p, "spoofed-source")

    def foreign_pd(self, v):
        """A well-formed WRITE with the key of another PD's MR: refused."""
        op = roce.RC_RDMA_WRITE_ONLY if v.kind == "rc" else roce.UC_RDMA_WRITE_ONLY
        p = roce.Pkt(opcode=op, dest_qp=v.qpn, psn=v.psn,
                     reth=(v.foreign.addr, v.foreign_mr.rkey, 64), payload=b"\x67" * 64)
        self.send(p, "foreign-pd-key")

    def guessed_qpn(self):
        op = self.rng.randrange(256)
        p = roce.Pkt(opcode=op, dest_qp=self.rng.getrandbits(24), psn=self.rng.getrandbits(24),
                     payload=self.rng.randbytes(self.rng.randint(0, 256)), strict=False)
        self.send(p, "guessed-qpn")

    def garbage(self, v):
        """Unknown opcodes and header sets that do not match the opcode."""
        op = self.rng.choice([self.rng.randrange(256), self.rng.choice(RC_OPCODES)])
        kw = {}
        for name in self.rng.sample(["reth", "aeth", "atomic_eth", "imm", "ieth", "deth"],
                                    self.rng.randint(0, 2)):
            kw.update(self.headers({"reth": 0x0a, "aeth": 0x11, "atomic_eth": 0x13, "imm": 0x03,
                                    "ieth": 0x16, "deth": 0x64}[name], v))
        p = roce.Pkt(opcode=op, dest_qp=v.qpn, psn=self.psn(v), strict=False,
                     payload=self.rng.randbytes(self.rng.randint(0, 128)), **kw)
        self.send(p, "garbage")


def check_control(ctx, gid, peer_gid, dev_ip, peer_ip):
    """DEV still serves: a READ at a fresh RC QP is answered with the MR's bytes (seen on the
    wire, before the peer's own device drops the answer for a QP it does not have)."""
    v = Victim(ctx, gid, peer_gid, "rc")
    try:
        with roce.Injector(peer_ip, dev_ip) as inj:
            inj.drain()
            inj.send(roce.Pkt(opcode=roce.RC_RDMA_READ_REQUEST, dest_qp=v.qpn, psn=RQ_PSN,
                              reth=(v.buf.addr, v.mr.rkey, 64)))
            deadline = time.time() + 5
            while time.time() < deadline:
                r = inj.recv(1)
                if r is not None and r.opcode == roce.RC_RDMA_READ_RESPONSE_ONLY and r.dest_qp == PEER_QPN:
                    return r.psn == RQ_PSN and r.payload == v.buf.bytes(0, 64) and r.icrc_ok
            return False
    finally:
        v.close()


def main():
    dev, gid, dev_ip, peer_ns, peer_ip, packets = sys.argv[1:7]
    seed = int(sys.argv[7]) if len(sys.argv) > 7 else int(time.time())
    gid, packets = int(gid), int(packets)
    random.seed(seed)
    ctx = Context(name=dev)
    peer_gid = ipv4_gid(peer_ip)
    enter_netns(peer_ns)
    fz = Fuzzer(dev_ip, peer_ip, seed)
    fz.open_l2(dev_ip)
    kinds = ["rc", "rc", "rc", "uc", "ud"]
    victims = [Victim(ctx, gid, peer_gid, k) for k in kinds]
    print(f"fuzz: seed {seed}, {packets} packets at {len(victims)} QPs", flush=True)
    canaries_ok = True
    t0 = time.time()
    sent = 0
    churned = 0
    while sent < packets:
        i = fz.rng.randrange(len(victims))
        v = victims[i]
        r = fz.rng.random()
        if v.kind == "ud":
            fz.request(v)
        elif r < 0.70:
            fz.request(v)
        elif r < 0.74:
            fz.read_flood(v)
        elif r < 0.78:
            fz.rnr(v)
        elif r < 0.84:
            fz.spoofed(v)
        elif r < 0.88:
            fz.foreign_pd(v)
        elif r < 0.94:
            fz.guessed_qpn()
        else:
            fz.garbage(v)
        new = sum(fz.counts.values())
        if new // 500 != sent // 500:
            for w in victims:
                w.refill()
        if new // CHURN_EVERY != sent // CHURN_EVERY:
            # The victim goes while its packets may still be queued; its QPN stays a target of
            # guessed packets only by chance.
            if not v.intact():
                canaries_ok = False
                print(f"canary of a {v.kind} QP 0x{v.qpn:x} changed", flush=True)
            v.close()
            victims[i] = Victim(ctx, gid, peer_gid, v.kind)
            churned += 1
        sent = new
    elapsed = time.time() - t0
    for v in victims:
        if not v.intact():
            canaries_ok = False
            print(f"canary of a {v.kind} QP 0x{v.qpn:x} changed", flush=True)
    states = {}
    for v in victims:
        s = qp_state(v.qp)
        states[s] = states.get(s, 0) + 1
    for v in victims:
        v.close()
    print(f"fuzz: {sent} packets sent in {elapsed:.0f} s, {churned} QPs replaced, QP states at "
          f"the end {sorted(states.items())}", flush=True)
    print("fuzz: kinds " + ", ".join(f"{k} {n}" for k, n in sorted(fz.counts.items())),
          flush=True)
    if not canaries_ok:
        fail("a canary changed")
    print("fuzz: canaries intact", flush=True)
    if not check_control(ctx, gid, peer_gid, dev_ip, peer_ip):
        fail("a READ at a fresh RC QP of DEV was not answered with its bytes")
    print("fuzz: a fresh QP still served", flush=True)


if __name__ == "__main__":
    main()
