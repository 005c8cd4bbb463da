#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Pick representative RoCE v2 packets out of capture-rxe.sh's pcap for oxrdma-wire's fixtures.

    tests/vm/capture/extract-fixtures.py RXE.PCAP > rust/wire/fixtures/rxe-roce-v2.txt

Runs on the host with a plain python3 (no third-party module). Reads an Ethernet pcap (tcpdump
-w), keeps the frames that are IPv4 or IPv6 UDP datagrams to port 4791, and keeps the first
frame of each kind, where a kind is (IP version, BTH opcode, pad count, AETH syndrome class).
To keep the file small (a few dozen frames): a frame longer than 600 bytes is dropped when a
shorter one of the same opcode is kept (FIRST and MIDDLE packets always carry a full path MTU);
over IPv6, only the opcodes in V6_OPCODES are kept, one per AETH syndrome class, whatever the
pad. It decodes the BTH with its own small opcode table (written from the IBA tables,
independently of the Rust code, so the Rust tests cross-check the two), and writes one line per
frame:

    NAME OPCODE PAD PAYLOAD_LEN FRAME_HEX

NAME says IP version, opcode, pad and syndrome; OPCODE is the BTH opcode in hex; PAYLOAD_LEN
the payload bytes without pad; FRAME_HEX the whole Ethernet frame as captured (Ethernet, IP,
UDP, BTH..., ICRC). Lines starting with # are comments. It also checks every selected frame's
ICRC (CRC-32 over 8 bytes of 0xFF and the masked IP, UDP and BTH headers and the rest,
little-endian on the wire) with zlib, and reports on stderr how many frames of the whole
capture match.
"""

import struct
import sys
import zlib

# opcode: (name, extension header bytes, has payload)
# RC 0x00-0x17 (0x15 reserved), 0x1C-0x1D; UC = RC | 0x20 for 0x00-0x0B; UD 0x64-0x65; CNP 0x81.
_RC = {
    0x00: ("send-first", 0, True), 0x01: ("send-middle", 0, True),
    0x02: ("send-last", 0, True), 0x03: ("send-last-imm", 4, True),
    0x04: ("send-only", 0, True), 0x05: ("send-only-imm", 4, True),
    0x06: ("write-first", 16, True), 0x07: ("write-middle", 0, True),
    0x08: ("write-last", 0, True), 0x09: ("write-last-imm", 4, True),
    0x0A: ("write-only", 16, True), 0x0B: ("write-only-imm", 20, True),
    0x0C: ("read-request", 16, False), 0x0D: ("read-response-first", 4, True),
    0x0E: ("read-response-middle", 0, True), 0x0F: ("read-response-last", 4, True),
    0x10: ("read-response-only", 4, True), 0x11: ("ack", 4, False),
    0x12: ("atomic-ack", 12, False), 0x13: ("compare-swap", 28, False),
    0x14: ("fetch-add", 28, False), 0x16: ("send-last-inv", 4, True),
    0x17: ("send-only-inv", 4, True), 0x1C: ("flush", 20, False),
    0x1D: ("atomic-write", 16, True),
}
OPCODES = {}
for _op, _v in _RC.items():
    OPCODES[_op] = ("rc-" + _v[0],) + _v[1:]
    if _op <= 0x0B:
        OPCODES[_op | 0x20] = ("uc-" + _v[0],) + _v[1:]
OPCODES[0x64] = ("ud-send-only", 8, True)
OPCODES[0x65] = ("ud-send-only-imm", 12, True)

FIRST_OR_MIDDLE = {0x00, 0x01, 0x06, 0x07, 0x0D, 0x0E, 0x20, 0x21, 0x26, 0x27}
# One of each header layout (and the syndromes) over IPv6; the rest is covered over IPv4.
V6_OPCODES = {0x04, 0x05, 0x0A, 0x0B, 0x0C, 0x10, 0x11, 0x12, 0x13, 0x17, 0x2B, 0x65}
BIG = 600


def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif struct.unpack(">I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D):
        endian = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        sys.exit(f"{path}: link type {linktype}, not Ethernet")
    off = 24
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        if incl == orig:
            yield frame


def roce(frame):
    """(ip version, ip packet, udp payload) of a RoCE v2 frame, else None."""
    ethertype = struct.unpack(">H", frame[12:14])[0]
    ip = frame[14:]
    if ethertype == 0x0800 and len(ip) >= 20 and ip[0] >> 4 == 4:
        ihl = (ip[0] & 15) * 4
        ip = ip[:struct.unpack(">H", ip[2:4])[0]]
        if ip[9] != 17:
            return None
        udp = ip[ihl:]
        version = 4
    elif ethertype == 0x86DD and len(ip) >= 40 and ip[0] >> 4 == 6:
        ip = ip[:40 + struct.unpack(">H", ip[4:6])[0]]
        if ip[6] != 17:
            return None
        udp = ip[40:]
        version = 6
    else:
        return None
    if len(udp) < 8 or struct.unpack(">H", udp[2:4])[0] != 4791:
        return None
    return version, ip, udp[8:]


def icrc_ok(version, ip):
    m = bytearray(ip[:-4])
    if version == 4:
        net = (m[0] & 15) * 4
        m[1] = m[8] = m[10] = m[11] = 0xFF
    else:
        net = 40
        m[0] |= 0x0F
        m[1:4] = b"\xff\xff\xff"
        m[7] = 0xFF
    m[net + 6:net + 8] = b"\xff\xff"
    m[net + 8 + 4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(m)).to_bytes(4, "little") == ip[-4:]


def syndrome_class(s):
    kind = (s >> 5) & 3
    if kind == 0:
        return "ack"
    if kind == 1:
        return "rnr-nak"
    if kind == 3:
        return ["nak-psn-seq", "nak-inv-req", "nak-rem-access", "nak-rem-op",
                "nak-inv-rd"][s & 31] if (s & 31) < 5 else f"nak-{s & 31}"
    return f"syndrome-{s:02x}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    seen = set()
    total = good = 0
    out = []
    for frame in read_pcap(sys.argv[1]):
        r = roce(frame)
        if r is None:
            continue
        version, ip, iba = r
        total += 1
        good += icrc_ok(version, ip)
        op = iba[0]
        if op not in OPCODES:
            print(f"skipping unknown opcode {op:#04x}", file=sys.stderr)
            continue
        name, ext, payload = OPCODES[op]
        pad = (iba[1] >> 4) & 3
        hdr = 12 + ext
        plen = len(iba) - hdr - 4 - pad if payload else 0
        syn = ""
        if op in (0x0D, 0x0F, 0x10, 0x11, 0x12):
            syn = syndrome_class(iba[12])
        if version == 6 and op not in V6_OPCODES:
            continue
        key = (version, op, pad if version == 4 else None, syn)
        if key in seen:
            continue
        seen.add(key)
        if not icrc_ok(version, ip):
            sys.exit(f"ICRC mismatch in a selected frame: {frame.hex()}")
        label = f"v{version}-{name}-pad{pad}" + (f"-{syn}" if syn and syn != "ack" else "")
        out.append((version, op, pad, syn, len(frame),
                    f"{label} {op:#04x} {pad} {plen} {frame.hex()}"))
    small = {(t[0], t[1]) for t in out if t[4] <= BIG}
    out = [t for t in out if t[4] <= BIG or (t[0], t[1]) not in small]
    out.sort(key=lambda t: t[:4])
    print("# SPDX-License-Identifier: GPL-2.0")
    print("# RoCE v2 frames sent by Linux 6.12 rxe, captured in oxrdma's test VM; see README.md.")
    print("# NAME OPCODE PAD PAYLOAD_LEN FRAME_HEX (Ethernet frame, ICRC included)")
    for t in out:
        print(t[5])
    print(f"{total} RoCE v2 frames, {good} with a valid little-endian ICRC, {len(out)} selected",
          file=sys.stderr)


if __name__ == "__main__":
    main()
