#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What the guest's kernel executed per message between two snapshots of the insn-count plugin.

    insn-count-report.py DIR [SYSTEM...] [--top N]

For each SYSTEM (default: oxiwarp siw), reads DIR/counts-SYSTEM-a.txt and -b.txt and
DIR/kallsyms-SYSTEM.txt (scripts/insn-count-guest.sh writes them) and prints, per message
(per TCP segment received: the runs of tcp_v4_rcv; a 2-byte ib_send_lat sends one segment per
message and nothing else), the instructions, memory accesses, translation blocks, atomic
instructions and indirect exits (blocks TCG cannot chain to the next) executed in the kernel,
by module; then the functions of the first two systems side by side, largest
difference first, with how often each was entered, and which functions called memcpy and
memset (direct calls ending a block).
"""
import bisect
import collections
import re
import sys


def demangle(name):
    """A readable tail of a Rust v0 symbol (the last three identifiers); others unchanged."""
    if not name.startswith('_R'):
        return name
    out, i = [], 0
    while i < len(name):
        m = re.match(r'\d+', name[i:])
        if not m:
            i += 1
            continue
        j = i + len(m.group(0))
        if name[j:j + 1] == '_':
            j += 1
        ident = name[j:j + int(m.group(0))]
        if ident and re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', ident):
            out.append(ident)
            i = j + len(ident)
        else:
            i = j
    out = [o for o in out if o not in ('oxrdma_main', 'kernel', 'core')]
    return '::'.join(out[-3:]) or name


class Symbols:
    def __init__(self, path):
        syms = []
        for line in open(path):
            f = line.split()
            if len(f) >= 3 and f[1] in 'tTwW':
                mod = f[3] if len(f) > 3 else '[kernel]'
                syms.append((int(f[0], 16), demangle(f[2]), mod))
        syms.sort()
        self.syms = syms
        self.addrs = [s[0] for s in syms]

    def at(self, va):
        """(start, name, module) of the function holding va."""
        i = bisect.bisect_right(self.addrs, va) - 1
        return self.syms[i] if i >= 0 else (0, '?', '?')


def counts(path):
    c = {}
    for line in open(path):
        va, n, ex, mem, tgt, atomics, indirect = line.split()
        k = (int(va, 16), int(n))
        e = c.setdefault(k, [0, 0, int(tgt, 16), int(atomics), int(indirect)])
        e[0] += int(ex)
        e[1] += int(mem)
    return c


def measure(d, what):
    sy = Symbols(f'{d}/kallsyms-{what}.txt')
    a, b = counts(f'{d}/counts-{what}-a.txt'), counts(f'{d}/counts-{what}-b.txt')
    # instructions, accesses, blocks, atomics, indirect exits, entries
    fn = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    calls = collections.defaultdict(collections.Counter)
    msgs = 0
    for (va, n), (ex, mem, tgt, atomics, indirect) in b.items():
        ex0, mem0 = a.get((va, n), (0, 0))[:2]
        ex, mem = ex - ex0, mem - mem0
        start, name, mod = sy.at(va)
        key = (name, mod)
        f = fn[key]
        f[0] += ex * n
        # The block that returns to user space is charged with far more accesses than its
        # instructions make (QEMU's, after it, most likely): left out.
        if name != 'syscall_return_via_sysret':
            f[1] += mem
        f[2] += ex
        f[3] += ex * atomics
        f[4] += ex * indirect
        if va == start:
            f[5] += ex
            if name == 'tcp_v4_rcv':
                msgs += ex
        if tgt:
            calls[sy.at(tgt)[1]][key] += ex
    if msgs == 0:
        sys.exit(f'{what}: no TCP segment received between the snapshots')
    return msgs, fn, calls


def main():
    args = sys.argv[1:]
    top = 40
    if '--top' in args:
        i = args.index('--top')
        top = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    d, systems = args[0], args[1:] or ['oxiwarp', 'siw']
    res = {}
    for w in systems:
        msgs, fn, calls = measure(d, w)
        res[w] = (msgs, fn)
        per = lambda v: v / msgs  # noqa: E731
        tot = [sum(f[i] for f in fn.values()) for i in range(5)]
        print(f'{w}: {msgs} messages; per message {per(tot[0]):.0f} instructions, '
              f'{per(tot[1]):.0f} memory accesses, {per(tot[2]):.0f} blocks, '
              f'{per(tot[3]):.0f} atomics, {per(tot[4]):.0f} indirect exits')
        mods = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        for (name, mod), f in fn.items():
            for i in range(5):
                mods[mod][i] += f[i]
        for mod, v in sorted(mods.items(), key=lambda kv: -kv[1][0]):
            if per(v[0]) >= 1:
                print(f'  {mod:14s} {per(v[0]):7.0f} instructions {per(v[1]):7.0f} accesses '
                      f'{per(v[2]):6.0f} blocks {per(v[3]):4.0f} atomics {per(v[4]):5.0f} indirect')
        for callee in ('memcpy', 'memset'):
            by = [f'{k[0]} {per(v):.1f}' for k, v in calls[callee].most_common() if per(v) >= 0.05]
            print(f'  calls to {callee} per message: {", ".join(by) or "none"}')
    if len(systems) < 2:
        return
    (ma, fa), (mb, fb) = res[systems[0]], res[systems[1]]
    zero = [0, 0, 0, 0, 0, 0]
    keys = sorted(set(fa) | set(fb),
                  key=lambda k: -abs(fa.get(k, zero)[0] / ma - fb.get(k, zero)[0] / mb))
    print(f'\nper message: entries, instructions, memory accesses, atomics '
          f'({systems[0]} | {systems[1]})')
    for k in keys[:top]:
        x, y = fa.get(k, zero), fb.get(k, zero)
        label = k[0] if k[1] == '[kernel]' else f'{k[0]} {k[1]}'
        print(f'{label[-52:]:52s} {x[5] / ma:5.1f} {x[0] / ma:5.0f} {x[1] / ma:5.0f} '
              f'{x[3] / ma:3.0f} | {y[5] / mb:5.1f} {y[0] / mb:5.0f} {y[1] / mb:5.0f} '
              f'{y[3] / mb:3.0f}')


if __name__ == '__main__':
    main()
