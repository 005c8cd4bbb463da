#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""SEND buffers reused the moment their completion arrives, over rdma_cm (pyverbs).

    reuse-after-send.py server ADDR PORT COUNT SIZE   post COUNT receives of SIZE bytes, accept,
                                                      check each message received
    reuse-after-send.py client ADDR PORT COUNT SIZE   connect, then COUNT times: fill the one
                                                      send buffer with message i's pattern,
                                                      SEND it, wait for its completion, and
                                                      overwrite the buffer at once

The verbs allow a buffer to be reused once its work request completed. A provider that sends
payload without copying it (the socket sends from the process's pages) and completes a SEND
before the peer acknowledged it would let TCP send the overwritten bytes again if a segment
is lost: under netem loss the receiver would see them. Each side prints "ok COUNT" on success
and exits 0; a wrong byte or an error completion prints what and exits 1.
"""
import sys

import pyverbs.cm_enums as ce
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.qp import QPCap, QPInitAttr

SIGNALED = 2  # IBV_SEND_SIGNALED

role, addr, port = sys.argv[1], sys.argv[2], sys.argv[3]
count, size = int(sys.argv[4]), int(sys.argv[5])
base = bytes(range(256)) * (size // 256 + 2)


def pattern(i):
    k = (i * 37) % 256
    return base[k:k + size]


def completion(get):
    wc = None
    while wc is None:
        wc = get()
    if wc.status != 0:
        print(f'{role}: completion status {wc.status}', flush=True)
        sys.exit(1)
    return wc


attr = QPInitAttr(cap=QPCap(max_send_wr=4, max_recv_wr=count, max_send_sge=1, max_recv_sge=1))
if role == 'server':
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
    listener = CMID(creator=ai, qp_init_attr=attr)
    listener.listen()
    cid = listener.get_request()
    mrs = [cid.reg_msgs(size) for _ in range(count)]
    for mr in mrs:
        cid.post_recv(mr)
    cid.accept()
    for i, mr in enumerate(mrs):
        wc = completion(cid.get_recv_comp)
        got = mr.read(size, 0)
        if wc.byte_len != size or got != pattern(i):
            bad = next((j for j in range(size) if got[j] != pattern(i)[j]), None)
            print(f'server: message {i}: {wc.byte_len} bytes, first wrong byte at {bad}',
                  flush=True)
            sys.exit(1)
else:
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=attr)
    mr = cid.reg_msgs(size)
    cid.connect()
    junk = bytes([0xEE]) * size
    for i in range(count):
        mr.write(pattern(i), size, 0)
        cid.post_send(mr, SIGNALED, size)
        completion(cid.get_send_comp)
        mr.write(junk, size, 0)
print(f'{role}: ok {count}', flush=True)
