// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for oxrdma's Rust abstraction layer; see helpers.h.
 */
#include <crypto/hash.h>
#include <kunit/test.h>
#include <linux/crc32.h>
#include <linux/idr.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#include "helpers.h"

void oxrdma_kunit_fail(struct kunit *test, const char *file, int file_len, int line,
		       const char *msg, int msg_len)
{
	KUNIT_FAIL(test, "%.*s:%d: %.*s", file_len, file, line, msg_len, msg);
}

const char *oxrdma_netdev_name(const struct net_device *ndev)
{
	return netdev_name(ndev);
}

bool oxrdma_netdev_up(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

bool oxrdma_netdev_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

unsigned short oxrdma_netdev_type(const struct net_device *ndev)
{
	return ndev->type;
}

unsigned int oxrdma_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

const unsigned char *oxrdma_netdev_addr(const struct net_device *ndev)
{
	return ndev->dev_addr;
}

void oxrdma_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void oxrdma_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

struct net_device *oxrdma_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

int oxrdma_respond_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, min(len, udata->outlen));
}

size_t oxrdma_udata_inlen(const struct ib_udata *udata)
{
	return udata->inlen;
}

int oxrdma_ib_mtu_int_to_enum(int mtu)
{
	return ib_mtu_int_to_enum(mtu);
}

struct ib_device *oxrdma_device_to_ibdev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
}

void oxrdma_ib_device_get(struct ib_device *ibdev)
{
	get_device(&ibdev->dev);
}

void oxrdma_ib_device_put(struct ib_device *ibdev)
{
	put_device(&ibdev->dev);
}

void *oxrdma_err_ptr(long err)
{
	return ERR_PTR(err);
}

bool oxrdma_ib_device_try_get(struct ib_device *ibdev)
{
	return ib_device_try_get(ibdev);
}

unsigned long oxrdma_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void oxrdma_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

void oxrdma_ida_init(struct ida *ida)
{
	ida_init(ida);
}

u32 oxrdma_crc32_update(struct crypto_shash *tfm, u32 crc, const void *data, size_t len)
{
	SHASH_DESC_ON_STACK(desc, tfm);

	desc->tfm = tfm;
	*(u32 *)shash_desc_ctx(desc) = crc;
	if (crypto_shash_update(desc, data, len))
		return crc32_le(crc, data, len);
	crc = *(u32 *)shash_desc_ctx(desc);
	barrier_data(shash_desc_ctx(desc));
	return crc;
}

void oxrdma_crypto_free_shash(struct crypto_shash *tfm)
{
	crypto_free_shash(tfm);
}

void oxrdma_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void oxrdma_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

bool oxrdma_in_task(void)
{
	return in_task();
}

bool oxrdma_need_resched(void)
{
	return need_resched();
}

/*
 * Module parameters (the 6.12 Rust `module!` macro has none): read through the getters below.
 */
static bool iwarp_markers;
module_param(iwarp_markers, bool, 0644);
MODULE_PARM_DESC(iwarp_markers,
		 "oxiwarp asks its peers for MPA markers in the streams it receives (default: no)");

bool oxrdma_param_iwarp_markers(void)
{
	return READ_ONCE(iwarp_markers);
}

static bool iwarp_crc = true;
module_param(iwarp_crc, bool, 0644);
MODULE_PARM_DESC(iwarp_crc,
		 "oxiwarp asks its peers for MPA CRCs (default: yes; a peer that asks gets them anyway)");

bool oxrdma_param_iwarp_crc(void)
{
	return READ_ONCE(iwarp_crc);
}

static uint iwarp_p2p;
module_param(iwarp_p2p, uint, 0644);
MODULE_PARM_DESC(iwarp_p2p,
		 "oxiwarp offers peer-to-peer mode (RFC 6581) on the connections it initiates, with these ready-to-receive messages: 1 zero-length RDMA write, 2 zero-length RDMA read, 3 both (default: 0, client-server mode)");

u32 oxrdma_param_iwarp_p2p(void)
{
	return READ_ONCE(iwarp_p2p);
}

static bool iwarp_ext = true;
module_param(iwarp_ext, bool, 0644);
MODULE_PARM_DESC(iwarp_ext,
		 "oxiwarp devices created from now on offer and take RFC 7306's extensions (immediate data, atomics), which only oxiwarp peers speak (default: on)");

bool oxrdma_param_iwarp_ext(void)
{
	return READ_ONCE(iwarp_ext);
}

static uint iwarp_zcopy = 1;
module_param(iwarp_zcopy, uint, 0644);
MODULE_PARM_DESC(iwarp_zcopy,
		 "oxiwarp sends payload of process memory regions without copying it, on streams without CRCs and markers: 1 RDMA read responses, 2 sends and RDMA writes, 3 both (default: 1)");

u32 oxrdma_param_iwarp_zcopy(void)
{
	return READ_ONCE(iwarp_zcopy);
}

static bool roce_gso = true;
module_param(roce_gso, bool, 0644);
MODULE_PARM_DESC(roce_gso,
		 "oxroce sends runs of equally long RoCE v2 packets as one UDP segmentation offload; off: every packet in an skb of its own, for a NIC whose UDP segmentation does not count IPv4 identifications up (default: on)");

bool oxrdma_param_roce_gso(void)
{
	return READ_ONCE(roce_gso);
}
