/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for the verbs objects (rdma.c): user memory pages, uverbs plumbing, timers.
 * Each is a thin wrapper around a static inline function or macro of the kernel.
 */
#ifndef OXRDMA_RDMA_HELPERS_H
#define OXRDMA_RDMA_HELPERS_H

#include <linux/types.h>

struct ib_ucontext;
struct ib_udata;
struct ib_umem;
struct page;
struct timer_list;
struct uverbs_attr_bundle;

/* rdma_udata_to_uverbs_attr_bundle(udata)->context: the ucontext of a user verbs call. */
struct ib_ucontext *oxrdma_udata_ucontext(struct ib_udata *udata);
/* &attrs->driver_udata, or NULL for a kernel caller (attrs == NULL). */
struct ib_udata *oxrdma_attrs_udata(struct uverbs_attr_bundle *attrs);
/* ib_umem_num_pages(), ib_umem_offset() */
size_t oxrdma_umem_num_pages(struct ib_umem *umem);
size_t oxrdma_umem_offset(struct ib_umem *umem);
/* for_each_sgtable_page() over the umem: stores up to @max pages, returns the page count. */
size_t oxrdma_umem_pages(struct ib_umem *umem, struct page **pages, size_t max);
/* memcpy_from_page(), memcpy_to_page() */
void oxrdma_page_read(struct page *page, size_t off, void *dst, size_t len);
void oxrdma_page_write(struct page *page, size_t off, const void *src, size_t len);
/* cmpxchg64() and atomic64_fetch_add() on a u64 inside a page (kmap_local_page). */
u64 oxrdma_page_cmpxchg64(struct page *page, size_t off, u64 cmp, u64 swap);
u64 oxrdma_page_fetch_add64(struct page *page, size_t off, u64 add);
/* memcpy() of memory a process may be writing at the same time (a shared ring). */
void oxrdma_copy_shared(void *dst, const void *src, size_t len);
/* timer_setup(timer, fn, 0) */
void oxrdma_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *));
/* jiffies + usecs_to_jiffies(us) + 1: a timer expiry at least @us from now. */
unsigned long oxrdma_jiffies_after_us(u64 us);
struct workqueue_struct;
/* alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name) (a macro). */
struct workqueue_struct *oxrdma_alloc_workqueue(const char *name);
/* vmalloc_user(): zeroed memory a process may map (a macro around vmalloc_user_noprof). */
void *oxrdma_vmalloc_user(size_t len);
/*
 * The page of kernel virtual address @addr if it is in the linear map (virt_addr_valid),
 * else NULL: how oxrdma reaches memory that kernel verbs users name by DMA address (with
 * ib_uses_virt_dma() a DMA address is the kernel virtual address).
 */
struct page *oxrdma_virt_page(u64 addr);
/* Copies @len bytes from kernel address @src (an IB_SEND_INLINE SGE of a kernel user). */
void oxrdma_copy_kernel(void *dst, u64 src, size_t len);
struct attribute;
/* sysfs_attr_init(): the lockdep key of an attribute not in static memory. */
void oxrdma_sysfs_attr_init(struct attribute *attr);
/* ktime_get_ns() in microseconds: the clock of the protocol state machines. */
u64 oxrdma_now_us(void);

#endif
