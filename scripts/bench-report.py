#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The make bench table: medians (and ranges) over the rounds of scripts/bench-guest.sh and
scripts/bench-2vm-guest.sh, the issue's goals checked against them, and a plot of write
bandwidth against message size.

    bench-report.py [--svg FILE] RAW...

Each RAW file holds "ROUND KEY VALUE" lines; round 0 holds one-off values (counters)."""
import argparse
import math
import statistics
import sys
from collections import defaultdict

SIZES = [64, 1024, 4096, 65536, 1048576]


def load(paths):
    """Figures by key, and how many times each key had none (perftest's inf latency, the
    bench's nan bandwidth)."""
    vals = defaultdict(list)
    missing = defaultdict(int)
    for p in paths:
        for line in open(p):
            f = line.split()
            if len(f) != 3:
                continue
            try:
                v = float(f[2])
            except ValueError:
                continue
            # perftest prints inf for a latency it could not measure, and the bench records
            # nan for a bandwidth it could not get (bench-guest.sh, bw): no figure, not a win.
            if math.isfinite(v):
                vals[f[1]].append(v)
            elif not f[1].endswith(".cpu_per_gb"):
                missing[f[1]] += 1
    return vals, missing


class Table:
    def __init__(self, vals, missing):
        self.vals = vals
        self.missing = missing

    def med(self, key):
        v = self.vals.get(key)
        return statistics.median(v) if v else None

    def cell(self, key, prec=1):
        v = self.vals.get(key)
        if not v:
            return "-"
        m = statistics.median(v)
        if len(v) == 1:
            return f"{m:.{prec}f}"
        return f"{m:.{prec}f} ({min(v):.{prec}f}-{max(v):.{prec}f})"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def size_name(s):
    return f"{s // 1048576} MiB" if s >= 1048576 else f"{s // 1024} KiB" if s >= 1024 else f"{s} B"


def report(t, out):
    n = max((len(v) for v in t.vals.values()), default=0)
    w = out.write
    w("== bench results (QEMU TCG; bench kernel; medians of %d rounds, range in parentheses)\n" % n)
    w("\n-- one VM, 2 vCPUs, two namespaces joined by veth (MTU 1500 unless said)\n")
    w("\nib_write_bw, MB/s              %-26s %-26s oxroce/rxe\n" % ("oxroce", "rxe"))
    for s in SIZES:
        k = f"ib_write_bw.{s}"
        if f"oxroce.{k}" in t.vals or f"rxe.{k}" in t.vals:
            w("  %-27s %-26s %-26s %s\n" % (size_name(s), t.cell(f"oxroce.{k}"), t.cell(f"rxe.{k}"),
                                            ratio(t.med(f"oxroce.{k}"), t.med(f"rxe.{k}"))))
    w("\n64 KiB messages, MB/s          %-26s %-26s oxroce/rxe\n" % ("oxroce", "rxe"))
    for label, k in [("ib_read_bw", "ib_read_bw.65536"), ("ib_send_bw", "ib_send_bw.65536"),
                     ("ib_write_bw bidirectional", "ib_write_bw.65536.bidir"),
                     ("ib_write_bw 4 QPs", "ib_write_bw.65536.q4"),
                     ("ib_write_bw 16 QPs", "ib_write_bw.65536.q16"),
                     ("ib_write_bw MTU 9000", "ib_write_bw.65536.mtu9000"),
                     ("ib_write_bw, RPS", "ib_write_bw.65536.rps")]:
        if f"oxroce.{k}" in t.vals:
            w("  %-27s %-26s %-26s %s\n" % (label, t.cell(f"oxroce.{k}"), t.cell(f"rxe.{k}"),
                                            ratio(t.med(f"oxroce.{k}"), t.med(f"rxe.{k}"))))
    w("  %-27s %s\n" % ("oxroce -> rxe ib_write_bw", t.cell("mixed.ib_write_bw.65536")))
    w("  %-27s %s\n" % ("TCP, 1 stream", t.cell("tcp.1")))
    w("  %-27s %s\n" % ("TCP, 2 streams", t.cell("tcp.2")))
    if "tcp.1.mtu9000" in t.vals:
        w("  %-27s %s\n" % ("TCP, 1 stream, MTU 9000", t.cell("tcp.1.mtu9000")))
    if "tcp.1.rps" in t.vals:
        w("  %-27s %s\n" % ("TCP, 1 stream, RPS", t.cell("tcp.1.rps")))
    w("\nCPU seconds per GB moved (64 KiB writes; both ends, every CPU)\n")
    w("  oxroce %s   rxe %s   TCP %s\n" % (t.cell("oxroce.ib_write_bw.65536.cpu_per_gb", 2),
                                          t.cell("rxe.ib_write_bw.65536.cpu_per_gb", 2),
                                          t.cell("tcp.1.cpu_per_gb", 2)))
    w("\nLatency of 2-byte messages, us %-26s %-26s oxroce/rxe\n" % ("oxroce", "rxe"))
    for label, k in [("ib_send_lat p50", "ib_send_lat.p50"), ("ib_send_lat p99", "ib_send_lat.p99"),
                     ("ib_write_lat p50", "ib_write_lat.p50"), ("ib_write_lat p99", "ib_write_lat.p99")]:
        w("  %-27s %-26s %-26s %s\n" % (label, t.cell(f"oxroce.{k}", 2), t.cell(f"rxe.{k}", 2),
                                        ratio(t.med(f"oxroce.{k}"), t.med(f"rxe.{k}"))))
    w("  %-27s %s\n" % ("oxroce -> rxe send_lat p50", t.cell("mixed.ib_send_lat.p50", 2)))
    w("  %-27s %s   p99 %s\n" % ("UDP round trip / 2, p50", t.cell("udp.p50", 2), t.cell("udp.p99", 2)))

    if any(k.startswith("nvme.") for k in t.vals):
        w("\n-- NVMe over Fabrics, one VM: nvme-rdma host and nvmet-rdma target on one device\n")
        w("   (through lo), a 256 MiB file on tmpfs, fio direct I/O, iodepth 16, one job\n")
        w("  %-27s %-26s %-26s oxroce/rxe\n" % ("", "oxroce", "rxe"))
        for label, k in [("128 KiB writes, MB/s", "write_128k"), ("128 KiB reads, MB/s", "read_128k"),
                         ("4 KiB random reads, kIOPS", "randread_4k")]:
            w("  %-27s %-26s %-26s %s\n" % (label, t.cell(f"nvme.oxroce.{k}", 2), t.cell(f"nvme.rxe.{k}", 2),
                                            ratio(t.med(f"nvme.oxroce.{k}"), t.med(f"nvme.rxe.{k}"))))
        w("  %-27s %-26s %-26s\n" % ("packets lo dropped (3 jobs)", t.cell("nvme.oxroce.lo_drops", 0),
                                      t.cell("nvme.rxe.lo_drops", 0)))

    if any(k.startswith("iw.") for k in t.vals):
        w("\n-- iWARP, one VM, perftest -R over rdma_cm, both systems on one veth pair in the root\n")
        w("   namespace (TCP between two local addresses, over lo); oxiwarp with its MPA CRCs (the\n")
        w("   default) and without (iwarp_crc=0, as siw runs by default); then oxiwarp between two\n")
        w("   namespaces (TCP over the veth pair)\n")
        w("  %-26s %-20s %-20s %-20s %-8s %-8s %s\n" % ("", "oxiwarp", "oxiwarp no CRC", "siw", "ox/siw",
                                                       "noCRC/siw", "oxiwarp netns"))
        for label, k, p in [("ib_write_bw 64 KiB, MB/s", "ib_write_bw.65536", 1),
                            ("ib_read_bw 64 KiB, MB/s", "ib_read_bw.65536", 1),
                            ("ib_send_bw 64 KiB, MB/s", "ib_send_bw.65536", 1),
                            ("ib_send_lat p50, us", "ib_send_lat.p50", 2),
                            ("ib_send_lat p99, us", "ib_send_lat.p99", 2)]:
            ox, nc, sw = (t.med(f"iw.{s}.{k}") for s in ("oxiwarp", "oxiwarp_nocrc", "siw"))
            w("  %-26s %-20s %-20s %-20s %-8s %-8s %s\n" % (
                label, t.cell(f"iw.oxiwarp.{k}", p), t.cell(f"iw.oxiwarp_nocrc.{k}", p),
                t.cell(f"iw.siw.{k}", p), ratio(ox, sw), ratio(nc, sw), t.cell(f"iw.oxiwarp_ns.{k}", p)))
        w("  %-26s lo %s, veth %s\n" % ("TCP, 1 stream, MB/s", t.cell("iw.tcp_lo"), t.cell("iw.tcp_veth")))
        siw = t.med("iw.siw.ib_write_bw.65536")
        lsiw = t.med("iw.siw.ib_send_lat.p50")
        for name, sysname in [("oxiwarp", "oxiwarp"), ("oxiwarp no CRC", "oxiwarp_nocrc")]:
            ox = t.med(f"iw.{sysname}.ib_write_bw.65536")
            lox = t.med(f"iw.{sysname}.ib_send_lat.p50")
            if ox and siw:
                w("  [%s] %s ib_write_bw -R 64 KiB >= 1.5 x siw (%.1f vs %.1f MB/s)\n"
                  % ("met" if ox >= 1.5 * siw else "not met", name, ox, 1.5 * siw))
            if lox and lsiw:
                w("  [%s] %s ib_send_lat -R no worse than siw (%.1f vs %.1f us)\n"
                  % ("met" if lox <= lsiw else "not met", name, lox, lsiw))

    if any(k.startswith("2vm.") for k in t.vals):
        w("\n-- two VMs, 1 vCPU each, joined by virtio-net (QEMU dgram link)\n")
        w("  %-27s %-26s %-26s oxroce/rxe\n" % ("", "oxroce", "rxe"))
        for label, k, p in [("ib_write_bw 64 KiB, MB/s", "ib_write_bw.65536", 1),
                            ("ib_send_lat p50, us", "ib_send_lat.p50", 2),
                            ("ib_send_lat p99, us", "ib_send_lat.p99", 2)]:
            w("  %-27s %-26s %-26s %s\n" % (label, t.cell(f"2vm.oxroce.{k}", p), t.cell(f"2vm.rxe.{k}", p),
                                            ratio(t.med(f"2vm.oxroce.{k}"), t.med(f"2vm.rxe.{k}"))))
        w("  %-27s %s\n" % ("TCP, 1 stream, MB/s", t.cell("2vm.tcp.1")))
        w("  %-27s %s   p99 %s\n" % ("UDP round trip / 2, p50", t.cell("2vm.udp.p50", 2),
                                      t.cell("2vm.udp.p99", 2)))

    w("\n-- goals (issue 10)\n")
    for topo, pre in [("one VM", ""), ("two VMs", "2vm.")]:
        ox, rxe = t.med(pre + "oxroce.ib_write_bw.65536"), t.med(pre + "rxe.ib_write_bw.65536")
        tcp = t.med(pre + "tcp.1")
        lox, lrxe = t.med(pre + "oxroce.ib_send_lat.p50"), t.med(pre + "rxe.ib_send_lat.p50")
        udp = t.med(pre + "udp.p50")
        if ox is None:
            continue

        def goal(text, ok):
            w("  [%s] %s: %s\n" % ("met" if ok else "not met", topo, text))
        goal(f"ib_write_bw 64 KiB >= 3 x rxe ({ox:.1f} vs {3 * rxe:.1f} MB/s)" if rxe else "vs rxe: -",
             bool(rxe) and ox >= 3 * rxe)
        goal(f"ib_write_bw 64 KiB >= TCP 1 stream ({ox:.1f} vs {tcp:.1f} MB/s)" if tcp else "vs TCP: -",
             bool(tcp) and ox >= tcp)
        if lox and lrxe:
            goal(f"ib_send_lat <= rxe / 2 ({lox:.1f} vs {lrxe / 2:.1f} us)", lox <= lrxe / 2)
        if lox and udp:
            goal(f"ib_send_lat <= 2 x UDP round trip / 2 ({lox:.1f} vs {2 * udp:.1f} us)", lox <= 2 * udp)
        if not pre:
            cox, crxe, ctcp = (t.med("oxroce.ib_write_bw.65536.cpu_per_gb"),
                               t.med("rxe.ib_write_bw.65536.cpu_per_gb"), t.med("tcp.1.cpu_per_gb"))
            if cox and crxe and ctcp:
                goal(f"CPU per GB below rxe's and TCP's ({cox:.2f} vs {crxe:.2f}, {ctcp:.2f} s)",
                     cox < crxe and cox < ctcp)

    counters = {k[len("oxroce.counter."):]: v[-1] for k, v in t.vals.items()
                if k.startswith("oxroce.counter.")}
    if counters:
        w("\n-- oxroce counters over the one-VM run (rdma statistic)\n")
        devs = sorted({k.split(".")[0] for k in counters})
        for d in devs:
            items = [(k.split(".", 1)[1], int(v)) for k, v in counters.items() if k.startswith(d + ".")]
            w("  %s: %s\n" % (d, " ".join(f"{k} {v}" for k, v in items)))
    if t.missing:
        w("\n-- no figure (perftest's inf us, or 0.00 MB/s with no usable iteration count),"
          " times\n")
        w("  %s\n" % ", ".join(f"{k} x{n}" for k, n in sorted(t.missing.items())))


def svg(t, path):
    """Write bandwidth (log2 of the message size on x) for oxroce and rxe, TCP as a marker."""
    width, height, ml, mr, mt, mb = 640, 400, 60, 20, 30, 50
    pts = {}
    for sys_, color in [("oxroce", "#c0392b"), ("rxe", "#2471a3")]:
        pts[sys_] = (color, [(s, t.med(f"{sys_}.ib_write_bw.{s}")) for s in SIZES
                             if t.med(f"{sys_}.ib_write_bw.{s}") is not None])
    tcp = t.med("tcp.1")
    ymax = max([v for _, p in pts.values() for _, v in p] + ([tcp] if tcp else []) + [1]) * 1.1
    xs = [math.log2(s) for s in SIZES]
    x0, x1 = min(xs), max(xs)

    def X(s):
        return ml + (math.log2(s) - x0) / (x1 - x0) * (width - ml - mr)

    def Y(v):
        return height - mb - v / ymax * (height - mt - mb)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle">ib_write_bw, one VM, MTU 1500 '
           f'(MB/s, median)</text>',
           f'<line x1="{ml}" y1="{height - mb}" x2="{width - mr}" y2="{height - mb}" stroke="black"/>',
           f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{height - mb}" stroke="black"/>']
    for s in SIZES:
        out.append(f'<text x="{X(s):.0f}" y="{height - mb + 16}" text-anchor="middle">{size_name(s)}</text>')
    for i in range(6):
        v = ymax * i / 5
        out.append(f'<text x="{ml - 6}" y="{Y(v) + 4:.0f}" text-anchor="end">{v:.0f}</text>')
        out.append(f'<line x1="{ml}" y1="{Y(v):.0f}" x2="{width - mr}" y2="{Y(v):.0f}" stroke="#ddd"/>')
    for i, (name, (color, p)) in enumerate(pts.items()):
        if p:
            d = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in p)
            out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
            for s, v in p:
                out.append(f'<circle cx="{X(s):.1f}" cy="{Y(v):.1f}" r="3" fill="{color}"/>')
        out.append(f'<text x="{ml + 10}" y="{mt + 16 + 16 * i}" fill="{color}">{name}</text>')
    if tcp:
        out.append(f'<circle cx="{X(65536):.1f}" cy="{Y(tcp):.1f}" r="5" fill="#27ae60"/>')
        out.append(f'<text x="{ml + 10}" y="{mt + 48}" fill="#27ae60">TCP (iperf3, 64 KiB writes)</text>')
    out.append('</svg>')
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--svg")
    ap.add_argument("raw", nargs="+")
    a = ap.parse_args()
    t = Table(*load(a.raw))
    report(t, sys.stdout)
    if a.svg:
        svg(t, a.svg)


if __name__ == "__main__":
    main()
