#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host test of roce.py against the rxe captures in rust/wire/fixtures/rxe-roce-v2.txt.

    python3 tests/vm/inject/test_roce.py [-v]

Plain unittest, standard library only; exits non-zero on a failure. For every fixture frame:
parse() gives the line's opcode, pad and payload length and a good ICRC; build() of a new Pkt
made from the parsed fields gives the same bytes, ICRC included; the ICRC is the little-endian
CRC-32 of the masked packet (checked with a bitwise CRC written here, not zlib); flipping any
one bit of the packet breaks the ICRC exactly when the bit is not in a masked field.

With ROCE_NETNS_TEST=1, as root, also sends packets between two network namespaces joined by a
veth pair (created and removed by the test) and checks they arrive byte for byte.
"""
import ctypes
import dataclasses
import os
import random
import socket
import struct
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import roce  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "..", "..", "rust", "wire", "fixtures", "rxe-roce-v2.txt")


def load_fixtures():
    out = []
    with open(FIXTURES) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, opcode, pad, plen, frame = line.split()
            out.append((name, int(opcode, 16), int(pad), int(plen), bytes.fromhex(frame)))
    return out


FIX = load_fixtures()


def crc32_bitwise(data, crc=0xffffffff):
    """IEEE CRC-32, reflected polynomial 0xEDB88320, one bit at a time; returns the raw register."""
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc


def masked_bits(ip):
    """The (byte, bit) positions the ICRC must ignore, written out from the RoCE v2 annex."""
    if ip[0] >> 4 == 4:
        bytes_ = [1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4]     # TOS, TTL, IP csum, UDP csum, BTH[4]
        bits = {(i, k) for i in bytes_ for k in range(8)}
    else:
        bytes_ = [1, 2, 3, 7, 40 + 6, 40 + 7, 48 + 4]       # TC+flow, hop limit, UDP csum, BTH[4]
        bits = {(i, k) for i in bytes_ for k in range(8)} | {(0, k) for k in range(4)}
    return bits


def ref_icrc(ip_without_icrc):
    """The ICRC, computed independently of roce.icrc (bitwise CRC, masks from masked_bits)."""
    b = bytearray(ip_without_icrc)
    for i, k in masked_bits(b):
        b[i] |= 1 << k
    return crc32_bitwise(b"\xff" * 8 + bytes(b)) ^ 0xffffffff


def verify(ip):
    """Does the ICRC in the last 4 bytes (little-endian) match? False if icrc() refuses it."""
    try:
        return roce.icrc(ip[:-4]) == int.from_bytes(ip[-4:], "little")
    except ValueError:
        return False


def fields(p):
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(roce.Pkt) if f.compare}


class Fixtures(unittest.TestCase):
    def test_count(self):
        self.assertEqual(len(FIX), 53)
        self.assertEqual(sum(1 for f in FIX if f[0].startswith("v6")), 15)

    def test_parse(self):
        for name, opcode, pad, plen, frame in FIX:
            with self.subTest(name):
                ip = roce.strip_ethernet(frame)
                p = roce.parse(ip)
                self.assertEqual(p.opcode, opcode)
                self.assertEqual(p.pad, pad)
                self.assertEqual(len(p.payload), plen)
                self.assertEqual(len(p.pad_bytes), pad)
                self.assertTrue(p.icrc_ok)
                self.assertTrue(p.ip_csum_ok)
                self.assertEqual(p.dport, 4791)
                self.assertEqual(":" in p.src, name.startswith("v6"))
                self.assertEqual(p.headers(), roce.OPCODE_HEADERS[opcode])
                self.assertTrue(roce.opcode_name(opcode).startswith(name.split("-")[1].upper()))
                if p.aeth is not None:
                    want = {"nak-rem-access": roce.NAK_REMOTE_ACCESS,
                            "nak-rem-op": roce.NAK_REMOTE_OP, "rnr-nak": "rnr"}
                    tail = name.split("-pad")[1][2:]
                    self.assertEqual(roce.nak_code(p), want.get(tail))
                else:
                    self.assertRaises(ValueError, roce.nak_code, p)

    def test_rebuild(self):
        for name, _, _, _, frame in FIX:
            with self.subTest(name):
                ip = roce.strip_ethernet(frame)
                p = roce.parse(ip)
                q = roce.Pkt(**fields(p))
                self.assertEqual(roce.build(q), ip)
                self.assertEqual(roce.parse(roce.build(q)), p)
                # rxe pads with zeros to a multiple of 4: the builder's defaults do the same
                q.pad = q.pad_bytes = None
                self.assertEqual(roce.build(q), ip)

    def test_icrc_le_and_masks(self):
        for name, _, _, _, frame in FIX:
            with self.subTest(name):
                ip = roce.strip_ethernet(frame)
                c = roce.icrc(ip[:-4])
                self.assertEqual(c, ref_icrc(ip[:-4]))
                self.assertEqual(ip[-4:], c.to_bytes(4, "little"))
                self.assertNotEqual(ip[-4:], c.to_bytes(4, "big"))
                self.assertEqual(c, struct.unpack("<I", ip[-4:])[0])

    def test_unmasked_icrc_differs(self):
        """Without the masks (or without the 8 0xff bytes) the CRC does not match: they matter."""
        for name, _, _, _, frame in FIX:
            with self.subTest(name):
                ip = roce.strip_ethernet(frame)
                want = int.from_bytes(ip[-4:], "little")
                import zlib
                self.assertNotEqual(zlib.crc32(b"\xff" * 8 + ip[:-4]), want)
                b = bytearray(ip[:-4])
                for i, k in masked_bits(b):
                    b[i] |= 1 << k
                self.assertNotEqual(zlib.crc32(bytes(b)), want)
                self.assertEqual(zlib.crc32(b"\xff" * 8 + bytes(b)), want)

    def test_every_bit_flip(self):
        flips = 0
        for name, _, _, _, frame in FIX:
            with self.subTest(name):
                ip = roce.strip_ethernet(frame)
                masked = masked_bits(ip)
                b = bytearray(ip)
                bad = []
                for i in range(len(b)):
                    for k in range(8):
                        b[i] ^= 1 << k
                        if verify(b) != ((i, k) in masked):
                            bad.append((i, k))
                        b[i] ^= 1 << k
                        flips += 1
                self.assertEqual(bad, [], "bits whose flip the ICRC check gets wrong")
        self.assertGreater(flips, 100000)
        print(f"\n  {flips} single-bit flips over {len(FIX)} fixtures", end=" ", file=sys.stderr)

    def test_flip_through_parse(self):
        for name, _, _, _, frame in FIX:
            with self.subTest(name):
                ip = bytearray(roce.strip_ethernet(frame))
                v4 = ip[0] >> 4 == 4
                ttl = 8 if v4 else 7
                ip[ttl] ^= 0x01                             # TTL / hop limit: masked
                p = roce.parse(bytes(ip))
                self.assertTrue(p.icrc_ok)
                self.assertEqual(p.ip_csum_ok, not v4)
                ip[ttl] ^= 0x01
                o = 28 if v4 else 48
                for off, what in ((o + 11, "PSN"), (o + 7, "dest QP"), (o + 3, "P_Key"),
                                  (o - 8, "UDP sport"), (len(ip) - 5, "last byte before ICRC")):
                    ip[off] ^= 0x10
                    self.assertFalse(roce.parse(bytes(ip)).icrc_ok, what)
                    ip[off] ^= 0x10
                if v4:
                    ip[5] ^= 0x01                           # identification: covered
                    self.assertFalse(roce.parse(bytes(ip)).icrc_ok, "IPv4 id")
                    ip[5] ^= 0x01

    def test_hand_decoded(self):
        """A few fields decoded by hand from the fixture hex."""
        by = {n: roce.parse(roce.strip_ethernet(f)) for n, _, _, _, f in FIX}
        p = by["v4-rc-send-first-pad0"]
        self.assertEqual((p.src, p.dst, p.ip_id, p.ttl, p.tos, p.df, p.sport, p.udp_csum),
                         ("10.78.0.1", "10.78.0.2", 0x130c, 64, 0, True, 0xc169, 0))
        self.assertEqual((p.pkey, p.dest_qp, p.psn, p.ack_req), (0xffff, 0x13, 0xed9e20, False))
        p = by["v4-rc-write-only-pad0"]
        self.assertEqual((p.dest_qp, p.psn, p.ack_req, p.reth), (0x1f, 0x19, True,
                                                                 (0x30a34000, 0x1047, 0)))
        p = by["v4-rc-send-only-imm-pad3"]
        self.assertEqual((p.tos, p.imm, p.payload, p.pad_bytes),
                         (0x62, 0x04030201, bytes.fromhex("030a11181f"), bytes(3)))
        p = by["v4-rc-atomic-ack-pad0"]
        self.assertEqual((p.aeth, p.atomic_ack, p.psn), ((0x1f, 1), 0x88e8bbd5a29be663, 0x35754a))
        p = by["v4-rc-fetch-add-pad0"]
        self.assertEqual(p.atomic_eth, (0x5631bddab000, 0xf57, 1, 0))
        p = by["v4-rc-send-only-inv-pad2"]
        self.assertEqual((p.ieth, len(p.payload), p.se), (0x1047, 10, False))
        p = by["v4-ud-send-only-imm-pad3"]
        self.assertEqual((p.deth, p.imm, p.dest_qp), ((0x11111111, 0x24), 0xeeffc000, 0x24))
        p = by["v4-rc-ack-pad0-rnr-nak"]
        self.assertEqual(p.aeth, (0x38, 0x0b))
        p = by["v6-rc-ack-pad0"]
        self.assertEqual((p.src, p.dst, p.sport, p.dest_qp, p.psn, p.aeth, p.ttl, p.udp_csum),
                         ("fe80::a488:b5ff:fe8e:3b58", "fe80::71:cfff:fe40:f330", 0xc1e4, 0x16,
                          0xc960ea, (0x1f, 1), 64, 0))
        p = by["v6-rc-send-only-imm-pad3"]
        self.assertEqual((p.tos, p.flow_label, p.imm), (0x62, 0, 0x04030201))


def random_pkt(rnd, opcode, v6):
    """A Pkt of OPCODE with random header values and the headers the opcode takes."""
    hdr = {
        "reth": lambda: (rnd.getrandbits(64), rnd.getrandbits(32), rnd.getrandbits(32)),
        "aeth": lambda: (rnd.getrandbits(8), rnd.getrandbits(24)),
        "atomic_eth": lambda: tuple(rnd.getrandbits(n) for n in (64, 32, 64, 64)),
        "atomic_ack": lambda: rnd.getrandbits(64),
        "imm": lambda: rnd.getrandbits(32), "ieth": lambda: rnd.getrandbits(32),
        "deth": lambda: (rnd.getrandbits(32), rnd.getrandbits(24)),
    }
    kw = {h: hdr[h]() for h in roce.OPCODE_HEADERS[opcode]}
    src, dst = ("fd00::1", "fd00::2:3") if v6 else ("192.0.2.1", "198.51.100.7")
    return roce.Pkt(opcode, dest_qp=rnd.getrandbits(24), psn=rnd.getrandbits(24),
                    se=bool(rnd.getrandbits(1)), migreq=bool(rnd.getrandbits(1)),
                    tver=rnd.getrandbits(4), pkey=rnd.getrandbits(16),
                    fecn_becn=rnd.getrandbits(8), ack_req=bool(rnd.getrandbits(1)),
                    payload=rnd.randbytes(rnd.choice([0, 1, 2, 3, 4, 33, 1024])),
                    src=src, dst=dst, sport=0xC000 | rnd.getrandbits(14),
                    ip_id=None if v6 else rnd.getrandbits(16), ttl=rnd.getrandbits(8), tos=rnd.getrandbits(8),
                    flow_label=rnd.getrandbits(20) if v6 else 0, **kw)


class Builder(unittest.TestCase):
    def test_round_trip_all_opcodes(self):
        rnd = random.Random(4791)
        n = 0
        for opcode in roce.OPCODE_HEADERS:
            for v6 in (False, True):
                for _ in range(5):
                    p = random_pkt(rnd, opcode, v6)
                    ip = roce.build(p)
                    q = roce.parse(ip)
                    self.assertTrue(q.icrc_ok)
                    self.assertEqual(q.pad, (-len(p.payload)) % 4)
                    p.pad, p.pad_bytes = q.pad, q.pad_bytes
                    self.assertEqual(q, p)
                    self.assertEqual(roce.icrc(ip[:-4]), ref_icrc(ip[:-4]))
                    hl = 40 if v6 else 20
                    self.assertEqual(len(ip), hl + 8 + 12 + sum(
                        roce._HDR_LEN[h] for h in q.headers()) + len(p.payload) + q.pad + 4)
                    n += 1
        self.assertEqual(n, len(roce.OPCODE_HEADERS) * 10)

    def test_layout(self):
        p = roce.Pkt(roce.RC_RDMA_WRITE_ONLY_IMM, dest_qp=0x123456, psn=0xabcdef, se=True,
                     ack_req=True, fecn_becn=0x80, reth=(0x1122334455667788, 0x99aabbcc, 5),
                     imm=0xdeadbeef, payload=b"hello", src="10.0.0.1", dst="10.0.0.2",
                     sport=0xC123, ip_id=0x4242, tos=0x02)
        ip = roce.build(p)
        self.assertEqual(ip[:10].hex(), "45020048424240004011")
        self.assertEqual(ip[12:20].hex(), "0a0000010a000002")
        self.assertEqual(ip[20:28].hex(), "c12312b700340000")
        self.assertEqual(ip[28:40].hex(), "0bb0ffff8012345680abcdef")
        self.assertEqual(ip[40:56].hex(), "112233445566778899aabbcc00000005")
        self.assertEqual(ip[56:60].hex(), "deadbeef")
        self.assertEqual(ip[60:68], b"hello\0\0\0")
        self.assertEqual(len(ip), 72)
        self.assertEqual(roce._csum16(ip[:20]), 0)

    def test_split_udp_gso(self):
        # A run of three WRITE MIDDLE packets and a shorter LAST, as one UDP GSO packet: each
        # packet's ICRC over the headers it has once cut, as the driver computes it.
        for v6 in (False, True):
            src, dst = ("fd00::1", "fd00::2") if v6 else ("10.0.0.1", "10.0.0.2")
            pkts = [roce.Pkt(roce.RC_RDMA_WRITE_MIDDLE, dest_qp=0x11, psn=7 + i,
                             payload=bytes([i]) * 256, src=src, dst=dst, ip_id=0x10 + i)
                    for i in range(3)]
            pkts.append(roce.Pkt(roce.RC_RDMA_WRITE_LAST, dest_qp=0x11, psn=10,
                                 payload=b"z" * 100, src=src, dst=dst, ip_id=0x13))
            wire = [roce.build(p) for p in pkts]
            hl = 48 if v6 else 28
            run = bytearray(wire[0][:hl] + b"".join(w[hl:] for w in wire))
            if v6:
                struct.pack_into("!H", run, 4, len(run) - 40)
            else:
                struct.pack_into("!H", run, 2, len(run))
            struct.pack_into("!H", run, hl - 4, len(run) - hl + 8)
            cut = roce.split_udp_gso(bytes(run), len(wire[0]) - hl)
            self.assertEqual(len(cut), 4)
            for got, want, p in zip(cut, wire, pkts):
                q = roce.parse(got)
                self.assertTrue(q.icrc_ok)
                self.assertEqual((q.psn, q.payload), (p.psn, p.payload))
                # Equal but for the UDP checksum (IPv6: build fills one in).
                self.assertEqual(got[:hl - 2], want[:hl - 2])
                self.assertEqual(got[hl:], want[hl:])
            self.assertEqual(roce.split_udp_gso(wire[0], 2000), [wire[0]])

    def test_strict_headers(self):
        p = roce.Pkt(roce.RC_RDMA_WRITE_ONLY, src="10.0.0.1", dst="10.0.0.2")
        self.assertRaises(ValueError, roce.build, p)               # no RETH
        p.reth = (0, 0, 0)
        roce.build(p)
        p.imm = 1
        self.assertRaises(ValueError, roce.build, p)               # ImmDt not in WRITE_ONLY
        p.strict = False
        q = roce.parse(roce.build(p))                              # the receiver sees RETH only
        self.assertEqual(q.payload[:4], b"\0\0\0\1")

    def test_forced_icrc_and_truncation(self):
        p = roce.Pkt(roce.RC_SEND_ONLY, payload=b"abcd", src="10.0.0.1", dst="10.0.0.2")
        good = roce.build(p)
        bad = roce.build(p, icrc=0x12345678)
        self.assertEqual(bad[:-4], good[:-4])
        self.assertEqual(bad[-4:], bytes.fromhex("78563412"))
        self.assertFalse(roce.parse(bad).icrc_ok)
        short = roce.build(p, icrc=False)
        self.assertEqual(len(short), len(good) - 4)
        self.assertEqual(struct.unpack_from("!H", short, 2)[0], len(short))

    def test_udp_checksum(self):
        for src, dst in (("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")):
            p = roce.Pkt(roce.RC_SEND_ONLY, payload=b"xyz", src=src, dst=dst, udp_csum=None)
            ip = roce.build(p)
            hl = 40 if ":" in src else 20
            fam = socket.AF_INET6 if ":" in src else socket.AF_INET
            udp = ip[hl:]
            pseudo = (socket.inet_pton(fam, src) + socket.inet_pton(fam, dst)
                      + struct.pack("!IxxxB", len(udp), 17))
            self.assertNotEqual(udp[6:8], b"\0\0")
            self.assertEqual(roce._csum16(pseudo + udp), 0)
            self.assertEqual(roce.parse(ip).icrc_ok, True)

    def test_syndromes(self):
        mk = lambda syn: roce.Pkt(roce.RC_ACKNOWLEDGE, aeth=(syn, 0))  # noqa: E731
        self.assertIsNone(roce.nak_code(mk(roce.ack_syndrome())))
        self.assertEqual(roce.ack_syndrome(), 0x1f)
        self.assertEqual(roce.nak_code(mk(roce.rnr_syndrome(14))), "rnr")
        for code in range(5):
            self.assertEqual(roce.nak_code(mk(roce.nak_syndrome(code))), code)
        self.assertRaises(ValueError, roce.nak_code, mk(0x40))
        self.assertRaises(ValueError, roce.nak_code, roce.Pkt(roce.RC_SEND_ONLY))

    def test_garbage(self):
        good = roce.build(roce.Pkt(roce.RC_RDMA_READ_REQUEST, reth=(1, 2, 3),
                                   src="10.0.0.1", dst="10.0.0.2"))
        tcp = bytearray(good)
        tcp[9] = 6
        port = bytearray(good)
        port[23] ^= 1
        frag = bytearray(good)
        frag[6] |= 0x20
        lenbig = bytearray(good)
        lenbig[3] += 1
        ulen = bytearray(good)
        ulen[25] -= 4
        padbig = roce.build(roce.Pkt(roce.RC_SEND_ONLY, pad=3, pad_bytes=b"", strict=False,
                                     src="10.0.0.1", dst="10.0.0.2"))
        for what, b in (("empty", b""), ("short", good[:19]), ("TCP", tcp), ("port", port),
                        ("fragment", frag), ("IP length", lenbig), ("UDP length", ulen),
                        ("no RETH room", good[:-20]), ("pad", padbig),
                        ("version 5", b"\x55" + good[1:]), ("no ICRC room", good[:39]),
                        ("IPv6 short", b"\x60" + bytes(30))):
            with self.subTest(what):
                self.assertRaises(ValueError, roce.parse, bytes(b))
        self.assertEqual(roce.parse(bytes(port), any_port=True).dport, 4791 ^ 1)
        self.assertEqual(roce.parse(good + bytes(6)).raw, good)    # Ethernet padding ignored

    def test_strip_ethernet_vlan(self):
        ip = roce.build(roce.Pkt(roce.RC_SEND_ONLY, src="10.0.0.1", dst="10.0.0.2"))
        self.assertEqual(roce.strip_ethernet(bytes(12) + b"\x81\x00\x00\x05\x08\x00" + ip), ip)
        self.assertRaises(ValueError, roce.strip_ethernet, bytes(12) + b"\x08\x06" + ip)

    def test_opcode_names(self):
        self.assertEqual(roce.opcode_name(0x0c), "RC_RDMA_READ_REQUEST")
        self.assertEqual(roce.opcode_name(0x65), "UD_SEND_ONLY_IMM")
        self.assertEqual(roce.opcode_name(0x81), "0x81")
        self.assertEqual(set(roce.OPCODE_NAMES), set(roce.OPCODE_HEADERS))


# ---- optional: two network namespaces joined by a veth pair

CLONE_NEWNET = 0x40000000


def setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


@unittest.skipUnless(os.environ.get("ROCE_NETNS_TEST") == "1" and os.geteuid() == 0,
                     "set ROCE_NETNS_TEST=1 and run as root")
class Netns(unittest.TestCase):
    ADDRS = (("10.99.0.1", "10.99.0.2"), ("fd00:99::1", "fd00:99::2"), ("fe80::1", "fe80::2"))

    def setUp(self):
        self.ns = (f"roce-a-{os.getpid()}", f"roce-b-{os.getpid()}")
        self.veth = ("roa%d" % (os.getpid() % 10000), "rob%d" % (os.getpid() % 10000))
        self.addCleanup(self.cleanup)
        a, b = self.ns
        run = lambda *c: subprocess.run(c, check=True)  # noqa: E731
        run("ip", "netns", "add", a)
        run("ip", "netns", "add", b)
        run("ip", "link", "add", self.veth[0], "netns", a, "type", "veth", "peer", "name",
            self.veth[1], "netns", b)
        for ns, dev, i in ((a, self.veth[0], 0), (b, self.veth[1], 1)):
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "addr", "add", self.ADDRS[0][i] + "/24", "dev", dev)
            for v6, _ in ((self.ADDRS[1], 0), (self.ADDRS[2], 0)):
                run("ip", "-n", ns, "addr", "add", v6[i] + "/64", "dev", dev, "nodad")
            run("ip", "-n", ns, "link", "set", dev, "up")

    def cleanup(self):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)

    def in_ns(self, ns, fn):
        orig = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            setns(fd)
            return fn()
        finally:
            setns(orig)
            os.close(fd)
            os.close(orig)

    def test_send_recv(self):
        total = 0
        for a_addr, b_addr in self.ADDRS:
            with self.subTest(a_addr):
                inj_a = self.in_ns(self.ns[0], lambda: roce.Injector(a_addr, b_addr))
                inj_b = self.in_ns(self.ns[1], lambda: roce.Injector(b_addr, a_addr))
                fam = socket.AF_INET6 if ":" in a_addr else socket.AF_INET
                plain = self.in_ns(self.ns[1], lambda: socket.socket(socket.AF_INET,
                                                                     socket.SOCK_RAW, 17))
                plain.settimeout(2)
                icmp = self.in_ns(self.ns[0], lambda: socket.socket(
                    fam, socket.SOCK_RAW, 1 if fam == socket.AF_INET else 58))
                icmp.setblocking(False)
                try:
                    for name, _, _, _, frame in FIX:
                        p = roce.parse(roce.strip_ethernet(frame))
                        p.src = p.dst = ""
                        p.ip_id = None
                        sent = inj_a.send(p)
                        got = inj_b.recv(2)
                        self.assertIsNotNone(got, name)
                        self.assertEqual(got.raw, sent, name)
                        self.assertTrue(got.icrc_ok, name)
                        if fam == socket.AF_INET:
                            # a plain raw IPPROTO_UDP socket sees the same bytes
                            while True:
                                data = plain.recv(65536)
                                if data[16:20] == socket.inet_aton(b_addr):
                                    break
                            self.assertEqual(data, sent, name)
                        total += 1
                    ack = roce.Pkt(roce.RC_ACKNOWLEDGE, dest_qp=0x11, psn=7,
                                   aeth=(roce.ack_syndrome(), 3))
                    sent = inj_b.send(ack)
                    got = inj_a.recv(2)
                    self.assertEqual(got.raw, sent)
                    self.assertTrue(got.icrc_ok)
                    self.assertIsNone(inj_a.recv(0.2))          # nothing else (own packets too)
                    self.assertEqual(inj_a.malformed + inj_b.malformed, [])
                    # the bound UDP sockets kept the kernels from sending port unreachable
                    unreach = []
                    while True:
                        try:
                            m = icmp.recv(65536)
                        except BlockingIOError:
                            break
                        t = m[(m[0] & 15) * 4] if fam == socket.AF_INET else m[0]
                        if t == (3 if fam == socket.AF_INET else 1):
                            unreach.append(m)
                    self.assertEqual(unreach, [])
                finally:
                    inj_a.close()
                    inj_b.close()
                    plain.close()
                    icmp.close()
        print(f"\n  {total} packets across the veth pair", end=" ", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
