/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C headers oxrdma's abstraction layer binds. bindgen reads this file with the kernel's
 * own compiler flags (see Kbuild); the output is rust/bindings/bindings_generated.rs.
 */
#include <crypto/hash.h>
#include <linux/crc32.h>
#include <linux/crc32c.h>
#include <linux/idr.h>
#include <linux/if_packet.h>
#include <linux/net.h>
#include <linux/netdevice.h>
#include <linux/socket.h>
#include <linux/random.h>
#include <linux/skbuff.h>
#include <net/dst.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <net/udp_tunnel.h>
#include <kunit/test.h>
#include <linux/timer.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iw_cm.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_netlink.h>

#include "../helpers/helpers.h"
#include "../helpers/rdma.h"
#include "../helpers/net.h"
