"""A small, deterministic simulator of the libibverbs API: two or more simulated hosts in one process.

Names, constants and struct fields follow libibverbs (rdma-core ``libibverbs/verbs.h``), so code written
against it reads like C verbs code: ``ibv_alloc_pd``, ``ibv_reg_mr``, ``ibv_create_cq``, ``ibv_create_qp``,
``ibv_modify_qp``, ``ibv_post_send``, ``ibv_post_recv``, ``ibv_poll_cq``. Where a C verb returns an errno,
this module raises ``VerbsError(errno)``, as rdma-core's Python binding (pyverbs) raises PyverbsRDMAError.

What is modelled, and from where:
- QP state machine for RC QPs, RESET/INIT/RTR/RTS/ERR: legal transitions and the attribute masks each one
  requires or allows, from the kernel's ``qp_state_table`` / ``ib_modify_qp_is_ok``
  (linux ``drivers/infiniband/core/verbs.c``). SQD and SQE are not modelled.
- Posting rules: receives may be posted from INIT on, sends only in RTS; in RESET (and sends before RTS) the
  post fails with EINVAL (rdma-core providers, e.g. hns ``post_recv``; rxe ``rxe_post_send``). In ERR every
  posted WR completes at once with IBV_WC_WR_FLUSH_ERR.
- Responder checks in rxe's order (linux ``drivers/infiniband/sw/rxe/rxe_resp.c``): QP access flags
  (IBV_WC_REM_INV_REQ_ERR), receive WQE present (RNR), rkey/bounds/MR access (IBV_WC_REM_ACCESS_ERR).
  Error completions follow rdmamojo's ibv_poll_cq status table and the IBTA RC error classes: the requester
  QP and, for responder-detected errors, the responder QP move to ERR and flush what is left.
- Moving a QP to RESET drops its WRs and removes its not yet polled completions from its CQs, as the mlx4,
  mlx5 and hns providers do (``mlx5_modify_qp`` -> ``mlx5_cq_clean``).

Deliberate simplifications (there is no clock): work executes synchronously when it is posted. A SEND that
finds no receive WQE waits at the head of its send queue when ``rnr_retry == 7`` (retry forever, NCCL's
setting) and is delivered when a receive is posted; with a finite ``rnr_retry`` the budget is spent at once
and the WR completes with IBV_WC_RNR_RETRY_EXC_ERR. Packets to an unreachable or not-ready QP, or with the
wrong PSN, count as lost: the requester completes with IBV_WC_RETRY_EXC_ERR. Atomics, SRQs, memory windows
and UD/UC QPs are not modelled.

Where it lives: this module is the facade, and every public name is reachable from it (``import
coursekit.verbs as v``). The verbs are in ``coursekit.verbs_device`` (device, PD, MR, CQ) and
``coursekit.verbs_qp`` (QPs); the constants, names and C structs in ``coursekit.verbs_defs``; the objects
(Fabric, ibv_context, ibv_pd, ibv_mr, ibv_cq, ibv_qp) in ``coursekit.verbs_objects``; the state machine's
tables in ``coursekit.verbs_states``; the wire that carries posted work to the responder in
``coursekit.verbs_wire``.
"""

from __future__ import annotations

# Each name is re-exported explicitly (``X as X``): a student's code reads v.IBV_QPS_RTS, v.ibv_qp_attr(...).
# One statement per module (isort would split every ``as`` into a statement of its own):
# isort: skip_file
from coursekit.verbs_defs import (
    IBV_ACCESS_LOCAL_WRITE as IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_ATOMIC as IBV_ACCESS_REMOTE_ATOMIC,
    IBV_ACCESS_REMOTE_READ as IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE as IBV_ACCESS_REMOTE_WRITE,
    IBV_GID_TYPE_IB as IBV_GID_TYPE_IB,
    IBV_GID_TYPE_ROCE_V1 as IBV_GID_TYPE_ROCE_V1,
    IBV_GID_TYPE_ROCE_V2 as IBV_GID_TYPE_ROCE_V2,
    IBV_LINK_LAYER_ETHERNET as IBV_LINK_LAYER_ETHERNET,
    IBV_LINK_LAYER_INFINIBAND as IBV_LINK_LAYER_INFINIBAND,
    IBV_MTU_256 as IBV_MTU_256,
    IBV_MTU_512 as IBV_MTU_512,
    IBV_MTU_1024 as IBV_MTU_1024,
    IBV_MTU_2048 as IBV_MTU_2048,
    IBV_MTU_4096 as IBV_MTU_4096,
    IBV_PORT_ACTIVE as IBV_PORT_ACTIVE,
    IBV_QP_ACCESS_FLAGS as IBV_QP_ACCESS_FLAGS,
    IBV_QP_ALT_PATH as IBV_QP_ALT_PATH,
    IBV_QP_AV as IBV_QP_AV,
    IBV_QP_CUR_STATE as IBV_QP_CUR_STATE,
    IBV_QP_DEST_QPN as IBV_QP_DEST_QPN,
    IBV_QP_MAX_DEST_RD_ATOMIC as IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_MAX_QP_RD_ATOMIC as IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_QP_MIN_RNR_TIMER as IBV_QP_MIN_RNR_TIMER,
    IBV_QP_PATH_MIG_STATE as IBV_QP_PATH_MIG_STATE,
    IBV_QP_PATH_MTU as IBV_QP_PATH_MTU,
    IBV_QP_PKEY_INDEX as IBV_QP_PKEY_INDEX,
    IBV_QP_PORT as IBV_QP_PORT,
    IBV_QP_RETRY_CNT as IBV_QP_RETRY_CNT,
    IBV_QP_RNR_RETRY as IBV_QP_RNR_RETRY,
    IBV_QP_RQ_PSN as IBV_QP_RQ_PSN,
    IBV_QP_SQ_PSN as IBV_QP_SQ_PSN,
    IBV_QP_STATE as IBV_QP_STATE,
    IBV_QP_TIMEOUT as IBV_QP_TIMEOUT,
    IBV_QPS_ERR as IBV_QPS_ERR,
    IBV_QPS_INIT as IBV_QPS_INIT,
    IBV_QPS_RESET as IBV_QPS_RESET,
    IBV_QPS_RTR as IBV_QPS_RTR,
    IBV_QPS_RTS as IBV_QPS_RTS,
    IBV_QPS_SQD as IBV_QPS_SQD,
    IBV_QPS_SQE as IBV_QPS_SQE,
    IBV_QPT_RC as IBV_QPT_RC,
    IBV_SEND_FENCE as IBV_SEND_FENCE,
    IBV_SEND_INLINE as IBV_SEND_INLINE,
    IBV_SEND_SIGNALED as IBV_SEND_SIGNALED,
    IBV_SEND_SOLICITED as IBV_SEND_SOLICITED,
    IBV_WC_BAD_RESP_ERR as IBV_WC_BAD_RESP_ERR,
    IBV_WC_LOC_ACCESS_ERR as IBV_WC_LOC_ACCESS_ERR,
    IBV_WC_LOC_EEC_OP_ERR as IBV_WC_LOC_EEC_OP_ERR,
    IBV_WC_LOC_LEN_ERR as IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_PROT_ERR as IBV_WC_LOC_PROT_ERR,
    IBV_WC_LOC_QP_OP_ERR as IBV_WC_LOC_QP_OP_ERR,
    IBV_WC_MW_BIND_ERR as IBV_WC_MW_BIND_ERR,
    IBV_WC_RDMA_READ as IBV_WC_RDMA_READ,
    IBV_WC_RDMA_WRITE as IBV_WC_RDMA_WRITE,
    IBV_WC_RECV as IBV_WC_RECV,
    IBV_WC_RECV_RDMA_WITH_IMM as IBV_WC_RECV_RDMA_WITH_IMM,
    IBV_WC_REM_ACCESS_ERR as IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR as IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_OP_ERR as IBV_WC_REM_OP_ERR,
    IBV_WC_RETRY_EXC_ERR as IBV_WC_RETRY_EXC_ERR,
    IBV_WC_RNR_RETRY_EXC_ERR as IBV_WC_RNR_RETRY_EXC_ERR,
    IBV_WC_SEND as IBV_WC_SEND,
    IBV_WC_SUCCESS as IBV_WC_SUCCESS,
    IBV_WC_WITH_IMM as IBV_WC_WITH_IMM,
    IBV_WC_WR_FLUSH_ERR as IBV_WC_WR_FLUSH_ERR,
    IBV_WR_RDMA_READ as IBV_WR_RDMA_READ,
    IBV_WR_RDMA_WRITE as IBV_WR_RDMA_WRITE,
    IBV_WR_RDMA_WRITE_WITH_IMM as IBV_WR_RDMA_WRITE_WITH_IMM,
    IBV_WR_SEND as IBV_WR_SEND,
    IBV_WR_SEND_WITH_IMM as IBV_WR_SEND_WITH_IMM,
    VerbsError as VerbsError,
    ibv_ah_attr as ibv_ah_attr,
    ibv_global_route as ibv_global_route,
    ibv_port_attr as ibv_port_attr,
    ibv_qp_attr as ibv_qp_attr,
    ibv_qp_cap as ibv_qp_cap,
    ibv_recv_wr as ibv_recv_wr,
    ibv_send_wr as ibv_send_wr,
    ibv_sge as ibv_sge,
    ibv_wc as ibv_wc,
    mask_names as mask_names,
    mtu_bytes as mtu_bytes,
    state_name as state_name,
    status_name as status_name,
)
from coursekit.verbs_device import (
    ibv_alloc_pd as ibv_alloc_pd,
    ibv_create_cq as ibv_create_cq,
    ibv_dealloc_pd as ibv_dealloc_pd,
    ibv_dereg_mr as ibv_dereg_mr,
    ibv_destroy_cq as ibv_destroy_cq,
    ibv_poll_cq as ibv_poll_cq,
    ibv_query_gid as ibv_query_gid,
    ibv_query_gid_type as ibv_query_gid_type,
    ibv_query_port as ibv_query_port,
    ibv_reg_mr as ibv_reg_mr,
)
from coursekit.verbs_objects import (
    Fabric as Fabric,
    ibv_context as ibv_context,
    ibv_cq as ibv_cq,
    ibv_mr as ibv_mr,
    ibv_pd as ibv_pd,
    ibv_qp as ibv_qp,
    ibv_qp_init_attr as ibv_qp_init_attr,
)
from coursekit.verbs_qp import (
    ibv_create_qp as ibv_create_qp,
    ibv_destroy_qp as ibv_destroy_qp,
    ibv_modify_qp as ibv_modify_qp,
    ibv_post_recv as ibv_post_recv,
    ibv_post_send as ibv_post_send,
    ibv_query_qp as ibv_query_qp,
)
