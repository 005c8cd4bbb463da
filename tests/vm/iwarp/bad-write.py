#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""An RDMA WRITE to an STag the target never registered, over rdma_cm (pyverbs).

    bad-write.py server ADDR PORT   accept one connection, post a receive, wait for its completion
    bad-write.py client ADDR PORT   connect, post a receive, write to a made-up STag, wait for the
                                    receive's completion

The target refuses the write with a TERMINATE (RDMAP, remote protection, invalid STag) and both
QPs go to the error state: each side's posted receive completes with a flush error. Each side
prints "recv status N" (N the ibv_wc_status) and exits 0 once it has that completion.
"""
import sys

import pyverbs.cm_enums as ce
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.qp import QPCap, QPInitAttr

role, addr, port = sys.argv[1], sys.argv[2], sys.argv[3]
attr = QPInitAttr(cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1))
if role == 'server':
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
    listener = CMID(creator=ai, qp_init_attr=attr)
    listener.listen()
    cid = listener.get_request()
    mr = cid.reg_msgs(64)
    cid.post_recv(mr)
    cid.accept()
else:
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=attr)
    mr = cid.reg_msgs(64)
    cid.post_recv(mr)
    cid.connect()
    cid.post_write(mr, 64, 0x10000, 0x7e7e7e00, flags=2)  # IBV_SEND_SIGNALED
wc = None
while wc is None:
    wc = cid.get_recv_comp()
print(f'recv status {wc.status}', flush=True)
