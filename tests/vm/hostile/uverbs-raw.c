// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile local process's raw commands (issue 14): the uverbs write() commands oxrdma's
 * verbs answer, built by hand on the context's command file, as no library would build them.
 *
 *   uverbs-raw DEV CALLS THREADS SEED
 *
 * Each thread writes CALLS commands, picked at random: every request word zero or a
 * boundary value (0, 1, small, 2^k, 2^31, UINT32_MAX, random); handle fields a live object
 * of the right type, one of another type (a CQ's handle as a PD), a destroyed one or a
 * random number; MR ranges in, across and outside mapped memory; QP types, WR lists with
 * counts and sizes that do or do not match the bytes written (post_send on a process's own
 * QPs, whose rings are their only queue, with WRs; post_recv, post_srq_recv and poll_cq, which
 * ib_uverbs refuses for oxrdma as for rxe); response buffers that are NULL,
 * unmapped, in the kernel or too short, so an object made is destroyed again by ib_uverbs;
 * driver data in and out of random lengths. Threads share the handles and destroy what the
 * others use. Half the commands are plausible (live handles of the right type, counts and
 * ranges a library would send), so that they reach the driver. The kernel must answer
 * every command with a result or an error; closing the
 * file must release everything (the harness checks "rdma res" and the kernel log).
 *
 * Prints "uverbs-raw: N calls, E refused, M objects made" and the counts per command; exits
 * 0, or 2 when the setup failed.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include "../lib/verbs-helpers.h"

#define SLOTS 32
#define BUF_LEN (1024 * 1024)
#define OUT_LEN (64 * 1024)
/* No response is this long: the bytes after it must stay as they were. */
#define RESP_MAX 1024
#define CANARY 0xa5
#define EX IB_USER_VERBS_CMD_FLAG_EXTENDED

enum kind { K_NONE, K_PD, K_AH, K_MR, K_MW, K_CQ, K_QP, K_SRQ, K_CHAN, K_NR };

struct field {
	unsigned short off;
	unsigned char kind;
};

/* One command: its request (after the header) and response, handle fields, what it makes. */
struct cmd {
	const char *name;
	uint32_t id;
	unsigned short req, resp;
	unsigned char has_resp; /* a non-extended request starting with its response pointer */
	unsigned char makes;	/* the kind of handle the response's first word carries */
	struct field h[4];
};

#define H(s, m, k) { offsetof(struct s, m), k }
#define CMD(n, s, r, resp_ptr, mk, ...) \
	{ #n, IB_USER_VERBS_CMD_##n, sizeof(struct s), r, resp_ptr, mk, { __VA_ARGS__ } }
#define EXCMD(n, s, r, mk, ...) \
	{ "EX_" #n, EX | IB_USER_VERBS_EX_CMD_##n, sizeof(struct s), sizeof(struct r), 0, mk, \
	  { __VA_ARGS__ } }
#define RSP(s) sizeof(struct s)

static const struct cmd cmds[] = {
	CMD(QUERY_DEVICE, ib_uverbs_query_device, RSP(ib_uverbs_query_device_resp), 1, K_NONE),
	CMD(QUERY_PORT, ib_uverbs_query_port, RSP(ib_uverbs_query_port_resp), 1, K_NONE),
	CMD(ALLOC_PD, ib_uverbs_alloc_pd, RSP(ib_uverbs_alloc_pd_resp), 1, K_PD),
	CMD(DEALLOC_PD, ib_uverbs_dealloc_pd, 0, 0, K_NONE,
	    H(ib_uverbs_dealloc_pd, pd_handle, K_PD)),
	CMD(CREATE_AH, ib_uverbs_create_ah, RSP(ib_uverbs_create_ah_resp), 1, K_AH,
	    H(ib_uverbs_create_ah, pd_handle, K_PD)),
	CMD(DESTROY_AH, ib_uverbs_destroy_ah, 0, 0, K_NONE,
	    H(ib_uverbs_destroy_ah, ah_handle, K_AH)),
	CMD(REG_MR, ib_uverbs_reg_mr, RSP(ib_uverbs_reg_mr_resp), 1, K_MR,
	    H(ib_uverbs_reg_mr, pd_handle, K_PD)),
	CMD(REREG_MR, ib_uverbs_rereg_mr, RSP(ib_uverbs_rereg_mr_resp), 1, K_NONE,
	    H(ib_uverbs_rereg_mr, mr_handle, K_MR), H(ib_uverbs_rereg_mr, pd_handle, K_PD)),
	CMD(DEREG_MR, ib_uverbs_dereg_mr, 0, 0, K_NONE, H(ib_uverbs_dereg_mr, mr_handle, K_MR)),
	CMD(ALLOC_MW, ib_uverbs_alloc_mw, RSP(ib_uverbs_alloc_mw_resp), 1, K_MW,
	    H(ib_uverbs_alloc_mw, pd_handle, K_PD)),
	CMD(DEALLOC_MW, ib_uverbs_dealloc_mw, 0, 0, K_NONE,
	    H(ib_uverbs_dealloc_mw, mw_handle, K_MW)),
	CMD(CREATE_COMP_CHANNEL, ib_uverbs_create_comp_channel,
	    RSP(ib_uverbs_create_comp_channel_resp), 1, K_CHAN),
	CMD(CREATE_CQ, ib_uverbs_create_cq, RSP(ib_uverbs_create_cq_resp), 1, K_CQ,
	    H(ib_uverbs_create_cq, comp_channel, K_CHAN)),
	CMD(RESIZE_CQ, ib_uverbs_resize_cq, RSP(ib_uverbs_resize_cq_resp), 1, K_NONE,
	    H(ib_uverbs_resize_cq, cq_handle, K_CQ)),
	CMD(DESTROY_CQ, ib_uverbs_destroy_cq, RSP(ib_uverbs_destroy_cq_resp), 1, K_NONE,
	    H(ib_uverbs_destroy_cq, cq_handle, K_CQ)),
	CMD(POLL_CQ, ib_uverbs_poll_cq, RSP(ib_uverbs_poll_cq_resp), 1, K_NONE,
	    H(ib_uverbs_poll_cq, cq_handle, K_CQ)),
	CMD(REQ_NOTIFY_CQ, ib_uverbs_req_notify_cq, 0, 0, K_NONE,
	    H(ib_uverbs_req_notify_cq, cq_handle, K_CQ)),
	CMD(CREATE_QP, ib_uverbs_create_qp, RSP(ib_uverbs_create_qp_resp), 1, K_QP,
	    H(ib_uverbs_create_qp, pd_handle, K_PD), H(ib_uverbs_create_qp, send_cq_handle, K_CQ),
	    H(ib_uverbs_create_qp, recv_cq_handle, K_CQ),
	    H(ib_uverbs_create_qp, srq_handle, K_SRQ)),
	CMD(QUERY_QP, ib_uverbs_query_qp, RSP(ib_uverbs_query_qp_resp), 1, K_NONE,
	    H(ib_uverbs_query_qp, qp_handle, K_QP)),
	CMD(MODIFY_QP, ib_uverbs_modify_qp, 0, 0, K_NONE, H(ib_uverbs_modify_qp, qp_handle, K_QP)),
	CMD(DESTROY_QP, ib_uverbs_destroy_qp, RSP(ib_uverbs_destroy_qp_resp), 1, K_NONE,
	    H(ib_uverbs_destroy_qp, qp_handle, K_QP)),
	CMD(POST_SEND, ib_uverbs_post_send, RSP(ib_uverbs_post_send_resp), 1, K_NONE,
	    H(ib_uverbs_post_send, qp_handle, K_QP)),
	CMD(POST_RECV, ib_uverbs_post_recv, RSP(ib_uverbs_post_recv_resp), 1, K_NONE,
	    H(ib_uverbs_post_recv, qp_handle, K_QP)),
	CMD(POST_SRQ_RECV, ib_uverbs_post_srq_recv, RSP(ib_uverbs_post_srq_recv_resp), 1, K_NONE,
	    H(ib_uverbs_post_srq_recv, srq_handle, K_SRQ)),
	CMD(ATTACH_MCAST, ib_uverbs_attach_mcast, 0, 0, K_NONE,
	    H(ib_uverbs_attach_mcast, qp_handle, K_QP)),
	CMD(DETACH_MCAST, ib_uverbs_detach_mcast, 0, 0, K_NONE,
	    H(ib_uverbs_detach_mcast, qp_handle, K_QP)),
	CMD(CREATE_SRQ, ib_uverbs_create_srq, RSP(ib_uverbs_create_srq_resp), 1, K_SRQ,
	    H(ib_uverbs_create_srq, pd_handle, K_PD)),
	CMD(MODIFY_SRQ, ib_uverbs_modify_srq, 0, 0, K_NONE,
	    H(ib_uverbs_modify_srq, srq_handle, K_SRQ)),
	CMD(QUERY_SRQ, ib_uverbs_query_srq, RSP(ib_uverbs_query_srq_resp), 1, K_NONE,
	    H(ib_uverbs_query_srq, srq_handle, K_SRQ)),
	CMD(DESTROY_SRQ, ib_uverbs_destroy_srq, RSP(ib_uverbs_destroy_srq_resp), 1, K_NONE,
	    H(ib_uverbs_destroy_srq, srq_handle, K_SRQ)),
	EXCMD(QUERY_DEVICE, ib_uverbs_ex_query_device, ib_uverbs_ex_query_device_resp, K_NONE),
	EXCMD(CREATE_CQ, ib_uverbs_ex_create_cq, ib_uverbs_ex_create_cq_resp, K_CQ,
	      H(ib_uverbs_ex_create_cq, comp_channel, K_CHAN)),
	EXCMD(CREATE_QP, ib_uverbs_ex_create_qp, ib_uverbs_ex_create_qp_resp, K_QP,
	      H(ib_uverbs_ex_create_qp, pd_handle, K_PD),
	      H(ib_uverbs_ex_create_qp, send_cq_handle, K_CQ),
	      H(ib_uverbs_ex_create_qp, recv_cq_handle, K_CQ),
	      H(ib_uverbs_ex_create_qp, srq_handle, K_SRQ)),
	EXCMD(MODIFY_QP, ib_uverbs_ex_modify_qp, ib_uverbs_ex_modify_qp_resp, K_NONE,
	      H(ib_uverbs_ex_modify_qp, base.qp_handle, K_QP)),
};

#define NCMDS ARRAY_SIZE(cmds)

static int fd;
static char *buf;
static union ibv_gid gids[4];
/* Handles of live objects, shared by the threads without a lock: a stale one is a case too. */
static uint32_t handles[K_NR][SLOTS];
static long calls_per_thread, calls_total[NCMDS], refused_total[NCMDS], made_total;
static long unsupported_total[NCMDS];
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;

struct worker {
	unsigned int seed;
	long calls;
	long n[NCMDS], refused[NCMDS], unsupported[NCMDS], made;
	uint64_t req[1024];
	char *out;
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

static uint32_t word(struct worker *w)
{
	switch (rn(w, 9)) {
	case 0: return 1;
	case 1: return rn(w, 64);
	case 2: return rn(w, 4096);
	case 3: return 1u << rn(w, 32);
	case 4: return 0x80000000u;
	case 5: return 0x7fffffffu;
	case 6: return UINT32_MAX;
	case 7: return UINT32_MAX - 1;
	default: return (uint32_t)r64(w);
	}
}

/*
 * A handle: of a live object of that kind, of another kind, stale or random (in a plausible
 * command, one of that kind whenever there is one).
 */
static uint32_t handle(struct worker *w, enum kind k, int plausible)
{
	unsigned int r = rn(w, 10);

	if (plausible) {
		unsigned int start = rn(w, SLOTS);

		for (unsigned int k2 = 0; k2 < SLOTS; k2++) {
			uint32_t h = __atomic_load_n(&handles[k][(start + k2) % SLOTS],
						     __ATOMIC_RELAXED);

			if (h)
				return h - 1;
		}
	}
	if (r >= 4) {
		uint32_t h = __atomic_load_n(&handles[k][rn(w, SLOTS)], __ATOMIC_RELAXED);

		if (h)
			return h - 1;
	}
	if (r >= 2) {
		uint32_t h = __atomic_load_n(&handles[1 + rn(w, K_NR - 1)][rn(w, SLOTS)],
					     __ATOMIC_RELAXED);

		if (h)
			return h - 1;
	}
	return r ? rn(w, 256) : word(w);
}

static uint64_t address(struct worker *w)
{
	switch (rn(w, 6)) {
	case 0: return (uint64_t)(uintptr_t)buf + 4096 * rn(w, 256);
	case 1: return (uint64_t)(uintptr_t)buf + rn(w, BUF_LEN);
	case 2: return 0;
	case 3: return 0xffff888000000000ull + 4096 * rn(w, 1024);
	case 4: return UINT64_MAX - rn(w, 8192);
	default: return r64(w);
	}
}

static uint64_t length(struct worker *w)
{
	switch (rn(w, 6)) {
	case 0: return 0;
	case 1: return 4096;
	case 2: return 1 + rn(w, BUF_LEN);
	case 3: return BUF_LEN + 4096 * rn(w, 4);
	case 4: return UINT64_MAX - rn(w, 8192);
	default: return r64(w);
	}
}

/* Counts and attributes a library would send, for a command that should reach the driver. */
static void plausible_counts(struct worker *w, uint32_t id, void *req)
{
	switch (id) {
	case IB_USER_VERBS_CMD_QUERY_PORT:
		((struct ib_uverbs_query_port *)req)->port_num = 1;
		break;
	case IB_USER_VERBS_CMD_CREATE_AH: {
		struct ib_uverbs_ah_attr *a = &((struct ib_uverbs_create_ah *)req)->attr;

		a->port_num = 1;
		a->is_global = 1;
		a->grh.sgid_index = rn(w, 4);
		a->grh.hop_limit = 64;
		/* The device's own addresses: ones the kernel can resolve. */
		memcpy(a->grh.dgid, gids[rn(w, 4)].raw, 16);
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_CQ:
		((struct ib_uverbs_create_cq *)req)->cqe = 1 + rn(w, 256);
		break;
	case EX | IB_USER_VERBS_EX_CMD_CREATE_CQ:
		((struct ib_uverbs_ex_create_cq *)req)->cqe = 1 + rn(w, 256);
		break;
	case IB_USER_VERBS_CMD_CREATE_SRQ: {
		struct ib_uverbs_create_srq *q = req;

		q->max_wr = 1 + rn(w, 64);
		q->max_sge = 1 + rn(w, 4);
		break;
	}
	case IB_USER_VERBS_CMD_CREATE_QP: {
		struct ib_uverbs_create_qp *q = req;

		q->max_send_wr = 1 + rn(w, 64);
		q->max_recv_wr = 1 + rn(w, 64);
		q->max_send_sge = 1 + rn(w, 4);
		q->max_recv_sge = 1 + rn(w, 4);
		q->max_inline_data = rn(w, 128);
		break;
	}
	case EX | IB_USER_VERBS_EX_CMD_CREATE_QP: {
		struct ib_uverbs_ex_create_qp *q = req;

		q->max_send_wr = 1 + rn(w, 64);
		q->max_recv_wr = 1 + rn(w, 64);
		q->max_send_sge = 1 + rn(w, 4);
		q->max_recv_sge = 1 + rn(w, 4);
		break;
	}
	case IB_USER_VERBS_CMD_MODIFY_QP: {
		struct ib_uverbs_modify_qp *m = req;

		/*
		 * RESET to INIT (state, access, P_Key index, port; Q_Key for UD) or any state
		 * (RESET, INIT, RTR, RTS, SQD, SQE, ERR) with random attributes.
		 */
		m->qp_state = rn(w, 2) ? 1 : rn(w, 7);
		m->attr_mask = m->qp_state == 1 ? 0x39 | (rn(w, 2) << 6) :
						   1 | ((uint32_t)r64(w) & 0x1fffff);
		m->qp_access_flags = rn(w, 16);
		m->pkey_index = 0;
		m->port_num = 1;
		m->path_mtu = 1 + rn(w, 5);
		m->dest.port_num = 1;
		m->dest.is_global = 1;
		break;
	}
	case IB_USER_VERBS_CMD_POLL_CQ:
		((struct ib_uverbs_poll_cq *)req)->ne = 1 + rn(w, 16);
		break;
	}
}

/* The fields that make a command reach the driver more often than random words would. */
static void shape(struct worker *w, const struct cmd *c, void *req, size_t *trail, int plausible)
{
	uint32_t id = c->id;

	if (plausible)
		plausible_counts(w, id, req);

	if (id == IB_USER_VERBS_CMD_REG_MR || id == IB_USER_VERBS_CMD_REREG_MR) {
		struct ib_uverbs_reg_mr *m = req;
		struct ib_uverbs_rereg_mr *rr = req;
		uint64_t start = address(w), len = length(w);
		uint32_t access = rn(w, 2) ? rn(w, 16) : word(w);

		if (plausible) {
			start = (uint64_t)(uintptr_t)buf + 4096 * rn(w, 128);
			len = 1 + rn(w, BUF_LEN / 2);
			access = IBV_ACCESS_LOCAL_WRITE | rn(w, 16);
		}

		if (id == IB_USER_VERBS_CMD_REG_MR) {
			m->start = start;
			m->length = len;
			m->hca_va = rn(w, 2) ? start : address(w);
			m->access_flags = access;
		} else {
			rr->flags = rn(w, 8);
			rr->start = start;
			rr->length = len;
			rr->hca_va = rn(w, 2) ? start : address(w);
			rr->access_flags = access;
		}
	} else if (id == IB_USER_VERBS_CMD_CREATE_QP ||
		   id == (EX | IB_USER_VERBS_EX_CMD_CREATE_QP)) {
		static const uint8_t types[] = { IB_UVERBS_QPT_RC, IB_UVERBS_QPT_UC,
						 IB_UVERBS_QPT_UD, IB_UVERBS_QPT_RAW_PACKET,
						 IB_UVERBS_QPT_XRC_INI, IB_UVERBS_QPT_DRIVER };
		uint8_t type = rn(w, 4) ? types[rn(w, 3)] : (rn(w, 2) ? types[rn(w, 6)] : r64(w));

		if (id == IB_USER_VERBS_CMD_CREATE_QP) {
			struct ib_uverbs_create_qp *q = req;

			q->qp_type = type;
			q->is_srq = rn(w, 3) == 0;
		} else {
			struct ib_uverbs_ex_create_qp *q = req;

			q->qp_type = type;
			q->is_srq = rn(w, 3) == 0;
			if (rn(w, 2)) {
				q->comp_mask = 0;
				q->create_flags = 0;
			}
		}
	} else if (id == IB_USER_VERBS_CMD_CREATE_CQ) {
		struct ib_uverbs_create_cq *q = req;

		if (rn(w, 3) || plausible)
			q->comp_channel = -1;
		q->comp_vector = rn(w, 4);
	} else if (id == (EX | IB_USER_VERBS_EX_CMD_CREATE_CQ)) {
		struct ib_uverbs_ex_create_cq *q = req;

		if (rn(w, 3) || plausible)
			q->comp_channel = -1;
		if (rn(w, 2) || plausible) {
			q->comp_mask = 0;
			q->flags = 0;
		}
	} else if (id == IB_USER_VERBS_CMD_POST_SEND || id == IB_USER_VERBS_CMD_POST_RECV ||
		   id == IB_USER_VERBS_CMD_POST_SRQ_RECV) {
		/* All three share this shape: handle, wr_count, sge_count, wqe_size. */
		struct ib_uverbs_post_send *p = req;
		size_t wr = id == IB_USER_VERBS_CMD_POST_SEND ? sizeof(struct ib_uverbs_send_wr) :
								   sizeof(struct ib_uverbs_recv_wr);

		if (rn(w, 4) || plausible) {
			p->wr_count = rn(w, 4);
			p->sge_count = rn(w, 5);
			p->wqe_size = rn(w, 4) ? wr : rn(w, 256);
		}
		*trail = (size_t)p->wr_count * p->wqe_size + (size_t)p->sge_count *
			 sizeof(struct ib_uverbs_sge);
		if (*trail > 2048 || (!plausible && !rn(w, 8)))
			*trail = 8 * rn(w, 64);
	}
}

static int destroys(uint32_t id)
{
	switch (id) {
	case IB_USER_VERBS_CMD_DEALLOC_PD:
	case IB_USER_VERBS_CMD_DESTROY_AH:
	case IB_USER_VERBS_CMD_DEREG_MR:
	case IB_USER_VERBS_CMD_DEALLOC_MW:
	case IB_USER_VERBS_CMD_DESTROY_CQ:
	case IB_USER_VERBS_CMD_DESTROY_QP:
	case IB_USER_VERBS_CMD_DESTROY_SRQ:
		return 1;
	}
	return 0;
}

/* A destroyed object's handle leaves the table (another thread may still have picked it). */
static void forget(enum kind k, uint32_t h)
{
	for (unsigned int i = 0; i < SLOTS; i++) {
		uint32_t want = h + 1;

		__atomic_compare_exchange_n(&handles[k][i], &want, 0, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
}

/* One command: built, written, and the object it made recorded. */
static void one(struct worker *w)
{
	unsigned int i = rn(w, NCMDS);
	const struct cmd *c = &cmds[i];
	int ex = !!(c->id & EX), plausible = rn(w, 2);
	size_t head = sizeof(struct ib_uverbs_cmd_hdr) +
		      (ex ? sizeof(struct ib_uverbs_ex_cmd_hdr) : 0);
	char *msg = (char *)w->req;
	char *req = msg + head;
	size_t trail = 0, drv_in = plausible ? 0 : 8 * rn(w, 9), drv_out = 8 * rn(w, 9);
	size_t resp_len = c->resp;
	uint64_t resp = (uint64_t)(uintptr_t)w->out;
	struct ib_uverbs_cmd_hdr *hdr = (void *)msg;
	ssize_t ret;

	memset(w->out, 0, RESP_MAX);
	for (size_t k = 0; k < c->req / 4; k++)
		((uint32_t *)req)[k] = rn(w, 2) || plausible ? 0 : word(w);
	for (int k = 0; k < 4 && c->h[k].kind; k++)
		*(uint32_t *)(req + c->h[k].off) = handle(w, c->h[k].kind, plausible);
	shape(w, c, req, &trail, plausible);
	for (size_t k = 0; k < (trail + drv_in) / 4; k++)
		((uint32_t *)(req + c->req))[k] = rn(w, 2) ? 0 : word(w);

	/* The response: mostly a buffer of the right size, sometimes none, bad or short. */
	switch (plausible ? 15 : rn(w, 16)) {
	case 0:
		resp = 0;
		break;
	case 1:
		resp = 16;
		break;
	case 2:
		resp = 0xffffffff81000000ull;
		break;
	case 3:
		/* 8 bytes short (never wrapping: the kernel clears what it is given). */
		resp_len = resp_len >= 8 ? resp_len - 8 : 0;
		break;
	}
	if (!c->has_resp && !ex) {
		resp_len = 0;
		drv_out = 0;
	}

	if (ex) {
		struct ib_uverbs_ex_cmd_hdr *xh = (void *)(msg + sizeof(*hdr));

		hdr->in_words = c->req / 8;
		hdr->out_words = resp_len / 8;
		xh->response = resp;
		xh->provider_in_words = drv_in / 8;
		xh->provider_out_words = drv_out / 8;
		xh->cmd_hdr_reserved = rn(w, 16) || plausible ? 0 : word(w);
	} else {
		hdr->in_words = (head + c->req + trail + drv_in) / 4;
		hdr->out_words = (resp_len + drv_out) / 4;
		if (c->has_resp)
			*(uint64_t *)req = resp;
	}
	hdr->command = c->id;

	w->n[i]++;
	w->calls++;
	ret = write(fd, msg, head + c->req + trail + drv_in);
	for (size_t k = RESP_MAX; k < 2 * RESP_MAX; k++)
		if ((unsigned char)w->out[k] != CANARY) {
			printf("uverbs-raw: %s wrote past its response (at %zu; %zu + %zu asked)\n",
			       c->name, k, resp_len, drv_out);
			exit(1);
		}
	if (ret < 0) {
		w->refused[i]++;
		w->unsupported[i] += errno == EOPNOTSUPP;
		return;
	}
	if (destroys(c->id))
		forget(c->h[0].kind, *(uint32_t *)(req + c->h[0].off));
	if (c->makes && resp == (uint64_t)(uintptr_t)w->out && resp_len >= 4) {
		uint32_t h = *(uint32_t *)w->out;

		if (c->makes == K_CHAN && rn(w, 2)) {
			close(h);
			return;
		}
		h = __atomic_exchange_n(&handles[c->makes][rn(w, SLOTS)], h + 1, __ATOMIC_RELAXED);
		/* A channel's descriptor pushed out of the table is closed; objects stay. */
		if (c->makes == K_CHAN && h)
			close(h - 1);
		w->made++;
	}
}

static void *run(void *arg)
{
	struct worker *w = arg;

	while (w->calls < calls_per_thread)
		one(w);
	pthread_mutex_lock(&totals_lock);
	for (size_t i = 0; i < NCMDS; i++) {
		calls_total[i] += w->n[i];
		refused_total[i] += w->refused[i];
		unsupported_total[i] += w->unsupported[i];
	}
	made_total += w->made;
	pthread_mutex_unlock(&totals_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct worker *ws;
	pthread_t *tids;
	long calls = 0, refused = 0;
	int threads;

	if (argc != 5) {
		fprintf(stderr, "usage: %s DEV CALLS THREADS SEED\n", argv[0]);
		return 2;
	}
	calls_per_thread = atol(argv[2]);
	threads = atoi(argv[3]);
	ctx = ox_open_device(argv[1]);
	buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ws = calloc(threads, sizeof(*ws));
	tids = calloc(threads, sizeof(*tids));
	if (!ctx || buf == MAP_FAILED || threads < 1 || !ws || !tids) {
		fprintf(stderr, "uverbs-raw: no device %s, or no memory\n", argv[1]);
		return 2;
	}
	memset(buf, 0x5a, BUF_LEN);
	for (int i = 0; i < 4; i++)
		ibv_query_gid(ctx, 1, i, &gids[i]);
	fd = ctx->cmd_fd;
	for (int t = 0; t < threads; t++) {
		ws[t].seed = (unsigned int)atol(argv[4]) * 7919 + t;
		/* Response buffers out of the heap, with a guard page after each. */
		ws[t].out = mmap(NULL, OUT_LEN + 4096, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ws[t].out == MAP_FAILED || mprotect(ws[t].out + OUT_LEN, 4096, PROT_NONE)) {
			fprintf(stderr, "uverbs-raw: no memory\n");
			return 2;
		}
		memset(ws[t].out + RESP_MAX, CANARY, OUT_LEN - RESP_MAX);
		if (pthread_create(&tids[t], NULL, run, &ws[t])) {
			fprintf(stderr, "uverbs-raw: no thread\n");
			return 2;
		}
	}
	for (int t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	for (size_t i = 0; i < NCMDS; i++) {
		calls += calls_total[i];
		refused += refused_total[i];
	}
	printf("uverbs-raw: %ld calls, %ld refused, %ld objects made\n", calls, refused,
	       made_total);
	for (size_t i = 0; i < NCMDS; i++)
		printf("  %s %ld (%ld refused, %ld EOPNOTSUPP)\n", cmds[i].name, calls_total[i],
		       refused_total[i], unsupported_total[i]);
	/* Closing the command file destroys what the commands made. */
	ibv_close_device(ctx);
	return 0;
}
