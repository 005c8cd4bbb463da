// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile local process (issue 14): random and boundary arguments to every verb oxrdma
 * implements, from several threads sharing one device context.
 *
 *   verbs-fuzz DEV GID_INDEX CALLS THREADS SEED
 *
 * Each thread makes CALLS calls, picked at random: PDs, MRs (addresses that are unmapped,
 * kernel, wrapping or NULL; lengths of 0, huge or random; any access bits), CQs, SRQs and QPs
 * of any type with counts near 0, the device's maximum and UINT32_MAX, modify_qp with random
 * attributes and masks, AHs with random GIDs and ports, post_send and post_recv with random
 * opcodes, SGEs, keys and inline sizes, polls, notifications, mmap of the command file at
 * random offsets and lengths, fork() with registered memory, and an RC pair moving data
 * whose target MR, target QP or requester QP is destroyed while the transfer runs (the CQ
 * after both QPs). Destroys may be refused (EBUSY):
 * the object stays and is used on. The kernel must answer each call with a result or an
 * error; the harness judges the kernel log.
 *
 * Prints "verbs-fuzz: N calls, E errors" with a count per call; exits 0 unless setup
 * failed (2) or a call did something that cannot be (1: printed).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "../lib/verbs-helpers.h"

#define POOL 16
#define BUF_LEN (1024 * 1024)
/* The RC QPs' ACK timeout (4.096 us << 8) and retry counts. */
#define RC_TIMEOUT 8
#define RC_RETRY 2

enum call {
	C_PD, C_MR, C_CQ, C_SRQ, C_QP, C_MODIFY, C_AH, C_SEND, C_RECV, C_POLL, C_MMAP, C_FORK,
	C_TEARDOWN, C_DESTROY, C_NR
};

static const char *const call_names[C_NR] = {
	"alloc_pd", "reg_mr", "create_cq", "create_srq", "create_qp", "modify_qp", "create_ah",
	"post_send", "post_recv", "poll_cq", "mmap", "fork", "teardown_under_traffic", "destroy",
};

static struct ibv_context *ctx;
static struct ibv_device_attr dev_attr;
static unsigned int gid_index;
static long calls_total[C_NR], errors_total[C_NR];
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;

struct worker {
	unsigned int seed;
	long calls;
	long n[C_NR], err[C_NR];
	struct ibv_pd *pd[POOL];
	struct ibv_mr *mr[POOL];
	struct ibv_cq *cq[POOL];
	struct ibv_srq *srq[POOL];
	struct ibv_qp *qp[POOL];
	struct ibv_ah *ah[POOL];
	char *buf;
	struct ibv_mr *buf_mr;
	struct ibv_pd *buf_pd;
};

static uint64_t r64(struct worker *w)
{
	return ((uint64_t)rand_r(&w->seed) << 33) ^ ((uint64_t)rand_r(&w->seed) << 11) ^
	       rand_r(&w->seed);
}

static unsigned int rn(struct worker *w, unsigned int n)
{
	return n ? (unsigned int)(r64(w) % n) : 0;
}

/* A count: small, near a device maximum, or near the top of its type. */
static uint32_t count(struct worker *w, uint32_t max)
{
	switch (rn(w, 6)) {
	case 0: return 0;
	case 1: return 1 + rn(w, 64);
	case 2: return max;
	case 3: return max + 1;
	case 4: return UINT32_MAX - rn(w, 2);
	default: return (uint32_t)r64(w);
	}
}

/* A live object of the pool, mostly (a NULL one in eight picks, or when there is none). */
static void *pick(struct worker *w, void **pool)
{
	int start = rn(w, POOL);

	if (!rn(w, 8))
		return pool[start];
	for (int k = 0; k < POOL; k++)
		if (pool[(start + k) % POOL])
			return pool[(start + k) % POOL];
	return NULL;
}

static int slot(struct worker *w, void **pool)
{
	int i = rn(w, POOL);

	return pool[i] ? -1 : i;
}

static struct ibv_pd *any_pd(struct worker *w)
{
	struct ibv_pd *pd = pick(w, (void **)w->pd);

	return pd ? pd : w->buf_pd;
}

static struct ibv_cq *any_cq(struct worker *w)
{
	return pick(w, (void **)w->cq);
}

/* An address: the thread's buffer (anywhere in it), NULL, unmapped, kernel, wrapping. */
static void *address(struct worker *w)
{
	switch (rn(w, 6)) {
	case 0: return NULL;
	case 1: return (void *)(uintptr_t)0xffff888000000000ULL;
	case 2: return (void *)(uintptr_t)(UINT64_MAX - rn(w, 8192));
	case 3: return (void *)(uintptr_t)0x10000;
	default: return w->buf + rn(w, BUF_LEN);
	}
}

static size_t length(struct worker *w)
{
	switch (rn(w, 5)) {
	case 0: return 0;
	case 1: return (size_t)1 << (20 + rn(w, 30));
	case 2: return SIZE_MAX - rn(w, 4096);
	default: return 1 + rn(w, BUF_LEN);
	}
}

static int access_flags(struct worker *w)
{
	return rn(w, 4) ? (int)(r64(w) & 0x1f) : (int)r64(w);
}

static int done(struct worker *w, enum call c, int failed)
{
	w->n[c]++;
	w->err[c] += !!failed;
	return !failed;
}

static void do_pd(struct worker *w)
{
	int i = slot(w, (void **)w->pd);

	if (i >= 0) {
		w->pd[i] = ibv_alloc_pd(ctx);
		done(w, C_PD, !w->pd[i]);
	}
}

static void do_mr(struct worker *w)
{
	int i = slot(w, (void **)w->mr);

	if (i >= 0) {
		w->mr[i] = ibv_reg_mr(any_pd(w), address(w), length(w), access_flags(w));
		done(w, C_MR, !w->mr[i]);
	}
}

static void do_cq(struct worker *w)
{
	int i = slot(w, (void **)w->cq);

	if (i >= 0) {
		w->cq[i] = ibv_create_cq(ctx, (int)count(w, dev_attr.max_cqe), NULL, NULL,
					 (int)count(w, ctx->num_comp_vectors));
		done(w, C_CQ, !w->cq[i]);
	}
}

static void do_srq(struct worker *w)
{
	int i = slot(w, (void **)w->srq);
	struct ibv_srq_init_attr a = { .attr = {
		.max_wr = count(w, dev_attr.max_srq_wr), .max_sge = count(w, dev_attr.max_srq_sge),
		.srq_limit = count(w, dev_attr.max_srq_wr) } };

	if (i >= 0) {
		w->srq[i] = ibv_create_srq(any_pd(w), &a);
		done(w, C_SRQ, !w->srq[i]);
	}
}

static void do_qp(struct worker *w)
{
	static const int types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET,
				     IBV_QPT_XRC_SEND, 0, 77 };
	int i = slot(w, (void **)w->qp);
	struct ibv_qp_init_attr a = {
		.send_cq = any_cq(w), .recv_cq = any_cq(w),
		.srq = rn(w, 4) ? NULL : pick(w, (void **)w->srq),
		.qp_type = types[rn(w, ARRAY_SIZE(types))],
		.sq_sig_all = (int)rn(w, 2),
		.cap = { .max_send_wr = count(w, dev_attr.max_qp_wr),
			 .max_recv_wr = count(w, dev_attr.max_qp_wr),
			 .max_send_sge = count(w, dev_attr.max_sge),
			 .max_recv_sge = count(w, dev_attr.max_sge),
			 .max_inline_data = count(w, 512) },
	};

	if (i < 0)
		return;
	/* Mostly well-formed: most of the interesting paths need a QP to exist. */
	if (rn(w, 2)) {
		a.qp_type = rn(w, 2) ? IBV_QPT_RC : IBV_QPT_UD;
		a.cap.max_send_wr = 1 + rn(w, 64);
		a.cap.max_recv_wr = 1 + rn(w, 64);
		a.cap.max_send_sge = 1 + rn(w, 4);
		a.cap.max_recv_sge = 1 + rn(w, 4);
		a.cap.max_inline_data = rn(w, 256);
	}
	if (!a.send_cq || !a.recv_cq) {
		done(w, C_QP, 1);
		return;
	}
	w->qp[i] = ibv_create_qp(any_pd(w), &a);
	done(w, C_QP, !w->qp[i]);
}

/* The next state of QP's way to RTS, with valid attributes (UD or connected to itself). */
static int next_state(struct worker *w, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	union ibv_gid gid;
	int ud = qp->qp_type == IBV_QPT_UD, mask;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	switch (a.qp_state) {
	case IBV_QPS_RESET:
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qkey = 0x11111111;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
	case IBV_QPS_INIT:
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		if (ud)
			return ibv_modify_qp(qp, &a, IBV_QP_STATE);
		if (ibv_query_gid(ctx, 1, gid_index, &gid))
			return -1;
		return ox_qp_to_rtr(qp, qp->qp_num, &gid, gid_index, rn(w, 1 << 24));
	case IBV_QPS_RTR:
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = rn(w, 1 << 24);
		a.timeout = RC_TIMEOUT;
		a.retry_cnt = RC_RETRY;
		a.rnr_retry = RC_RETRY;
		a.max_rd_atomic = 1;
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (!ud)
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		return ibv_modify_qp(qp, &a, mask);
	case IBV_QPS_ERR:
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE);
	default:
		return 0;
	}
}

static void do_modify(struct worker *w)
{
	struct ibv_qp *qp = pick(w, (void **)w->qp);
	union ibv_gid gid;
	struct ibv_qp_attr a;
	int mask;

	if (!qp)
		return;
	if (rn(w, 2)) {
		done(w, C_MODIFY, next_state(w, qp) != 0);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = rn(w, 8);
	a.cur_qp_state = rn(w, 8);
	a.path_mtu = rn(w, 7);
	a.qkey = (uint32_t)r64(w);
	a.rq_psn = (uint32_t)r64(w);
	a.sq_psn = (uint32_t)r64(w);
	a.dest_qp_num = rn(w, 2) ? (uint32_t)r64(w) : qp->qp_num;
	a.qp_access_flags = access_flags(w);
	a.pkey_index = rn(w, 4);
	a.port_num = rn(w, 3);
	a.max_rd_atomic = rn(w, 256);
	a.max_dest_rd_atomic = rn(w, 256);
	a.min_rnr_timer = rn(w, 64);
	a.timeout = rn(w, 64);
	a.retry_cnt = rn(w, 16);
	a.rnr_retry = rn(w, 16);
	a.cap.max_send_wr = count(w, dev_attr.max_qp_wr);
	a.ah_attr.is_global = rn(w, 4) != 0;
	a.ah_attr.port_num = rn(w, 4) ? 1 : rn(w, 256);
	a.ah_attr.grh.sgid_index = rn(w, 4) ? gid_index : rn(w, 256);
	a.ah_attr.grh.hop_limit = rn(w, 256);
	if (rn(w, 2) && !ibv_query_gid(ctx, 1, gid_index, &gid)) {
		a.ah_attr.grh.dgid = gid;
	} else {
		for (int k = 0; k < 16; k++)
			a.ah_attr.grh.dgid.raw[k] = rn(w, 256);
	}
	mask = rn(w, 3) ? (int)(r64(w) & 0x1fffff) : (int)r64(w);
	if (rn(w, 2))
		mask |= IBV_QP_STATE;
	done(w, C_MODIFY, ibv_modify_qp(qp, &a, mask) != 0);
	if (rn(w, 2)) {
		struct ibv_qp_init_attr ia;

		ibv_query_qp(qp, &a, (int)r64(w), &ia);
	}
}

static void do_ah(struct worker *w)
{
	int i = slot(w, (void **)w->ah);
	struct ibv_ah_attr a = {
		.is_global = rn(w, 4) != 0, .port_num = rn(w, 4) ? 1 : rn(w, 256),
		.grh = { .sgid_index = rn(w, 4) ? gid_index : rn(w, 256), .hop_limit = rn(w, 256),
			 .traffic_class = rn(w, 256), .flow_label = (uint32_t)r64(w) },
		.dlid = rn(w, 65536), .sl = rn(w, 16),
	};

	if (i < 0)
		return;
	for (int k = 0; k < 16; k++)
		a.grh.dgid.raw[k] = rn(w, 2) ? rn(w, 256) : 0;
	if (rn(w, 2)) {
		ibv_query_gid(ctx, 1, gid_index, &a.grh.dgid);
	} else if (rn(w, 2)) {
		a.grh.dgid.raw[10] = 0xff;     /* IPv4-mapped */
		a.grh.dgid.raw[11] = 0xff;
		a.grh.dgid.raw[12] = 10;
	}
	w->ah[i] = ibv_create_ah(any_pd(w), &a);
	done(w, C_AH, !w->ah[i]);
}

static void random_sges(struct worker *w, struct ibv_sge *sge, int n)
{
	for (int k = 0; k < n; k++) {
		struct ibv_mr *mr = pick(w, (void **)w->mr);

		sge[k].addr = (uintptr_t)(rn(w, 3) ? w->buf + rn(w, BUF_LEN) : address(w));
		sge[k].length = rn(w, 3) ? rn(w, 65536) : (uint32_t)r64(w);
		sge[k].lkey = rn(w, 2) ? w->buf_mr->lkey : mr ? mr->lkey : (uint32_t)r64(w);
	}
}

static void do_send(struct worker *w)
{
	struct ibv_qp *qp = pick(w, (void **)w->qp);
	/* An SGE list per WR: an inline WR's list must stay ours until the post. */
	struct ibv_sge sges[4][64];
	struct ibv_send_wr wr[4], *bad;
	int nwr = 1 + rn(w, 4);

	if (!qp)
		return;
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < nwr; k++) {
		int nsge = rn(w, 4) ? rn(w, 4) : rn(w, 65);
		struct ibv_sge *sge = sges[k];

		if (nsge > 64)
			nsge = 64;
		random_sges(w, sge, nsge);
		wr[k].wr_id = r64(w);
		wr[k].sg_list = nsge ? sge : NULL;
		wr[k].num_sge = rn(w, 8) ? nsge : (int)r64(w) & 0xffff;
		if (wr[k].num_sge > nsge)
			wr[k].num_sge = nsge;
		wr[k].opcode = rn(w, 12);
		wr[k].send_flags = (unsigned int)r64(w) & 0x3f;
		if (wr[k].send_flags & IBV_SEND_INLINE) {
			/* The provider copies inline data from these addresses: keep them ours. */
			for (int j = 0; j < nsge; j++) {
				sge[j].length = rn(w, 4) ? rn(w, 256) : rn(w, 65536);
				sge[j].addr = (uintptr_t)w->buf + rn(w, BUF_LEN - sge[j].length);
			}
		}
		wr[k].imm_data = (uint32_t)r64(w);
		wr[k].wr.rdma.remote_addr = r64(w);
		wr[k].wr.rdma.rkey = (uint32_t)r64(w);
		if (qp->qp_type == IBV_QPT_UD) {
			wr[k].wr.ud.ah = pick(w, (void **)w->ah);
			wr[k].wr.ud.remote_qpn = (uint32_t)r64(w);
			wr[k].wr.ud.remote_qkey = (uint32_t)r64(w);
			/* Without an AH: an opcode refused before the AH is looked at. */
			if (!wr[k].wr.ud.ah)
				wr[k].opcode = IBV_WR_RDMA_WRITE;
		}
		wr[k].next = k + 1 < nwr ? &wr[k + 1] : NULL;
	}
	done(w, C_SEND, ibv_post_send(qp, wr, &bad) != 0);
}

static void do_recv(struct worker *w)
{
	struct ibv_qp *qp = pick(w, (void **)w->qp);
	struct ibv_srq *srq = pick(w, (void **)w->srq);
	struct ibv_sge sge[8];
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = sge }, *bad;

	wr.num_sge = rn(w, 9);
	random_sges(w, sge, wr.num_sge);
	if (srq && rn(w, 2))
		done(w, C_RECV, ibv_post_srq_recv(srq, &wr, &bad) != 0);
	else if (qp)
		done(w, C_RECV, ibv_post_recv(qp, &wr, &bad) != 0);
}

static void do_poll(struct worker *w)
{
	struct ibv_cq *cq = any_cq(w);
	struct ibv_wc wc[64];

	if (!cq)
		return;
	if (rn(w, 4))
		done(w, C_POLL, ibv_poll_cq(cq, 1 + rn(w, 64), wc) < 0);
	else
		done(w, C_POLL, ibv_req_notify_cq(cq, rn(w, 2)) != 0);
}

/* The command file mapped at offsets and lengths that match no object (or do). */
static void do_mmap(struct worker *w)
{
	off_t off = (off_t)(rn(w, 2) ? rn(w, 64) : rn(w, 1 << 20)) * 4096;
	size_t len = rn(w, 3) ? 4096 * (1 + rn(w, 16)) : (size_t)1 << (12 + rn(w, 24));
	int prot = rn(w, 2) ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap(NULL, len, prot, MAP_SHARED, ctx->cmd_fd, off);

	done(w, C_MMAP, p == MAP_FAILED);
	if (p != MAP_FAILED)
		munmap(p, len);
}

/* fork() with memory registered: the child writes to the registered buffer and leaves. */
static void do_fork(struct worker *w)
{
	pid_t pid = fork();

	if (pid == 0) {
		memset(w->buf, 0x77, 4096);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	done(w, C_FORK, pid < 0);
}

/* QP of this device to RTS, connected to QP number DEST of this device; PSNs 0. */
static int rc_connect(struct ibv_qp *qp, uint32_t dest)
{
	union ibv_gid gid;

	if (ibv_query_gid(ctx, 1, gid_index, &gid) || ox_qp_to_init(qp) ||
	    ox_qp_to_rtr(qp, dest, &gid, gid_index, 0))
		return -1;
	return ox_qp_to_rts(qp, 0, RC_TIMEOUT, RC_RETRY, RC_RETRY);
}

/*
 * Two RC QPs of the device connected to each other, RDMA WRITEs and READs of the whole
 * buffer posted, then the target MR, a QP or the CQ destroyed at once, while they run.
 */
static void do_teardown(struct worker *w)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = cq ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_qp *b = a ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_mr *src = NULL, *dst = NULL;
	char *target = NULL;
	int ok = 0, order = rn(w, 4);

	if (!b || rc_connect(a, b->qp_num) || rc_connect(b, a->qp_num))
		goto out;
	target = aligned_alloc(4096, BUF_LEN);
	src = target ? ibv_reg_mr(pd, w->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	dst = src ? ibv_reg_mr(pd, target, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	if (!dst)
		goto out;
	for (int k = 0; k < 8; k++) {
		struct ibv_sge sge = { .addr = (uintptr_t)w->buf, .length = BUF_LEN,
				       .lkey = src->lkey };
		struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1,
					  .opcode = k & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { .remote_addr = (uintptr_t)target,
						       .rkey = dst->rkey } }, *bad;

		ibv_post_send(a, &wr, &bad);
	}
	ok = 1;
	/* What goes first while the transfer runs. */
	if (order == 0) {
		ibv_dereg_mr(dst);
		dst = NULL;
	} else if (order == 1) {
		ibv_destroy_qp(b);
		b = NULL;
	} else if (order == 2) {
		ibv_destroy_qp(a);
		a = NULL;
	}
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (dst)
		ibv_dereg_mr(dst);
	if (src)
		ibv_dereg_mr(src);
	free(target);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	done(w, C_TEARDOWN, !ok);
}

static int destroy_qp(void *o)
{
	return ibv_destroy_qp(o);
}

static int destroy_ah(void *o)
{
	return ibv_destroy_ah(o);
}

static int destroy_mr(void *o)
{
	return ibv_dereg_mr(o);
}

static int destroy_srq(void *o)
{
	return ibv_destroy_srq(o);
}

static int destroy_cq(void *o)
{
	return ibv_destroy_cq(o);
}

static int destroy_pd(void *o)
{
	return ibv_dealloc_pd(o);
}

/* The pools, dependents before what they depend on, with their destructors. */
#define NR_POOLS 6
static int (*const destroyers[NR_POOLS])(void *) = {
	destroy_qp, destroy_ah, destroy_mr, destroy_srq, destroy_cq, destroy_pd,
};

static void **pool_of(struct worker *w, int k)
{
	void **pools[NR_POOLS] = { (void **)w->qp, (void **)w->ah, (void **)w->mr,
				   (void **)w->srq, (void **)w->cq, (void **)w->pd };

	return pools[k];
}

/* Destroys object I of pool K; a refusal (EBUSY: still in use) leaves it in the pool. */
static int destroy(struct worker *w, int k, int i)
{
	void **pool = pool_of(w, k);
	int err = pool[i] ? destroyers[k](pool[i]) : 0;

	if (!err)
		pool[i] = NULL;
	return err;
}

static void do_destroy(struct worker *w)
{
	done(w, C_DESTROY, destroy(w, rn(w, NR_POOLS), rn(w, POOL)) != 0);
}

static void cleanup(struct worker *w)
{
	/* Dependents first; what is still refused is left to close. */
	for (int k = 0; k < NR_POOLS; k++)
		for (int i = 0; i < POOL; i++)
			destroy(w, k, i);
	ibv_dereg_mr(w->buf_mr);
	ibv_dealloc_pd(w->buf_pd);
}

static void *run(void *arg)
{
	struct worker *w = arg;

	for (long n = 0; n < w->calls; n++) {
		unsigned int r = rn(w, 100);

		if (r < 6)
			do_pd(w);
		else if (r < 16)
			do_mr(w);
		else if (r < 24)
			do_cq(w);
		else if (r < 29)
			do_srq(w);
		else if (r < 40)
			do_qp(w);
		else if (r < 52)
			do_modify(w);
		else if (r < 57)
			do_ah(w);
		else if (r < 70)
			do_send(w);
		else if (r < 76)
			do_recv(w);
		else if (r < 82)
			do_poll(w);
		else if (r < 86)
			do_mmap(w);
		else if (r < 87)
			do_fork(w);
		else if (r < 89)
			do_teardown(w);
		else
			do_destroy(w);
	}
	cleanup(w);
	pthread_mutex_lock(&totals_lock);
	for (int c = 0; c < C_NR; c++) {
		calls_total[c] += w->n[c];
		errors_total[c] += w->err[c];
	}
	pthread_mutex_unlock(&totals_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	long calls, all = 0, errs = 0;
	int threads;
	unsigned int seed;

	if (argc != 6) {
		fprintf(stderr, "usage: verbs-fuzz DEV GID_INDEX CALLS THREADS SEED\n");
		return 2;
	}
	gid_index = atoi(argv[2]);
	calls = atol(argv[3]);
	threads = atoi(argv[4]);
	seed = (unsigned int)strtoul(argv[5], NULL, 0);
	ctx = ox_open_device(argv[1]);
	if (!ctx || ibv_query_device(ctx, &dev_attr)) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 2;
	}
	{
		pthread_t tid[threads];
		struct worker *w = calloc(threads, sizeof(*w));

		if (!w)
			return 2;
		for (int t = 0; t < threads; t++) {
			w[t].seed = seed + t * 7919;
			w[t].calls = calls;
			w[t].buf = aligned_alloc(4096, BUF_LEN);
			w[t].buf_pd = ibv_alloc_pd(ctx);
			w[t].buf_mr = w[t].buf_pd && w[t].buf ?
				ibv_reg_mr(w[t].buf_pd, w[t].buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE) :
				NULL;
			if (!w[t].buf_mr) {
				fprintf(stderr, "setup: %s\n", strerror(errno));
				return 2;
			}
		}
		for (int t = 0; t < threads; t++)
			pthread_create(&tid[t], NULL, run, &w[t]);
		for (int t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);
	}
	for (int c = 0; c < C_NR; c++) {
		printf("call %s %ld errors %ld\n", call_names[c], calls_total[c], errors_total[c]);
		all += calls_total[c];
		errs += errors_total[c];
	}
	printf("verbs-fuzz: %ld calls, %ld errors\n", all, errs);
	return ibv_close_device(ctx) ? 1 : 0;
}
