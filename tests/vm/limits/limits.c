// SPDX-License-Identifier: GPL-2.0
/*
 * Resource limits of a verbs device, seen from a process. Each mode prints one line per
 * result, "key value", for tests/vm/dev-limits.sh to check:
 *
 *   limits DEV srqs              SRQs (1 entry each) until a create fails: "created N",
 *                                "errno E"; then one destroyed and one created again:
 *                                "again 0" (or its errno)
 *   limits DEV cqs N CQE FILE    up to N CQs of CQE entries, reading the memory cgroup's
 *                                FILE (memory.current) before and after each: "before B",
 *                                "after-I BYTES" per CQ made, "created N", "errno E" (0 if
 *                                all N were made)
 *   limits DEV objects N         up to N PDs: "created N", "errno E"
 *   limits DEV mr BYTES          registers BYTES of memory: "mr 0" or "mr E" (errno)
 *   limits DEV entries           a CQ of max_cqe + 1 entries and an RC QP of max_qp_wr + 1
 *                                send WRs: "cq E", "qp E" (errno, 0 if made)
 *
 * Exits 0 when the device opened, whatever the limits said.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>
#include "../lib/verbs-helpers.h"

/* The device called NAME, opened; exits 2 when it cannot be. */
static struct ibv_context *open_dev(const char *name)
{
	struct ibv_context *ctx = ox_open_device(name);

	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", name);
		exit(2);
	}
	return ctx;
}

static long long read_num(const char *file)
{
	long long v = -1;
	FILE *f = fopen(file, "r");

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static struct ibv_srq *new_srq(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 1, .max_sge = 1 } };

	return ibv_create_srq(pd, &a);
}

static void srqs(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	size_t cap = 1 << 20, n = 0;
	struct ibv_srq **v = calloc(cap, sizeof(*v));

	if (!pd || !v) {
		printf("setup %d\n", errno);
		return;
	}
	for (; n < cap; n++) {
		v[n] = new_srq(pd);
		if (!v[n])
			break;
	}
	printf("created %zu\nerrno %d\n", n, n < cap ? errno : 0);
	if (n) {
		ibv_destroy_srq(v[--n]);
		v[n] = new_srq(pd);
		printf("again %d\n", v[n] ? 0 : errno);
		if (v[n])
			n++;
	}
	while (n)
		ibv_destroy_srq(v[--n]);
	ibv_dealloc_pd(pd);
	free(v);
}

static void cqs(struct ibv_context *ctx, int max, int cqe, const char *file)
{
	struct ibv_cq **v = calloc(max, sizeof(*v));
	int n = 0, err = 0;

	printf("before %lld\n", read_num(file));
	for (; n < max; n++) {
		v[n] = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
		if (!v[n]) {
			err = errno;
			break;
		}
		printf("after-%d %lld\n", n, read_num(file));
	}
	printf("created %d\nerrno %d\n", n, err);
	while (n)
		ibv_destroy_cq(v[--n]);
	free(v);
}

static void objects(struct ibv_context *ctx, int max)
{
	struct ibv_pd **v = calloc(max, sizeof(*v));
	int n = 0, err = 0;

	for (; n < max; n++) {
		v[n] = ibv_alloc_pd(ctx);
		if (!v[n]) {
			err = errno;
			break;
		}
	}
	printf("created %d\nerrno %d\n", n, err);
	while (n)
		ibv_dealloc_pd(v[--n]);
	free(v);
}

static void reg_mr(struct ibv_context *ctx, size_t bytes)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *m;

	if (!pd || p == MAP_FAILED) {
		printf("setup %d\n", errno);
		return;
	}
	memset(p, 1, bytes);
	m = ibv_reg_mr(pd, p, bytes, IBV_ACCESS_LOCAL_WRITE);
	printf("mr %d\n", m ? 0 : errno);
	if (m)
		ibv_dereg_mr(m);
	munmap(p, bytes);
	ibv_dealloc_pd(pd);
}

static void entries(struct ibv_context *ctx)
{
	struct ibv_device_attr attr;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq, *big;
	struct ibv_qp *qp;

	if (!pd || ibv_query_device(ctx, &attr)) {
		printf("setup %d\n", errno);
		return;
	}
	big = ibv_create_cq(ctx, attr.max_cqe + 1, NULL, NULL, 0);
	printf("cq %d\n", big ? 0 : errno);
	if (big)
		ibv_destroy_cq(big);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq) {
		printf("setup %d\n", errno);
		return;
	}
	qp = ox_create_rc_qp(pd, cq, attr.max_qp_wr + 1, 1);
	printf("qp %d\n", qp ? 0 : errno);
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;

	if (argc < 3) {
		fprintf(stderr,
			"usage: limits DEV srqs|cqs N CQE FILE|objects N|mr BYTES|entries\n");
		return 2;
	}
	ctx = open_dev(argv[1]);
	if (!strcmp(argv[2], "srqs"))
		srqs(ctx);
	else if (!strcmp(argv[2], "cqs") && argc == 6)
		cqs(ctx, atoi(argv[3]), atoi(argv[4]), argv[5]);
	else if (!strcmp(argv[2], "objects") && argc == 4)
		objects(ctx, atoi(argv[3]));
	else if (!strcmp(argv[2], "mr") && argc == 4)
		reg_mr(ctx, strtoull(argv[3], NULL, 0));
	else if (!strcmp(argv[2], "entries"))
		entries(ctx);
	else
		return 2;
	ibv_close_device(ctx);
	return 0;
}
