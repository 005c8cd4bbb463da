#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A scripted iWARP peer over a plain TCP socket: RFC 7306 messages, good and hostile.

    mpa-peer.py ADDR PORT CASE

Connects to an rdma_cm server on an oxiwarp device (tests/vm/iwarp/ext.c's server, which
answers with an MPA reply, then SENDs the address and STag of its 8-byte aligned target,
holding 1000), without MPA CRCs or markers (the server runs with iwarp_crc off), and plays
CASE:

    good         offer RFC 7306; a fetch-and-add of 5 to the target: the atomic response
                 must carry the request's identifier and the original value 1000; then a
                 SEND "hello", which the server checks
    no-offer     no offer: the reply must not take RFC 7306, and immediate data is then an
                 unexpected opcode (TERMINATE RDMAP, remote operation, 0x06)
    stray-resp   an atomic response nobody asked for: unexpected opcode
    bad-stag     a fetch-and-add to an STag the server never registered: invalid STag
                 (TERMINATE RDMAP, remote protection, 0x00)
    bad-aopcode  an atomic request with the reserved AOpCode 1: unexpected opcode
    misaligned   a fetch-and-add at the target's address + 4: catastrophic error localised
                 to the stream (TERMINATE RDMAP, remote operation, 0x07), as RFC 7306 asks

Prints what it saw and "ok" on the expected outcome (exit 0), else what was wrong (exit 1).
"""
import socket
import struct
import sys

addr, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def die(msg):
    print(f'mpa-peer {case}: {msg}', flush=True)
    sys.exit(1)


def recv_exact(s, n):
    b = b''
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            die(f'connection closed after {len(b)} of {n} bytes')
        b += c
    return b


def fpdu(ulpdu):
    """An FPDU without markers: ULPDU length, ULPDU, pad to 4 bytes, and the CRC field, 0
    when CRCs are not in use (RFC 5044)."""
    pad = (-(2 + len(ulpdu))) % 4
    return struct.pack('>H', len(ulpdu)) + ulpdu + b'\0' * (pad + 4)


def read_fpdu(s):
    """The next FPDU's ULPDU."""
    n = struct.unpack('>H', recv_exact(s, 2))[0]
    u = recv_exact(s, n)
    recv_exact(s, (-(2 + n)) % 4 + 4)
    return u


def untagged(opcode, qn, msn, rest=b'', mo=0):
    """An untagged DDP segment (last flag, DDP and RDMAP version 1) with RDMAP header rest."""
    return bytes([0x41, 0x40 | opcode]) + struct.pack('>IIII', 0, qn, msn, mo) + rest


def atomic_request(msn, req_id, stag, to, add, aopcode=0):
    rest = struct.pack('>IIIQQQQQ', aopcode, req_id, stag, to, add, 0, 0, 2**64 - 1)
    return untagged(10, 1, msn, rest)


def expect_terminate(s, etype, code):
    """Reads FPDUs until a TERMINATE; checks its RDMAP layer, error type and code."""
    while True:
        try:
            u = read_fpdu(s)
        except (ConnectionResetError, BrokenPipeError):
            die('connection reset before a TERMINATE')
        if u[1] & 0x0f == 7:
            w = struct.unpack('>I', u[18:22])[0]
            got = (w >> 28, (w >> 24) & 0x0f, (w >> 16) & 0xff)
            print(f'mpa-peer {case}: TERMINATE layer {got[0]} type {got[1]} code {got[2]:#04x}',
                  flush=True)
            if got != (0, etype, code):
                die(f'expected layer 0 type {etype} code {code:#04x}')
            return


s = socket.create_connection((addr, port), timeout=20)
offer = case != 'no-offer'
# MPA revision 1 request: no CRC, no markers; 0x04 offers RFC 7306 (oxiwarp's reserved bit).
s.sendall(b'MPA ID Req Frame' + bytes([0x04 if offer else 0, 1]) + struct.pack('>H', 0))
rep = recv_exact(s, 20)
if rep[:16] != b'MPA ID Rep Frame' or rep[16] & 0x20:
    die(f'not an accepting MPA reply: {rep.hex()}')
recv_exact(s, struct.unpack('>H', rep[18:20])[0])
if rep[16] & 0x40:
    die('the server asked for CRCs (iwarp_crc must be off for this peer)')
taken = bool(rep[16] & 0x02)
print(f'mpa-peer {case}: reply flags {rep[16]:#04x}, RFC 7306 taken: {taken}', flush=True)
if taken != offer:
    die('RFC 7306 taken without an offer, or not taken with one')
# The server's first SEND: its target's address and STag.
u = read_fpdu(s)
if u[1] & 0x0f != 3 or len(u) < 18 + 12:
    die(f'expected a SEND with the target, got {u.hex()}')
target, stag = struct.unpack('<QI', u[18:30])

if case == 'good':
    s.sendall(fpdu(atomic_request(1, 0x77, stag, target, 5)))
    r = read_fpdu(s)
    if len(r) != 30 or r[1] & 0x0f != 11:
        die(f'expected an atomic response, got {r.hex()}')
    qn, msn = struct.unpack('>II', r[6:14])
    req_id, orig = struct.unpack('>IQ', r[18:30])
    print(f'mpa-peer {case}: atomic response queue {qn} msn {msn} id {req_id:#x} '
          f'original {orig}', flush=True)
    if (qn, msn, req_id, orig) != (3, 1, 0x77, 1000):
        die('expected queue 3, msn 1, id 0x77, original 1000')
    s.sendall(fpdu(untagged(3, 0, 1, b'hello\0')))
    # The server, satisfied, waits for this side to go.
elif case == 'no-offer':
    s.sendall(fpdu(untagged(8, 0, 1, struct.pack('>Q', 1))))
    expect_terminate(s, 2, 0x06)
elif case == 'stray-resp':
    s.sendall(fpdu(untagged(11, 3, 1, struct.pack('>IQ', 1, 2))))
    expect_terminate(s, 2, 0x06)
elif case == 'bad-stag':
    s.sendall(fpdu(atomic_request(1, 1, stag ^ 0x5a5a5a00, target, 5)))
    expect_terminate(s, 1, 0x00)
elif case == 'bad-aopcode':
    s.sendall(fpdu(atomic_request(1, 1, stag, target, 5, aopcode=1)))
    expect_terminate(s, 2, 0x06)
elif case == 'misaligned':
    s.sendall(fpdu(atomic_request(1, 1, stag, target + 4, 5)))
    expect_terminate(s, 2, 0x07)
else:
    die('unknown case')
s.close()
print(f'mpa-peer {case}: ok', flush=True)
