/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Verbs helpers shared by the C test programs under tests/vm (faults, hostile, limits):
 * opening a device by name, creating an RC QP and taking it INIT -> RTR -> RTS on port 1
 * over a RoCE (global) path. Each program includes it as "../lib/verbs-helpers.h", so the
 * compile lines of the test scripts need no -I.
 */
#ifndef OX_VERBS_HELPERS_H
#define OX_VERBS_HELPERS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

/*
 * Opens the verbs device called NAME. NULL when it cannot, with errno ENODEV if there is no
 * such device, else ibv_open_device()'s errno. The device list is freed before returning.
 */
static inline struct ibv_context *ox_open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int err = ENODEV;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			err = errno;
		}
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		errno = err;
	return ctx;
}

/*
 * Creates an RC QP on PD whose send and receive completions both go to CQ, with room for
 * SEND_WR and RECV_WR work requests of one SGE each. NULL with errno when refused.
 */
static inline struct ibv_qp *ox_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq,
					     uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

/* Moves QP from RESET to INIT on port 1, P_Key index 0, remote writes and reads allowed. */
static inline int ox_qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/*
 * Moves an RC QP from INIT to RTR: connected to QP number DEST at GID DGID, sent from the
 * local GID at SGID_INDEX of port 1 (hop limit 64), expecting RQ_PSN first. MTU 1024, one
 * incoming RDMA READ at a time, an RNR NAK timer of 0.01 ms.
 */
static inline int ox_qp_to_rtr(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *dgid,
			       uint8_t sgid_index, uint32_t rq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dest,
		.rq_psn = rq_psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *dgid, .sgid_index = sgid_index, .hop_limit = 64 } },
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			     IBV_QP_MIN_RNR_TIMER);
}

/*
 * Moves an RC QP from RTR to RTS: sending from SQ_PSN, an ACK timeout of 4.096 us << TIMEOUT,
 * RETRY_CNT retries after a timeout and RNR_RETRY after an RNR NAK, one outgoing RDMA READ
 * at a time.
 */
static inline int ox_qp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t timeout,
			       uint8_t retry_cnt, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .sq_psn = sq_psn, .timeout = timeout,
		.retry_cnt = retry_cnt, .rnr_retry = rnr_retry, .max_rd_atomic = 1,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

#endif /* OX_VERBS_HELPERS_H */
