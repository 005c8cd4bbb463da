#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Capture real iWARP (MPA/DDP/RDMAP over TCP) traffic of the reference soft-iWARP driver (siw) for
# oxrdma-wire's fixtures.
#
#	tests/vm/capture/capture-siw.sh --build-siw DIR [VARIANT]   (on the host, once: see below)
#	scripts/vm-run --no-module --timeout 600 --out DIR tests/vm/capture/capture-siw.sh
#
# Not a test (nothing is judged): a tool, run by hand in the test VM.
#
# siw on Linux 6.12 has NO module parameters: mpa_crc_required, mpa_crc_strict, peer_to_peer,
# try_gso and siw_tcp_nagle are `const bool` (all false) and mpa_version a plain global (2) in
# siw_main.c. The stock module always sends MPA revision 2 requests without the CRC flag, and
# uses CRC only when a peer asks for it. So `--build-siw DIR` (run on the host, before the VM)
# builds DIR/siw-params/siw.ko: the test kernel's own siw source with those six variables made
# writable module parameters (/sys/module/siw/parameters/*, mode 0644) and nothing else
# changed, out of tree against the build directory of the kernel VARIANT (test, the default,
# or debug; ~10 s). scripts/check.sh builds one into the kernel's cache directory, which
# scripts/vm-run hands to the guest as $OX_OUT/modroot/siw-params/siw.ko (iwarp-p2p-siw.sh). In the VM this
# script loads that module (insmod) if it exists, else the stock siw, and then skips every
# step that needs a parameter. Both siw devices live in the same kernel, so a parameter
# applies to both ends of a connection; each is set through sysfs just before its step and is
# read by siw when the connection is set up.
#
# Network: root_ns_pair (tests/vm/lib.sh): siw device siwr on oxr0 (root namespace,
# 10.79.0.1, fd79::1) and siwn on oxn0 (namespace oxn, 10.79.0.2, fd79::2), a veth pair with
# MTU 1500. Servers run in oxn, clients in the root namespace (one device per namespace, so a
# wildcard rdma_cm listen works). tcpdump records `tcp` on oxr0 with a full snaplen (siw.pcap);
# TSO/GSO/GRO are switched off on both veth ends so that the capture shows wire-sized segments.
# Each step below is one rdma_cm connection (perftest -R opens more than one, see the log).
#	crc0-rping         rping -C 3 -v, stock parameters (MPA rev 2, no CRC)
#	crc1-rping         the same with mpa_crc_required=1 (the stream fixture)
#	crc{0,1}-rping-v6  the same over IPv6
#	crc1-mpa1-send-bw-s33  mpa_version=1, CRC on: ib_send_bw -R -n 5 -s 33 (rping's server
#	                   fails to post its RDMA READ on an MPA v1 connection)
#	crc1-p2p-rping     peer_to_peer=1, CRC on (RFC 6581 ready-to-receive message)
#	crc1-{send,write,read}-bw-s{33,3000,5000}
#	                   ib_{send,write,read}_bw -R -n 5 -s SIZE, CRC on (5000 > MULPDU)
#	crc0-write-bw-s33  ib_write_bw -R -n 5 -s 33, CRC off
#	crc1-gso-write-bw-s5000  the same with try_gso=1 (siw's own MPA flag 0x08, FPDUs > MSS)
#	crc1-ops           pyverbs over rdma_cm (written out below): send with solicited event,
#	                   zero-length send, send with invalidate (with and without SE), RDMA
#	                   write and read, last an RDMA write to a wrong R_Key (the responder
#	                   answers with a TERMINATE message)
#	crc1-ops-badread   the same script: a send, then an RDMA read from a wrong R_Key
#	                   (TERMINATE)
# Output in $OX_OUT: siw.pcap, steps.txt (one line per step: START END NAME, seconds since the
# epoch as the guest's clock has them, the same clock as tcpdump's timestamps), params.txt, and
# one log per step. tests/vm/capture/extract-iwarp-fixtures.py turns siw.pcap and steps.txt into
# rust/wire/fixtures/siw-iwarp.txt and siw-iwarp-stream.txt.
set -euo pipefail

if [ "${1:-}" = --build-siw ]; then
	[ $# = 2 ] || [ $# = 3 ] || { echo "usage: $0 --build-siw DIR [VARIANT]" >&2; exit 2; }
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
	# shellcheck source=scripts/lib/env.sh
	. "$root/scripts/lib/env.sh"
	kdir=$(kernel_dir "${3:-test}")
	[ -f "$kdir/.oxrdma-built" ] || { echo "no ${3:-test} kernel; run: make kernel" >&2; exit 2; }
	dst=$2/siw-params
	rm -rf "$dst"
	mkdir -p "$dst"
	dst=$(cd "$dst" && pwd)
	cp "$kdir/src/drivers/infiniband/sw/siw/"*.[ch] "$dst/"
	vars='try_gso|mpa_crc_required|mpa_crc_strict|siw_tcp_nagle|peer_to_peer'
	sed -i -E "s/^extern const bool ($vars);\$/extern bool \\1;/" "$dst/siw.h"
	sed -i -E "s/^const bool ($vars);\$/bool \\1;\\nmodule_param(\\1, bool, 0644);/" "$dst/siw_main.c"
	sed -i -E 's/^u_char mpa_version = MPA_REVISION_2;$/&\nmodule_param(mpa_version, byte, 0644);/' \
		"$dst/siw_main.c"
	[ "$(grep -c '^module_param(' "$dst/siw_main.c")" = 6 ] ||
		{ echo "siw_main.c did not patch as expected" >&2; exit 1; }
	{
		echo 'obj-m := siw.o'
		sed -n '/^siw-y/,$p' "$kdir/src/drivers/infiniband/sw/siw/Makefile"
	} >"$dst/Kbuild"
	make -s -C "$kdir/src" O="$kdir/build" M="$dst" "${KMAKE_VARS[@]}" modules
	/sbin/modinfo -F parm "$dst/siw.ko"
	echo "built $dst/siw.ko"
	exit 0
fi

# shellcheck source=tests/vm/lib.sh
. "$OX_ROOT/tests/vm/lib.sh"

out=${OX_OUT:?no OX_OUT: run this through scripts/vm-run}
OX_CMD_TIMEOUT=60

[ -d /sys/module/ib_uverbs ] || expect_ok modprobe ib_uverbs
params=0
if [ -f "$out/siw-params/siw.ko" ]; then
	expect_ok insmod "$out/siw-params/siw.ko"
	params=1
	info "loaded $out/siw-params/siw.ko: parameters $(ls /sys/module/siw/parameters | tr '\n' ' ')"
else
	expect_ok modprobe siw
	info "no $out/siw-params/siw.ko (see --build-siw): stock siw, only the steps without parameters"
fi

root_ns_pair
ethtool -K "$RN_ROOT_DEV" tso off gso off gro off >/dev/null 2>&1 ||
	info "ethtool -K $RN_ROOT_DEV failed: the capture may hold segments larger than the MTU"
ip netns exec "$RN_NS" ethtool -K "$RN_DEV" tso off gso off gro off >/dev/null 2>&1 ||
	info "ethtool -K $RN_DEV failed: the capture may hold segments larger than the MTU"
siw_add siwr "$RN_ROOT_DEV"
siw_add -n "$RN_NS" siwn "$RN_DEV"

tcpdump -i "$RN_ROOT_DEV" -s 0 -U -Z root -w "$out/siw.pcap" tcp >"$out/tcpdump.log" 2>&1 &
dump_pid=$!
# shellcheck disable=SC2317  # called through wait_until
_listening() { grep -q 'listening on' "$1"; }
wait_until 20 _listening "$out/tcpdump.log" || fail "tcpdump did not start: $(<"$out/tcpdump.log")"

# set_params CRC MPA_VERSION P2P [GSO]: the module parameters for the next step.
set_params() {
	local p=/sys/module/siw/parameters
	echo "$1" >"$p/mpa_crc_required"
	echo "$2" >"$p/mpa_version"
	echo "$3" >"$p/peer_to_peer"
	echo "${4:-0}" >"$p/try_gso"
}

n=0
: >"$out/steps.txt"
: >"$out/params.txt"
# step NAME NEEDS_PARAMS CRC MPA_VERSION P2P GSO CMD...: run CMD (a function), log to
# $out/NN-NAME.log; a failure is logged, not fatal.
step() {
	local name=$1 needs=$2 crc=$3 ver=$4 p2p=$5 gso=$6 log t0 t1
	shift 6
	n=$((n + 1))
	if [ "$needs" = 1 ] && [ "$params" = 0 ]; then
		info "skipped (needs siw-params): $name"
		return 0
	fi
	[ "$params" = 0 ] || set_params "$crc" "$ver" "$p2p" "$gso"
	[ "$params" = 0 ] ||
		echo "$name $(cd /sys/module/siw/parameters && grep -H . -- * | tr '\n' ' ')" >>"$out/params.txt"
	log=$(printf '%s/%02d-%s.log' "$out" "$n" "$name")
	sleep 0.3
	t0=$EPOCHREALTIME
	if ("$@") >"$log" 2>&1; then
		info "ok: $name"
	else
		info "FAILED (see ${log##*/}): $name"
	fi
	sleep 0.5
	t1=$EPOCHREALTIME
	echo "$t0 $t1 $name" >>"$out/steps.txt"
}

rping_pair() { # rping_pair ADDR COUNT
	run_pair --server-ns "$RN_NS" --port 7174 60 \
		rping -s -a "$1" -C "$2" -v -V -- \
		rping -c -a "$1" -C "$2" -v -V
	echo "--- server"; echo "$PAIR_SERVER_OUT"; echo "--- client"; echo "$PAIR_CLIENT_OUT"
}
bw_once() { # bw_once TOOL SIZE
	run_pair --server-ns "$RN_NS" --port 18515 90 \
		"$1" -d siwn -R -n 5 -s "$2" -- \
		"$1" -d siwr -R -n 5 -s "$2" "$RN_IP4"
	echo "--- server"; echo "$PAIR_SERVER_OUT"; echo "--- client"; echo "$PAIR_CLIENT_OUT"
}
# One retry: perftest's clock check ("Correlation coefficient r^2 < 0.9") fails now and then
# under TCG. The failed attempt's connections stay in the capture (named NAME#1, NAME#2...).
bw_pair() { # bw_pair TOOL SIZE
	(bw_once "$@") || { echo "--- failed: once more"; bw_once "$@"; }
}

step crc0-rping 0 0 2 0 0 rping_pair "$RN_IP4" 3
step crc1-rping 1 1 2 0 0 rping_pair "$RN_IP4" 3
step crc0-rping-v6 0 0 2 0 0 rping_pair "$RN_IP6" 3
step crc1-rping-v6 1 1 2 0 0 rping_pair "$RN_IP6" 3
step crc1-mpa1-send-bw-s33 1 1 1 0 0 bw_pair ib_send_bw 33
step crc1-p2p-rping 1 1 2 1 0 rping_pair "$RN_IP4" 3
for tool in send write read; do
	for s in 33 3000 5000; do
		step "crc1-$tool-bw-s$s" 1 1 2 0 0 bw_pair "ib_${tool}_bw" "$s"
	done
done
step crc0-write-bw-s33 0 0 2 0 0 bw_pair ib_write_bw 33
step crc1-gso-write-bw-s5000 1 1 2 0 1 bw_pair ib_write_bw 5000

# pyverbs over rdma_cm: the operations perftest and rping do not use. One script, two roles.
cat >"$OX_TMP/ops.py" <<'EOF'
import os, sys, time
import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import CMID, AddrInfo, ConnParam
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

role, addr, port, xfile, bad = sys.argv[1:6]
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


def log(msg):
    print(f"{role}: {msg}", flush=True)


def poll(cq, what, n=1, limit=5.0):
    got, end = [], time.monotonic() + limit
    while len(got) < n and time.monotonic() < end:
        k, wcs = cq.poll(n - len(got))
        got.extend(wcs[:k])
        if not k:
            time.sleep(0.002)
    for wc in got:
        log(f"{what}: wc status {wc.status} opcode {wc.opcode} len {wc.byte_len} "
            f"flags {wc.wc_flags:#x} invalidated {wc.imm_data:#x}")
    if len(got) < n:
        log(f"{what}: {n - len(got)} completion(s) missing")
    return got


if role == "server":
    lid = CMID(creator=AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                                flags=ce.RAI_PASSIVE))
    lid.listen()
    cid = lid.get_request()
else:
    cid = CMID(creator=AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP))
ctx = cid.context
pd = PD(ctx)
cq = CQ(ctx, 64)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1,
                                 max_recv_sge=1)))
attr, mask = cid.init_qp_attr(e.IBV_QPS_INIT)
qp.modify(attr, mask)
mrs = [MR(pd, 8192, ACCESS) for _ in range(3)]
for i, mr in enumerate(mrs):
    mr.write(bytes((j * 13 + i + 1) & 0xFF for j in range(8192)), 8192)


def sge(mr, off, length):
    return [SGE(mr.buf + off, length, mr.lkey)]


if role == "server":
    for i in range(8):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=sge(mrs[0], 4096, 512)))
    cid.accept(ConnParam(resources=4, depth=4, qp_num=qp.qp_num))
    log("connected")
    with open(xfile + ".tmp", "w") as f:
        f.write(" ".join(f"{mr.rkey} {mr.buf}" for mr in mrs))
    os.rename(xfile + ".tmp", xfile)
    poll(cq, "receives", 4 if bad == "write" else 1, 20)
    time.sleep(4)  # the client's write, read and bad write
    log("done")
else:
    cid.connect(ConnParam(resources=4, depth=4, qp_num=qp.qp_num))
    log("connected")
    end = time.monotonic() + 20
    while not os.path.exists(xfile) and time.monotonic() < end:
        time.sleep(0.05)
    v = [int(x) for x in open(xfile).read().split()]
    (rk0, ra0), (rk1, _), (rk2, _) = zip(v[0::2], v[1::2])

    def send(what, opcode, length, flags=0, inv=None, rkey=None, raddr=None):
        wr = SendWR(opcode=opcode, num_sge=1, sg=sge(mrs[0], 0, length),
                    send_flags=e.IBV_SEND_SIGNALED | flags)
        if inv is not None:
            wr.imm_data = inv  # ibv_send_wr.invalidate_rkey (a union with imm_data)
            wr.set_wr_rdma(inv, 0)  # libsiw takes the STag to invalidate from wr.rdma.rkey
        if rkey is not None:
            wr.set_wr_rdma(rkey, raddr)
        log(f"post {what}")
        try:
            qp.post_send(wr)
        except Exception as ex:
            log(f"{what}: post failed: {ex!r}")
            return
        poll(cq, what)

    send("SEND 17 with solicited event", e.IBV_WR_SEND, 17, e.IBV_SEND_SOLICITED)
    if bad == "read":
        send("RDMA_READ 7 from a wrong R_Key", e.IBV_WR_RDMA_READ, 7,
             rkey=(rk0 + 0x10000) & 0xFFFFFFFF, raddr=ra0 + 200)
        time.sleep(1)
        log("done")
        sys.exit(0)
    send("SEND 0", e.IBV_WR_SEND, 0)
    send("SEND_WITH_INV 40", e.IBV_WR_SEND_WITH_INV, 40, inv=rk1)
    send("SEND_WITH_INV 6 with solicited event", e.IBV_WR_SEND_WITH_INV, 6,
         e.IBV_SEND_SOLICITED, inv=rk2)
    send("RDMA_WRITE 10", e.IBV_WR_RDMA_WRITE, 10, rkey=rk0, raddr=ra0 + 100)
    send("RDMA_READ 7", e.IBV_WR_RDMA_READ, 7, rkey=rk0, raddr=ra0 + 200)
    send("RDMA_WRITE 10 to a wrong R_Key", e.IBV_WR_RDMA_WRITE, 10,
         rkey=(rk0 + 0x10000) & 0xFFFFFFFF, raddr=ra0 + 100)
    time.sleep(1)
    log("done")
EOF
ops_pair() { # ops_pair write|read: what the last, bad, operation is
	rm -f "$OX_TMP/ops.x"
	run_pair --server-ns "$RN_NS" --port 7999 60 \
		/usr/bin/python3 "$OX_TMP/ops.py" server "$RN_IP4" 7999 "$OX_TMP/ops.x" "$1" -- \
		/usr/bin/python3 "$OX_TMP/ops.py" client "$RN_IP4" 7999 "$OX_TMP/ops.x" "$1"
	echo "--- server"; echo "$PAIR_SERVER_OUT"; echo "--- client"; echo "$PAIR_CLIENT_OUT"
}
step crc1-ops 1 1 2 0 0 ops_pair write
step crc1-ops-badread 1 1 2 0 0 ops_pair read

sleep 1
kill -INT "$dump_pid" 2>/dev/null || true
wait "$dump_pid" 2>/dev/null || true
cat "$out/tcpdump.log"
cat "$out/steps.txt"
info "capture: $(stat -c %s "$out/siw.pcap") bytes in siw.pcap"
pass
