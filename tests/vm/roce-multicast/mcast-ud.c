// SPDX-License-Identifier: GPL-2.0
/*
 * UD multicast with plain verbs (no rdma_cm): ibv_attach_mcast, sends to QPN 0xffffff through
 * an AH whose destination is the group's GID, and a check of every datagram received.
 *
 *   mcast-ud recv DEV GID-INDEX GROUP QPS COUNT SIZE
 *	attaches QPS UD QPs to GROUP, prints "attached", then expects each QP to receive the
 *	COUNT datagrams 0..COUNT-1 exactly once, SIZE bytes each, with their content, the GRH
 *	flag and the group as the destination address in the network header area. Then detaches
 *	each QP (a second detach must fail with EINVAL).
 *   mcast-ud send DEV GID-INDEX GROUP COUNT SIZE
 *	sends datagrams 0..COUNT-1 to GROUP.
 *
 * GROUP is an IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) address. Exit status 0 on success.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11223344u
#define GRH 40
#define MAX_QPS 32

static void die(const char *what)
{
	fprintf(stderr, "mcast-ud: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void bad(const char *what)
{
	fprintf(stderr, "mcast-ud: %s\n", what);
	exit(1);
}

static uint8_t pattern(uint32_t seq, uint32_t k)
{
	return (uint8_t)(seq * 7 + k);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	int i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			return ibv_open_device(l[i]);
	bad("no such device");
	return NULL;
}

static int parse_group(const char *s, union ibv_gid *gid, int *ipv4)
{
	struct in_addr a;

	memset(gid, 0, sizeof(*gid));
	if (inet_pton(AF_INET, s, &a) == 1) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &a, 4);
		*ipv4 = 1;
		return 0;
	}
	*ipv4 = 0;
	return inet_pton(AF_INET6, s, gid->raw) == 1 ? 0 : -1;
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, int count)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = count, .max_recv_wr = count,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
	return qp;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int recv = argc == 8 && !strcmp(argv[1], "recv");
	int send = argc == 7 && !strcmp(argv[1], "send");
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	union ibv_gid group;
	int ipv4, gidx, qps, count, size, i, q, done = 0;
	size_t slot;
	uint8_t *buf;

	if (!recv && !send)
		bad("usage: mcast-ud recv DEV GID-INDEX GROUP QPS COUNT SIZE\n"
		    "       mcast-ud send DEV GID-INDEX GROUP COUNT SIZE");
	gidx = atoi(argv[3]);
	if (parse_group(argv[4], &group, &ipv4))
		bad("bad group address");
	qps = recv ? atoi(argv[5]) : 1;
	count = atoi(argv[recv ? 6 : 5]);
	size = atoi(argv[recv ? 7 : 6]);
	if (qps < 1 || qps > MAX_QPS || count < 1 || count > 4096 || size < 4 || size > 4096)
		bad("bad QPS, COUNT or SIZE");
	ctx = open_dev(argv[2]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, qps * count + 1, NULL, NULL, 0);
	slot = GRH + size;
	buf = calloc((size_t)qps * count, slot);
	if (!pd || !cq || !buf)
		die("PD, CQ or buffer");
	mr = ibv_reg_mr(pd, buf, (size_t)qps * count * slot, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");

	if (recv) {
		struct ibv_qp *qp[MAX_QPS];
		uint8_t *seen = calloc((size_t)qps * count, 1);
		double deadline;

		for (q = 0; q < qps; q++) {
			qp[q] = ud_qp(pd, cq, count);
			if (ibv_attach_mcast(qp[q], &group, 0))
				die("ibv_attach_mcast");
			/* Attaching twice is harmless. */
			if (ibv_attach_mcast(qp[q], &group, 0))
				die("second ibv_attach_mcast");
			for (i = 0; i < count; i++) {
				size_t at = ((size_t)q * count + i) * slot;
				struct ibv_sge sge = { (uintptr_t)buf + at, slot, mr->lkey };
				struct ibv_recv_wr *badwr, wr = {
					.wr_id = at, .sg_list = &sge, .num_sge = 1,
				};

				if (ibv_post_recv(qp[q], &wr, &badwr))
					die("ibv_post_recv");
			}
		}
		printf("attached %d QPs\n", qps);
		fflush(stdout);
		deadline = now() + 60;
		while (done < qps * count) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cq, 1, &wc);
			uint8_t *m;
			uint32_t seq;

			if (n < 0)
				bad("ibv_poll_cq failed");
			if (!n) {
				if (now() > deadline) {
					fprintf(stderr, "mcast-ud: %d of %d datagrams after 60 s\n",
						done, qps * count);
					return 1;
				}
				usleep(1000);
				continue;
			}
			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
				bad("receive completion with an error");
			if (wc.byte_len != slot || !(wc.wc_flags & IBV_WC_GRH))
				bad("wrong length or no GRH flag");
			m = buf + wc.wr_id;
			/* The destination address: IPv4 header in the area's last 20 bytes. */
			if (ipv4 ? memcmp(m + GRH - 4, &group.raw[12], 4) :
				   memcmp(m + 24, group.raw, 16))
				bad("the network header's destination is not the group");
			seq = ntohl(*(uint32_t *)(m + GRH));
			if (seq >= (uint32_t)count)
				bad("unknown sequence number");
			for (i = 4; i < size; i++)
				if (m[GRH + i] != pattern(seq, i))
					bad("datagram content differs");
			for (q = 0; q < qps; q++)
				if (wc.qp_num == qp[q]->qp_num)
					break;
			if (q == qps || seen[(size_t)q * count + seq]++)
				bad("datagram for an unknown QP, or twice");
			done++;
		}
		for (q = 0; q < qps; q++) {
			if (ibv_detach_mcast(qp[q], &group, 0))
				die("ibv_detach_mcast");
			errno = ibv_detach_mcast(qp[q], &group, 0);
			if (errno != EINVAL)
				bad("a second detach did not fail with EINVAL");
			ibv_destroy_qp(qp[q]);
		}
		printf("received %d x %d datagrams of %d bytes, all correct\n", qps, count, size);
	} else {
		struct ibv_qp *qp = ud_qp(pd, cq, count);
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = group, .sgid_index = gidx, .hop_limit = 64 },
		};
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);

		if (!ah)
			die("ibv_create_ah");
		for (i = 0; i < count; i++) {
			uint8_t *m = buf + (size_t)i * slot;
			struct ibv_sge sge = { (uintptr_t)m, size, mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.ud = { .ah = ah, .remote_qpn = 0xffffff, .remote_qkey = QKEY },
			}, *badwr;
			struct ibv_wc wc;
			int k, n;

			*(uint32_t *)m = htonl(i);
			for (k = 4; k < size; k++)
				m[k] = pattern(i, k);
			if (ibv_post_send(qp, &wr, &badwr))
				die("ibv_post_send");
			while (!(n = ibv_poll_cq(cq, 1, &wc)))
				;
			if (n < 0 || wc.status != IBV_WC_SUCCESS)
				bad("send completion with an error");
			/* Unreliable: do not outrun the receivers' softirq. */
			usleep(2000);
		}
		printf("sent %d datagrams of %d bytes\n", count, size);
	}
	return 0;
}
