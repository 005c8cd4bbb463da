// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for the verbs objects of oxrdma's Rust abstraction layer (rust/abstractions/rdma):
 * static inline functions and macros around user memory, uverbs and timers. Thin wrappers;
 * the safety contract of each is the wrapped one's.
 */
#include <linux/completion.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/scatterlist.h>
#include <linux/timer.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iw_cm.h>
#include <rdma/uverbs_ioctl.h>

#include "rdma.h"

struct ib_ucontext *oxrdma_udata_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

struct ib_udata *oxrdma_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

size_t oxrdma_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

size_t oxrdma_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/* Fills pages[0..max) with the umem's pages in order; returns how many there are. */
size_t oxrdma_umem_pages(struct ib_umem *umem, struct page **pages, size_t max)
{
	struct sg_page_iter it;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (n < max)
			pages[n] = sg_page_iter_page(&it);
		n++;
	}
	return n;
}

void oxrdma_get_page(struct page *page)
{
	get_page(page);
}

void oxrdma_put_page(struct page *page)
{
	put_page(page);
}

void oxrdma_page_read(struct page *page, size_t off, void *dst, size_t len)
{
	memcpy_from_page(dst, page, off, len);
}

void oxrdma_page_write(struct page *page, size_t off, const void *src, size_t len)
{
	memcpy_to_page(page, off, src, len);
}

u64 oxrdma_page_cmpxchg64(struct page *page, size_t off, u64 cmp, u64 swap)
{
	u64 *va = kmap_local_page(page) + off;
	u64 old = cmpxchg64(va, cmp, swap);

	kunmap_local(va);
	return old;
}

u64 oxrdma_page_fetch_add64(struct page *page, size_t off, u64 add)
{
	atomic64_t *va = kmap_local_page(page) + off;
	u64 old = atomic64_fetch_add(add, va);

	kunmap_local(va);
	return old;
}

/* Copies memory another context (a process) may write concurrently. */
void oxrdma_copy_shared(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

void oxrdma_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *))
{
	timer_setup(timer, fn, 0);
}

unsigned long oxrdma_jiffies_after_us(u64 us)
{
	return jiffies + usecs_to_jiffies(us) + 1;
}

u64 oxrdma_now_us(void)
{
	return div_u64(ktime_get_ns(), NSEC_PER_USEC);
}

/*
 * Pages of its own (__GFP_ACCOUNT charges each to the caller's memory cgroup) in a vmap()
 * area that has VM_USERMAP, for remap_vmalloc_range(), and VM_MAP_PUT_PAGES, so that vfree()
 * releases the pages and their array as for vmalloc_user() memory. A charge over the
 * cgroup's limit fails the allocation (__GFP_RETRY_MAYFAIL: the verb returns ENOMEM) rather
 * than waking the cgroup's OOM killer. The work item for a deferred free is allocated here,
 * so that freeing needs no allocation.
 */
struct oxrdma_ring *oxrdma_ring_alloc(size_t len, bool account)
{
	gfp_t gfp = account ? GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN : GFP_KERNEL;
	size_t n = len >> PAGE_SHIFT, i;
	struct oxrdma_ring *ring;
	struct page **pages;

	if (!n || !PAGE_ALIGNED(len) || n > totalram_pages())
		return NULL;
	ring = kzalloc(sizeof(*ring), gfp);
	if (!ring)
		return NULL;
	pages = kvmalloc_array(n, sizeof(*pages), gfp);
	if (!pages)
		goto free_ring;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(gfp | __GFP_ZERO);
		if (!pages[i])
			goto free_pages;
	}
	ring->addr = vmap(pages, n, VM_MAP | VM_MAP_PUT_PAGES | VM_USERMAP, PAGE_KERNEL);
	if (ring->addr)
		return ring;
free_pages:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
free_ring:
	kfree(ring);
	return NULL;
}

static void oxrdma_ring_free_now(struct oxrdma_ring *ring)
{
	vfree(ring->addr);
	kfree(ring);
}

static void oxrdma_ring_free_work(struct work_struct *work)
{
	oxrdma_ring_free_now(container_of(work, struct oxrdma_ring, free_work));
}

void oxrdma_ring_free(struct oxrdma_ring *ring, struct workqueue_struct *wq)
{
	if (in_interrupt() || irqs_disabled()) {
		INIT_WORK(&ring->free_work, oxrdma_ring_free_work);
		queue_work(wq, &ring->free_work);
		return;
	}
	oxrdma_ring_free_now(ring);
}

struct workqueue_struct *oxrdma_alloc_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name);
}

struct workqueue_struct *oxrdma_alloc_percpu_highpri_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0, name);
}

u32 oxrdma_next_online_cpu(void)
{
	unsigned int cpu = cpumask_next(raw_smp_processor_id(), cpu_online_mask);

	return cpu < nr_cpu_ids ? cpu : cpumask_first(cpu_online_mask);
}

bool oxrdma_several_cpus_online(void)
{
	return num_online_cpus() > 1;
}

struct page *oxrdma_virt_page(u64 addr)
{
	void *va = (void *)(uintptr_t)addr;

	return virt_addr_valid(va) ? virt_to_page(va) : NULL;
}

void oxrdma_copy_kernel(void *dst, u64 src, size_t len)
{
	memcpy(dst, (const void *)(uintptr_t)src, len);
}

void oxrdma_sysfs_attr_init(struct attribute *attr)
{
	sysfs_attr_init(attr);
}

void oxrdma_qp_refs_init(struct oxrdma_qp_refs *r)
{
	atomic_set(&r->count, 1);
	init_completion(&r->done);
}

void oxrdma_qp_refs_get(struct oxrdma_qp_refs *r)
{
	atomic_inc(&r->count);
}

void oxrdma_qp_refs_put(struct oxrdma_qp_refs *r)
{
	if (atomic_dec_and_test(&r->count))
		complete(&r->done);
}

void oxrdma_qp_refs_drain(struct oxrdma_qp_refs *r)
{
	oxrdma_qp_refs_put(r);
	wait_for_completion(&r->done);
}

void oxrdma_qp_index_init(struct oxrdma_qp_index *x)
{
	xa_init(&x->xa);
}

static bool oxrdma_qp_indexed(struct ib_qp *qp)
{
	return qp->device->node_type == RDMA_NODE_RNIC;
}

int oxrdma_qp_index_add(struct oxrdma_qp_index *x, struct ib_qp *qp)
{
	if (!oxrdma_qp_indexed(qp))
		return 0;
	return xa_insert(&x->xa, qp->qp_num, qp, GFP_KERNEL);
}

void oxrdma_qp_index_del(struct oxrdma_qp_index *x, struct ib_qp *qp)
{
	if (!oxrdma_qp_indexed(qp))
		return;
	xa_erase(&x->xa, qp->qp_num);
	/* A lookup that found it ran with interrupts off: an RCU read side. */
	synchronize_rcu();
}

struct ib_qp *oxrdma_qp_index_find(struct oxrdma_qp_index *x, u32 qpn)
{
	return xa_load(&x->xa, qpn);
}

void oxrdma_qp_index_destroy(struct oxrdma_qp_index *x)
{
	WARN_ON(!xa_empty(&x->xa));
	xa_destroy(&x->xa);
}

int oxrdma_iw_event(struct iw_cm_id *id, struct iw_cm_event *ev)
{
	return id->event_handler(id, ev);
}

void oxrdma_iw_add_ref(struct iw_cm_id *id)
{
	id->add_ref(id);
}

void oxrdma_iw_rem_ref(struct iw_cm_id *id)
{
	id->rem_ref(id);
}

void oxrdma_iw_device_init(struct ib_device *dev, const char *ifname)
{
	dev->iw_driver_flags = IW_F_NO_PORT_MAP;
	strscpy(dev->iw_ifname, ifname, sizeof(dev->iw_ifname));
}
