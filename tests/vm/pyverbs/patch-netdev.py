# SPDX-License-Identifier: GPL-2.0
"""Patch the netdev lookup of a COPY of rdma-core's tests/base.py (rdma-core 44), in place.

    python3 patch-netdev.py SUITE_DIR/base.py

RDMATestCase._get_ip_mac() finds a device's netdev (whose first address the rdmacm tests bind
to) only at /sys/class/infiniband/<dev>/device/net/, which exists for PCI devices. Software
devices (rxe, siw, oxrdma) have no parent device there: their netdev is the one of the chosen GID
entry, /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<gid index>. Without an address
every rdmacm test skips ("Device ... doesn't have net interface"). The patch falls back to that
file when device/net/ does not exist; nothing else changes. It only matters to tests built on
RDMATestCase (rdmacm, traffic); test_device and test_pd (PyverbsAPITestCase) never call it.
"""
import sys

OLD = """\
    def _get_ip_mac(self, dev, port, idx):
        if not os.path.exists('/sys/class/infiniband/{}/device/net/'.format(dev)):
            self.args.append([dev, port, idx, None, None])
            return
        net_name = self.get_net_name(dev)
"""
NEW = """\
    def _get_ip_mac(self, dev, port, idx):
        if not os.path.exists('/sys/class/infiniband/{}/device/net/'.format(dev)):
            # oxrdma tests/vm/pyverbs/patch-netdev.py: a software device's netdev
            try:
                with open('/sys/class/infiniband/{}/ports/{}/gid_attrs/ndevs/{}'
                          .format(dev, port, idx)) as f:
                    net_name = f.read().strip()
            except OSError:
                self.args.append([dev, port, idx, None, None])
                return
        else:
            net_name = self.get_net_name(dev)
"""

path = sys.argv[1]
with open(path) as f:
    text = f.read()
if NEW in text:
    sys.exit(0)
if text.count(OLD) != 1:
    sys.exit(f'patch-netdev.py: {path}: _get_ip_mac() is not the rdma-core 44 code this patch expects')
with open(path, 'w') as f:
    f.write(text.replace(OLD, NEW))
