/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for the verbs objects (rdma.c): user memory pages, uverbs plumbing, timers.
 * Each is a thin wrapper around a static inline function or macro of the kernel.
 */
#ifndef OXRDMA_RDMA_HELPERS_H
#define OXRDMA_RDMA_HELPERS_H

#include <linux/completion.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

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
/* get_page(), put_page() */
void oxrdma_get_page(struct page *page);
void oxrdma_put_page(struct page *page);
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
struct workqueue_struct *oxrdma_alloc_percpu_highpri_workqueue(const char *name);
u32 oxrdma_next_online_cpu(void);
/* Whether more than one CPU is online. */
bool oxrdma_several_cpus_online(void);

/* Ring memory: @addr, zeroed whole pages that remap_vmalloc_range() may map into a process. */
struct oxrdma_ring {
	void *addr;
	struct work_struct free_work;
};

/*
 * A ring of @len bytes (whole pages); with @account, charged to the calling task's memory
 * cgroup (vmalloc_user()'s memory never is). NULL on failure.
 */
struct oxrdma_ring *oxrdma_ring_alloc(size_t len, bool account);
/*
 * Frees @ring, from any context: from interrupt or softirq context, or with interrupts off,
 * later, from @wq (vfree() there would defer through the area's first bytes, which a process
 * may still map and write).
 */
void oxrdma_ring_free(struct oxrdma_ring *ring, struct workqueue_struct *wq);

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

/*
 * iWARP (rust/abstractions/rdma/iwcm.rs and the adapter's iw_* ops).
 *
 * A QP's references for the iw_cm (iw_add_ref/iw_rem_ref): the count starts at one, the
 * owner's; oxrdma_qp_refs_drain() drops that one and waits until the iw_cm has dropped its
 * own, as destroy_qp must before ib_core frees the QP.
 */
struct oxrdma_qp_refs {
	atomic_t count;
	struct completion done;
};

void oxrdma_qp_refs_init(struct oxrdma_qp_refs *r);
void oxrdma_qp_refs_get(struct oxrdma_qp_refs *r);
void oxrdma_qp_refs_put(struct oxrdma_qp_refs *r);
void oxrdma_qp_refs_drain(struct oxrdma_qp_refs *r);
/*
 * A device's QPs by number, for the iw_cm's iw_get_qp(). The iw_cm calls it, and then
 * iw_add_ref() on what it returns, holding an identifier's lock with interrupts off, a lock
 * other drivers' softirqs take too (siw's): the lookup must take no lock that is ever taken
 * with softirqs on (restrack's is), so it is an RCU load. Only an iWARP device (node type
 * RNIC) indexes its QPs: oxrdma_qp_index_del() waits for a grace period, after which no
 * lookup can still return the QP, so the iw_cm's references can then be drained.
 */
struct ib_device;
struct ib_qp;
struct oxrdma_qp_index {
	struct xarray xa;
};

void oxrdma_qp_index_init(struct oxrdma_qp_index *x);
int oxrdma_qp_index_add(struct oxrdma_qp_index *x, struct ib_qp *qp);
void oxrdma_qp_index_del(struct oxrdma_qp_index *x, struct ib_qp *qp);
/* The QP numbered @qpn, or NULL; not referenced (see above). */
struct ib_qp *oxrdma_qp_index_find(struct oxrdma_qp_index *x, u32 qpn);
void oxrdma_qp_index_destroy(struct oxrdma_qp_index *x);
/* cm_id->event_handler(cm_id, ev), cm_id->add_ref(cm_id), cm_id->rem_ref(cm_id) */
struct iw_cm_id;
struct iw_cm_event;
int oxrdma_iw_event(struct iw_cm_id *id, struct iw_cm_event *ev);
void oxrdma_iw_add_ref(struct iw_cm_id *id);
void oxrdma_iw_rem_ref(struct iw_cm_id *id);
/* device->iw_driver_flags = IW_F_NO_PORT_MAP and device->iw_ifname = @ifname (truncated). */
void oxrdma_iw_device_init(struct ib_device *dev, const char *ifname);

#endif
