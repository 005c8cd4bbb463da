# SPDX-License-Identifier: GPL-2.0
"""A hostile RoCE v2 peer for the VM tests: build, send, receive and parse RoCE v2 packets.

Standard library only (Debian 12's /usr/bin/python3). Typical use, as root, in a network
namespace where nothing else owns UDP port 4791:

    import roce
    with roce.Injector("10.0.0.2", "10.0.0.1") as inj:
        inj.send(roce.Pkt(roce.RC_RDMA_READ_REQUEST, dest_qp=qpn, psn=100,
                          reth=(va, rkey, 64)))
        answer = inj.recv(2.0)          # a parsed Pkt, answer.icrc_ok checked

Packet layout (IBA vol 1 and its RoCE v2 annex): IPv4 or IPv6 / UDP (dport 4791) / BTH (12
bytes) / extension headers / payload / pad (BTH pad count, 0-3 bytes) / ICRC (4 bytes).

ICRC, as checked against the rxe captures in rust/wire/fixtures/rxe-roce-v2.txt: the IEEE CRC-32
(zlib.crc32) of 8 bytes of 0xff, the IP header, the UDP header, the BTH and everything after it up
to the ICRC, with the IPv4 TOS, TTL and header checksum, the IPv6 traffic class, flow label and
hop limit, the UDP checksum and BTH byte 4 (FECN, BECN, reserved) replaced by all ones. It is
sent least significant byte first. The IPv4 total length and identification are covered, so
the injector writes the whole IPv4 header itself.
"""
import dataclasses
import errno
import ipaddress
import select
import socket
import struct
import time
import zlib

ROCE_V2_PORT = 4791
ICRC_LEN = 4
BTH_LEN = 12

# ---- BTH opcodes (IBA vol 1, table 38). Transport in the top 3 bits: RC 0x00, UC 0x20,
# RD 0x40 (not supported here), UD 0x60.
RC_SEND_FIRST = 0x00
RC_SEND_MIDDLE = 0x01
RC_SEND_LAST = 0x02
RC_SEND_LAST_IMM = 0x03
RC_SEND_ONLY = 0x04
RC_SEND_ONLY_IMM = 0x05
RC_RDMA_WRITE_FIRST = 0x06
RC_RDMA_WRITE_MIDDLE = 0x07
RC_RDMA_WRITE_LAST = 0x08
RC_RDMA_WRITE_LAST_IMM = 0x09
RC_RDMA_WRITE_ONLY = 0x0a
RC_RDMA_WRITE_ONLY_IMM = 0x0b
RC_RDMA_READ_REQUEST = 0x0c
RC_RDMA_READ_RESPONSE_FIRST = 0x0d
RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e
RC_RDMA_READ_RESPONSE_LAST = 0x0f
RC_RDMA_READ_RESPONSE_ONLY = 0x10
RC_ACKNOWLEDGE = 0x11
RC_ATOMIC_ACKNOWLEDGE = 0x12
RC_COMPARE_SWAP = 0x13
RC_FETCH_ADD = 0x14
RC_SEND_LAST_INV = 0x16
RC_SEND_ONLY_INV = 0x17
RC_ATOMIC_ACK = RC_ATOMIC_ACKNOWLEDGE

UC_SEND_FIRST = 0x20
UC_SEND_MIDDLE = 0x21
UC_SEND_LAST = 0x22
UC_SEND_LAST_IMM = 0x23
UC_SEND_ONLY = 0x24
UC_SEND_ONLY_IMM = 0x25
UC_RDMA_WRITE_FIRST = 0x26
UC_RDMA_WRITE_MIDDLE = 0x27
UC_RDMA_WRITE_LAST = 0x28
UC_RDMA_WRITE_LAST_IMM = 0x29
UC_RDMA_WRITE_ONLY = 0x2a
UC_RDMA_WRITE_ONLY_IMM = 0x2b

UD_SEND_ONLY = 0x64
UD_SEND_ONLY_IMM = 0x65

# ---- AETH syndrome (IBA vol 1, 9.7.5.2.x): class in bits 7..5, value in bits 4..0.
AETH_ACK = 0x00          # | credit count (0x1f: invalid / not used)
AETH_RNR_NAK = 0x20      # | RNR timer code
AETH_NAK = 0x60          # | NAK code below
NAK_PSN_SEQ_ERROR = 0
NAK_INVALID_REQUEST = 1
NAK_REMOTE_ACCESS = 2
NAK_REMOTE_OP = 3
NAK_INVALID_RD_REQUEST = 4

# Extension headers in wire order, with their lengths.
_HDR_ORDER = ("deth", "reth", "atomic_eth", "aeth", "atomic_ack", "imm", "ieth")
_HDR_LEN = {"deth": 8, "reth": 16, "atomic_eth": 28, "aeth": 4, "atomic_ack": 8, "imm": 4,
            "ieth": 4}

# Opcodes this module knows: opcode -> extension headers (a subset of _HDR_ORDER, in order).
_RC_UC_HDRS = {
    0x00: (), 0x01: (), 0x02: (), 0x03: ("imm",), 0x04: (), 0x05: ("imm",),
    0x06: ("reth",), 0x07: (), 0x08: (), 0x09: ("imm",), 0x0a: ("reth",),
    0x0b: ("reth", "imm"),
}
OPCODE_HEADERS = dict(_RC_UC_HDRS)
OPCODE_HEADERS.update({
    0x0c: ("reth",), 0x0d: ("aeth",), 0x0e: (), 0x0f: ("aeth",), 0x10: ("aeth",),
    0x11: ("aeth",), 0x12: ("aeth", "atomic_ack"), 0x13: ("atomic_eth",),
    0x14: ("atomic_eth",), 0x16: ("ieth",), 0x17: ("ieth",),
})
OPCODE_HEADERS.update({0x20 | op: h for op, h in _RC_UC_HDRS.items()})
OPCODE_HEADERS.update({UD_SEND_ONLY: ("deth",), UD_SEND_ONLY_IMM: ("deth", "imm")})

OPCODE_NAMES = {v: k for k, v in globals().items()
                if k[:3] in ("RC_", "UC_", "UD_") and isinstance(v, int) and k != "RC_ATOMIC_ACK"}


def opcode_name(opcode):
    """'RC_SEND_ONLY' etc., or '0xNN' for an opcode this module does not know."""
    return OPCODE_NAMES.get(opcode, f"0x{opcode:02x}")


def ack_syndrome(credits=0x1f):
    """AETH syndrome of an ACK (credit count 0x1f: no credits advertised)."""
    return AETH_ACK | (credits & 0x1f)


def rnr_syndrome(timer):
    """AETH syndrome of an RNR NAK with RNR timer code TIMER (0-31)."""
    return AETH_RNR_NAK | (timer & 0x1f)


def nak_syndrome(code):
    """AETH syndrome of a NAK with NAK code CODE (NAK_PSN_SEQ_ERROR, ...)."""
    return AETH_NAK | (code & 0x1f)


@dataclasses.dataclass
class Pkt:
    """One RoCE v2 packet. Header fields are attributes; build() turns it into an IP packet.

    Extension headers are present when not None: reth (va, rkey, dma_len), aeth (syndrome,
    msn), atomic_eth (va, rkey, swap_add, compare), atomic_ack (original value), imm, ieth
    (rkey), deth (qkey, src_qp). With strict (the default) build() refuses headers that do not
    match a known opcode; strict=False sends whatever is set, in IBA order.
    pad None: the pad count that makes the payload a multiple of 4; pad_bytes None: zeros.
    ip_id None: 0 for build(), the next identification for Injector.send().
    ip_len, ip_csum, udp_len: None computes them; set them to send wrong values (the kernel
    rewrites the IPv4 total length and checksum of raw sends, so for IPv4 these are build-only).
    udp_csum: 0 (none, as rxe sends), None computes it, an int is sent as is.
    After parse(): icrc_ok, icrc_value (as received), ip_csum_ok, raw (the packet's bytes).
    """
    opcode: int
    dest_qp: int = 0
    psn: int = 0
    se: bool = False
    migreq: bool = False
    pad: int | None = None
    tver: int = 0
    pkey: int = 0xffff
    fecn_becn: int = 0          # all of BTH byte 4: FECN 0x80, BECN 0x40, 6 reserved bits
    ack_req: bool = False
    resv7: int = 0              # the 7 reserved bits after AckReq
    reth: tuple | None = None
    aeth: tuple | None = None
    atomic_eth: tuple | None = None
    atomic_ack: int | None = None
    imm: int | None = None
    ieth: int | None = None
    deth: tuple | None = None
    deth_resv: int = 0
    payload: bytes = b""
    pad_bytes: bytes | None = None
    src: str = ""
    dst: str = ""
    sport: int = 0xC000
    dport: int = ROCE_V2_PORT
    ip_id: int | None = None
    ttl: int = 64               # the IPv6 hop limit for IPv6
    tos: int = 0                # the IPv6 traffic class for IPv6
    flow_label: int = 0         # IPv6 only
    df: bool = True             # IPv4 only
    ip_len: int | None = None
    ip_csum: int | None = None
    udp_len: int | None = None
    udp_csum: int | None = 0
    strict: bool = dataclasses.field(default=True, compare=False)
    icrc_ok: bool | None = dataclasses.field(default=None, compare=False)
    icrc_value: int | None = dataclasses.field(default=None, compare=False, repr=False)
    ip_csum_ok: bool | None = dataclasses.field(default=None, compare=False, repr=False)
    raw: bytes | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self):
        s = f"{opcode_name(self.opcode)} qp=0x{self.dest_qp:x} psn={self.psn}"
        if self.ack_req:
            s += " A"
        if self.aeth is not None:
            s += f" aeth=(0x{self.aeth[0]:02x},{self.aeth[1]})"
        if self.reth is not None:
            s += f" reth=(0x{self.reth[0]:x},0x{self.reth[1]:x},{self.reth[2]})"
        s += f" len={len(self.payload)}"
        if self.icrc_ok is not None:
            s += " icrc_ok" if self.icrc_ok else " ICRC-BAD"
        return s

    def headers(self):
        """Names of the extension headers that are set, in wire order."""
        return tuple(h for h in _HDR_ORDER if getattr(self, h) is not None)


def nak_code(pkt):
    """None for an ACK, 'rnr' for an RNR NAK, the NAK code (int) for a NAK.

    Raises ValueError for a packet without AETH or with a reserved syndrome class."""
    if pkt.aeth is None:
        raise ValueError(f"{opcode_name(pkt.opcode)} has no AETH")
    syn = pkt.aeth[0]
    cls = syn & 0xe0
    if cls == AETH_ACK:
        return None
    if cls == AETH_RNR_NAK:
        return "rnr"
    if cls == AETH_NAK:
        return syn & 0x1f
    raise ValueError(f"reserved AETH syndrome 0x{syn:02x}")


# ---- checksums

def _csum16(data):
    """Internet checksum (RFC 1071) of DATA."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def icrc(ip_packet_without_icrc):
    """The ICRC of an IP packet (IPv4 or IPv6 / UDP / BTH ...) given without its 4 ICRC bytes.

    Append it with .to_bytes(4, "little"). Raises ValueError if the packet is too short for its
    IP, UDP and BTH headers or is neither IPv4 nor IPv6."""
    b = bytearray(ip_packet_without_icrc)
    if not b:
        raise ValueError("empty packet")
    ver = b[0] >> 4
    if ver == 4:
        ihl = (b[0] & 0x0f) * 4
        if ihl < 20:
            raise ValueError(f"IPv4 header length {ihl}")
        b[1] = 0xff                     # TOS (DSCP, ECN)
        b[8] = 0xff                     # TTL
        b[10:12] = b"\xff\xff"          # header checksum
    elif ver == 6:
        ihl = 40
        b[0] |= 0x0f                    # traffic class and flow label
        b[1:4] = b"\xff\xff\xff"
        b[7] = 0xff                     # hop limit
    else:
        raise ValueError(f"IP version {ver}")
    if len(b) < ihl + 8 + BTH_LEN:
        raise ValueError("too short for IP, UDP and BTH headers")
    b[ihl + 6:ihl + 8] = b"\xff\xff"    # UDP checksum
    b[ihl + 8 + 4] = 0xff               # BTH byte 4: FECN, BECN, reserved
    return zlib.crc32(b, zlib.crc32(b"\xff" * 8))


_icrc = icrc    # build() has a parameter of that name


# ---- build

def _check(name, v, bits):
    if not isinstance(v, int) or v < 0 or v >> bits:
        raise ValueError(f"{name}={v!r} does not fit in {bits} bits")
    return v


def _ext_headers(p):
    names = p.headers()
    if p.strict and p.opcode in OPCODE_HEADERS and names != OPCODE_HEADERS[p.opcode]:
        raise ValueError(f"{opcode_name(p.opcode)} takes headers {OPCODE_HEADERS[p.opcode]}, "
                         f"got {names} (strict=False to send them anyway)")
    out = b""
    for h in names:
        v = getattr(p, h)
        if h == "deth":
            qkey, src_qp = v
            out += struct.pack("!IB", _check("qkey", qkey, 32), _check("deth_resv", p.deth_resv, 8))
            out += _check("src_qp", src_qp, 24).to_bytes(3, "big")
        elif h == "reth":
            va, rkey, dma_len = v
            out += struct.pack("!QII", _check("va", va, 64), _check("rkey", rkey, 32),
                               _check("dma_len", dma_len, 32))
        elif h == "atomic_eth":
            va, rkey, swap_add, compare = v
            out += struct.pack("!QIQQ", _check("va", va, 64), _check("rkey", rkey, 32),
                               _check("swap_add", swap_add, 64), _check("compare", compare, 64))
        elif h == "aeth":
            syndrome, msn = v
            out += struct.pack("!B", _check("syndrome", syndrome, 8))
            out += _check("msn", msn, 24).to_bytes(3, "big")
        elif h == "atomic_ack":
            out += struct.pack("!Q", _check("atomic_ack", v, 64))
        else:                           # imm, ieth
            out += struct.pack("!I", _check(h, v, 32))
    return out


def _bth(p, pad):
    b1 = (p.se << 7) | (p.migreq << 6) | (_check("pad", pad, 2) << 4) | _check("tver", p.tver, 4)
    return (struct.pack("!BBHB", _check("opcode", p.opcode, 8), b1, _check("pkey", p.pkey, 16),
                        _check("fecn_becn", p.fecn_becn, 8))
            + _check("dest_qp", p.dest_qp, 24).to_bytes(3, "big")
            + struct.pack("!B", (p.ack_req << 7) | _check("resv7", p.resv7, 7))
            + _check("psn", p.psn, 24).to_bytes(3, "big"))


def _family(addr):
    if not addr:
        raise ValueError("src and dst must be set (an IPv4 or IPv6 literal)")
    return ipaddress.ip_address(addr).version


def build(p, icrc=True):
    """The whole IP packet for P (IP, UDP, BTH, extension headers, payload, pad, ICRC).

    icrc True appends the correct ICRC, an int appends that value (little-endian, as the ICRC
    is sent), False appends none (a truncated packet)."""
    pad = (-len(p.payload)) % 4 if p.pad is None else p.pad
    pad_bytes = bytes(pad) if p.pad_bytes is None else p.pad_bytes
    roce = _bth(p, pad) + _ext_headers(p) + p.payload + pad_bytes
    icrc_len = 0 if icrc is False else ICRC_LEN
    udp_len = 8 + len(roce) + icrc_len if p.udp_len is None else p.udp_len
    udp = struct.pack("!HHHH", _check("sport", p.sport, 16), _check("dport", p.dport, 16),
                      _check("udp_len", udp_len, 16), 0)
    ver = _family(p.src)
    if _family(p.dst) != ver:
        raise ValueError(f"src {p.src} and dst {p.dst} are not of the same IP version")
    saddr = socket.inet_pton(socket.AF_INET if ver == 4 else socket.AF_INET6, p.src)
    daddr = socket.inet_pton(socket.AF_INET if ver == 4 else socket.AF_INET6, p.dst)
    ulen = 8 + len(roce) + icrc_len
    if ver == 4:
        tot = 20 + ulen if p.ip_len is None else p.ip_len
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, _check("tos", p.tos, 8), _check("ip_len", tot, 16),
                          _check("ip_id", p.ip_id or 0, 16), 0x4000 if p.df else 0,
                          _check("ttl", p.ttl, 8), socket.IPPROTO_UDP, 0, saddr, daddr)
        csum = _csum16(hdr) if p.ip_csum is None else _check("ip_csum", p.ip_csum, 16)
        ip = hdr[:10] + struct.pack("!H", csum) + hdr[12:]
        pseudo = saddr + daddr + struct.pack("!BBH", 0, socket.IPPROTO_UDP, ulen)
    else:
        plen = ulen if p.ip_len is None else p.ip_len
        w0 = (6 << 28) | (_check("tos", p.tos, 8) << 20) | _check("flow_label", p.flow_label, 20)
        ip = struct.pack("!IHBB16s16s", w0, _check("ip_len", plen, 16), socket.IPPROTO_UDP,
                         _check("ttl", p.ttl, 8), saddr, daddr)
        pseudo = saddr + daddr + struct.pack("!IxxxB", ulen, socket.IPPROTO_UDP)
    pkt = ip + udp + roce
    if icrc is True:
        pkt += _icrc(pkt).to_bytes(4, "little")
    elif icrc is not False:
        pkt += _check("icrc", icrc, 32).to_bytes(4, "little")
    if p.udp_csum is None:
        c = _csum16(pseudo + pkt[len(ip):]) or 0xffff
    else:
        c = _check("udp_csum", p.udp_csum, 16)
    off = len(ip) + 6
    return pkt[:off] + struct.pack("!H", c) + pkt[off + 2:]


# ---- parse

VIRTIO_NET_HDR_LEN = 10
VIRTIO_NET_HDR_GSO_UDP_L4 = 5


def split_udp_gso(ip_packet, gso_size):
    """The datagrams that UDP segmentation offload cuts IP_PACKET (one UDP datagram) into,
    GSO_SIZE payload bytes each (the last may be shorter), as the kernel cuts them: the IP and
    UDP headers copied into each with its own lengths, IPv4 identifications counting up from
    the packet's, the IPv4 header checksum recomputed; the UDP checksum is copied as it is
    (the ICRC masks it). A packet whose payload fits one segment is returned as it is."""
    ver = ip_packet[0] >> 4
    ihl = (ip_packet[0] & 0x0f) * 4 if ver == 4 else 40
    hl = ihl + 8
    payload = ip_packet[hl:]
    if gso_size <= 0 or len(payload) <= gso_size:
        return [ip_packet]
    out = []
    ip_id = struct.unpack_from("!H", ip_packet, 4)[0] if ver == 4 else 0
    for i, at in enumerate(range(0, len(payload), gso_size)):
        seg = payload[at:at + gso_size]
        h = bytearray(ip_packet[:hl])
        if ver == 4:
            struct.pack_into("!HH", h, 2, hl + len(seg), (ip_id + i) & 0xffff)
            struct.pack_into("!H", h, 10, 0)
            struct.pack_into("!H", h, 10, _csum16(bytes(h[:ihl])))
        else:
            struct.pack_into("!H", h, 4, 8 + len(seg))
        struct.pack_into("!H", h, ihl + 4, 8 + len(seg))
        out.append(bytes(h) + seg)
    return out


def strip_ethernet(frame):
    """The IP packet in an Ethernet frame (802.1Q tags skipped). Raises ValueError otherwise."""
    off = 12
    while True:
        if len(frame) < off + 2:
            raise ValueError("short Ethernet frame")
        ethertype = struct.unpack_from("!H", frame, off)[0]
        if ethertype in (0x8100, 0x88a8):
            off += 4
            continue
        if ethertype not in (0x0800, 0x86dd):
            raise ValueError(f"ethertype 0x{ethertype:04x} is not IP")
        return bytes(frame[off + 2:])


def parse(ip_packet, any_port=False):
    """The Pkt in an IP packet (bytes past the IP length, e.g. Ethernet padding, are ignored).

    Raises ValueError unless it is IPv4 (unfragmented) or IPv6 (no extension header) / UDP to
    port 4791 (any port with any_port) / a BTH, with room for the opcode's headers, the pad and
    the ICRC. Sets icrc_ok, icrc_value, ip_csum_ok and raw. Unknown opcodes parse with no
    extension header (all in payload)."""
    b = bytes(ip_packet)
    if len(b) < 20:
        raise ValueError("too short for an IP header")
    ver = b[0] >> 4
    f = {}
    if ver == 4:
        ihl = (b[0] & 0x0f) * 4
        tot, ip_id, frag, ttl, proto = struct.unpack_from("!HHHBB", b, 2)
        if ihl != 20:
            raise ValueError(f"IPv4 header length {ihl} (options are not supported)")
        if tot > len(b) or tot < ihl:
            raise ValueError(f"IPv4 total length {tot}, {len(b)} bytes")
        if frag & 0x3fff:
            raise ValueError("IPv4 fragment")
        if proto != socket.IPPROTO_UDP:
            raise ValueError(f"IP protocol {proto} is not UDP")
        f.update(tos=b[1], ip_id=ip_id, df=bool(frag & 0x4000), ttl=ttl,
                 src=socket.inet_ntop(socket.AF_INET, b[12:16]),
                 dst=socket.inet_ntop(socket.AF_INET, b[16:20]))
        ip_csum_ok = _csum16(b[:20]) == 0
    elif ver == 6:
        ihl = 40
        if len(b) < 40:
            raise ValueError("too short for an IPv6 header")
        w0, plen, nxt, hlim = struct.unpack_from("!IHBB", b, 0)
        tot = 40 + plen
        if tot > len(b):
            raise ValueError(f"IPv6 payload length {plen}, {len(b) - 40} bytes")
        if nxt != socket.IPPROTO_UDP:
            raise ValueError(f"IPv6 next header {nxt} is not UDP")
        f.update(tos=(w0 >> 20) & 0xff, flow_label=w0 & 0xfffff, ttl=hlim,
                 src=socket.inet_ntop(socket.AF_INET6, b[8:24]),
                 dst=socket.inet_ntop(socket.AF_INET6, b[24:40]))
        ip_csum_ok = True
    else:
        raise ValueError(f"IP version {ver}")
    b = b[:tot]
    if tot < ihl + 8:
        raise ValueError("too short for a UDP header")
    sport, dport, ulen, ucsum = struct.unpack_from("!HHHH", b, ihl)
    if dport != ROCE_V2_PORT and not any_port:
        raise ValueError(f"UDP destination port {dport} is not {ROCE_V2_PORT}")
    if ulen != tot - ihl:
        raise ValueError(f"UDP length {ulen}, IP payload {tot - ihl}")
    f.update(sport=sport, dport=dport, udp_csum=ucsum)
    o = ihl + 8
    if tot < o + BTH_LEN + ICRC_LEN:
        raise ValueError("too short for a BTH and an ICRC")
    opcode, b1, pkey, resv8a = struct.unpack_from("!BBHB", b, o)
    dest_qp = int.from_bytes(b[o + 5:o + 8], "big")
    f.update(opcode=opcode, se=bool(b1 & 0x80), migreq=bool(b1 & 0x40), pad=(b1 >> 4) & 3,
             tver=b1 & 0xf, pkey=pkey, fecn_becn=resv8a, dest_qp=dest_qp,
             ack_req=bool(b[o + 8] & 0x80), resv7=b[o + 8] & 0x7f,
             psn=int.from_bytes(b[o + 9:o + 12], "big"))
    o += BTH_LEN
    end = tot - ICRC_LEN
    for h in OPCODE_HEADERS.get(opcode, ()):
        n = _HDR_LEN[h]
        if o + n > end:
            raise ValueError(f"{opcode_name(opcode)}: too short for its {h}")
        if h == "deth":
            qkey, resv = struct.unpack_from("!IB", b, o)
            f["deth"] = (qkey, int.from_bytes(b[o + 5:o + 8], "big"))
            f["deth_resv"] = resv
        elif h == "reth":
            f["reth"] = struct.unpack_from("!QII", b, o)
        elif h == "atomic_eth":
            f["atomic_eth"] = struct.unpack_from("!QIQQ", b, o)
        elif h == "aeth":
            f["aeth"] = (b[o], int.from_bytes(b[o + 1:o + 4], "big"))
        elif h == "atomic_ack":
            f["atomic_ack"] = struct.unpack_from("!Q", b, o)[0]
        else:
            f[h] = struct.unpack_from("!I", b, o)[0]
        o += n
    if o + f["pad"] > end:
        raise ValueError(f"pad count {f['pad']} but {end - o} bytes after the headers")
    f["payload"] = b[o:end - f["pad"]]
    f["pad_bytes"] = b[end - f["pad"]:end]
    p = Pkt(**f)
    p.icrc_value = int.from_bytes(b[end:tot], "little")
    p.icrc_ok = icrc(b[:end]) == p.icrc_value
    p.ip_csum_ok = ip_csum_ok
    p.raw = b
    return p


# ---- sending and receiving

IPV6_HDRINCL = getattr(socket, "IPV6_HDRINCL", 36)
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = getattr(socket, "SOL_PACKET", 263)
SOL_UDP = 17
UDP_SEGMENT = 103
IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
PACKET_VNET_HDR = 15
ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772


def _link_local_ifname(addr):
    """The interface that has IPv6 address ADDR, from /proc/net/if_inet6 (None if none)."""
    want = ipaddress.ip_address(addr).packed.hex()
    try:
        with open("/proc/net/if_inet6") as fh:
            for line in fh:
                w = line.split()
                if len(w) >= 6 and w[0] == want:
                    return w[5]
    except OSError:
        pass
    return None


class Injector:
    """Raw-socket RoCE v2 peer at address SRC talking to the device at DST (same IP version).

    Sending: a raw IP socket with the IP header included (IPv4: IPPROTO_RAW; IPv6: IPPROTO_RAW
    with IPV6_HDRINCL), so the ICRC covers exactly the header that goes out. The kernel still
    rewrites the IPv4 total length and header checksum (and picks an id if it is 0 without DF).
    Receiving: an AF_PACKET socket (all interfaces, or IFNAME) gives the whole IP packet, IPv6
    header included (an IPv6 raw socket would not), before the IP stack could drop it; packets
    are kept if they are UDP to port 4791 at SRC (and, with only_peer, from DST). A UDP socket
    bound to (SRC, 4791) keeps the kernel from answering ICMP port unreachable; if the port is
    owned by a local RoCE stack (EADDRINUSE) it is skipped, but that stack then also consumes
    the packets: run the injector in its own network namespace. Give IFNAME when a packet
    can cross two interfaces of that namespace (a bridge and its port): each one sees it.
    Needs root (CAP_NET_RAW).
    Packets to port 4791 at SRC that do not parse are not returned; they go to self.malformed
    as (bytes, error message).
    """

    def __init__(self, src, dst, ifname=None, only_peer=False):
        self.src, self.dst = src, dst
        self.version = _family(src)
        if _family(dst) != self.version:
            raise ValueError(f"src {src} and dst {dst} are not of the same IP version")
        self.src_packed = ipaddress.ip_address(src).packed
        self.dst_packed = ipaddress.ip_address(dst).packed
        self.only_peer = only_peer
        self.malformed = []
        self.next_id = 1
        self.scope_id = 0
        if self.version == 6 and ipaddress.ip_address(dst).is_link_local:
            ifname = ifname or _link_local_ifname(src)
            if ifname is None:
                raise ValueError(f"link-local {dst}: give ifname")
            self.scope_id = socket.if_nametoindex(ifname)
        self.ifname = ifname
        self.tx = self.rx = self.udp = self.run_sock = None
        self.pending = []
        try:
            if self.version == 4:
                self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
                self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
            else:
                self.tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
                self.tx.setsockopt(socket.IPPROTO_IPV6, IPV6_HDRINCL, 1)
            if ifname:
                self.tx.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
            # Link-layer frames (SOCK_RAW: what PACKET_VNET_HDR needs) with a virtio_net_hdr
            # in front: a UDP GSO run (a veth carries it uncut) comes with its segment size,
            # and recv_raw cuts it as the wire would.
            self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            if ifname:
                self.rx.bind((ifname, ETH_P_ALL))
            try:
                self.rx.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)      # SO_RCVBUFFORCE
            except OSError:
                self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            fam = socket.AF_INET if self.version == 4 else socket.AF_INET6
            self.udp = socket.socket(fam, socket.SOCK_DGRAM)
            self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.udp.setblocking(False)
            try:
                if self.version == 4:
                    self.udp.bind((src, ROCE_V2_PORT))
                else:
                    self.udp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    self.udp.bind((src, ROCE_V2_PORT, 0, self.scope_id))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                self.udp.close()
                self.udp = None
        except BaseException:
            self.close()
            raise

    def close(self):
        """Closes the sockets."""
        for s in (self.tx, self.rx, self.udp, self.run_sock):
            if s is not None:
                s.close()
        self.tx = self.rx = self.udp = self.run_sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _next_ip_id(self):
        i = self.next_id
        self.next_id = self.next_id % 0xffff + 1          # 1..0xffff, never 0
        return i

    def _build(self, p, icrc):
        """P's bytes (src/dst filled if unset, ip_id if None) and its destination."""
        q = dataclasses.replace(p)
        q.src = q.src or self.src
        q.dst = q.dst or self.dst
        if q.ip_id is None:
            q.ip_id = self._next_ip_id() if self.version == 4 else 0
        return build(q, icrc), q.dst

    def send(self, p, icrc=True):
        """Builds P (src/dst filled if unset, ip_id if None) and sends it; returns the bytes.

        P itself is not changed."""
        data, dst = self._build(p, icrc)
        self.send_raw(data, dst)
        return data

    def send_run(self, pkts, fixed_ids=False, bad=None, size=None):
        """Sends the IPv4 packets PKTS as one UDP segmentation offload datagram (UDP_SEGMENT),
        as a sender's run that crosses a veth uncut: one skb of their UDP payloads behind the
        first one's headers, which the receiver gets whole. The kernel gives a DF datagram of
        an unconnected socket identification 0, so each packet's ICRC is computed with the
        identification it would have once cut: 0, 1, 2... or, with FIXED_IDS, 0 for all (what
        receive offload also merges). BAD: the index of a packet sent with a wrong ICRC.
        SIZE: the segment size (default: the first packet's UDP payload length). Returns the
        packets' bytes as computed."""
        if self.version != 4:
            raise ValueError("send_run: IPv4 only")
        sport = 0xC0DE
        if self.run_sock is None:
            self.run_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.run_sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
            self.run_sock.bind((self.src, sport))
        built = []
        for i, p in enumerate(pkts):
            q = dataclasses.replace(p, src=p.src or self.src, dst=p.dst or self.dst,
                                    sport=sport, ip_id=0 if fixed_ids else i)
            data = build(q)
            if i == bad:
                data = data[:-4] + bytes(b ^ 0xff for b in data[-4:])
            built.append(data)
        payloads = [d[28:] for d in built]
        size = size or len(payloads[0])
        self.run_sock.setsockopt(SOL_UDP, UDP_SEGMENT, size)
        self.run_sock.sendto(b"".join(payloads), (self.dst, ROCE_V2_PORT))
        return built

    def send_raw(self, ip_packet, dst=None):
        """Sends a hand-made IP packet (IP header included) towards DST (default: the peer)."""
        dst = dst or self.dst
        if self.version == 4:
            self.tx.sendto(ip_packet, (dst, 0))
        else:
            self.tx.sendto(ip_packet, (dst, 0, 0, self.scope_id))

    def _wanted(self, b):
        """True for a UDP packet to port 4791 at our address (from the peer with only_peer)."""
        if len(b) < 1:
            return False
        ver = b[0] >> 4
        if ver != self.version:
            return False
        if ver == 4:
            if len(b) < 20 or b[9] != socket.IPPROTO_UDP:
                return False
            ihl = (b[0] & 0x0f) * 4
            src, dst = b[12:16], b[16:20]
        else:
            if len(b) < 40 or b[6] != socket.IPPROTO_UDP:
                return False
            ihl = 40
            src, dst = b[8:24], b[24:40]
        if dst != self.src_packed:
            return False
        if self.only_peer and src != self.dst_packed:
            return False
        return len(b) >= ihl + 4 and struct.unpack_from("!H", b, ihl + 2)[0] == ROCE_V2_PORT

    def _drain_udp(self):
        if self.udp is None:
            return
        while True:
            try:
                self.udp.recv(65536)
            except (BlockingIOError, InterruptedError):
                return

    def recv_raw(self, timeout):
        """The next IP packet (bytes) that is UDP to port 4791 at our address, or None. A UDP
        segmentation offload run arrives as the packets it is cut into, one per call."""
        if self.pending:
            return self.pending.pop(0)
        end = time.monotonic() + timeout
        socks = [self.rx] + ([self.udp] if self.udp is not None else [])
        while True:
            ready = select.select(socks, [], [], max(0.0, end - time.monotonic()))[0]
            if not ready:
                return None
            if self.udp in ready:
                self._drain_udp()
            if self.rx in ready:
                frame, addr = self.rx.recvfrom(65536 + VIRTIO_NET_HDR_LEN + 64)
                vnet, data = frame[:VIRTIO_NET_HDR_LEN], frame[VIRTIO_NET_HDR_LEN:]
                if addr[3] in (ARPHRD_ETHER, ARPHRD_LOOPBACK):
                    try:
                        data = strip_ethernet(data)
                    except ValueError:
                        continue
                if addr[2] != PACKET_OUTGOING and self._wanted(data):
                    # Native byte order (virtio 1.0 little-endian, as the host).
                    gso_type, gso_size = vnet[1] & 0x7f, struct.unpack_from("=H", vnet, 4)[0]
                    if gso_type == VIRTIO_NET_HDR_GSO_UDP_L4:
                        self.pending = split_udp_gso(data, gso_size)
                        return self.pending.pop(0)
                    return data

    def recv(self, timeout):
        """The next RoCE v2 packet addressed to us, parsed (icrc_ok set), or None on timeout."""
        end = time.monotonic() + timeout
        while True:
            data = self.recv_raw(max(0.0, end - time.monotonic()))
            if data is None:
                return None
            try:
                return parse(data)
            except ValueError as exc:
                self.malformed.append((data, str(exc)))

    def recv_all(self, timeout):
        """Every RoCE v2 packet addressed to us that arrives within TIMEOUT seconds, parsed."""
        end = time.monotonic() + timeout
        out = []
        while True:
            p = self.recv(max(0.0, end - time.monotonic()))
            if p is None:
                return out
            out.append(p)

    def drain(self):
        """Discards everything received so far; returns how many RoCE packets that was."""
        return len(self.recv_all(0))


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "dataclasses", "errno", "ipaddress", "select", "socket", "struct", "time", "zlib")]
