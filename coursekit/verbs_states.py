"""The rules of the RC QP state machine that ``ibv_modify_qp`` (``coursekit.verbs``) enforces, as tables.

Which transitions are legal and which attributes each one requires or allows come from the kernel's
``qp_state_table`` (linux ``drivers/infiniband/core/verbs.c``); the range of each attribute's value is the
size the IB spec gives its field.
"""

from __future__ import annotations

from coursekit.verbs_defs import (
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_ATOMIC,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE,
    IBV_QP_ACCESS_FLAGS,
    IBV_QP_ALT_PATH,
    IBV_QP_AV,
    IBV_QP_CUR_STATE,
    IBV_QP_DEST_QPN,
    IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_QP_MIN_RNR_TIMER,
    IBV_QP_PATH_MIG_STATE,
    IBV_QP_PATH_MTU,
    IBV_QP_PKEY_INDEX,
    IBV_QP_PORT,
    IBV_QP_RETRY_CNT,
    IBV_QP_RNR_RETRY,
    IBV_QP_RQ_PSN,
    IBV_QP_SQ_PSN,
    IBV_QP_TIMEOUT,
    IBV_QPS_ERR,
    IBV_QPS_INIT,
    IBV_QPS_RESET,
    IBV_QPS_RTR,
    IBV_QPS_RTS,
)

_RESET, _INIT, _RTR, _RTS, _ERR = IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR
# RC rows of qp_state_table in linux drivers/infiniband/core/verbs.c: (current, next) -> (required, optional)
TRANSITIONS = {
    (_RESET, _RESET): (0, 0),
    (_RESET, _INIT): (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0),
    (_INIT, _RESET): (0, 0),
    (_INIT, _ERR): (0, 0),
    (_INIT, _INIT): (0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
    (_INIT, _RTR): (
        IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER,
        IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
    ),
    (_RTR, _RESET): (0, 0),
    (_RTR, _ERR): (0, 0),
    (_RTR, _RTS): (
        IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_CUR_STATE
        | IBV_QP_ALT_PATH
        | IBV_QP_ACCESS_FLAGS
        | IBV_QP_MIN_RNR_TIMER
        | IBV_QP_PATH_MIG_STATE,
    ),
    (_RTS, _RESET): (0, 0),
    (_RTS, _ERR): (0, 0),
    (_RTS, _RTS): (
        0,
        IBV_QP_CUR_STATE
        | IBV_QP_ACCESS_FLAGS
        | IBV_QP_ALT_PATH
        | IBV_QP_PATH_MIG_STATE
        | IBV_QP_MIN_RNR_TIMER,
    ),
    (_ERR, _RESET): (0, 0),
    (_ERR, _ERR): (0, 0),
}
ALL_ACCESS = (
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC
)
RANGES = {  # attribute -> (field, lowest, highest) as the IB spec sizes the fields
    IBV_QP_DEST_QPN: ("dest_qp_num", 0, 0xFFFFFF),
    IBV_QP_RQ_PSN: ("rq_psn", 0, 0xFFFFFF),
    IBV_QP_SQ_PSN: ("sq_psn", 0, 0xFFFFFF),
    IBV_QP_MAX_DEST_RD_ATOMIC: ("max_dest_rd_atomic", 0, 16),
    IBV_QP_MAX_QP_RD_ATOMIC: ("max_rd_atomic", 0, 16),
    IBV_QP_MIN_RNR_TIMER: ("min_rnr_timer", 0, 31),
    IBV_QP_TIMEOUT: ("timeout", 0, 31),
    IBV_QP_RETRY_CNT: ("retry_cnt", 0, 7),
    IBV_QP_RNR_RETRY: ("rnr_retry", 0, 7),
    IBV_QP_PKEY_INDEX: ("pkey_index", 0, 0),  # a one-entry P_Key table
    IBV_QP_PORT: ("port_num", 1, 1),
    IBV_QP_ACCESS_FLAGS: ("qp_access_flags", 0, ALL_ACCESS),
}
