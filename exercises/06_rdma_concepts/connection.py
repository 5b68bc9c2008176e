"""RDMA with the verbs API: connect two reliable-connected (RC) queue pairs, exchange messages with SEND/RECV,
and move bytes one-sidedly with RDMA WRITE and READ, on the course's verbs simulator (coursekit.verbs).

Objects, as in libibverbs: a protection domain (PD) owns memory regions (MR: lkey for local access, rkey for
the peer's); a queue pair (QP) posts work requests (WR) that complete into a completion queue (CQ) as work
completions (WC). A QP must climb RESET -> INIT -> RTR -> RTS before it sends. Check: `grade exercise 06`.
"""

from __future__ import annotations

from dataclasses import dataclass

from coursekit import verbs as v

# The QP settings NCCL uses (NVIDIA/nccl src/transport/net_ib.cc: ncclIbCreateQp, ncclIbRtrQp, ncclIbRtsQp).
PORT = 1  # HCA port
PKEY_INDEX = 0  # NCCL_IB_PKEY default: the first entry of the P_Key table
TIMEOUT = 20  # NCCL_IB_TIMEOUT default since 2.23: 4.096 us * 2^20 = 4.3 s per transport retry (env.rst)
RETRY_CNT = 7  # NCCL_IB_RETRY_CNT default: 7 retries, ~30 s before IBV_WC_RETRY_EXC_ERR
RNR_RETRY = 7  # 7 = retry forever when the receiver has no receive posted ("receiver not ready")
MIN_RNR_TIMER = 12  # how long the sender waits after an RNR NAK (IB spec table: 12 = 0.64 ms)
MAX_RD_ATOMIC = (
    1  # RDMA READs in flight, both as requester (max_rd_atomic) and responder (max_dest_rd_atomic)
)
HOP_LIMIT = 255  # GRH hop limit on RoCE
QP_ACCESS = v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_WRITE | v.IBV_ACCESS_REMOTE_READ
MAX_POLLS = 1000  # empty polls before giving up on a completion (a real program would also sleep or block)


@dataclass
class Endpoint:
    """Everything one host creates to talk over one RC connection."""

    ctx: v.ibv_context
    pd: v.ibv_pd
    cq: v.ibv_cq  # one CQ for both the send and the receive queue
    qp: v.ibv_qp
    buf: bytearray  # registered memory: what the NIC may read and write
    mr: v.ibv_mr
    psn: int  # the first packet sequence number this side sends


def poll(cq: v.ibv_cq, n: int) -> list[v.ibv_wc]:
    """Exactly ``n`` completions from ``cq``, polling at most MAX_POLLS times, else TimeoutError."""
    got: list[v.ibv_wc] = []
    for _ in range(MAX_POLLS):
        got += v.ibv_poll_cq(cq, n - len(got))
        if len(got) == n:
            return got
    raise TimeoutError(f"{len(got)} of {n} completions after {MAX_POLLS} polls: {[str(wc) for wc in got]}")


# ------------------------------------------------------------------------------------------------------------
# 06.connect: resources, the out-of-band exchange, the state machine


def create_endpoint(ctx: v.ibv_context, size: int, access: int, *, psn: int = 0, depth: int = 16) -> Endpoint:
    """Everything one host needs for one RC connection, as an Endpoint: a zeroed ``size``-byte buffer that the
    NIC may access as ``access`` allows, an RC QP whose send and receive queues each hold ``depth`` work
    requests of one scatter/gather entry, a single CQ that can hold every completion both queues can produce
    at once, and only WRs flagged IBV_SEND_SIGNALED completing when they succeed. ``psn`` is this side's first
    PSN. The QP is left in RESET."""
    raise NotImplementedError("TODO(06.connect): not implemented yet")


def roce_v2_gid_index(ctx: v.ibv_context) -> int:
    """The GID index on port PORT that NCCL picks by default for a routed RoCE connection
    (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET; README.md, "Addressing"): the first entry of
    the port's GID table that qualifies. ValueError if none does."""
    raise NotImplementedError("TODO(06.connect): not implemented yet")


def local_info(ep: Endpoint, gid_index: int | None = None) -> dict:
    """What the peer needs to reach us and our memory, sent out of band (NCCL sends it over its bootstrap
    socket), from port PORT: {"lid": our LID, "gid": our GID at gid_index (None when gid_index is None),
    "mtu": the port's active MTU as ibv_query_port reports it (an enum ibv_mtu value, not bytes),
    "qp_num": our QP's number, "psn": our first PSN, "addr": the virtual address of our registered buffer,
    "rkey": the key a peer needs to access it}."""
    raise NotImplementedError("TODO(06.connect): not implemented yet")


def connect(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> None:
    """Bring ep.qp to RTS, connected to the QP described by ``remote`` (the peer's local_info), from whatever
    state it is in (a fresh QP, one in ERR after a failure, one already connected).

    Every ibv_modify_qp call is one legal transition and carries exactly the attributes that transition
    requires (README.md, "The QP state machine"), with the values NCCL uses (the constants above; remote
    peers may read and write our memory). On InfiniBand (gid_index None) the peer is addressed by its LID; on
    RoCE (gid_index given) by its GID, from our GID at gid_index. The path MTU is one both ports can carry.
    """
    raise NotImplementedError("TODO(06.connect): not implemented yet")


def recover(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> list[v.ibv_wc]:
    """After an error: bring ep back to RTS, connected to ``remote`` again, and return every completion that
    was still in ep.cq (the failed WR and the ones flushed after it), oldest first."""
    raise NotImplementedError("TODO(06.recover): not implemented yet")
