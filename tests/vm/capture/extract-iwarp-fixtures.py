#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Cut capture-siw.sh's pcap into MPA units for oxrdma-wire's iWARP fixtures.

    tests/vm/capture/extract-iwarp-fixtures.py [--steps STEPS] [--stream CONN] PCAP OUTDIR

Runs on the host with a plain python3 (no third-party module). Reads an Ethernet pcap (tcpdump
-w) of siw traffic, follows every TCP connection that starts with a SYN in the capture,
reassembles its two byte streams by sequence number (retransmitted and overlapping segments are
merged; overlapping bytes that differ, or a hole, stop the run), and cuts each stream into MPA
units: the MPA request (initiator to responder) or reply frame (20-byte header: 16-byte key,
flags, revision, private data length; then the private data), then FPDUs (2-byte ULPDU length,
ULPDU, pad to a multiple of 4 counting the length field, 4-byte CRC field, always present). A
stream must cut exactly, with no bytes left over. Each connection is named after the step of
STEPS (capture-siw.sh's steps.txt, default: next to PCAP) during which its SYN was sent, with
`#N` appended to the Nth connection of a step (perftest -R opens several).

It writes:

  OUTDIR/siw-iwarp.txt, one unit per line (`#` lines are comments):
      NAME KIND CRC RDMAP_OPCODE ULPDU_LEN HEX
  KIND `req`, `rep` or `fpdu`; CRC 1 if the connection uses CRC32C (siw uses it exactly when
  the reply's C flag is set), else 0; RDMAP_OPCODE the low 4 bits of the ULPDU's second byte
  (`-` for req/rep); ULPDU_LEN the MPA length field (for req/rep: the private data length);
  HEX the unit exactly as on the wire. NAME is CONNECTION:DIRECTION:INDEX:DESCRIPTION, where
  DIRECTION is i2r (initiator to responder) or r2i and INDEX counts the units of that stream
  from 0 (the req or rep); DESCRIPTION is opcode, T(agged)/U(ntagged), L(ast)/nL, pad count,
  and `-nonzero` when the pad bytes are not zero. Kept: the req and rep of every connection;
  the first FPDU of each (connection kind, opcode, tagged, last, pad count, non-zero pad,
  empty payload) where the connection kind is the negotiated CRC, MPA revision,
  peer-to-peer and siw's GSO flag, preferring a unit of at most 600 bytes when the key has
  one; every TERMINATE; every FPDU of the first multi-segment untagged and tagged message of
  a CRC connection without GSO.
  OUTDIR/siw-iwarp-stream.txt: the two reassembled streams of connection CONN (default:
  crc1-rping), one line per direction, `DIRECTION HEX`.

On stderr it reports what it verified over the whole capture: the CRC32C byte order on every
FPDU of every CRC connection, the CRC field of connections without CRC, the MPA flags,
revisions and private data, the DDP/RDMAP control bytes, queue numbers, MSN and MO sequences,
and the largest ULPDU.
"""

import argparse
import collections
import os
import struct
import sys

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
BIG = 600
OPNAMES = {0: "write", 1: "read-req", 2: "read-resp", 3: "send", 4: "send-inv", 5: "send-se",
           6: "send-se-inv", 7: "terminate", 8: "imm", 9: "imm-se", 10: "atomic-req",
           11: "atomic-resp"}
UNTAGGED_QN = {3: 0, 4: 0, 5: 0, 6: 0, 1: 1, 7: 2}


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def read_pcap(path):
    data = open(path, "rb").read()
    if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif struct.unpack(">I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D):
        endian = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    nano = struct.unpack(endian + "I", data[:4])[0] == 0xA1B23C4D
    if struct.unpack(endian + "I", data[20:24])[0] != 1:
        sys.exit(f"{path}: not Ethernet")
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if incl != orig:
            sys.exit(f"{path}: a frame was cut to {incl} of {orig} bytes (snaplen)")
        yield sec + frac / (1e9 if nano else 1e6), data[off:off + incl]
        off += incl


def tcp_segment(frame):
    """(src, dst, sport, dport, seq, flags, payload) of an IPv4/IPv6 TCP frame, else None."""
    etype = struct.unpack(">H", frame[12:14])[0]
    ip = frame[14:]
    if etype == 0x0800 and ip[0] >> 4 == 4:
        ip = ip[:struct.unpack(">H", ip[2:4])[0]]
        if ip[9] != 6:
            return None
        src, dst, tcp = ip[12:16], ip[16:20], ip[(ip[0] & 15) * 4:]
    elif etype == 0x86DD and ip[0] >> 4 == 6:
        ip = ip[:40 + struct.unpack(">H", ip[4:6])[0]]
        if ip[6] != 6:
            return None
        src, dst, tcp = ip[8:24], ip[24:40], ip[40:]
    else:
        return None
    sport, dport, seq = struct.unpack(">HHI", tcp[:8])
    return src, dst, sport, dport, seq, tcp[13], tcp[(tcp[12] >> 4) * 4:]


def addr(a, port):
    if len(a) == 4:
        return ".".join(str(x) for x in a) + f":{port}"
    return "[" + ":".join(f"{a[i] << 8 | a[i + 1]:x}" for i in range(0, 16, 2)) + f"]:{port}"


class Stream:
    def __init__(self):
        self.isn = None
        self.buf = bytearray()
        self.have = bytearray()  # 1 where buf holds a byte
        self.conflicts = 0

    def add(self, seq, data):
        off = (seq - self.isn - 1) & 0xFFFFFFFF
        if off > 0x7FFFFFFF:
            return  # before the start (a SYN retransmission has no payload anyway)
        end = off + len(data)
        if end > len(self.buf):
            self.buf.extend(bytes(end - len(self.buf)))
            self.have.extend(bytes(end - len(self.have)))
        for i, b in enumerate(data):
            if self.have[off + i] and self.buf[off + i] != b:
                self.conflicts += 1
            self.buf[off + i] = b
            self.have[off + i] = 1

    def data(self, name):
        if self.conflicts:
            sys.exit(f"{name}: {self.conflicts} retransmitted bytes differ from the first copy")
        if 0 in self.have:
            sys.exit(f"{name}: hole at stream offset {self.have.index(0)} of {len(self.buf)}")
        return bytes(self.buf)


def connections(pcap):
    """[(syn time, client, server, i2r bytes, r2i bytes)] in SYN order."""
    conns = collections.OrderedDict()
    for ts, frame in read_pcap(pcap):
        seg = tcp_segment(frame)
        if seg is None:
            continue
        src, dst, sport, dport, seq, flags, payload = seg
        a, b = (src, sport), (dst, dport)
        syn, ack = flags & 0x02, flags & 0x10
        if syn and not ack and (a, b) not in conns:
            conns[(a, b)] = {"t": ts, "i2r": Stream(), "r2i": Stream()}
        if (a, b) in conns:
            c, d = conns[(a, b)], "i2r"
        elif (b, a) in conns:
            c, d = conns[(b, a)], "r2i"
        else:
            continue  # a connection whose SYN is not in the capture
        st = c[d]
        if syn:
            st.isn = seq
        elif st.isn is not None and payload:
            st.add(seq, payload)
    out = []
    for (a, b), c in conns.items():
        name = f"{addr(*a)}->{addr(*b)}"
        if c["r2i"].isn is None:
            print(f"{name}: no SYN-ACK, left out", file=sys.stderr)
            continue
        out.append((c["t"], a, b, c["i2r"].data(name + " i2r"), c["r2i"].data(name + " r2i")))
    return out


def name_connections(conns, steps_path):
    steps = []
    if steps_path and os.path.exists(steps_path):
        for line in open(steps_path):
            t0, t1, name = line.split()
            steps.append((float(t0), float(t1), name))
    else:
        print(f"no steps file {steps_path}: connections are named by port", file=sys.stderr)
    count = collections.Counter()
    names = []
    for t, a, b, _, _ in conns:
        step = next((s[2] for s in steps if s[0] <= t <= s[1]), f"port{b[1]}")
        count[step] += 1
        names.append(f"{step}#{count[step]}")
    return names


class Unit:
    def __init__(self, conn, d, index, kind, raw, ulen):
        self.conn, self.dir, self.index, self.kind, self.raw, self.ulen = \
            conn, d, index, kind, raw, ulen
        self.crc = 0
        self.desc = kind
        self.opcode = None


def cut(conn, d, data):
    """The MPA units of one direction's stream; exits if it does not cut exactly."""
    units = []
    want = KEY_REQ if d == "i2r" else KEY_REP
    if data[:16] != want:
        sys.exit(f"{conn} {d}: stream does not start with {want!r}: {data[:20].hex()}")
    pdlen = struct.unpack(">H", data[18:20])[0]
    units.append(Unit(conn, d, 0, "req" if d == "i2r" else "rep", data[:20 + pdlen], pdlen))
    off = 20 + pdlen
    while off < len(data):
        if off + 2 > len(data):
            sys.exit(f"{conn} {d}: {len(data) - off} bytes left at the end")
        ulen = struct.unpack(">H", data[off:off + 2])[0]
        n = 2 + ulen
        n += -n % 4
        n += 4
        if off + n > len(data):
            sys.exit(f"{conn} {d}: FPDU at {off} with ULPDU length {ulen} runs past the end "
                     f"({len(data)} bytes)")
        units.append(Unit(conn, d, len(units), "fpdu", data[off:off + n], ulen))
        off += n
    return units


def describe(u):
    """Decode an FPDU's DDP/RDMAP header into u's attributes."""
    p = u.raw[2:2 + u.ulen]
    u.ddp, u.rdmap = p[0], p[1]
    u.tagged, u.last = bool(p[0] & 0x80), bool(p[0] & 0x40)
    u.opcode = p[1] & 15
    u.pad = (-(2 + u.ulen)) % 4
    if u.tagged:
        u.hdr = 14
        u.stag, u.to = struct.unpack(">IQ", p[2:14])
        u.qn = u.msn = u.mo = None
    else:
        u.hdr = 18
        u.inv_stag, u.qn, u.msn, u.mo = struct.unpack(">IIII", p[2:18])
    u.payload = u.ulen - u.hdr
    op = OPNAMES.get(u.opcode, f"op{u.opcode}")
    u.desc = f"{op}-{'T' if u.tagged else 'U'}-{'L' if u.last else 'nL'}-pad{u.pad}"
    if any(u.raw[2 + u.ulen:-4]):
        u.desc += "-nonzero"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps")
    ap.add_argument("--stream", default="crc1-rping")
    ap.add_argument("pcap")
    ap.add_argument("outdir")
    args = ap.parse_args()
    steps = args.steps or os.path.join(os.path.dirname(os.path.abspath(args.pcap)), "steps.txt")
    conns = connections(args.pcap)
    names = name_connections(conns, steps)
    err = lambda *a: print(*a, file=sys.stderr)  # noqa: E731

    all_units = []
    info = {}
    for (t, a, b, i2r, r2i), conn in zip(conns, names):
        ui, ur = cut(conn, "i2r", i2r), cut(conn, "r2i", r2i)
        req, rep = ui[0], ur[0]
        crc = 1 if rep.raw[16] & 0x40 else 0
        if req.raw[16] & 0x40 and not crc:
            sys.exit(f"{conn}: the request asks for CRC, the reply does not set it")
        rev = rep.raw[17]
        p2p = bool(len(req.raw) >= 24 and req.raw[16] & 0x10 and req.raw[20] & 0x80)
        gso = bool(req.raw[16] & 0x08 and rep.raw[16] & 0x08)
        kind = f"crc{crc}-rev{rev}" + ("-p2p" if p2p else "") + ("-gso" if gso else "")
        info[conn] = dict(crc=crc, rev=rev, kind=kind, client=addr(*a), server=addr(*b),
                          req=req.raw, rep=rep.raw, i2r=i2r, r2i=r2i, units=ui + ur)
        for u in ui + ur:
            u.crc, u.kind_of_conn = crc, kind
            if u.kind == "fpdu":
                describe(u)
        all_units.extend(ui + ur)

    # --- Facts over the whole capture.
    fp = [u for u in all_units if u.kind == "fpdu"]
    on = [u for u in fp if u.crc]
    le = sum(crc32c(u.raw[:-4]).to_bytes(4, "little") == u.raw[-4:] for u in on)
    be = sum(crc32c(u.raw[:-4]).to_bytes(4, "big") == u.raw[-4:] for u in on)
    off = [u for u in fp if not u.crc]
    err(f"{len(conns)} connections, {len(all_units)} MPA units, {len(fp)} FPDUs")
    err(f"CRC connections: {len(on)} FPDUs; CRC32C field == to_le_bytes: {le}, "
        f"== to_be_bytes: {be}")
    err(f"no-CRC connections: {len(off)} FPDUs; CRC field values: "
        f"{sorted({u.raw[-4:].hex() for u in off})}")
    pads = collections.Counter(u.raw[2 + u.ulen:-4].hex() for u in fp)
    err(f"pad bytes seen: {dict(pads)}")
    for conn, c in info.items():
        q, r = c["req"], c["rep"]
        err(f"{conn} {c['client']}->{c['server']} {c['kind']}: req flags {q[16]:#04x} rev {q[17]} "
            f"pd {q[20:].hex() or '-'}; rep flags {r[16]:#04x} rev {r[17]} pd {r[20:].hex() or '-'}"
            f"; FPDUs i2r {sum(u.kind == 'fpdu' and u.dir == 'i2r' for u in c['units'])} "
            f"r2i {sum(u.kind == 'fpdu' and u.dir == 'r2i' for u in c['units'])}")
    ctl = collections.Counter((u.ddp, u.rdmap, u.opcode) for u in fp)
    err("DDP/RDMAP control bytes (ddp, rdmap, opcode name): count")
    for (d, r, o), k in sorted(ctl.items()):
        err(f"  {d:#04x} {r:#04x} {OPNAMES.get(o, o)}: {k}")
    qn = collections.Counter((OPNAMES.get(u.opcode), u.qn) for u in fp if not u.tagged)
    err(f"untagged (opcode, QN): {dict(qn)}")
    bad_qn = [u for u in fp if not u.tagged and UNTAGGED_QN.get(u.opcode) != u.qn]
    err(f"untagged FPDUs whose QN differs from RFC 5040's: {len(bad_qn)}")
    nonzero_inv = collections.Counter(OPNAMES.get(u.opcode) for u in fp
                                      if not u.tagged and u.inv_stag)
    err(f"untagged FPDUs with a non-zero invalidate-STag/reserved word: {dict(nonzero_inv)}")
    # MSN: per connection, direction and QN, the MSN of each message (starting where?), and MO.
    msn_report = collections.defaultdict(list)
    mo_bad = 0
    for conn, c in info.items():
        for d in ("i2r", "r2i"):
            expect = {}
            for u in c["units"]:
                if u.kind != "fpdu" or u.dir != d or u.tagged:
                    continue
                k = u.qn
                e = expect.get(k)
                if e is None:
                    msn_report[(u.qn, "first MSN")].append(u.msn)
                elif (u.msn, u.mo) != e:
                    mo_bad += 1
                    err(f"  {conn} {d} QN {u.qn}: MSN {u.msn} MO {u.mo}, expected {e}")
                expect[k] = (u.msn + 1, 0) if u.last else (u.msn, u.mo + u.payload)
    err(f"first MSN per QN: { {k: sorted(set(v)) for k, v in msn_report.items()} }; "
        f"MSN/MO sequence breaks: {mo_bad}")
    tag_bad = 0
    for conn, c in info.items():
        for d in ("i2r", "r2i"):
            nxt = None
            for u in c["units"]:
                if u.kind != "fpdu" or u.dir != d or not u.tagged:
                    continue
                if nxt is not None and (u.stag, u.to) != nxt:
                    tag_bad += 1
                nxt = None if u.last else (u.stag, u.to + u.payload)
    err(f"tagged non-last segments not followed by the same STag at TO+len: {tag_bad}")
    ddp_ver = {u.ddp & 3 for u in fp}
    rdmap_ver = {u.rdmap >> 6 for u in fp}
    err(f"DDP versions {ddp_ver}, RDMAP versions {rdmap_ver}, DDP reserved bits "
        f"{ {u.ddp & 0x3C for u in fp} }, RDMAP reserved bits { {u.rdmap & 0x30 for u in fp} }")
    for kind in sorted({u.kind_of_conn for u in fp}):
        us = [u for u in fp if u.kind_of_conn == kind]
        mx = max(u.ulen for u in us)
        nl = sorted({u.ulen for u in us if not u.last})
        err(f"{kind}: largest ULPDU {mx} (FPDU {mx + 2 + (-(mx + 2)) % 4 + 4}); "
            f"ULPDU lengths of non-last segments: {nl}")
    nz = [u for u in fp if any(u.raw[2 + u.ulen:-4])]
    err(f"FPDUs with non-zero pad bytes: {len(nz)} of {sum(u.pad > 0 for u in fp)} with a pad "
        f"(pads {sorted({u.raw[2 + u.ulen:-4].hex() for u in nz})}; ULPDU lengths "
        f"{sorted({u.ulen for u in nz})})")
    inv = [u for u in fp if u.opcode in (4, 6)]
    err(f"send-with-invalidate STags: {[f'{u.inv_stag:#010x}' for u in inv]}")
    for u in fp:
        if u.opcode == 1:
            p = u.raw[2:2 + u.ulen]
            sk, sto, size, ss, sto2 = struct.unpack(">IQIIQ", p[18:46])
            err(f"first read request ({u.conn} {u.dir}): ULPDU {u.ulen}, MSN {u.msn}, sink STag "
                f"{sk:#x} TO {sto:#x}, size {size}, source STag {ss:#x} TO {sto2:#x}")
            break
    for u in fp:
        if u.opcode == 7:
            p = u.raw[2:2 + u.ulen]
            b = p[18:22]
            err(f"TERMINATE {u.conn} {u.dir}: FPDU {u.raw.hex()}")
            err(f"  terminate control {b.hex()}: read as RFC 5040 (layer = high nibble of byte "
                f"0): layer {b[0] >> 4} etype {b[0] & 15} ecode {b[1]:#04x} M {b[2] >> 7} "
                f"D {b[2] >> 6 & 1} R {b[2] >> 5 & 1}; read as siw's little-endian bitfield: "
                f"layer {b[0] & 15} etype {b[0] >> 4} ecode {b[1]:#04x} M {b[2] & 1} "
                f"D {b[2] >> 1 & 1} R {b[2] >> 2 & 1}")
            if len(p) > 22:
                err(f"  DDP segment length field {struct.unpack('>H', p[22:24])[0]}, "
                    f"terminated header {p[24:].hex()}")
    for conn, c in info.items():
        if "p2p" in c["kind"]:
            first = [u for u in c["units"] if u.kind == "fpdu"][:2]
            for u in first:
                err(f"p2p {conn} {u.dir} first FPDU: {u.desc} ULPDU {u.ulen} {u.raw.hex()}")

    # --- Selection.
    sel = []
    for conn, c in info.items():
        sel.extend(u for u in c["units"] if u.kind != "fpdu")
    first = collections.OrderedDict()
    for u in fp:
        key = (u.kind_of_conn, u.opcode, u.tagged, u.last, u.pad, any(u.raw[2 + u.ulen:-4]),
               u.payload == 0, u.conn if u.opcode == 7 else None)
        cur = first.get(key)
        if cur is None or (len(cur.raw) > BIG and len(u.raw) <= BIG):
            first[key] = u
    sel.extend(first.values())
    for tagged in (False, True):
        for conn, c in info.items():
            if not c["crc"] or "gso" in c["kind"]:
                continue
            fpdus = [u for u in c["units"] if u.kind == "fpdu"]
            run = None
            for i, u in enumerate(fpdus):
                if u.tagged == tagged and not u.last and u.opcode != 1:
                    run = [u]
                    for v in fpdus[i + 1:]:
                        if v.dir == u.dir and v.tagged == tagged and v.opcode == u.opcode:
                            run.append(v)
                            if v.last:
                                break
                    break
            if run:
                err(f"multi-segment {'tagged' if tagged else 'untagged'} message: {conn} "
                    f"{run[0].dir} {run[0].desc}, {len(run)} FPDUs")
                sel.extend(run)
                break
    seen, out = set(), []
    for u in sel:
        if id(u) not in seen:
            seen.add(id(u))
            out.append(u)
    order = {conn: i for i, conn in enumerate(info)}
    out.sort(key=lambda u: (order[u.conn], u.dir, u.index))

    path = os.path.join(args.outdir, "siw-iwarp.txt")
    with open(path, "w") as f:
        f.write("# SPDX-License-Identifier: GPL-2.0\n"
                "# MPA units sent by Linux 6.12 siw, captured in oxrdma's test VM; see README.md.\n"
                "# NAME KIND CRC RDMAP_OPCODE ULPDU_LEN HEX\n")
        for u in out:
            op = "-" if u.kind != "fpdu" else str(u.opcode)
            f.write(f"{u.conn}:{u.dir}:{u.index}:{u.desc} {u.kind} {u.crc} {op} {u.ulen} "
                    f"{u.raw.hex()}\n")
    err(f"wrote {path}: {len(out)} units ({sum(u.kind == 'fpdu' for u in out)} FPDUs), "
        f"{os.path.getsize(path)} bytes")

    s = args.stream if "#" in args.stream else args.stream + "#1"
    if s not in info:
        sys.exit(f"no connection {s} for the stream file")
    c = info[s]
    path = os.path.join(args.outdir, "siw-iwarp-stream.txt")
    with open(path, "w") as f:
        f.write("# SPDX-License-Identifier: GPL-2.0\n"
                f"# The two TCP byte streams of one siw connection ({s}: {c['kind']}, "
                f"{sum(u.kind == 'fpdu' for u in c['units'])} FPDUs), reassembled from the\n"
                "# capture; see README.md. DIRECTION HEX (i2r: initiator to responder).\n")
        f.write(f"i2r {c['i2r'].hex()}\nr2i {c['r2i'].hex()}\n")
    err(f"wrote {path}: {s} {c['client']}->{c['server']}, i2r {len(c['i2r'])} bytes, "
        f"r2i {len(c['r2i'])} bytes")


if __name__ == "__main__":
    main()
