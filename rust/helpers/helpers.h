/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers: static inline functions and macros of the kernel that Rust cannot call
 * directly. Each is a thin, behaviour-free wrapper; the safety contract is the wrapped one's.
 */
#ifndef OXRDMA_HELPERS_H
#define OXRDMA_HELPERS_H

#include <linux/types.h>

struct kunit;
struct net_device;

/* KUNIT_FAIL() with a caller-supplied location (Rust's #[track_caller]) and message. */
void oxrdma_kunit_fail(struct kunit *test, const char *file, int file_len, int line,
		       const char *msg, int msg_len);

/* netdev_name(): the interface name of @ndev. */
const char *oxrdma_netdev_name(const struct net_device *ndev);

struct ib_device;
struct ib_udata;
struct device;
struct notifier_block;

/* netif_running() && netif_carrier_ok(): the port is usable. */
bool oxrdma_netdev_up(const struct net_device *ndev);
/* netif_running(): administratively up. */
bool oxrdma_netdev_running(const struct net_device *ndev);
unsigned short oxrdma_netdev_type(const struct net_device *ndev);
unsigned int oxrdma_netdev_mtu(const struct net_device *ndev);
const unsigned char *oxrdma_netdev_addr(const struct net_device *ndev);
void oxrdma_dev_hold(struct net_device *ndev);
void oxrdma_dev_put(struct net_device *ndev);
/* netdev_notifier_info_to_dev() */
struct net_device *oxrdma_notifier_info_to_dev(void *info);

/* ib_copy_to_udata(), bounded by what userspace asked for (ib_respond_udata's contract). */
int oxrdma_respond_udata(struct ib_udata *udata, const void *src, size_t len);
/* udata->inlen, udata->outlen */
size_t oxrdma_udata_inlen(const struct ib_udata *udata);
/* ib_mtu_int_to_enum() */
int oxrdma_ib_mtu_int_to_enum(int mtu);
/* rdma_device_to_ibdev() */
struct ib_device *oxrdma_device_to_ibdev(struct device *dev);
/* get_device()/put_device() on the ib_device's struct device. */
void oxrdma_ib_device_get(struct ib_device *ibdev);
void oxrdma_ib_device_put(struct ib_device *ibdev);

/* ERR_PTR(err) */
void *oxrdma_err_ptr(long err);
/* ib_device_try_get(): a registration reference, false once unregistration has begun. */
bool oxrdma_ib_device_try_get(struct ib_device *ibdev);

/* spin_lock_irqsave(), spin_unlock_irqrestore() (macros) */
struct spinlock;
unsigned long oxrdma_spin_lock_irqsave(struct spinlock *lock);
void oxrdma_spin_unlock_irqrestore(struct spinlock *lock, unsigned long flags);
/*
 * One crypto_shash_update() of the "crc32" shash (the accelerated CRC-32 where the CPU has
 * one): the CRC-32 register @crc (no inversions, like crc32_le()) after @data.
 */
struct crypto_shash;
u32 oxrdma_crc32_update(struct crypto_shash *tfm, u32 crc, const void *data, size_t len);
/* crypto_free_shash() */
void oxrdma_crypto_free_shash(struct crypto_shash *tfm);
/* spin_lock_bh(), spin_unlock_bh() (macros) */
void oxrdma_spin_lock_bh(struct spinlock *lock);
void oxrdma_spin_unlock_bh(struct spinlock *lock);
/* in_task(): process context (not hard or soft interrupt, not NMI). */
bool oxrdma_in_task(void);
/* need_resched(): a task waits for this CPU (the scheduler asked the current one to yield). */
bool oxrdma_need_resched(void);
/* ida_init() */
struct ida;
void oxrdma_ida_init(struct ida *ida);

/*
 * The module parameters iwarp_markers, iwarp_crc, iwarp_p2p, iwarp_zcopy, iwarp_ext,
 * roce_gso (/sys/module/oxrdma/parameters/).
 */
bool oxrdma_param_iwarp_markers(void);
bool oxrdma_param_iwarp_crc(void);
u32 oxrdma_param_iwarp_p2p(void);
u32 oxrdma_param_iwarp_zcopy(void);
bool oxrdma_param_iwarp_ext(void);
bool oxrdma_param_roce_gso(void);

#endif
