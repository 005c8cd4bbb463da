// SPDX-License-Identifier: GPL-2.0
/*
 * Systematic fault injection into oxrdma's control and transmit paths, from a process:
 * each operation below is run again and again with /proc/thread-self/fail-nth set to 1, 2,
 * 3, ... (the Nth slab or page allocation the kernel makes for this thread fails, see
 * Documentation/fault-injection/fault-injection.rst), until a run completes with no fault
 * left to inject. Every failed run must fail cleanly: an error return (or, for traffic, an
 * error completion), never a hang; the objects of a run that succeeded are destroyed before
 * the next. Leaks are the debug kernel's kmemleak's to find afterwards.
 *
 *   faults DEV GID_INDEX PEER_DEV PEER_GID_INDEX NETDEV
 *
 * DEV and PEER_DEV are oxroce devices that reach each other with their RoCE v2 GIDs of those
 * indexes (RC traffic goes from DEV to PEER_DEV); NETDEV is a netdev on which device
 * creation is swept ("oxfault0", made and deleted over netlink). Prints one line per operation,
 * "op NAME runs R failed F errnos E1,E2,.. done D" (D 1 when the sweep ended with a run that
 * had nothing left to fail), "fresh pairs N ok" (FRESH_PAIRS pairs, each posting a WRITE the
 * moment it is connected), then "faults: N injected, H hung". FAULTS_ONLY=NAME sweeps one
 * operation; FAULTS_VERBOSE=1 prints every run; FAULTS_FIRST and FAULTS_RUNS pick the faults
 * swept (default: from the first, at most MAX_RUNS); FAULTS_STRIDE=K sweeps every Kth fault
 * after the first DENSE_RUNS (device creation has some 3600, 7100 on the debug kernel).
 * Exits 1 on a hang or a failure the process cannot explain (a failed call without errno),
 * 2 if setup fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include "../lib/verbs-helpers.h"

#define MAX_RUNS 8000
/* Faults swept one by one before a stride applies (FAULTS_STRIDE). */
#define DENSE_RUNS 200
#define BUF_LEN 65536
#define COMPLETION_TIMEOUT_MS 30000
/* Fresh pairs that each post a WRITE as soon as they are connected. */
#define FRESH_PAIRS 300
/* The RC QPs' first PSN (both ways), ACK timeout (4.096 us << 10) and retry counts. */
#define RC_PSN 1
#define RC_TIMEOUT 10
#define RC_RETRY 3

static int nth_fd = -1;
static long injected_total, hung_total;
static const char *dev_name, *peer_name, *netdev;
static int gid_index, peer_gid_index, verbose;
static const char *only;
static int first = 1, max_runs = MAX_RUNS, stride = 1;

static void die(const char *what)
{
	fprintf(stderr, "setup: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Arms the Nth fault point of this thread (0 disarms). */
static void arm(int n)
{
	char s[16];
	int len = snprintf(s, sizeof(s), "%d", n);

	if (pwrite(nth_fd, s, len, 0) != len)
		die("write fail-nth");
}

/* Disarms; true if the armed fault was injected. */
static int disarm(void)
{
	char s[16] = "";
	int left;

	if (pread(nth_fd, s, sizeof(s) - 1, 0) <= 0)
		die("read fail-nth");
	left = atoi(s);
	arm(0);
	return left == 0;
}

/* The objects one operation needs, made before it without faults. */
struct env {
	struct ibv_context *ctx, *peer_ctx;
	struct ibv_pd *pd, *peer_pd;
	struct ibv_cq *cq, *peer_cq;
	struct ibv_mr *mr, *peer_mr;
	struct ibv_qp *qp, *peer_qp;
	struct ibv_qp *spare;
	char *buf, *peer_buf;
	union ibv_gid gid, peer_gid;
	int broken;
};

/* An RC QP of 16 send and 16 receive WRs, one SGE each. */
static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	return ox_create_rc_qp(pd, cq, 16, 16);
}

/* The shared transitions with this program's PSN, timeout and retry counts. */
static int to_rtr(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *dgid, int sgid)
{
	return ox_qp_to_rtr(qp, dest, dgid, sgid, RC_PSN);
}

static int to_rts(struct ibv_qp *qp)
{
	return ox_qp_to_rts(qp, RC_PSN, RC_TIMEOUT, RC_RETRY, RC_RETRY);
}

/* A connected RC pair, DEV to PEER_DEV, made again when the last one went to error. */
static void connect_pair(struct env *e)
{
	if (e->qp && !e->broken)
		return;
	if (e->qp) {
		struct ibv_wc wc;

		ibv_destroy_qp(e->qp);
		ibv_destroy_qp(e->peer_qp);
		/* Whatever the old pair completed before it went is of no interest. */
		while (ibv_poll_cq(e->cq, 1, &wc) > 0 || ibv_poll_cq(e->peer_cq, 1, &wc) > 0)
			;
	}
	e->qp = rc_qp(e->pd, e->cq);
	e->peer_qp = rc_qp(e->peer_pd, e->peer_cq);
	if (!e->qp || !e->peer_qp)
		die("create the RC pair");
	if (ox_qp_to_init(e->qp) || ox_qp_to_init(e->peer_qp) ||
	    to_rtr(e->qp, e->peer_qp->qp_num, &e->peer_gid, gid_index) ||
	    to_rtr(e->peer_qp, e->qp->qp_num, &e->gid, peer_gid_index) ||
	    to_rts(e->qp) || to_rts(e->peer_qp))
		die("connect the RC pair");
	e->broken = 0;
}

/* Waits for one completion on CQ: its status, or -1 after COMPLETION_TIMEOUT_MS. */
static int wait_completion(struct ibv_cq *cq)
{
	struct timespec t0, t;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n > 0)
			return wc.status;
		if (n < 0)
			return IBV_WC_GENERAL_ERR;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
		    COMPLETION_TIMEOUT_MS)
			return -1;
		usleep(100);
	}
}

/*
 * One operation: setup (unarmed) makes what it needs, run (armed) is the call under test
 * and returns 0 or an errno, undo (unarmed) destroys what run made.
 */
struct op {
	const char *name;
	void (*setup)(struct env *e);
	int (*run)(struct env *e, void **obj);
	void (*undo)(struct env *e, void *obj);
};

static int err_of(const void *p)
{
	return p ? 0 : (errno ? errno : -1);
}

static int run_open(struct env *e, void **obj)
{
	*obj = ox_open_device(dev_name);
	return err_of(*obj);
}

static void undo_open(struct env *e, void *obj)
{
	ibv_close_device(obj);
}

static int run_pd(struct env *e, void **obj)
{
	*obj = ibv_alloc_pd(e->ctx);
	return err_of(*obj);
}

static void undo_pd(struct env *e, void *obj)
{
	ibv_dealloc_pd(obj);
}

static int run_mr(struct env *e, void **obj)
{
	*obj = ibv_reg_mr(e->pd, e->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
			  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return err_of(*obj);
}

static void undo_mr(struct env *e, void *obj)
{
	ibv_dereg_mr(obj);
}

static int run_cq(struct env *e, void **obj)
{
	*obj = ibv_create_cq(e->ctx, 256, NULL, NULL, 0);
	return err_of(*obj);
}

static void undo_cq(struct env *e, void *obj)
{
	ibv_destroy_cq(obj);
}

static int run_srq(struct env *e, void **obj)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 64, .max_sge = 1 } };

	*obj = ibv_create_srq(e->pd, &a);
	return err_of(*obj);
}

static void undo_srq(struct env *e, void *obj)
{
	ibv_destroy_srq(obj);
}

static int run_rc_qp(struct env *e, void **obj)
{
	*obj = rc_qp(e->pd, e->cq);
	return err_of(*obj);
}

static void undo_qp(struct env *e, void *obj)
{
	ibv_destroy_qp(obj);
}

static int run_ud_qp(struct env *e, void **obj)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	*obj = ibv_create_qp(e->pd, &a);
	return err_of(*obj);
}

static int run_ah(struct env *e, void **obj)
{
	struct ibv_ah_attr a = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = e->peer_gid, .sgid_index = gid_index, .hop_limit = 64 },
	};

	*obj = ibv_create_ah(e->pd, &a);
	return err_of(*obj);
}

static void undo_ah(struct env *e, void *obj)
{
	ibv_destroy_ah(obj);
}

/* A new RC QP's whole way to RTS, connected to a peer QP that stays in RTS. */
static void setup_modify(struct env *e)
{
	connect_pair(e);
	e->spare = rc_qp(e->pd, e->cq);
	if (!e->spare)
		die("create an RC QP");
}

static int run_modify(struct env *e, void **obj)
{
	struct ibv_qp *qp = e->spare;
	int err;

	*obj = qp;
	err = ox_qp_to_init(qp);
	if (!err)
		err = to_rtr(qp, e->peer_qp->qp_num, &e->peer_gid, gid_index);
	if (!err)
		err = to_rts(qp);
	return err;
}

/* An RDMA WRITE of BUF_LEN bytes to the peer, its doorbell armed; then its completion. */
static void setup_write(struct env *e)
{
	connect_pair(e);
}

static int run_write(struct env *e, void **obj)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = BUF_LEN, .lkey = e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)e->peer_buf, .rkey = e->peer_mr->rkey },
	}, *bad;

	*obj = NULL;
	return ibv_post_send(e->qp, &wr, &bad);
}

static int write_status(struct env *e, int posted)
{
	int st;

	/* A failed doorbell leaves the WQE in the ring: the pair is not reused. */
	if (!posted) {
		e->broken = 1;
		return 0;
	}
	st = wait_completion(e->cq);
	if (st < 0)
		return -1;
	if (st != IBV_WC_SUCCESS)
		e->broken = 1;
	return 0;
}

/* Device creation over netlink, as `rdma link add oxfault0 type oxroce netdev NETDEV`. */
static int nl_fd = -1;

static void nl_attr(char *msg, const char *end, int type, const char *s)
{
	struct nlmsghdr *h = (struct nlmsghdr *)msg;
	struct nlattr *a = (struct nlattr *)(msg + NLMSG_ALIGN(h->nlmsg_len));
	size_t len = strlen(s) + 1;

	if ((char *)a + NLA_HDRLEN + NLA_ALIGN(len) > end)
		die("netlink message too long");
	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, s, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static int run_link(struct env *e, void **obj)
{
	char msg[512] = "", reply[4096];
	struct nlmsghdr *h = (struct nlmsghdr *)msg;
	struct nlmsgerr *err;
	ssize_t n;
	int ret;

	h->nlmsg_len = NLMSG_HDRLEN;
	h->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_NEWLINK);
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nl_attr(msg, msg + sizeof(msg), RDMA_NLDEV_ATTR_DEV_NAME, "oxfault0");
	nl_attr(msg, msg + sizeof(msg), RDMA_NLDEV_ATTR_LINK_TYPE, "oxroce");
	nl_attr(msg, msg + sizeof(msg), RDMA_NLDEV_ATTR_NDEV_NAME, netdev);
	*obj = NULL;
	if (send(nl_fd, msg, h->nlmsg_len, 0) < 0)
		return errno;
	n = recv(nl_fd, reply, sizeof(reply), 0);
	h = (struct nlmsghdr *)reply;
	if (n < 0) {
		ret = errno;
	} else if (n < (ssize_t)NLMSG_HDRLEN || h->nlmsg_type != NLMSG_ERROR) {
		ret = -1;
	} else {
		err = NLMSG_DATA(h);
		ret = -err->error;
	}
	/*
	 * The device can exist whatever the reply says: when the command succeeded and only
	 * its acknowledgment could not be allocated, the socket reports ENOBUFS.
	 */
	if (!access("/sys/class/infiniband/oxfault0", F_OK))
		*obj = (void *)1;
	return ret;
}

static void undo_link(struct env *e, void *obj)
{
	if (system("rdma link delete oxfault0") != 0)
		die("rdma link delete oxfault0");
}

static void setup_none(struct env *e)
{
}

static const struct op ops[] = {
	{ "link_add", setup_none, run_link, undo_link },
	{ "open_device", setup_none, run_open, undo_open },
	{ "alloc_pd", setup_none, run_pd, undo_pd },
	{ "reg_mr", setup_none, run_mr, undo_mr },
	{ "create_cq", setup_none, run_cq, undo_cq },
	{ "create_srq", setup_none, run_srq, undo_srq },
	{ "create_qp_rc", setup_none, run_rc_qp, undo_qp },
	{ "create_qp_ud", setup_none, run_ud_qp, undo_qp },
	{ "create_ah", setup_none, run_ah, undo_ah },
	{ "modify_qp_to_rts", setup_modify, run_modify, undo_qp },
	{ "rdma_write", setup_write, run_write, NULL },
};

/* Sweeps one operation; returns false on a hang or an unexplained failure. */
static int sweep(struct env *e, const struct op *op)
{
	int runs = 0, failed = 0, done = 0, ok = 1, seen[8] = { 0 }, nseen = 0;

	for (int n = first; n < first + max_runs && !done;
	     n += n - first < DENSE_RUNS ? 1 : stride) {
		void *obj = NULL;
		int err, hit;

		op->setup(e);
		errno = 0;
		arm(n);
		err = op->run(e, &obj);
		hit = disarm();
		runs++;
		if (verbose)
			printf("  %s fault %d: %s, error %d\n", op->name, n,
			       hit ? "injected" : "none left", err);
		injected_total += hit;
		done = !hit;
		if (op->run == run_write && write_status(e, err == 0) < 0) {
			printf("hang %s: no completion %d s after fault %d\n", op->name,
			       COMPLETION_TIMEOUT_MS / 1000, n);
			hung_total++;
			ok = 0;
			break;
		}
		if (err) {
			int k;

			failed++;
			if (err < 0) {
				printf("unexplained %s: failed without errno at fault %d\n",
				       op->name, n);
				ok = 0;
			}
			for (k = 0; k < nseen && seen[k] != err; k++)
				;
			if (k == nseen && nseen < 8)
				seen[nseen++] = err;
		}
		if (obj && op->undo)
			op->undo(e, obj);
	}
	printf("op %s runs %d failed %d errnos ", op->name, runs, failed);
	for (int k = 0; k < nseen; k++)
		printf("%s%d", k ? "," : "", seen[k]);
	printf("%s done %d\n", nseen ? "" : "-", done);
	fflush(stdout);
	return ok;
}

int main(int argc, char **argv)
{
	struct env e = { 0 };
	int ok = 1;

	if (argc != 6) {
		fprintf(stderr, "usage: faults DEV GID_INDEX PEER_DEV PEER_GID_INDEX NETDEV\n");
		return 2;
	}
	dev_name = argv[1];
	gid_index = atoi(argv[2]);
	peer_name = argv[3];
	peer_gid_index = atoi(argv[4]);
	netdev = argv[5];
	only = getenv("FAULTS_ONLY");
	verbose = !!getenv("FAULTS_VERBOSE");
	if (getenv("FAULTS_FIRST"))
		first = atoi(getenv("FAULTS_FIRST"));
	if (getenv("FAULTS_RUNS"))
		max_runs = atoi(getenv("FAULTS_RUNS"));
	if (getenv("FAULTS_STRIDE") && atoi(getenv("FAULTS_STRIDE")) > 0)
		stride = atoi(getenv("FAULTS_STRIDE"));
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (nth_fd < 0)
		die("/proc/thread-self/fail-nth");
	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (nl_fd < 0)
		die("netlink socket");
	e.ctx = ox_open_device(dev_name);
	e.peer_ctx = ox_open_device(peer_name);
	if (!e.ctx || !e.peer_ctx)
		die("open the devices");
	e.pd = ibv_alloc_pd(e.ctx);
	e.peer_pd = ibv_alloc_pd(e.peer_ctx);
	e.cq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	e.peer_cq = ibv_create_cq(e.peer_ctx, 64, NULL, NULL, 0);
	e.buf = aligned_alloc(4096, BUF_LEN);
	e.peer_buf = aligned_alloc(4096, BUF_LEN);
	if (!e.pd || !e.peer_pd || !e.cq || !e.peer_cq || !e.buf || !e.peer_buf)
		die("PDs, CQs, buffers");
	memset(e.buf, 0x5a, BUF_LEN);
	e.mr = ibv_reg_mr(e.pd, e.buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	e.peer_mr = ibv_reg_mr(e.peer_pd, e.peer_buf, BUF_LEN,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!e.mr || !e.peer_mr || ibv_query_gid(e.ctx, 1, gid_index, &e.gid) ||
	    ibv_query_gid(e.peer_ctx, 1, peer_gid_index, &e.peer_gid))
		die("MRs, GIDs");

	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (!only || !strcmp(only, ops[i].name))
			ok &= sweep(&e, &ops[i]);

	/* FAULTS_SWEEP_ONLY: the sweeps alone (an iWARP device's QPs do not connect by hand). */
	if (getenv("FAULTS_SWEEP_ONLY")) {
		printf("faults: %ld injected, %ld hung\n", injected_total, hung_total);
		goto out;
	}

	/*
	 * Without faults: fresh pairs, each WRITE posted the moment its QP reaches RTS, while
	 * the work the modify queued may still be running (a WQE published just as the kernel
	 * ended such a run once stayed in the ring for good).
	 */
	for (int i = 0; i < FRESH_PAIRS && ok; i++) {
		void *obj;
		int err, st;

		e.broken = 1;
		connect_pair(&e);
		err = run_write(&e, &obj);
		st = err ? -2 : wait_completion(e.cq);
		if (st != IBV_WC_SUCCESS) {
			printf("fresh pair %d: post %d, status %d\n", i, err, st);
			ok = 0;
		}
	}
	if (ok)
		printf("fresh pairs %d ok\n", FRESH_PAIRS);

	/* A last WRITE without faults: the pair still moves data. */
	connect_pair(&e);
	memset(e.peer_buf, 0, BUF_LEN);
	{
		void *obj;
		int err = run_write(&e, &obj), st = err ? -2 : wait_completion(e.cq);

		if (st != IBV_WC_SUCCESS || memcmp(e.buf, e.peer_buf, BUF_LEN)) {
			printf("final write failed: post %d, status %d\n", err, st);
			ok = 0;
		} else {
			printf("final write ok\n");
		}
	}
	printf("faults: %ld injected, %ld hung\n", injected_total, hung_total);
out:
	if (e.qp)
		ibv_destroy_qp(e.qp);
	if (e.peer_qp)
		ibv_destroy_qp(e.peer_qp);
	ibv_dereg_mr(e.mr);
	ibv_dereg_mr(e.peer_mr);
	ibv_destroy_cq(e.cq);
	ibv_destroy_cq(e.peer_cq);
	ibv_dealloc_pd(e.pd);
	ibv_dealloc_pd(e.peer_pd);
	ibv_close_device(e.ctx);
	ibv_close_device(e.peer_ctx);
	return ok ? 0 : 1;
}
