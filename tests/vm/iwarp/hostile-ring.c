// SPDX-License-Identifier: GPL-2.0
/*
 * A process that writes garbage into the shared rings of its own iWARP QPs (oxiwarp), over
 * rdma_cm: the kernel must treat the rings as hostile, on iWARP as on RoCE
 * (tests/vm/hostile/hostile.py is the RoCE version).
 *
 *   hostile-ring server ADDR PORT    accept a bystander connection (echoing what it receives
 *                                    on it until "done") and one connection per scenario
 *   hostile-ring client ADDR PORT    connect the bystander, then per scenario a victim
 *                                    connection whose rings it scribbles over
 *
 * Scenarios: the SQ producer index beyond the ring, a garbage WQE, a SEND with an L_Key that
 * does not exist, SGEs past their MR and of 4 GiB - 1 bytes, 255 SGEs, an inline length past
 * its slot, an impossible CQ consumer index. Each victim must end with an error completion of
 * the expected kind and/or its QP in the error state, and after each one the bystander
 * connection on the same devices must still carry a SEND both ways.
 *
 * The rings are found in /proc/self/maps (mappings of the device's uverbs file, in file
 * offset order: the victim's CQ ring, then its send and receive rings). The kernel is made to
 * look at them with an RTS -> RTS modify, which runs the QP's send side. Each side prints
 * "<role>: ok" ("client: N scenarios ok") and exits 0, or prints what went wrong and exits 1.
 */
#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

/* The oxrdma ring and WQE layout (rust/uapi/src/ring.rs, queue.rs). */
#define RING_HDR 256
#define RING_PROD 0
#define RING_CONS 64
#define SEND_WQE 64
#define SGE_BYTES 16
#define WQE_INLINE 0x08
#define OP_SEND 2

#define SLOTS 8
#define MSG 128
#define RECVS 4
#define MR_BYTES 65536
#define MAX_VICTIMS 16
#define MAX_MAPS 256

struct wqe {
	uint64_t wr_id;
	uint8_t opcode, flags, num_sge, reserved0;
	uint32_t imm_or_inv;
	uint64_t remote_addr;
	uint32_t rkey, inline_len;
	uint64_t compare_add, swap;
	uint32_t ah, remote_qpn, remote_qkey, reserved1;
};

struct sge {
	uint64_t addr;
	uint32_t length, lkey;
};

static_assert(sizeof(struct wqe) == SEND_WQE, "send WQE header");
static_assert(sizeof(struct sge) == SGE_BYTES, "SGE");

static const char *role;

static void die(const char *what)
{
	printf("%s: FAIL: %s\n", role, what);
	fflush(stdout);
	exit(1);
}

static struct rdma_addrinfo *resolve(const char *addr, const char *port, int passive)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;

	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		die("rdma_getaddrinfo failed");
	return res;
}

static void conn_param(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
}

static struct ibv_qp_init_attr qp_attr(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SLOTS, .max_recv_wr = SLOTS,
			 .max_send_sge = 2, .max_recv_sge = 2 },
	};

	return a;
}

/* ---- server ---------------------------------------------------------------------------- */

struct conn {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void accept_one(struct rdma_cm_id *listen_id, struct conn *c)
{
	struct ibv_qp_init_attr a = qp_attr(NULL);
	struct rdma_conn_param p;

	if (rdma_get_request(listen_id, &c->id))
		die("rdma_get_request failed");
	if (rdma_create_qp(c->id, NULL, &a))
		die("rdma_create_qp failed");
	c->buf = calloc(RECVS, MSG);
	c->mr = c->buf ? rdma_reg_msgs(c->id, c->buf, RECVS * MSG) : NULL;
	if (!c->mr)
		die("receive buffers");
	for (int i = 0; i < RECVS; i++)
		if (rdma_post_recv(c->id, NULL, c->buf + i * MSG, MSG, c->mr))
			die("rdma_post_recv failed");
	conn_param(&p);
	if (rdma_accept(c->id, &p))
		die("rdma_accept failed");
}

/* Echoes every message of the bystander connection until "done". */
static void *serve_bystander(void *arg)
{
	struct conn *c = arg;
	struct ibv_wc wc;

	for (unsigned int i = 0;; i++) {
		uint8_t *m = c->buf + (i % RECVS) * MSG;

		if (rdma_get_recv_comp(c->id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			die("bystander: receive failed");
		if (!strcmp((char *)m, "done"))
			return NULL;
		if (rdma_post_send(c->id, NULL, m, wc.byte_len, c->mr, IBV_SEND_SIGNALED) ||
		    rdma_get_send_comp(c->id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			die("bystander: echo failed");
		if (rdma_post_recv(c->id, NULL, m, MSG, c->mr))
			die("bystander: rdma_post_recv failed");
	}
}

static int run_server(const char *addr, const char *port, int victims)
{
	struct rdma_addrinfo *res = resolve(addr, port, 1);
	struct conn bystander, v[MAX_VICTIMS];
	struct rdma_cm_id *listen_id;
	pthread_t t;

	if (rdma_create_ep(&listen_id, res, NULL, NULL) || rdma_listen(listen_id, 4))
		die("listen failed");
	accept_one(listen_id, &bystander);
	if (pthread_create(&t, NULL, serve_bystander, &bystander))
		die("pthread_create failed");
	for (int i = 0; i < victims; i++)
		accept_one(listen_id, &v[i]);
	pthread_join(t, NULL);
	for (int i = 0; i < victims; i++)
		rdma_destroy_ep(v[i].id);
	rdma_disconnect(bystander.id);
	rdma_destroy_ep(bystander.id);
	rdma_destroy_ep(listen_id);
	rdma_freeaddrinfo(res);
	printf("server: ok\n");
	return 0;
}

/* ---- client ---------------------------------------------------------------------------- */

struct victim {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	uint8_t *cq_ring, *sq, *rq;
	/*
	 * Bytes of a send slot: the header and the larger of the SGEs and the inline data
	 * granted, rounded up to a power of two (send_slot_size() in rust/uapi).
	 */
	size_t slot;
};

static struct ibv_pd *pd;
static struct ibv_mr *mr;
static uint8_t *buf;

/* The start addresses of the mappings of the device's uverbs file, in file offset order. */
static int uverbs_maps(struct ibv_context *ctx, uintptr_t *out)
{
	unsigned long long start, end, off, offs[MAX_MAPS];
	char line[512], path[256];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	snprintf(path, sizeof(path), "/dev/infiniband/%s", ctx->device->dev_name);
	if (!f)
		die("/proc/self/maps");
	while (fgets(line, sizeof(line), f) && n < MAX_MAPS) {
		char file[256] = "";

		int got = sscanf(line, "%llx-%llx %*s %llx %*s %*s %255s", &start, &end, &off,
				 file);

		if (got == 4 && !strcmp(file, path)) {
			int i = n++;

			/* Insertion by offset. */
			while (i > 0 && offs[i - 1] > off) {
				offs[i] = offs[i - 1];
				out[i] = out[i - 1];
				i--;
			}
			offs[i] = off;
			out[i] = start;
		}
	}
	fclose(f);
	return n;
}

/* The ring index at byte OFF of RING (the process's side of it: no kernel ordering needed). */
static uint32_t ring_index(uint8_t *ring, size_t off)
{
	return __atomic_load_n((uint32_t *)(ring + off), __ATOMIC_ACQUIRE);
}

static void set_ring_index(uint8_t *ring, size_t off, uint32_t val)
{
	__atomic_store_n((uint32_t *)(ring + off), val, __ATOMIC_RELEASE);
}

static void connect_victim(struct rdma_addrinfo *res, struct victim *v)
{
	uintptr_t before[MAX_MAPS], after[MAX_MAPS];
	struct ibv_qp_init_attr a;
	struct rdma_conn_param p;
	int nb, na;

	if (rdma_create_ep(&v->id, res, NULL, NULL))
		die("rdma_create_ep failed");
	if (!pd) {
		pd = ibv_alloc_pd(v->id->verbs);
		buf = calloc(1, MR_BYTES);
		mr = pd && buf ? ibv_reg_mr(pd, buf, MR_BYTES, IBV_ACCESS_LOCAL_WRITE) : NULL;
		if (!mr)
			die("PD and MR");
	}
	nb = uverbs_maps(v->id->verbs, before);
	v->cq = ibv_create_cq(v->id->verbs, 16, NULL, NULL, 0);
	a = qp_attr(v->cq);
	if (!v->cq || rdma_create_qp(v->id, pd, &a))
		die("victim CQ and QP");
	na = uverbs_maps(v->id->verbs, after);
	/* The new ones: the CQ ring, the send ring, the receive ring. */
	if (na != nb + 3)
		die("expected 3 new ring mappings");
	v->slot = SEND_WQE + (a.cap.max_send_sge * SGE_BYTES > a.cap.max_inline_data ?
			      a.cap.max_send_sge * SGE_BYTES : a.cap.max_inline_data);
	while (v->slot & (v->slot - 1))
		v->slot += v->slot & -v->slot;
	v->cq_ring = (uint8_t *)after[nb];
	v->sq = (uint8_t *)after[nb + 1];
	v->rq = (uint8_t *)after[nb + 2];
	conn_param(&p);
	if (rdma_connect(v->id, &p))
		die("rdma_connect failed");
}

/*
 * Makes the kernel run the victim's send side (an RTS -> RTS modify); one refused because
 * the QP is already in the error state is fine.
 */
static void kick(struct victim *v)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };

	ibv_modify_qp(v->id->qp, &a, IBV_QP_STATE);
}

static enum ibv_qp_state qp_state(struct victim *v)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	if (ibv_query_qp(v->id->qp, &a, IBV_QP_STATE, &init))
		die("ibv_query_qp failed");
	return a.qp_state;
}

static void expect_error_state(struct victim *v, const char *what)
{
	for (int i = 0; i < 100 && qp_state(v) != IBV_QPS_ERR; i++)
		usleep(50000);
	if (qp_state(v) != IBV_QPS_ERR) {
		printf("client: FAIL: %s: victim QP in state %d, not in error\n", what,
		       qp_state(v));
		exit(1);
	}
}

/* The first completion of the victim's CQ within 10 s. */
static struct ibv_wc first_wc(struct victim *v, const char *what)
{
	struct ibv_wc wc;

	for (int i = 0; i < 10000; i++) {
		if (ibv_poll_cq(v->cq, 1, &wc) == 1)
			return wc;
		usleep(1000);
	}
	printf("client: FAIL: %s: no completion\n", what);
	exit(1);
}

/* Writes LEN bytes of WQE into the victim's next send slot and publishes it. */
static void inject(struct victim *v, const void *wqe, size_t len)
{
	uint32_t prod = ring_index(v->sq, RING_PROD);

	if (len > v->slot)
		die("injected WQE larger than a slot");
	memcpy(v->sq + RING_HDR + (prod % SLOTS) * v->slot, wqe, len);
	set_ring_index(v->sq, RING_PROD, prod + 1);
}

/* A SEND WQE saying NUM_SGE SGEs, followed by the N of S. */
static void inject_send(struct victim *v, uint64_t wr_id, uint8_t num_sge, const struct sge *s,
			int n)
{
	uint8_t b[SEND_WQE + 2 * SGE_BYTES] = { 0 };
	struct wqe w = { .wr_id = wr_id, .opcode = OP_SEND, .flags = 1, .num_sge = num_sge };

	memcpy(b, &w, sizeof(w));
	memcpy(b + SEND_WQE, s, n * sizeof(*s));
	inject(v, b, SEND_WQE + n * sizeof(*s));
}

/*
 * The victim's first completion must have status S1 or S2 (and WR_ID unless 0), and be its
 * only one.
 */
static void expect_status(struct victim *v, const char *what, uint64_t wr_id,
			  enum ibv_wc_status s1, enum ibv_wc_status s2)
{
	struct ibv_wc wc = first_wc(v, what), more;

	if ((wc.status != s1 && wc.status != s2) || (wr_id && wc.wr_id != wr_id)) {
		printf("client: FAIL: %s: completion %llu status %d (%s)\n", what,
		       (unsigned long long)wc.wr_id, wc.status, ibv_wc_status_str(wc.status));
		exit(1);
	}
	usleep(200000);
	if (ibv_poll_cq(v->cq, 1, &more) == 1) {
		printf("client: FAIL: %s: another completion after it (%llu, status %d)\n", what,
		       (unsigned long long)more.wr_id, more.status);
		exit(1);
	}
	printf("%s: status %d (%s)\n", what, wc.status, ibv_wc_status_str(wc.status));
}

static struct rdma_cm_id *bystander;
static struct ibv_mr *bmr;
static uint8_t bbuf[2 * MSG];

/* One message to the server and its echo back, on the bystander connection. */
static void exchange(const char *msg)
{
	struct ibv_wc wc;

	if (rdma_post_recv(bystander, NULL, bbuf + MSG, MSG, bmr))
		die("bystander: rdma_post_recv failed");
	size_t len = strlen(msg) + 1;

	if (len > MSG)
		die("bystander: message too long");
	memcpy(bbuf, msg, len);
	if (rdma_post_send(bystander, NULL, bbuf, len, bmr, IBV_SEND_SIGNALED) ||
	    rdma_get_send_comp(bystander, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
		die("bystander: send failed");
	if (!strcmp(msg, "done"))
		return;
	if (rdma_get_recv_comp(bystander, &wc) <= 0 || wc.status != IBV_WC_SUCCESS ||
	    strcmp((char *)bbuf + MSG, msg))
		die("bystander: no echo");
}

static int run_client(const char *addr, const char *port)
{
	struct rdma_addrinfo *res = resolve(addr, port, 0);
	struct ibv_qp_init_attr a = qp_attr(NULL);
	struct victim v[MAX_VICTIMS];
	struct rdma_conn_param p;
	int n = 0, done = 0;
	uint8_t junk[256];

	if (rdma_create_ep(&bystander, res, NULL, &a))
		die("bystander: rdma_create_ep failed");
	bmr = rdma_reg_msgs(bystander, bbuf, sizeof(bbuf));
	conn_param(&p);
	if (!bmr || rdma_connect(bystander, &p))
		die("bystander: connect failed");
	exchange("bystander before");

	/* 1. The SQ producer index beyond the ring. */
	connect_victim(res, &v[n]);
	set_ring_index(v[n].sq, RING_PROD, ring_index(v[n].sq, RING_CONS) + SLOTS + 5);
	kick(&v[n]);
	expect_error_state(&v[n], "sq producer overrun");
	printf("sq producer overrun: victim QP in error\n");
	exchange("after 1");
	n++, done++;

	/* 2. A garbage WQE. */
	connect_victim(res, &v[n]);
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = rand();
	inject(&v[n], junk, SEND_WQE + 2 * SGE_BYTES);
	kick(&v[n]);
	expect_status(&v[n], "garbage WQE", 0, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR);
	expect_error_state(&v[n], "garbage WQE");
	exchange("after 2");
	n++, done++;

	/* 3. A SEND with an L_Key that does not exist. */
	connect_victim(res, &v[n]);
	inject_send(&v[n], 33, 1, &(struct sge){ (uintptr_t)buf, 100, 0xdeadbe00 }, 1);
	kick(&v[n]);
	expect_status(&v[n], "bad L_Key", 33, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_PROT_ERR);
	exchange("after 3");
	n++, done++;

	/* 4. A SEND whose SGE runs past its MR, and one of 4 GiB - 1 bytes. */
	for (int k = 0; k < 2; k++) {
		uint32_t len = k ? 0xffffffffu : MR_BYTES + 1;

		connect_victim(res, &v[n]);
		inject_send(&v[n], 44, 1, &(struct sge){ (uintptr_t)buf, len, mr->lkey }, 1);
		kick(&v[n]);
		expect_status(&v[n], k ? "SGE of 4 GiB - 1 bytes" : "SGE past its MR", 44,
			      IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_LEN_ERR);
		exchange("after 4");
		n++, done++;
	}

	/* 5. 255 SGEs in a slot that holds 2 (the QP allows 2). */
	connect_victim(res, &v[n]);
	{
		struct sge two[2] = { { (uintptr_t)buf, 1, mr->lkey },
				      { (uintptr_t)buf, 1, mr->lkey } };

		inject_send(&v[n], 55, 255, two, 2);
	}
	kick(&v[n]);
	expect_status(&v[n], "255 SGEs", 55, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_LEN_ERR);
	exchange("after 5");
	n++, done++;

	/* 6. Inline data longer than the slot. */
	connect_victim(res, &v[n]);
	{
		struct wqe w = { .wr_id = 66, .opcode = OP_SEND, .flags = 1 | WQE_INLINE,
				 .inline_len = 100000 };

		inject(&v[n], &w, sizeof(w));
	}
	kick(&v[n]);
	expect_status(&v[n], "inline length past its slot", 0, IBV_WC_LOC_QP_OP_ERR,
		      IBV_WC_LOC_LEN_ERR);
	exchange("after 6");
	n++, done++;

	/* 7. An impossible CQ consumer index: the victim's completions are lost, nothing else. */
	connect_victim(res, &v[n]);
	set_ring_index(v[n].cq_ring, RING_CONS, ring_index(v[n].cq_ring, RING_PROD) + 12345);
	{
		struct ibv_sge sg = { (uintptr_t)buf, 10, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 77, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		if (ibv_post_send(v[n].id->qp, &wr, &bad))
			die("CQ consumer garbage: ibv_post_send failed");
	}
	kick(&v[n]);
	usleep(500000);
	printf("CQ consumer index garbage: no crash\n");
	exchange("after 7");
	n++, done++;

	exchange("done");
	for (int i = 0; i < n; i++) {
		rdma_destroy_qp(v[i].id);
		ibv_destroy_cq(v[i].cq);
		rdma_destroy_ep(v[i].id);
	}
	rdma_disconnect(bystander);
	rdma_dereg_mr(bmr);
	rdma_destroy_ep(bystander);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	free(buf);
	rdma_freeaddrinfo(res);
	printf("client: %d scenarios ok\n", done);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		die("usage: hostile-ring server|client ADDR PORT [VICTIMS]");
	role = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(role, "server"))
		return run_server(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 0);
	return run_client(argv[2], argv[3]);
}
