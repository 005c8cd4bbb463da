// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for oxrdma's Rust abstraction layer; see helpers.h.
 */
#include <kunit/test.h>
#include <linux/netdevice.h>

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
