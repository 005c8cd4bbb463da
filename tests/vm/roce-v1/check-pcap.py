#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the RoCE v1 frames of a pcap (tcpdump -w) independently of oxrdma's code.

    check-pcap.py CAPTURE.PCAP

Plain python3, no third-party module. For every Ethernet frame of ethertype 0x8915 it checks
the GRH (version 6, next header 0x1B, a payload length that fits the frame) and recomputes the
ICRC as IBA vol 1 7.8.1 and the RoCE annex A16 define it: CRC-32 (zlib's) over 8 bytes of 0xFF
(the LRH, absent on Ethernet), the GRH with traffic class, flow label and hop limit set to all
ones, the BTH with its reserved byte (resv8a) set to all ones, and everything after it up to
the ICRC, which is sent least significant byte first. Prints "frames N, good N, bad N" and a
line per bad frame; exits 1 if a frame is bad or there is none.
"""

import struct
import sys
import zlib


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != 1:
        sys.exit(f"{path}: link type {linktype}, not Ethernet")
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        yield data[off:off + incl]
        off += incl


def check(frame):
    """None if the RoCE v1 packet in FRAME is well-formed with a good ICRC, else why not."""
    pkt = frame[14:]
    if len(pkt) < 40 + 12 + 4:
        return "too short"
    if pkt[0] >> 4 != 6 or pkt[6] != 0x1B:
        return "GRH: not version 6 / next header 0x1B"
    plen = struct.unpack_from(">H", pkt, 4)[0]
    if 40 + plen > len(pkt):
        return f"GRH payload length {plen} beyond the frame"
    pkt = pkt[:40 + plen]
    grh = bytearray(pkt[:40])
    grh[0] |= 0x0F
    grh[1:4] = b"\xff\xff\xff"
    grh[7] = 0xFF
    bth = bytearray(pkt[40:52])
    bth[4] = 0xFF
    body = bytes(grh) + bytes(bth) + pkt[52:-4]
    want = zlib.crc32(b"\xff" * 8 + body) & 0xFFFFFFFF
    got = struct.unpack_from("<I", pkt, len(pkt) - 4)[0]
    if want != got:
        return f"ICRC {got:08x}, computed {want:08x} (opcode 0x{pkt[40]:02x})"
    return None


def main():
    n = good = 0
    for fr in frames(sys.argv[1]):
        if len(fr) < 14 or fr[12:14] != b"\x89\x15":
            continue
        n += 1
        why = check(fr)
        if why is None:
            good += 1
        else:
            print(f"bad frame {n}: {why}")
    print(f"frames {n}, good {good}, bad {n - good}")
    sys.exit(0 if n and n == good else 1)


if __name__ == "__main__":
    main()
