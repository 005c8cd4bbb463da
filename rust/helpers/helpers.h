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

#endif
