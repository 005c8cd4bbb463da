// SPDX-License-Identifier: GPL-2.0
/*
 * oxrdma_kverbs_test - KUnit test of an RDMA device's kernel verbs
 *
 * What a kernel ULP (NVMe over RDMA, NFS/RDMA, iSER, SMC-R) needs from a RoCE
 * provider, exercised through ib_core's kernel API only: PDs with a
 * local_dma_lkey (get_dma_mr), kernel CQs polled by ib_core (IB_POLL_WORKQUEUE,
 * IB_POLL_SOFTIRQ: the comp_handler and ib_req_notify_cq path) or by the
 * caller (IB_POLL_DIRECT, ib_poll_cq), kernel RC QPs and SRQs connected by
 * hand (INIT -> RTR -> RTS with a RoCE v2 address vector), SEND and
 * SEND_WITH_IMM from ib_dma_map_single() memory, fast-registration MRs
 * (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR) as targets of RDMA WRITE, READ and
 * atomics, IB_WR_LOCAL_INV and IB_WR_SEND_WITH_INV, and flushing on drain.
 *
 * The two ends of each RC connection live on devices dev_a and dev_b; both may
 * name the same device (loopback). Devices are looked up by name in every
 * network namespace, so one module load can use devices of two namespaces.
 * gid_a/gid_b are GID table indexes (port 1) of RoCE v2 IPv4 GIDs; a negative
 * value picks the first such GID. Load it and read the KTAP results:
 *
 *	modprobe oxrdma_kverbs_test dev_a=rxe0 dev_b=rxe0 gid_a=1 gid_b=1
 *	dmesg | grep -A20 'Subtest: oxrdma_kverbs'
 *
 * tests/vm/roce-kernel-ulp.sh does that in the test VM (scripts/vm-run). Every
 * wait is bounded by timeout_ms: a missing completion fails the case.
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev_a;
module_param(dev_a, charp, 0444);
MODULE_PARM_DESC(dev_a, "ib device of the first end of each connection");

static char *dev_b;
module_param(dev_b, charp, 0444);
MODULE_PARM_DESC(dev_b, "ib device of the second end (may equal dev_a)");

static int gid_a = -1;
module_param(gid_a, int, 0444);
MODULE_PARM_DESC(gid_a, "RoCE v2 IPv4 GID index on dev_a (-1: the first)");

static int gid_b = -1;
module_param(gid_b, int, 0444);
MODULE_PARM_DESC(gid_b, "RoCE v2 IPv4 GID index on dev_b (-1: the first)");

static unsigned int timeout_ms = 5000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "limit of every wait for a completion (ms)");

#define KV_PORT		1
#define KV_CQE		256
#define KV_WR		64
#define KV_SGE		2
#define KV_MAX_QPS	2
#define KV_MAX_BUFS	12
#define KV_MAX_FRMRS	2
#define KV_MAX_PAGES	4
#define KV_POISON	0xa5
#define KV_PAGE_POISON	0x5a

/* One end: a device, its GID and PD, and one CQ for sends and receives. */
struct kv_side {
	const char *name;
	struct ib_device *dev;
	const struct ib_gid_attr *gid_attr;
	struct ib_pd *pd;
	struct ib_cq *cq;
	u8 dmac[ETH_ALEN];	/* next hop towards the other end */
	u8 hop_limit;
};

/* A kmalloc'd buffer mapped for the device with ib_dma_map_single(). */
struct kv_buf {
	struct kv_side *side;
	u8 *va;
	u64 dma;
	size_t len;
};

/* A fast-registration MR over separately allocated pages. */
struct kv_frmr {
	struct kv_side *side;
	struct ib_mr *mr;
	struct page *pages[KV_MAX_PAGES];
	struct scatterlist sgl[KV_MAX_PAGES];
	int npages;
	int nmapped;		/* ib_dma_map_sg() result, 0 if unmapped */
	unsigned int offset;	/* of the MR's first byte in pages[0] */
	size_t len;
};

/* Everything a case set up, torn down by kv_exit() whatever happened. */
struct kv_ctx {
	struct kunit *test;
	struct kv_side a, b;
	struct ib_srq *srq;		/* on b, shared by the qb[] */
	int nqps;
	struct ib_qp *qa[KV_MAX_QPS];	/* qa[i] is connected to qb[i] */
	struct ib_qp *qb[KV_MAX_QPS];
	bool live_a[KV_MAX_QPS];	/* left RESET: drain before destroy */
	bool live_b[KV_MAX_QPS];
	struct kv_buf bufs[KV_MAX_BUFS];
	int nbufs;
	struct kv_frmr frmrs[KV_MAX_FRMRS];
	int nfrmrs;
};

/*
 * One posted work request and its completion, copied by the ib_cqe callback.
 * Allocated with kunit_kzalloc(): it outlives a case that stopped on a failed
 * assertion, until kv_exit() has flushed and destroyed the QPs and CQs.
 */
struct kv_wr {
	struct ib_cqe cqe;
	struct completion done;
	struct ib_wc wc;
	struct ib_cq *cq;
	struct ib_qp *qp;
};

static void kv_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kv_wr *w = container_of(wc->wr_cqe, struct kv_wr, cqe);

	w->wc = *wc;
	complete(&w->done);
}

static struct kv_wr *kv_wr_new(struct kunit *test, struct ib_qp *qp,
			       struct ib_cq *cq)
{
	struct kv_wr *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, w);
	w->cqe.done = kv_wr_done;
	init_completion(&w->done);
	w->cq = cq;
	w->qp = qp;
	return w;
}

/* Poll an IB_POLL_DIRECT CQ with ib_poll_cq() and run the callbacks. */
static int kv_poll_direct(struct ib_cq *cq)
{
	struct ib_wc wcs[8];
	int i, n;

	n = ib_poll_cq(cq, ARRAY_SIZE(wcs), wcs);
	for (i = 0; i < n; i++)
		wcs[i].wr_cqe->done(cq, &wcs[i]);
	return n;
}

/* Wait (bounded) for the completion of w: 0 or -ETIMEDOUT. */
static int kv_wait(struct kv_wr *w)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);

	if (w->cq->poll_ctx != IB_POLL_DIRECT)
		return wait_for_completion_timeout(&w->done,
						   msecs_to_jiffies(timeout_ms)) ?
			0 : -ETIMEDOUT;
	for (;;) {
		if (try_wait_for_completion(&w->done))
			return 0;
		if (kv_poll_direct(w->cq) > 0)
			continue;
		if (time_after(jiffies, deadline))
			return try_wait_for_completion(&w->done) ? 0 : -ETIMEDOUT;
		usleep_range(50, 200);
	}
}

static const char *kv_status(enum ib_wc_status s)
{
	return ib_wc_status_msg(s);
}

/* Wait for w, assert its status and check its opcode and QP. */
static void kv_expect_wc(struct kunit *test, struct kv_wr *w,
			 enum ib_wc_status status, enum ib_wc_opcode opcode,
			 const char *what)
{
	KUNIT_ASSERT_EQ_MSG(test, kv_wait(w), 0,
			    "%s: no completion within %u ms", what, timeout_ms);
	KUNIT_ASSERT_EQ_MSG(test, w->wc.status, status,
			    "%s: wc status '%s', expected '%s' (vendor_err %#x)",
			    what, kv_status(w->wc.status), kv_status(status),
			    w->wc.vendor_err);
	KUNIT_EXPECT_PTR_EQ_MSG(test, w->wc.qp, w->qp, "%s: wc.qp", what);
	if (status == IB_WC_SUCCESS)
		KUNIT_EXPECT_EQ_MSG(test, w->wc.opcode, opcode,
				    "%s: wc opcode", what);
}

/* Check the immediate/invalidate flags of a receive completion. */
static void kv_expect_recv_flags(struct kunit *test, struct kv_wr *w,
				 int flags, const char *what)
{
	KUNIT_EXPECT_EQ_MSG(test,
			    w->wc.wc_flags & (IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE),
			    flags, "%s: wc_flags %#x", what, w->wc.wc_flags);
}

/* Compare len bytes and report the first difference. */
static void kv_expect_bytes(struct kunit *test, const u8 *got, const u8 *want,
			    size_t len, const char *what)
{
	size_t i;

	if (!memcmp(got, want, len))
		return;
	for (i = 0; i < len && got[i] == want[i]; i++)
		;
	KUNIT_FAIL(test, "%s: byte %zu of %zu is %#04x, expected %#04x",
		   what, i, len, got[i], want[i]);
}

static void kv_expect_fill(struct kunit *test, const u8 *got, u8 want,
			   size_t len, const char *what)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (got[i] != want) {
			KUNIT_FAIL(test, "%s: byte %zu of %zu is %#04x, expected %#04x",
				   what, i, len, got[i], want);
			return;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Buffers and fast-registration MRs */

static struct kv_buf *kv_buf_new(struct kunit *test, struct kv_side *side,
				 size_t len)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *b;

	KUNIT_ASSERT_LT(test, ctx->nbufs, KV_MAX_BUFS);
	b = &ctx->bufs[ctx->nbufs];
	b->va = kmalloc(len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, b->va);
	memset(b->va, KV_POISON, len);
	b->dma = ib_dma_map_single(side->dev, b->va, len, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(side->dev, b->dma)) {
		kfree(b->va);
		b->va = NULL;
		KUNIT_FAIL_AND_ABORT(test, "ib_dma_map_single of %zu bytes failed", len);
	}
	b->side = side;
	b->len = len;
	ctx->nbufs++;
	return b;
}

static void kv_buf_for_cpu(struct kv_buf *b)
{
	ib_dma_sync_single_for_cpu(b->side->dev, b->dma, b->len,
				   DMA_BIDIRECTIONAL);
}

static void kv_buf_for_dev(struct kv_buf *b)
{
	ib_dma_sync_single_for_device(b->side->dev, b->dma, b->len,
				      DMA_BIDIRECTIONAL);
}

/* Random contents for the first len bytes, poison after them. */
static void kv_buf_fill(struct kv_buf *b, size_t len)
{
	kv_buf_for_cpu(b);
	get_random_bytes(b->va, len);
	memset(b->va + len, KV_POISON, b->len - len);
	kv_buf_for_dev(b);
}

static void kv_buf_poison(struct kv_buf *b)
{
	kv_buf_for_cpu(b);
	memset(b->va, KV_POISON, b->len);
	kv_buf_for_dev(b);
}

/* An SGE over [off, off + len) of b, with the PD's local_dma_lkey. */
static struct ib_sge kv_sge(struct kv_buf *b, size_t off, size_t len)
{
	return (struct ib_sge) {
		.addr = b->dma + off,
		.length = len,
		.lkey = b->side->pd->local_dma_lkey,
	};
}

/*
 * An FRMR of npages pages that starts offset bytes into the first page, mapped
 * (ib_map_mr_sg) but not yet registered.
 */
static struct kv_frmr *kv_frmr_new(struct kunit *test, struct kv_side *side,
				   int npages, unsigned int offset)
{
	struct kv_ctx *ctx = test->priv;
	unsigned int sg_offset = offset;
	struct kv_frmr *f;
	int i, n;

	KUNIT_ASSERT_LT(test, ctx->nfrmrs, KV_MAX_FRMRS);
	KUNIT_ASSERT_LE(test, npages, KV_MAX_PAGES);
	KUNIT_ASSERT_LT(test, offset, PAGE_SIZE);
	f = &ctx->frmrs[ctx->nfrmrs++];
	f->side = side;
	f->offset = offset;
	f->len = npages * PAGE_SIZE - offset;

	f->mr = ib_alloc_mr(side->pd, IB_MR_TYPE_MEM_REG, npages);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, f->mr, "ib_alloc_mr(MEM_REG, %d)",
					 npages);
	KUNIT_EXPECT_EQ(test, f->mr->type, IB_MR_TYPE_MEM_REG);

	sg_init_table(f->sgl, npages);
	for (i = 0; i < npages; i++) {
		f->pages[i] = alloc_page(GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, f->pages[i]);
		f->npages = i + 1;
		memset_page(f->pages[i], 0, KV_PAGE_POISON, PAGE_SIZE);
		sg_set_page(&f->sgl[i], f->pages[i], PAGE_SIZE, 0);
	}
	f->nmapped = ib_dma_map_sg(side->dev, f->sgl, npages, DMA_BIDIRECTIONAL);
	KUNIT_ASSERT_GT_MSG(test, f->nmapped, 0, "ib_dma_map_sg");

	n = ib_map_mr_sg(f->mr, f->sgl, f->nmapped, &sg_offset, PAGE_SIZE);
	KUNIT_ASSERT_EQ_MSG(test, n, f->nmapped, "ib_map_mr_sg: %d", n);
	KUNIT_EXPECT_EQ(test, f->mr->iova, sg_dma_address(&f->sgl[0]) + offset);
	KUNIT_EXPECT_EQ(test, f->mr->length, (u64)f->len);
	KUNIT_EXPECT_EQ(test, f->mr->page_size, (u32)PAGE_SIZE);
	return f;
}

static void kv_frmr_sync(struct kv_frmr *f, bool for_cpu)
{
	struct ib_device *dev = f->side->dev;

	if (ib_uses_virt_dma(dev))
		return;
	if (for_cpu)
		dma_sync_sg_for_cpu(dev->dma_device, f->sgl, f->npages,
				    DMA_BIDIRECTIONAL);
	else
		dma_sync_sg_for_device(dev->dma_device, f->sgl, f->npages,
				       DMA_BIDIRECTIONAL);
}

/* Copy [off, off + len) of the MR's memory to or from buf. */
static void kv_frmr_copy(struct kv_frmr *f, size_t off, u8 *buf, size_t len,
			 bool out)
{
	size_t pos = f->offset + off;

	while (len) {
		struct page *page = f->pages[pos / PAGE_SIZE];
		size_t in_page = pos % PAGE_SIZE;
		size_t n = min_t(size_t, len, PAGE_SIZE - in_page);

		if (out)
			memcpy_from_page(buf, page, in_page, n);
		else
			memcpy_to_page(page, in_page, buf, n);
		buf += n;
		pos += n;
		len -= n;
	}
}

/* Check the whole MR against want (f->len bytes) and the bytes before it. */
static void kv_frmr_expect(struct kunit *test, struct kv_frmr *f,
			   const u8 *want, const char *what)
{
	u8 *got = kunit_kmalloc(test, f->len, GFP_KERNEL);
	u8 head[64];

	KUNIT_ASSERT_NOT_NULL(test, got);
	kv_frmr_sync(f, true);
	kv_frmr_copy(f, 0, got, f->len, true);
	kv_expect_bytes(test, got, want, f->len, what);
	memcpy_from_page(head, f->pages[0], f->offset - min_t(size_t, f->offset, 64),
			 min_t(size_t, f->offset, 64));
	kv_expect_fill(test, head, KV_PAGE_POISON, min_t(size_t, f->offset, 64),
		       "bytes before the MR");
	kunit_kfree(test, got);
}

/* Post a signaled send WR on the QP of side's end; wr_cqe is filled in. */
static struct kv_wr *kv_post_send(struct kunit *test, struct kv_side *side,
				  struct ib_qp *qp, struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad = NULL;
	struct kv_wr *w = kv_wr_new(test, qp, side->cq);
	int ret;

	wr->wr_cqe = &w->cqe;
	wr->send_flags |= IB_SEND_SIGNALED;
	wr->next = NULL;
	ret = ib_post_send(qp, wr, &bad);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "ib_post_send opcode %d", wr->opcode);
	return w;
}

static struct kv_wr *kv_post_recv(struct kunit *test, struct kv_side *side,
				  struct ib_qp *qp, struct ib_sge *sges, int n)
{
	const struct ib_recv_wr *bad = NULL;
	struct kv_wr *w = kv_wr_new(test, qp, side->cq);
	struct ib_recv_wr wr = {
		.wr_cqe = &w->cqe,
		.sg_list = sges,
		.num_sge = n,
	};
	int ret;

	ret = ib_post_recv(qp, &wr, &bad);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "ib_post_recv");
	return w;
}

/* Register f with a new key (IB_WR_REG_MR on qp) and wait for it. */
static void kv_frmr_register(struct kunit *test, struct kv_frmr *f,
			     struct ib_qp *qp, int access)
{
	struct ib_reg_wr wr = {
		.wr.opcode = IB_WR_REG_MR,
		.mr = f->mr,
		.access = access,
	};
	u32 old = f->mr->rkey;
	struct kv_wr *w;

	ib_update_fast_reg_key(f->mr, ib_inc_rkey(f->mr->rkey) & 0xff);
	KUNIT_EXPECT_NE(test, f->mr->rkey, old);
	KUNIT_EXPECT_EQ(test, f->mr->rkey & ~0xffU, old & ~0xffU);
	wr.key = f->mr->rkey;
	kv_frmr_sync(f, false);
	w = kv_post_send(test, f->side, qp, &wr.wr);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_REG_MR, "REG_MR");
}

/* RDMA WRITE or READ between b (local) and [off, off + len) of f. */
static struct kv_wr *kv_post_rdma(struct kunit *test, struct kv_side *side,
				  struct ib_qp *qp, enum ib_wr_opcode op,
				  struct ib_sge *sges, int nsge,
				  struct kv_frmr *f, u32 rkey, size_t off)
{
	struct ib_rdma_wr wr = {
		.wr.opcode = op,
		.wr.sg_list = sges,
		.wr.num_sge = nsge,
		.remote_addr = f->mr->iova + off,
		.rkey = rkey,
	};

	return kv_post_send(test, side, qp, &wr.wr);
}

/* ------------------------------------------------------------------------ */
/* Devices, QPs, connection */

static void kv_qp_event(struct ib_event *ev, void *context)
{
	pr_info("oxrdma_kverbs: %s: QP %#x: async event '%s'\n",
		dev_name(&ev->device->dev), ev->element.qp->qp_num,
		ib_event_msg(ev->event));
}

static bool kv_gid_usable(const struct ib_gid_attr *attr)
{
	return attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
	       ipv6_addr_v4mapped((const struct in6_addr *)attr->gid.raw);
}

static void kv_side_init(struct kunit *test, struct kv_side *side,
			 const char *name, int index)
{
	const struct ib_gid_attr *attr;

	side->name = name;
	side->dev = ib_device_get_by_name(name, RDMA_DRIVER_UNKNOWN);
	KUNIT_ASSERT_NOT_NULL_MSG(test, side->dev, "no ib device named %s", name);
	KUNIT_ASSERT_TRUE_MSG(test, rdma_protocol_roce(side->dev, KV_PORT),
			      "%s port %d is not RoCE", name, KV_PORT);
	/* ib_core calls these without checking them (NULL get_dma_mr: oops) */
	KUNIT_ASSERT_TRUE_MSG(test, side->dev->ops.post_send &&
			      side->dev->ops.post_recv &&
			      side->dev->ops.poll_cq &&
			      side->dev->ops.req_notify_cq,
			      "%s has no kernel post/poll verbs", name);
	KUNIT_ASSERT_TRUE_MSG(test, side->dev->ops.get_dma_mr ||
			      (side->dev->attrs.kernel_cap_flags & IBK_LOCAL_DMA_LKEY),
			      "%s can give no local_dma_lkey (no get_dma_mr)", name);

	if (index >= 0) {
		attr = rdma_get_gid_attr(side->dev, KV_PORT, index);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, attr, "%s: no GID %d",
						 name, index);
		side->gid_attr = attr;
		KUNIT_ASSERT_TRUE_MSG(test, kv_gid_usable(attr),
				      "%s GID %d (%pI6) is not RoCE v2 IPv4",
				      name, index, attr->gid.raw);
	} else {
		for (index = 0; index < 256 && !side->gid_attr; index++) {
			attr = rdma_get_gid_attr(side->dev, KV_PORT, index);
			if (PTR_ERR_OR_ZERO(attr) == -EINVAL)
				break;
			if (IS_ERR(attr))
				continue;
			if (kv_gid_usable(attr))
				side->gid_attr = attr;
			else
				rdma_put_gid_attr(attr);
		}
		KUNIT_ASSERT_NOT_NULL_MSG(test, side->gid_attr,
					  "%s has no RoCE v2 IPv4 GID", name);
	}

	side->pd = ib_alloc_pd(side->dev, 0);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, side->pd, "ib_alloc_pd(%s)", name);
}

/*
 * Kernel callers of ib_modify_qp() must give a RoCE address vector with the
 * destination MAC already resolved (ib_core resolves it only for user QPs):
 * resolve it like ib_core does, by route and neighbour lookup in the network
 * namespace of the source GID's netdev.
 */
struct kv_resolve {
	struct rdma_dev_addr addr;
	struct completion done;
	int status;
};

static void kv_resolve_done(int status, struct sockaddr *src,
			    struct rdma_dev_addr *addr, void *context)
{
	struct kv_resolve *r = context;

	r->status = status;
	complete(&r->done);
}

static void kv_resolve_dmac(struct kunit *test, struct kv_side *from,
			    struct kv_side *to)
{
	union {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} src, dst;
	struct kv_resolve *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	int ret;

	KUNIT_ASSERT_NOT_NULL(test, r);
	init_completion(&r->done);
	r->addr.net = &init_net;
	r->addr.sgid_attr = from->gid_attr;
	rdma_gid2ip((struct sockaddr *)&src, &from->gid_attr->gid);
	rdma_gid2ip((struct sockaddr *)&dst, &to->gid_attr->gid);
	ret = rdma_resolve_ip((struct sockaddr *)&src, (struct sockaddr *)&dst,
			      &r->addr, timeout_ms, kv_resolve_done, true, r);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "rdma_resolve_ip %pI4 -> %pI4",
			    &src.in.sin_addr, &dst.in.sin_addr);
	if (!wait_for_completion_timeout(&r->done,
					 msecs_to_jiffies(timeout_ms) + HZ)) {
		rdma_addr_cancel(&r->addr);
		KUNIT_FAIL_AND_ABORT(test, "rdma_resolve_ip %pI4 -> %pI4 did not finish",
				     &src.in.sin_addr, &dst.in.sin_addr);
	}
	KUNIT_ASSERT_EQ_MSG(test, r->status, 0,
			    "%s: no neighbour for %pI4 (from %pI4)", from->name,
			    &dst.in.sin_addr, &src.in.sin_addr);
	memcpy(from->dmac, r->addr.dst_dev_addr, ETH_ALEN);
	from->hop_limit = r->addr.hoplimit > 0 ? r->addr.hoplimit : 64;
	kunit_info(test, "%s %pI4 -> %s %pI4: dmac %pM hop limit %u\n",
		   from->name, &src.in.sin_addr, to->name, &dst.in.sin_addr,
		   from->dmac, from->hop_limit);
}

static struct ib_qp *kv_create_qp(struct kunit *test, struct kv_side *side,
				  struct ib_srq *srq)
{
	struct ib_qp_init_attr init = {
		.event_handler = kv_qp_event,
		.send_cq = side->cq,
		.recv_cq = side->cq,
		.srq = srq,
		.cap = {
			.max_send_wr = KV_WR,
			.max_recv_wr = srq ? 0 : KV_WR,
			.max_send_sge = KV_SGE,
			.max_recv_sge = srq ? 0 : KV_SGE,
		},
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
	};
	struct ib_qp *qp = ib_create_qp(side->pd, &init);

	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, qp, "ib_create_qp(%s, RC)",
					 side->name);
	KUNIT_EXPECT_GE(test, init.cap.max_send_wr, KV_WR);
	KUNIT_EXPECT_GE(test, init.cap.max_send_sge, KV_SGE);
	return qp;
}

static int kv_qp_access(struct kv_side *side)
{
	int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		     IB_ACCESS_REMOTE_READ;

	if (side->dev->attrs.atomic_cap != IB_ATOMIC_NONE)
		access |= IB_ACCESS_REMOTE_ATOMIC;
	return access;
}

static u8 kv_rd_atomic(u32 max)
{
	return min_t(u32, max, 4);
}

/* RESET -> INIT -> RTR -> RTS towards the QP qpn on peer. */
static void kv_qp_connect(struct kunit *test, struct kv_side *side,
			  struct ib_qp *qp, bool *live, struct kv_side *peer,
			  u32 qpn, u32 sq_psn, u32 rq_psn)
{
	union ib_gid dgid = peer->gid_attr->gid;
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = KV_PORT,
		.qp_access_flags = kv_qp_access(side),
	};
	int ret;

	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "%s: modify QP to INIT", side->name);
	*live = true;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = qpn;
	attr.rq_psn = rq_psn;
	attr.max_dest_rd_atomic = kv_rd_atomic(side->dev->attrs.max_qp_rd_atom);
	attr.min_rnr_timer = 12;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, KV_PORT);
	rdma_ah_set_sl(&attr.ah_attr, 0);
	rdma_ah_set_grh(&attr.ah_attr, &dgid, 0, side->gid_attr->index,
			side->hop_limit, 0);
	memcpy(attr.ah_attr.roce.dmac, side->dmac, ETH_ALEN);
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "%s: modify QP to RTR", side->name);

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = sq_psn;
	attr.max_rd_atomic = kv_rd_atomic(side->dev->attrs.max_qp_init_rd_atom);
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_TIMEOUT |
			   IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			   IB_QP_MAX_QP_RD_ATOMIC);
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "%s: modify QP to RTS", side->name);
}

/*
 * npairs connected RC QP pairs qa[i] <-> qb[i], one CQ per side polled in
 * poll_a/poll_b context; with srq the qb[] receive from one SRQ.
 */
static void kv_connect(struct kunit *test, int npairs,
		       enum ib_poll_context poll_a, enum ib_poll_context poll_b,
		       bool srq)
{
	struct kv_ctx *ctx = test->priv;
	int i;

	KUNIT_ASSERT_LE(test, npairs, KV_MAX_QPS);
	kv_resolve_dmac(test, &ctx->a, &ctx->b);
	kv_resolve_dmac(test, &ctx->b, &ctx->a);

	ctx->a.cq = ib_alloc_cq(ctx->a.dev, ctx, KV_CQE, 0, poll_a);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ctx->a.cq, "ib_alloc_cq(%s)",
					 ctx->a.name);
	ctx->b.cq = ib_alloc_cq(ctx->b.dev, ctx, KV_CQE, 0, poll_b);
	KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ctx->b.cq, "ib_alloc_cq(%s)",
					 ctx->b.name);
	if (srq) {
		struct ib_srq_init_attr attr = {
			.attr = { .max_wr = KV_WR, .max_sge = KV_SGE },
			.srq_type = IB_SRQT_BASIC,
		};

		ctx->srq = ib_create_srq(ctx->b.pd, &attr);
		KUNIT_ASSERT_NOT_ERR_OR_NULL_MSG(test, ctx->srq, "ib_create_srq(%s)",
						 ctx->b.name);
	}

	for (i = 0; i < npairs; i++) {
		ctx->qa[i] = kv_create_qp(test, &ctx->a, NULL);
		ctx->nqps = i + 1;
		ctx->qb[i] = kv_create_qp(test, &ctx->b, ctx->srq);
		kv_qp_connect(test, &ctx->a, ctx->qa[i], &ctx->live_a[i], &ctx->b,
			      ctx->qb[i]->qp_num, 0x1000 + i, 0x2000 + i);
		kv_qp_connect(test, &ctx->b, ctx->qb[i], &ctx->live_b[i], &ctx->a,
			      ctx->qa[i]->qp_num, 0x2000 + i, 0x1000 + i);
	}
}

/* ------------------------------------------------------------------------ */
/* Set-up and tear-down of each case */

static int kv_init(struct kunit *test)
{
	struct kv_ctx *ctx;

	if (!dev_a || !*dev_a || !dev_b || !*dev_b)
		kunit_skip(test, "no devices: load with dev_a=IBDEV dev_b=IBDEV");
	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->test = test;
	test->priv = ctx;
	kv_side_init(test, &ctx->a, dev_a, gid_a);
	kv_side_init(test, &ctx->b, dev_b, gid_b);
	return 0;
}

/*
 * What ib_drain_qp() does, bounded: move the QP to the error state, then post
 * a send and (without an SRQ) a receive and wait until they complete flushed,
 * which means every WR posted before them has completed.
 */
static void kv_drain_bounded(struct kunit *test, struct kv_side *side,
			     struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	const struct ib_send_wr *sbad;
	const struct ib_recv_wr *rbad;
	struct ib_rdma_wr swr = { .wr.opcode = IB_WR_RDMA_WRITE };
	struct ib_recv_wr rwr = {};
	struct kv_wr *sw, *rw = NULL;
	int ret;

	ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	KUNIT_EXPECT_EQ_MSG(test, ret, 0, "%s: modify QP %#x to ERR",
			    side->name, qp->qp_num);
	if (ret)
		return;
	sw = kv_wr_new(test, qp, side->cq);
	swr.wr.wr_cqe = &sw->cqe;
	swr.wr.send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(qp, &swr.wr, &sbad);
	KUNIT_EXPECT_EQ_MSG(test, ret, 0, "%s: post send to an ERR QP", side->name);
	if (!qp->srq) {
		rw = kv_wr_new(test, qp, side->cq);
		rwr.wr_cqe = &rw->cqe;
		if (ib_post_recv(qp, &rwr, &rbad)) {
			KUNIT_FAIL(test, "%s: post recv to an ERR QP", side->name);
			rw = NULL;
		}
	}
	if (!ret) {
		KUNIT_EXPECT_EQ_MSG(test, kv_wait(sw), 0,
				    "%s: send queue of QP %#x not flushed",
				    side->name, qp->qp_num);
		KUNIT_EXPECT_EQ(test, sw->wc.status, IB_WC_WR_FLUSH_ERR);
	}
	if (rw) {
		KUNIT_EXPECT_EQ_MSG(test, kv_wait(rw), 0,
				    "%s: receive queue of QP %#x not flushed",
				    side->name, qp->qp_num);
		KUNIT_EXPECT_EQ(test, rw->wc.status, IB_WC_WR_FLUSH_ERR);
	}
}

static void kv_exit(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	int i, j;

	if (!ctx)
		return;
	for (i = 0; i < ctx->nqps; i++) {
		if (ctx->live_a[i])
			kv_drain_bounded(test, &ctx->a, ctx->qa[i]);
		if (ctx->live_b[i])
			kv_drain_bounded(test, &ctx->b, ctx->qb[i]);
	}
	for (i = 0; i < ctx->nqps; i++) {
		if (!IS_ERR_OR_NULL(ctx->qa[i]))
			KUNIT_EXPECT_EQ(test, ib_destroy_qp(ctx->qa[i]), 0);
		if (!IS_ERR_OR_NULL(ctx->qb[i]))
			KUNIT_EXPECT_EQ(test, ib_destroy_qp(ctx->qb[i]), 0);
	}
	if (!IS_ERR_OR_NULL(ctx->srq))
		ib_destroy_srq(ctx->srq);
	if (!IS_ERR_OR_NULL(ctx->a.cq))
		ib_free_cq(ctx->a.cq);
	if (!IS_ERR_OR_NULL(ctx->b.cq))
		ib_free_cq(ctx->b.cq);

	for (i = 0; i < ctx->nfrmrs; i++) {
		struct kv_frmr *f = &ctx->frmrs[i];

		if (!IS_ERR_OR_NULL(f->mr))
			KUNIT_EXPECT_EQ(test, ib_dereg_mr(f->mr), 0);
		if (f->nmapped > 0)
			ib_dma_unmap_sg(f->side->dev, f->sgl, f->npages,
					DMA_BIDIRECTIONAL);
		for (j = 0; j < f->npages; j++)
			__free_page(f->pages[j]);
	}
	for (i = 0; i < ctx->nbufs; i++) {
		struct kv_buf *b = &ctx->bufs[i];

		ib_dma_unmap_single(b->side->dev, b->dma, b->len,
				    DMA_BIDIRECTIONAL);
		kfree(b->va);
	}
	for (i = 0; i < 2; i++) {
		struct kv_side *side = i ? &ctx->b : &ctx->a;

		if (!IS_ERR_OR_NULL(side->pd))
			ib_dealloc_pd(side->pd);
		if (side->gid_attr)
			rdma_put_gid_attr(side->gid_attr);
		if (side->dev)
			ib_device_put(side->dev);
	}
}

/* ------------------------------------------------------------------------ */
/* The cases */

/*
 * One SEND (or SEND_WITH_IMM) of len bytes from src on (from, sq) to dst on
 * (to, rq); with dst2 the receive scatters over two SGEs.
 */
static void kv_send_one(struct kunit *test, struct kv_side *from,
			struct ib_qp *sq, struct kv_buf *src,
			struct kv_side *to, struct ib_qp *rq, struct kv_buf *dst,
			struct kv_buf *dst2, size_t len, bool imm, u32 imm_val)
{
	size_t first = dst2 ? len * 2 / 3 : dst->len;
	struct ib_sge rsge[2], ssge;
	struct ib_send_wr wr = {};
	struct kv_wr *sw, *rw;

	kv_buf_fill(src, len);
	kv_buf_poison(dst);
	rsge[0] = kv_sge(dst, 0, first);
	if (dst2) {
		kv_buf_poison(dst2);
		rsge[1] = kv_sge(dst2, 0, dst2->len);
	}
	rw = kv_post_recv(test, to, rq, rsge, dst2 ? 2 : 1);

	ssge = kv_sge(src, 0, len);
	wr.opcode = imm ? IB_WR_SEND_WITH_IMM : IB_WR_SEND;
	wr.sg_list = &ssge;
	wr.num_sge = 1;
	if (imm)
		wr.ex.imm_data = cpu_to_be32(imm_val);
	sw = kv_post_send(test, from, sq, &wr);

	kv_expect_wc(test, sw, IB_WC_SUCCESS, IB_WC_SEND, "send");
	kv_expect_wc(test, rw, IB_WC_SUCCESS, IB_WC_RECV, "recv");
	KUNIT_EXPECT_EQ_MSG(test, rw->wc.byte_len, (u32)len, "recv byte_len");
	kv_expect_recv_flags(test, rw, imm ? IB_WC_WITH_IMM : 0, "recv");
	if (imm)
		KUNIT_EXPECT_EQ_MSG(test, be32_to_cpu(rw->wc.ex.imm_data), imm_val,
				    "recv imm_data");

	kv_buf_for_cpu(dst);
	if (dst2) {
		kv_buf_for_cpu(dst2);
		kv_expect_bytes(test, dst->va, src->va, first, "first SGE");
		kv_expect_bytes(test, dst2->va, src->va + first, len - first,
				"second SGE");
		kv_expect_fill(test, dst->va + first, KV_POISON, dst->len - first,
			       "after the first SGE");
		kv_expect_fill(test, dst2->va + len - first, KV_POISON,
			       dst2->len - (len - first), "after the data");
	} else {
		kv_expect_bytes(test, dst->va, src->va, len, "received data");
		kv_expect_fill(test, dst->va + len, KV_POISON, dst->len - len,
			       "after the data");
	}
}

static void send_recv_dma_lkey(struct kunit *test)
{
	static const size_t sizes[] = { 1, 1000, 4093, 10000 };
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src_a, *dst_a, *src_b, *dst_b, *dst_b2;
	int i;

	kv_connect(test, 1, IB_POLL_WORKQUEUE, IB_POLL_SOFTIRQ, false);
	src_a = kv_buf_new(test, &ctx->a, 10000);
	dst_a = kv_buf_new(test, &ctx->a, 10000 + 64);
	src_b = kv_buf_new(test, &ctx->b, 10000);
	dst_b = kv_buf_new(test, &ctx->b, 10000 + 64);
	dst_b2 = kv_buf_new(test, &ctx->b, 2048);

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t len = sizes[i];

		kunit_info(test, "a -> b: SEND and SEND_WITH_IMM of %zu bytes\n", len);
		kv_send_one(test, &ctx->a, ctx->qa[0], src_a, &ctx->b, ctx->qb[0],
			    dst_b, NULL, len, false, 0);
		kv_send_one(test, &ctx->a, ctx->qa[0], src_a, &ctx->b, ctx->qb[0],
			    dst_b, NULL, len, true, 0x11223300 + i);
		kunit_info(test, "b -> a: SEND_WITH_IMM of %zu bytes\n", len);
		kv_send_one(test, &ctx->b, ctx->qb[0], src_b, &ctx->a, ctx->qa[0],
			    dst_a, NULL, len, true, 0xa0b0c000 + i);
	}
	kunit_info(test, "a -> b: 4093 bytes into two receive SGEs\n");
	kv_send_one(test, &ctx->a, ctx->qa[0], src_a, &ctx->b, ctx->qb[0],
		    dst_b, dst_b2, 4093, false, 0);
	kv_send_one(test, &ctx->a, ctx->qa[0], src_a, &ctx->b, ctx->qb[0],
		    dst_b, dst_b2, 3000, true, 0xfeedf00d);
}

#define KV_FRMR_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ)

static void frmr_write_read(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src, *dst, *dst2, *rbuf;
	struct ib_sge sge[2];
	struct kv_wr *w, *rw;
	struct kv_frmr *f;
	u8 *want;
	size_t len;

	kv_connect(test, 1, IB_POLL_WORKQUEUE, IB_POLL_WORKQUEUE, false);
	f = kv_frmr_new(test, &ctx->b, 3, 100);
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	len = f->len;
	want = kunit_kmalloc(test, len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, want);
	src = kv_buf_new(test, &ctx->a, len);
	dst = kv_buf_new(test, &ctx->a, len);
	dst2 = kv_buf_new(test, &ctx->a, 2048);

	kunit_info(test, "RDMA WRITE of %zu bytes over 3 pages, rkey %#x, iova %#llx\n",
		   len, f->mr->rkey, f->mr->iova);
	kv_buf_fill(src, len);
	sge[0] = kv_sge(src, 0, len);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_WRITE, sge, 1, f,
			 f->mr->rkey, 0);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, "RDMA WRITE");
	memcpy(want, src->va, len);
	kv_frmr_expect(test, f, want, "MR after the first write");

	kunit_info(test, "RDMA WRITE of 5000 bytes at MR offset 3000, two SGEs\n");
	kv_buf_fill(src, 5000);
	sge[0] = kv_sge(src, 0, 3333);
	sge[1] = kv_sge(src, 3333, 5000 - 3333);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_WRITE, sge, 2, f,
			 f->mr->rkey, 3000);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, "RDMA WRITE 2");
	memcpy(want + 3000, src->va, 5000);
	kv_frmr_expect(test, f, want, "MR after the second write");

	kunit_info(test, "RDMA READ of the whole MR\n");
	sge[0] = kv_sge(dst, 0, len);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_READ, sge, 1, f,
			 f->mr->rkey, 0);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_READ, "RDMA READ");
	KUNIT_EXPECT_EQ(test, w->wc.byte_len, (u32)len);
	kv_buf_for_cpu(dst);
	kv_expect_bytes(test, dst->va, want, len, "RDMA READ data");

	kunit_info(test, "RDMA READ of 3000 bytes at MR offset 3900 into two SGEs\n");
	kv_buf_poison(dst);
	kv_buf_poison(dst2);
	sge[0] = kv_sge(dst, 0, 1000);
	sge[1] = kv_sge(dst2, 0, 2000);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_READ, sge, 2, f,
			 f->mr->rkey, 3900);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_READ, "RDMA READ 2");
	kv_buf_for_cpu(dst);
	kv_buf_for_cpu(dst2);
	kv_expect_bytes(test, dst->va, want + 3900, 1000, "READ first SGE");
	kv_expect_bytes(test, dst2->va, want + 4900, 2000, "READ second SGE");
	kv_expect_fill(test, dst->va + 1000, KV_POISON, 1000, "after the first SGE");

	kunit_info(test, "RDMA WRITE_WITH_IMM of 2000 bytes at MR offset 8000\n");
	rbuf = kv_buf_new(test, &ctx->b, 64);
	sge[1] = kv_sge(rbuf, 0, rbuf->len);
	rw = kv_post_recv(test, &ctx->b, ctx->qb[0], &sge[1], 1);
	kv_buf_fill(src, 2000);
	sge[0] = kv_sge(src, 0, 2000);
	{
		struct ib_rdma_wr wr = {
			.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM,
			.wr.sg_list = sge,
			.wr.num_sge = 1,
			.wr.ex.imm_data = cpu_to_be32(0xc0ffee01),
			.remote_addr = f->mr->iova + 8000,
			.rkey = f->mr->rkey,
		};

		w = kv_post_send(test, &ctx->a, ctx->qa[0], &wr.wr);
	}
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, "WRITE_WITH_IMM");
	kv_expect_wc(test, rw, IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM,
		     "recv of WRITE_WITH_IMM");
	kv_expect_recv_flags(test, rw, IB_WC_WITH_IMM, "recv of WRITE_WITH_IMM");
	KUNIT_EXPECT_EQ(test, be32_to_cpu(rw->wc.ex.imm_data), 0xc0ffee01);
	KUNIT_EXPECT_EQ(test, rw->wc.byte_len, 2000);
	memcpy(want + 8000, src->va, 2000);
	kv_frmr_expect(test, f, want, "MR after WRITE_WITH_IMM");
	kv_buf_for_cpu(rbuf);
	kv_expect_fill(test, rbuf->va, KV_POISON, rbuf->len, "receive buffer");
}

static void kv_frmr_put_u64(struct kv_frmr *f, size_t off, u64 v)
{
	kv_frmr_copy(f, off, (u8 *)&v, sizeof(v), false);
}

static u64 kv_frmr_get_u64(struct kv_frmr *f, size_t off)
{
	u64 v;

	kv_frmr_sync(f, true);
	kv_frmr_copy(f, off, (u8 *)&v, sizeof(v), true);
	return v;
}

/* One atomic on [off] of f; returns the original value read back. */
static u64 kv_atomic(struct kunit *test, struct kv_buf *res,
		     enum ib_wr_opcode op, struct kv_frmr *f, size_t off,
		     u64 compare_add, u64 swap)
{
	struct kv_ctx *ctx = test->priv;
	struct ib_sge sge;
	struct ib_atomic_wr wr = {
		.wr.opcode = op,
		.wr.sg_list = &sge,
		.wr.num_sge = 1,
		.remote_addr = f->mr->iova + off,
		.compare_add = compare_add,
		.swap = swap,
		.rkey = f->mr->rkey,
	};
	struct kv_wr *w;
	u64 old;

	kv_buf_poison(res);
	sge = kv_sge(res, 0, sizeof(u64));
	w = kv_post_send(test, &ctx->a, ctx->qa[0], &wr.wr);
	kv_expect_wc(test, w, IB_WC_SUCCESS,
		     op == IB_WR_ATOMIC_FETCH_AND_ADD ? IB_WC_FETCH_ADD :
		     IB_WC_COMP_SWAP, "atomic");
	kv_buf_for_cpu(res);
	memcpy(&old, res->va, sizeof(old));
	kv_expect_fill(test, res->va + sizeof(u64), KV_POISON,
		       res->len - sizeof(u64), "after the atomic result");
	return old;
}

static void frmr_atomics(struct kunit *test)
{
	const u64 v1 = 0x0102030405060708ULL, v2 = 0xffffffffULL;
	const u64 sw = 0xdeadbeefcafef00dULL;
	/* one word at the MR's start, one right after a page boundary */
	const size_t o1 = 0, o2 = PAGE_SIZE - 64;
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *res;
	struct kv_frmr *f;

	if (ctx->a.dev->attrs.atomic_cap == IB_ATOMIC_NONE ||
	    ctx->b.dev->attrs.atomic_cap == IB_ATOMIC_NONE)
		kunit_skip(test, "no atomics (atomic_cap IB_ATOMIC_NONE)");
	kv_connect(test, 1, IB_POLL_SOFTIRQ, IB_POLL_WORKQUEUE, false);
	f = kv_frmr_new(test, &ctx->b, 2, 64);
	kv_frmr_put_u64(f, o1, v1);
	kv_frmr_put_u64(f, o2, v2);
	kv_frmr_put_u64(f, o2 + 8, 0x1111111111111111ULL);
	kv_frmr_register(test, f, ctx->qb[0],
			 IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_ATOMIC);
	res = kv_buf_new(test, &ctx->a, 64);

	KUNIT_EXPECT_EQ(test, kv_atomic(test, res, IB_WR_ATOMIC_FETCH_AND_ADD,
					f, o1, 0x10, 0), v1);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o1), v1 + 0x10);

	/* the carry crosses the 32-bit halves */
	KUNIT_EXPECT_EQ(test, kv_atomic(test, res, IB_WR_ATOMIC_FETCH_AND_ADD,
					f, o2, 1, 0), v2);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o2), v2 + 1);

	KUNIT_EXPECT_EQ(test, kv_atomic(test, res, IB_WR_ATOMIC_CMP_AND_SWP,
					f, o2, v2 + 1, sw), v2 + 1);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o2), sw);

	/* a compare that fails returns the value and leaves it */
	KUNIT_EXPECT_EQ(test, kv_atomic(test, res, IB_WR_ATOMIC_CMP_AND_SWP,
					f, o2, 0, 1), sw);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o2), sw);

	KUNIT_EXPECT_EQ(test, kv_atomic(test, res, IB_WR_ATOMIC_CMP_AND_SWP,
					f, o1, v1 + 0x10, 42), v1 + 0x10);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o1), 42);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o1 + 8),
			0x5a5a5a5a5a5a5a5aULL);
	KUNIT_EXPECT_EQ(test, kv_frmr_get_u64(f, o2 + 8), 0x1111111111111111ULL);
}

/* A write to f with rkey that must fail: the MR keeps want. */
static void kv_expect_write_denied(struct kunit *test, struct kv_frmr *f,
				   u32 rkey, const u8 *want)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src = kv_buf_new(test, &ctx->a, 1500);
	struct ib_sge sge = kv_sge(src, 0, src->len);
	struct kv_wr *w;

	kunit_info(test, "RDMA WRITE with the invalidated rkey %#x\n", rkey);
	kv_buf_fill(src, src->len);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_WRITE, &sge, 1, f,
			 rkey, 0);
	kv_expect_wc(test, w, IB_WC_REM_ACCESS_ERR, 0, "write to an invalid rkey");
	kv_frmr_expect(test, f, want, "MR after the refused write");
}

/* Write random data to the whole of f with its current rkey. */
static void kv_write_all(struct kunit *test, struct kv_frmr *f, u8 *want)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src = kv_buf_new(test, &ctx->a, f->len);
	struct ib_sge sge = kv_sge(src, 0, f->len);
	struct kv_wr *w;

	kv_buf_fill(src, f->len);
	w = kv_post_rdma(test, &ctx->a, ctx->qa[0], IB_WR_RDMA_WRITE, &sge, 1, f,
			 f->mr->rkey, 0);
	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, "RDMA WRITE");
	memcpy(want, src->va, f->len);
	kv_frmr_expect(test, f, want, "MR after the write");
}

static void kv_local_inv(struct kunit *test, struct kv_frmr *f,
			 struct ib_qp *qp)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.ex.invalidate_rkey = f->mr->rkey,
	};
	struct kv_wr *w = kv_post_send(test, f->side, qp, &wr);

	kv_expect_wc(test, w, IB_WC_SUCCESS, IB_WC_LOCAL_INV, "LOCAL_INV");
}

static void local_inv(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_frmr *f;
	u8 *want;

	kv_connect(test, 1, IB_POLL_WORKQUEUE, IB_POLL_SOFTIRQ, false);
	f = kv_frmr_new(test, &ctx->b, 2, 0);
	want = kunit_kmalloc(test, f->len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, want);
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	kv_write_all(test, f, want);
	kunit_info(test, "LOCAL_INV of rkey %#x\n", f->mr->rkey);
	kv_local_inv(test, f, ctx->qb[0]);
	kv_expect_write_denied(test, f, f->mr->rkey, want);
}

/* SEND_WITH_INV of f's rkey from a to b; checks both completions. */
static void kv_send_with_inv(struct kunit *test, struct kv_frmr *f)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src = kv_buf_new(test, &ctx->a, 300);
	struct kv_buf *dst = kv_buf_new(test, &ctx->b, 512);
	struct ib_sge ssge = kv_sge(src, 0, src->len);
	struct ib_sge rsge = kv_sge(dst, 0, dst->len);
	struct ib_send_wr wr = {
		.opcode = IB_WR_SEND_WITH_INV,
		.sg_list = &ssge,
		.num_sge = 1,
		.ex.invalidate_rkey = f->mr->rkey,
	};
	struct kv_wr *sw, *rw;

	kunit_info(test, "SEND_WITH_INV of rkey %#x\n", f->mr->rkey);
	rw = kv_post_recv(test, &ctx->b, ctx->qb[0], &rsge, 1);
	kv_buf_fill(src, src->len);
	sw = kv_post_send(test, &ctx->a, ctx->qa[0], &wr);
	kv_expect_wc(test, sw, IB_WC_SUCCESS, IB_WC_SEND, "SEND_WITH_INV");
	kv_expect_wc(test, rw, IB_WC_SUCCESS, IB_WC_RECV, "recv of SEND_WITH_INV");
	kv_expect_recv_flags(test, rw, IB_WC_WITH_INVALIDATE,
			     "recv of SEND_WITH_INV");
	KUNIT_EXPECT_EQ(test, rw->wc.ex.invalidate_rkey, f->mr->rkey);
	KUNIT_EXPECT_EQ(test, rw->wc.byte_len, (u32)src->len);
	kv_buf_for_cpu(dst);
	kv_expect_bytes(test, dst->va, src->va, src->len, "received data");
	kv_expect_fill(test, dst->va + src->len, KV_POISON, dst->len - src->len,
		       "after the data");
}

static void send_with_inv(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_frmr *f;
	u8 *want;

	kv_connect(test, 1, IB_POLL_SOFTIRQ, IB_POLL_WORKQUEUE, false);
	f = kv_frmr_new(test, &ctx->b, 2, 512);
	want = kunit_kmalloc(test, f->len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, want);
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	kv_write_all(test, f, want);
	kv_send_with_inv(test, f);
	kv_expect_write_denied(test, f, f->mr->rkey, want);
}

static void send_with_inv_rereg(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_frmr *f;
	u32 old;
	u8 *want;

	kv_connect(test, 1, IB_POLL_WORKQUEUE, IB_POLL_WORKQUEUE, false);
	f = kv_frmr_new(test, &ctx->b, 3, 8);
	want = kunit_kmalloc(test, f->len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, want);
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	kv_write_all(test, f, want);
	kv_send_with_inv(test, f);

	/*
	 * The IBA (and rxe) allow REG_MR only on an invalid MR: this succeeds
	 * because SEND_WITH_INV invalidated it.
	 */
	old = f->mr->rkey;
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	kunit_info(test, "re-registered: rkey %#x -> %#x\n", old, f->mr->rkey);
	kv_write_all(test, f, want);

	kv_local_inv(test, f, ctx->qb[0]);
	old = f->mr->rkey;
	kv_frmr_register(test, f, ctx->qb[0], KV_FRMR_ACCESS);
	kunit_info(test, "LOCAL_INV and REG_MR: rkey %#x -> %#x\n", old,
		   f->mr->rkey);
	kv_write_all(test, f, want);
	kv_expect_write_denied(test, f, old, want);
}

/*
 * n receives on qp, then the QP to ERR: each completes flushed; so do a send
 * and a receive posted afterwards (which is what ib_drain_qp() relies on).
 */
static void kv_flush_check(struct kunit *test, struct kv_side *side,
			   struct ib_qp *qp, struct kv_buf *dst, int n)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct ib_qp_init_attr init;
	struct ib_send_wr wr = {};
	struct kv_wr *rw[8], *w;
	struct ib_sge sge;
	int i;

	kunit_info(test, "%s: %d receives, QP to ERR: each completes flushed\n",
		   side->name, n);
	KUNIT_ASSERT_LE(test, n, ARRAY_SIZE(rw));
	for (i = 0; i < n; i++) {
		sge = kv_sge(dst, 0, dst->len);
		rw[i] = kv_post_recv(test, side, qp, &sge, 1);
	}
	KUNIT_ASSERT_EQ(test, ib_modify_qp(qp, &attr, IB_QP_STATE), 0);
	KUNIT_ASSERT_EQ(test, ib_query_qp(qp, &attr, IB_QP_STATE, &init), 0);
	KUNIT_EXPECT_EQ(test, attr.qp_state, IB_QPS_ERR);
	for (i = 0; i < n; i++)
		kv_expect_wc(test, rw[i], IB_WC_WR_FLUSH_ERR, 0, "flushed receive");

	sge = kv_sge(dst, 0, 16);
	w = kv_post_recv(test, side, qp, &sge, 1);
	kv_expect_wc(test, w, IB_WC_WR_FLUSH_ERR, 0, "receive posted in ERR");
	wr.opcode = IB_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	w = kv_post_send(test, side, qp, &wr);
	kv_expect_wc(test, w, IB_WC_WR_FLUSH_ERR, 0, "send posted in ERR");
}

static void drain_and_flush(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	struct kv_buf *src, *dst_a, *dst_b;

	/* b's CQ is polled here with ib_poll_cq(), a's by ib_core */
	kv_connect(test, 1, IB_POLL_WORKQUEUE, IB_POLL_DIRECT, false);
	src = kv_buf_new(test, &ctx->a, 256);
	dst_a = kv_buf_new(test, &ctx->a, 256);
	dst_b = kv_buf_new(test, &ctx->b, 256);
	kv_send_one(test, &ctx->a, ctx->qa[0], src, &ctx->b, ctx->qb[0], dst_b,
		    NULL, 200, true, 7);

	kv_flush_check(test, &ctx->b, ctx->qb[0], dst_b, 8);
	kv_flush_check(test, &ctx->a, ctx->qa[0], dst_a, 4);
	/*
	 * ib_drain_qp() waits without a limit: called only now that both QPs
	 * are known to flush what is posted in ERR, it returns.
	 */
	ib_drain_qp(ctx->qa[0]);
	ib_drain_qp(ctx->qb[0]);
}

static void srq_two_qps(struct kunit *test)
{
	struct kv_ctx *ctx = test->priv;
	const struct ib_recv_wr *bad;
	struct kv_wr *rw[6], *sw;
	struct kv_buf *src, *dst;
	struct ib_sge sge[6], ssge;
	bool seen[6] = {};
	int i, j, n = ARRAY_SIZE(rw);

	kv_connect(test, 2, IB_POLL_WORKQUEUE, IB_POLL_WORKQUEUE, true);
	src = kv_buf_new(test, &ctx->a, 2048);
	dst = kv_buf_new(test, &ctx->b, n * 2048);
	for (i = 0; i < n; i++) {
		struct ib_recv_wr wr = { .sg_list = &sge[i], .num_sge = 1 };

		rw[i] = kv_wr_new(test, NULL, ctx->b.cq);
		sge[i] = kv_sge(dst, i * 2048, 2048);
		wr.wr_cqe = &rw[i]->cqe;
		KUNIT_ASSERT_EQ(test, ib_post_srq_recv(ctx->srq, &wr, &bad), 0);
	}
	kv_buf_fill(src, 2048);
	for (i = 0; i < n; i++) {
		struct ib_qp *qp = ctx->qa[i % 2];
		struct ib_send_wr wr = {
			.opcode = IB_WR_SEND_WITH_IMM,
			.sg_list = &ssge,
			.num_sge = 1,
			.ex.imm_data = cpu_to_be32(i),
		};

		ssge = kv_sge(src, i * 100, 1000 + i);
		sw = kv_post_send(test, &ctx->a, qp, &wr);
		kv_expect_wc(test, sw, IB_WC_SUCCESS, IB_WC_SEND, "send");
	}
	/* SRQ receives complete in posting order, whichever QP took them */
	kv_buf_for_cpu(dst);
	for (i = 0; i < n; i++) {
		KUNIT_ASSERT_EQ_MSG(test, kv_wait(rw[i]), 0, "SRQ receive %d", i);
		KUNIT_ASSERT_EQ_MSG(test, rw[i]->wc.status, IB_WC_SUCCESS, "'%s'",
				    kv_status(rw[i]->wc.status));
		KUNIT_EXPECT_EQ(test, rw[i]->wc.opcode, IB_WC_RECV);
		kv_expect_recv_flags(test, rw[i], IB_WC_WITH_IMM, "SRQ recv");
		j = be32_to_cpu(rw[i]->wc.ex.imm_data);
		KUNIT_ASSERT_LT(test, j, n);
		KUNIT_EXPECT_FALSE_MSG(test, seen[j], "message %d twice", j);
		seen[j] = true;
		KUNIT_EXPECT_PTR_EQ_MSG(test, rw[i]->wc.qp, ctx->qb[j % 2],
					"message %d on the wrong QP", j);
		KUNIT_EXPECT_EQ(test, rw[i]->wc.byte_len, 1000 + j);
		kv_expect_bytes(test, dst->va + i * 2048, src->va + j * 100,
				1000 + j, "SRQ receive data");
	}
}

static struct kunit_case kv_cases[] = {
	KUNIT_CASE(send_recv_dma_lkey),
	KUNIT_CASE(frmr_write_read),
	KUNIT_CASE(frmr_atomics),
	KUNIT_CASE(local_inv),
	KUNIT_CASE(send_with_inv),
	KUNIT_CASE(send_with_inv_rereg),
	KUNIT_CASE(drain_and_flush),
	KUNIT_CASE(srq_two_qps),
	{}
};

static struct kunit_suite kv_suite = {
	.name = "oxrdma_kverbs",
	.init = kv_init,
	.exit = kv_exit,
	.test_cases = kv_cases,
};

kunit_test_suite(kv_suite);

MODULE_DESCRIPTION("KUnit test of an RDMA device's kernel verbs (kernel ULP use)");
MODULE_LICENSE("GPL");
