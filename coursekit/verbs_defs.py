"""Constants, names and C structs of libibverbs for the verbs simulator (see ``coursekit.verbs``).

Values are those of rdma-core ``libibverbs/verbs.h``; the structs keep the C field names. This is the bottom
of the simulator: it imports nothing of it. The one struct that holds objects, ``ibv_qp_init_attr`` (its two
CQs), lives with the objects in ``coursekit.verbs_objects``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------------------
# constants, with the values of rdma-core libibverbs/verbs.h

IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR = range(7)
IBV_QPT_RC = 2

IBV_ACCESS_LOCAL_WRITE = 1
IBV_ACCESS_REMOTE_WRITE = 1 << 1
IBV_ACCESS_REMOTE_READ = 1 << 2
IBV_ACCESS_REMOTE_ATOMIC = 1 << 3

IBV_QP_STATE = 1 << 0
IBV_QP_CUR_STATE = 1 << 1
IBV_QP_ACCESS_FLAGS = 1 << 3
IBV_QP_PKEY_INDEX = 1 << 4
IBV_QP_PORT = 1 << 5
IBV_QP_AV = 1 << 7
IBV_QP_PATH_MTU = 1 << 8
IBV_QP_TIMEOUT = 1 << 9
IBV_QP_RETRY_CNT = 1 << 10
IBV_QP_RNR_RETRY = 1 << 11
IBV_QP_RQ_PSN = 1 << 12
IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13
IBV_QP_ALT_PATH = 1 << 14
IBV_QP_MIN_RNR_TIMER = 1 << 15
IBV_QP_SQ_PSN = 1 << 16
IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17
IBV_QP_PATH_MIG_STATE = 1 << 18
IBV_QP_DEST_QPN = 1 << 20

IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ = range(5)
IBV_SEND_FENCE, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED, IBV_SEND_INLINE = 1, 2, 4, 8

_STATUS_NAMES = (
    "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR",
)  # fmt: skip
(IBV_WC_SUCCESS, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_EEC_OP_ERR, IBV_WC_LOC_PROT_ERR,
 IBV_WC_WR_FLUSH_ERR, IBV_WC_MW_BIND_ERR, IBV_WC_BAD_RESP_ERR, IBV_WC_LOC_ACCESS_ERR,
 IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR, IBV_WC_RETRY_EXC_ERR,
 IBV_WC_RNR_RETRY_EXC_ERR) = range(14)  # fmt: skip
IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ = 0, 1, 2
IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM = 1 << 7, (1 << 7) + 1
IBV_WC_WITH_IMM = 1 << 1

IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096 = 1, 2, 3, 4, 5
IBV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_ETHERNET = 1, 2
IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2 = 0, 1, 2
IBV_PORT_ACTIVE = 4

_STATE_NAMES = {IBV_QPS_RESET: "RESET", IBV_QPS_INIT: "INIT", IBV_QPS_RTR: "RTR", IBV_QPS_RTS: "RTS",
                IBV_QPS_SQD: "SQD", IBV_QPS_SQE: "SQE", IBV_QPS_ERR: "ERR"}  # fmt: skip
_MASK_NAMES = {v: k for k, v in globals().items() if k.startswith("IBV_QP_") and isinstance(v, int)}


def status_name(status: int) -> str:
    """'IBV_WC_REM_ACCESS_ERR' for 10 (not libibverbs' ibv_wc_status_str, whose text differs)."""
    return _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else f"status {status}"


def state_name(state: int) -> str:
    return _STATE_NAMES.get(state, f"state {state}")


def mask_names(mask: int) -> str:
    return "|".join(name for bit, name in sorted(_MASK_NAMES.items()) if mask & bit) or "0"


def mtu_bytes(mtu: int) -> int:
    """IBV_MTU_1024 -> 1024 (enum ibv_mtu: 1 is 256 bytes, each step doubles)."""
    return 128 << mtu


class VerbsError(OSError):
    """A verb failed the way its C counterpart returns an errno; ``bad_wr`` is the index of a failed post."""

    def __init__(self, code: int, message: str, bad_wr: int | None = None) -> None:
        super().__init__(code, message)
        self.bad_wr = bad_wr


# ---------------------------------------------------------------------------------------------------------
# the C structs, as plain mutable dataclasses (field names as in verbs.h)


@dataclass
class ibv_sge:
    addr: int
    length: int
    lkey: int


@dataclass
class ibv_send_wr:
    wr_id: int = 0
    sg_list: list[ibv_sge] = field(default_factory=list)
    opcode: int = IBV_WR_SEND
    send_flags: int = 0
    imm_data: int = 0
    remote_addr: int = 0  # wr.rdma.remote_addr in C
    rkey: int = 0  # wr.rdma.rkey in C


@dataclass
class ibv_recv_wr:
    wr_id: int = 0
    sg_list: list[ibv_sge] = field(default_factory=list)


@dataclass
class ibv_wc:
    """A completion. With an error status only wr_id, status, qp_num and vendor_err are valid."""

    wr_id: int
    status: int
    opcode: int
    byte_len: int = 0
    imm_data: int = 0
    qp_num: int = 0
    src_qp: int = 0
    wc_flags: int = 0
    vendor_err: int = 0

    def __str__(self) -> str:
        return f"ibv_wc(wr_id={self.wr_id}, {status_name(self.status)}, byte_len={self.byte_len})"


@dataclass
class ibv_qp_cap:
    max_send_wr: int = 16
    max_recv_wr: int = 16
    max_send_sge: int = 1
    max_recv_sge: int = 1
    max_inline_data: int = 0


@dataclass
class ibv_global_route:
    dgid: str = ""
    flow_label: int = 0
    sgid_index: int = 0
    hop_limit: int = 0
    traffic_class: int = 0


@dataclass
class ibv_ah_attr:
    grh: ibv_global_route = field(default_factory=ibv_global_route)
    dlid: int = 0
    sl: int = 0
    src_path_bits: int = 0
    is_global: int = 0
    port_num: int = 0


@dataclass
class ibv_qp_attr:
    qp_state: int = IBV_QPS_RESET
    cur_qp_state: int = IBV_QPS_RESET
    path_mtu: int = 0
    rq_psn: int = 0
    sq_psn: int = 0
    dest_qp_num: int = 0
    qp_access_flags: int = 0
    ah_attr: ibv_ah_attr = field(default_factory=ibv_ah_attr)
    pkey_index: int = 0
    max_rd_atomic: int = 0
    max_dest_rd_atomic: int = 0
    min_rnr_timer: int = 0
    port_num: int = 0
    timeout: int = 0
    retry_cnt: int = 0
    rnr_retry: int = 0


@dataclass
class ibv_port_attr:
    state: int
    max_mtu: int
    active_mtu: int
    lid: int
    link_layer: int
    gid_tbl_len: int = 1


WC_OPCODE = {
    IBV_WR_SEND: IBV_WC_SEND, IBV_WR_SEND_WITH_IMM: IBV_WC_SEND, IBV_WR_RDMA_WRITE: IBV_WC_RDMA_WRITE,
    IBV_WR_RDMA_WRITE_WITH_IMM: IBV_WC_RDMA_WRITE, IBV_WR_RDMA_READ: IBV_WC_RDMA_READ,
}  # fmt: skip


def check(ok: object, code: int, message: str) -> None:
    if not ok:
        raise VerbsError(code, message)
