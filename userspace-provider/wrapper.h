/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rdma-core headers bindgen binds for the provider (build.rs). driver.h is libibverbs'
 * private provider interface (verbs_device_ops, verbs_context_ops, verbs_register_driver_34,
 * ibv_cmd_*); kern-abi.h declares the command structures (struct ibv_alloc_pd, ...). Both come
 * from rdma-core v55 as set up by scripts/setup-provider.sh.
 */
#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
