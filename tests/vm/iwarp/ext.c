// SPDX-License-Identifier: GPL-2.0
/*
 * RFC 7306 over rdma_cm: RDMA WRITE with immediate and atomics, every result checked.
 *
 *   ext server ADDR PORT MODE    accept one connection, send the client the address and
 *                                key of its target region, check what arrives
 *   ext client ADDR PORT MODE    connect and run MODE's operations
 *
 * MODE "ext" (both sides speak RFC 7306): WRITEs with immediate of 5000, 0 (solicited) and
 * 1 MiB + 3 bytes, each received as one RECV_RDMA_WITH_IMM completion with the WRITE's
 * length and the immediate; fetch-and-add, a compare-and-swap that swaps and one that does
 * not, each returning the target's original value; then a SEND "done", after which the
 * server checks every byte of its region. MODE "misaligned": as "ext", then a fetch-and-add
 * at an address that is not 8-byte aligned, which ibv_post_send refuses (RFC 7306 allows
 * 64-bit aligned targets only), so the target keeps its value. MODE "noext" (the peer does not
 * speak RFC 7306): a SEND arrives, then a WRITE with immediate completes at once with a
 * local QP operation error and nothing of it reaches the server.
 *
 * Each side prints "<role>: ok" and exits 0 when everything was as expected, else prints
 * what was not and exits 1.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define REGION (2u << 20)
#define BIG (1048576u + 3)
#define MSG 64
#define RECVS 8

struct info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

static const char *role;

static void die(const char *what)
{
	printf("%s: %s\n", role, what);
	fflush(stdout);
	exit(1);
}

static uint8_t pattern(size_t i, unsigned int seed)
{
	return (uint8_t)(i * 7 + seed);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(i, seed);
}

static int same(const uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(i, seed))
			return 0;
	return 1;
}

static struct ibv_wc send_comp(struct rdma_cm_id *id)
{
	struct ibv_wc wc;

	if (rdma_get_send_comp(id, &wc) <= 0)
		die("no send completion");
	return wc;
}

static struct ibv_wc recv_comp(struct rdma_cm_id *id)
{
	struct ibv_wc wc;

	if (rdma_get_recv_comp(id, &wc) <= 0)
		die("no receive completion");
	return wc;
}

/* Posts one work request with one SGE and waits for its completion. */
static struct ibv_wc post(struct rdma_cm_id *id, struct ibv_send_wr *wr,
			  struct ibv_mr *mr, void *buf, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey
	};
	struct ibv_send_wr *bad;

	wr->sg_list = len ? &sge : NULL;
	wr->num_sge = len ? 1 : 0;
	wr->send_flags |= IBV_SEND_SIGNALED;
	if (ibv_post_send(id->qp, wr, &bad))
		die("ibv_post_send failed");
	return send_comp(id);
}

static void expect_ok(struct ibv_wc wc, const char *what)
{
	if (wc.status != IBV_WC_SUCCESS) {
		printf("%s: %s: completion status %d (%s)\n", role, what,
		       wc.status, ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static struct ibv_wc write_imm(struct rdma_cm_id *id, struct ibv_mr *mr,
			       uint8_t *src, uint32_t len, struct info *t,
			       uint64_t off, uint32_t imm, int solicited)
{
	struct ibv_send_wr wr = {
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.imm_data = htonl(imm),
		.send_flags = solicited ? IBV_SEND_SOLICITED : 0,
		.wr.rdma = { .remote_addr = t->addr + off, .rkey = t->rkey },
	};

	return post(id, &wr, mr, src, len);
}

static uint64_t atomic(struct rdma_cm_id *id, struct ibv_mr *mr, uint64_t *res,
		       struct info *t, uint64_t off, enum ibv_wr_opcode op,
		       uint64_t compare_add, uint64_t swap, const char *what)
{
	struct ibv_send_wr wr = {
		.opcode = op,
		.wr.atomic = {
			.remote_addr = t->addr + off, .rkey = t->rkey,
			.compare_add = compare_add, .swap = swap,
		},
	};

	*res = 0xeeeeeeeeeeeeeeeeull;
	expect_ok(post(id, &wr, mr, res, 8), what);
	return *res;
}

static void connect_params(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 4;
	p->initiator_depth = 4;
	p->retry_count = 7;
}

static int run_server(struct rdma_cm_id *listen_id, const char *mode)
{
	struct rdma_conn_param param;
	struct rdma_cm_id *id;
	struct ibv_mr *region_mr, *msg_mr;
	uint8_t *region, *msgs;
	struct info *info;
	struct ibv_wc wc;
	int ext = strcmp(mode, "noext") != 0;

	if (rdma_listen(listen_id, 1) || rdma_get_request(listen_id, &id))
		die("listen failed");
	region = calloc(1, REGION);
	msgs = calloc(RECVS + 1, MSG);
	if (!region || !msgs)
		die("out of memory");
	*(uint64_t *)region = 1000;
	region_mr = ibv_reg_mr(id->pd, region, REGION,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	msg_mr = rdma_reg_msgs(id, msgs, (RECVS + 1) * MSG);
	if (!region_mr || !msg_mr)
		die("memory registration failed");
	for (int i = 0; i < RECVS; i++)
		if (rdma_post_recv(id, NULL, msgs + i * MSG, MSG, msg_mr))
			die("rdma_post_recv failed");
	connect_params(&param);
	if (rdma_accept(id, &param))
		die("rdma_accept failed");
	info = (struct info *)(msgs + RECVS * MSG);
	info->addr = (uintptr_t)region;
	info->rkey = region_mr->rkey;
	if (rdma_post_send(id, NULL, info, sizeof(*info), msg_mr, IBV_SEND_SIGNALED))
		die("rdma_post_send failed");
	expect_ok(send_comp(id), "send of the region's key");

	if (!ext) {
		wc = recv_comp(id);
		expect_ok(wc, "hello");
		if (wc.opcode != IBV_WC_RECV || memcmp(msgs, "hello", 6))
			die("hello: not the expected message");
	} else {
		static const struct {
			uint32_t len, imm;
		} imms[] = { { 5000, 0x12345678 }, { 0, 0xdeadbeef }, { BIG, 3 } };

		for (unsigned int i = 0; i < 3; i++) {
			wc = recv_comp(id);
			expect_ok(wc, "write with immediate");
			if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
			    !(wc.wc_flags & IBV_WC_WITH_IMM) ||
			    wc.byte_len != imms[i].len ||
			    ntohl(wc.imm_data) != imms[i].imm) {
				printf("%s: write with immediate %u: ", role, i);
				printf("opcode %d flags %#x len %u imm %#x\n",
				       wc.opcode, wc.wc_flags, wc.byte_len,
				       ntohl(wc.imm_data));
				exit(1);
			}
		}
		wc = recv_comp(id);
		expect_ok(wc, "done");
		if (wc.opcode != IBV_WC_RECV || memcmp(msgs + 3 * MSG, "done", 5))
			die("done: not the expected message");
		if (!same(region + 64, 5000, 1) || !same(region + 8192, BIG, 2))
			die("region: the written bytes are wrong");
		if (*(uint64_t *)region != 77) {
			printf("%s: atomic target %llu, expected 77\n", role,
			       (unsigned long long)*(uint64_t *)region);
			exit(1);
		}
	}
	/* Until the client is done: its disconnect flushes the receives left. */
	do {
		wc = recv_comp(id);
	} while (wc.status == IBV_WC_SUCCESS);
	if (strcmp(mode, "misaligned") == 0 && *(uint64_t *)region != 77)
		die("region: the misaligned atomic changed memory");
	printf("%s: ok\n", role);
	fflush(stdout);
	rdma_disconnect(id);
	return 0;
}

static int run_client(struct rdma_cm_id *id, const char *mode)
{
	struct rdma_conn_param param;
	struct ibv_mr *mr;
	uint8_t *buf, *msg;
	uint64_t *res;
	struct info t;
	struct ibv_wc wc;

	buf = calloc(1, BIG + 2 * MSG);
	if (!buf)
		die("out of memory");
	msg = buf + BIG;
	res = (uint64_t *)(msg + MSG);
	mr = ibv_reg_mr(id->pd, buf, BIG + 2 * MSG, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("memory registration failed");
	if (rdma_post_recv(id, NULL, msg, MSG, mr))
		die("rdma_post_recv failed");
	connect_params(&param);
	if (rdma_connect(id, &param))
		die("rdma_connect failed");
	expect_ok(recv_comp(id), "the region's key");
	memcpy(&t, msg, sizeof(t));

	if (strcmp(mode, "noext") == 0) {
		memcpy(msg, "hello", 6);
		if (rdma_post_send(id, NULL, msg, 6, mr, IBV_SEND_SIGNALED))
			die("rdma_post_send failed");
		expect_ok(send_comp(id), "hello");
		fill(buf, 16, 1);
		wc = write_imm(id, mr, buf, 16, &t, 64, 1, 0);
		if (wc.status != IBV_WC_LOC_QP_OP_ERR) {
			printf("%s: write with immediate: status %d, expected %d\n",
			       role, wc.status, IBV_WC_LOC_QP_OP_ERR);
			exit(1);
		}
		printf("%s: write with immediate refused: %s\n", role,
		       ibv_wc_status_str(wc.status));
	} else {
		fill(buf, 5000, 1);
		expect_ok(write_imm(id, mr, buf, 5000, &t, 64, 0x12345678, 0),
			  "write with immediate of 5000 bytes");
		expect_ok(write_imm(id, mr, buf, 0, &t, 0, 0xdeadbeef, 1),
			  "empty write with immediate, solicited");
		if (atomic(id, mr, res, &t, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0,
			   "fetch and add") != 1000)
			die("fetch and add: wrong original value");
		if (atomic(id, mr, res, &t, 0, IBV_WR_ATOMIC_CMP_AND_SWP, 1005, 77,
			   "compare and swap") != 1005)
			die("compare and swap: wrong original value");
		if (atomic(id, mr, res, &t, 0, IBV_WR_ATOMIC_CMP_AND_SWP, 1, 99,
			   "failing compare and swap") != 77)
			die("failing compare and swap: wrong original value");
		fill(buf, BIG, 2);
		expect_ok(write_imm(id, mr, buf, BIG, &t, 8192, 3, 0),
			  "write with immediate of 1 MiB + 3 bytes");
		memcpy(msg, "done", 5);
		if (rdma_post_send(id, NULL, msg, 5, mr, IBV_SEND_SIGNALED))
			die("rdma_post_send failed");
		expect_ok(send_comp(id), "done");
		if (strcmp(mode, "misaligned") == 0) {
			struct ibv_send_wr wr = {
				.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				.wr.atomic = {
					.remote_addr = t.addr + 4, .rkey = t.rkey,
					.compare_add = 1,
				},
			};

			struct ibv_sge sge = {
				.addr = (uintptr_t)res, .length = 8, .lkey = mr->lkey
			};
			struct ibv_send_wr *bad;
			int err;

			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			err = ibv_post_send(id->qp, &wr, &bad);
			if (!err)
				die("misaligned fetch and add: posted");
			printf("%s: misaligned fetch and add refused: %s\n", role,
			       strerror(err));
		}
	}
	printf("%s: ok\n", role);
	fflush(stdout);
	rdma_disconnect(id);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = RECVS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_cm_id *id;

	if (argc != 5)
		return 2;
	role = argv[1];
	if (strcmp(role, "server") == 0)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(argv[2], argv[3], &hints, &res))
		die("rdma_getaddrinfo failed");
	if (rdma_create_ep(&id, res, NULL, &attr))
		die("rdma_create_ep failed");
	rdma_freeaddrinfo(res);
	return strcmp(role, "server") == 0 ? run_server(id, argv[4]) : run_client(id, argv[4]);
}
