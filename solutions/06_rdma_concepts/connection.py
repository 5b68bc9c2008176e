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
    ### BEGIN SOLUTION 06.connect
    pd = v.ibv_alloc_pd(ctx)
    cq = v.ibv_create_cq(ctx, 2 * depth)  # sends and receives complete into the same CQ
    buf = bytearray(size)
    mr = v.ibv_reg_mr(pd, buf, access)  # pins buf and hands out lkey (for us) and rkey (for the peer)
    cap = v.ibv_qp_cap(max_send_wr=depth, max_recv_wr=depth, max_send_sge=1, max_recv_sge=1)
    qp = v.ibv_create_qp(pd, v.ibv_qp_init_attr(send_cq=cq, recv_cq=cq, cap=cap, qp_type=v.IBV_QPT_RC))
    return Endpoint(ctx, pd, cq, qp, buf, mr, psn)
    ### END SOLUTION


def roce_v2_gid_index(ctx: v.ibv_context) -> int:
    """The GID index on port PORT that NCCL picks by default for a routed RoCE connection
    (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET; README.md, "Addressing"): the first entry of
    the port's GID table that qualifies. ValueError if none does."""
    ### BEGIN SOLUTION 06.connect
    for index in range(v.ibv_query_port(ctx, PORT).gid_tbl_len):
        gid = v.ibv_query_gid(ctx, PORT, index)
        # v2 = IB transport over UDP/IP: routable; link-local fe80:: GIDs are not, and v1 is plain Ethernet
        if v.ibv_query_gid_type(ctx, PORT, index) == v.IBV_GID_TYPE_ROCE_V2 and gid.startswith("::ffff:"):
            return index
    raise ValueError(f"{ctx.name} has no RoCE v2 IPv4 GID")
    ### END SOLUTION


def local_info(ep: Endpoint, gid_index: int | None = None) -> dict:
    """What the peer needs to reach us and our memory, sent out of band (NCCL sends it over its bootstrap
    socket), from port PORT: {"lid": our LID, "gid": our GID at gid_index (None when gid_index is None),
    "mtu": the port's active MTU as ibv_query_port reports it (an enum ibv_mtu value, not bytes),
    "qp_num": our QP's number, "psn": our first PSN, "addr": the virtual address of our registered buffer,
    "rkey": the key a peer needs to access it}."""
    ### BEGIN SOLUTION 06.connect
    port = v.ibv_query_port(ep.ctx, PORT)
    gid = None if gid_index is None else v.ibv_query_gid(ep.ctx, PORT, gid_index)
    return {
        "lid": port.lid,
        "gid": gid,
        "mtu": port.active_mtu,
        "qp_num": ep.qp.qp_num,
        "psn": ep.psn,
        "addr": ep.mr.addr,
        "rkey": ep.mr.rkey,
    }
    ### END SOLUTION


def connect(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> None:
    """Bring ep.qp to RTS, connected to the QP described by ``remote`` (the peer's local_info), from whatever
    state it is in (a fresh QP, one in ERR after a failure, one already connected).

    Every ibv_modify_qp call is one legal transition and carries exactly the attributes that transition
    requires (README.md, "The QP state machine"), with the values NCCL uses (the constants above; remote
    peers may read and write our memory). On InfiniBand (gid_index None) the peer is addressed by its LID; on
    RoCE (gid_index given) by its GID, from our GID at gid_index. The path MTU is one both ports can carry.
    """
    ### BEGIN SOLUTION 06.connect
    qp = ep.qp
    if qp.state != v.IBV_QPS_RESET:  # ERR -> INIT is illegal: every road back goes through RESET
        v.ibv_modify_qp(qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_RESET), v.IBV_QP_STATE)
    init = v.ibv_qp_attr(
        qp_state=v.IBV_QPS_INIT, pkey_index=PKEY_INDEX, port_num=PORT, qp_access_flags=QP_ACCESS
    )
    v.ibv_modify_qp(qp, init, v.IBV_QP_STATE | v.IBV_QP_PKEY_INDEX | v.IBV_QP_PORT | v.IBV_QP_ACCESS_FLAGS)

    ah = v.ibv_ah_attr(port_num=PORT)
    if gid_index is None:
        ah.dlid = remote["lid"]  # InfiniBand: the subnet manager's LID routes inside the subnet
    else:  # RoCE has no LIDs: every packet carries a GRH with the peer's GID (its IP address)
        ah.is_global = 1
        ah.grh = v.ibv_global_route(dgid=remote["gid"], sgid_index=gid_index, hop_limit=HOP_LIMIT)
    mtu = min(v.ibv_query_port(ep.ctx, PORT).active_mtu, remote["mtu"])  # as NCCL: min(remote, local)
    rtr = v.ibv_qp_attr(
        qp_state=v.IBV_QPS_RTR,
        ah_attr=ah,
        path_mtu=mtu,
        dest_qp_num=remote["qp_num"],
        rq_psn=remote["psn"],
        max_dest_rd_atomic=MAX_RD_ATOMIC,
        min_rnr_timer=MIN_RNR_TIMER,
    )
    mask = v.IBV_QP_AV | v.IBV_QP_PATH_MTU | v.IBV_QP_DEST_QPN | v.IBV_QP_RQ_PSN
    v.ibv_modify_qp(qp, rtr, v.IBV_QP_STATE | mask | v.IBV_QP_MAX_DEST_RD_ATOMIC | v.IBV_QP_MIN_RNR_TIMER)

    rts = v.ibv_qp_attr(
        qp_state=v.IBV_QPS_RTS,
        sq_psn=ep.psn,
        timeout=TIMEOUT,
        retry_cnt=RETRY_CNT,
        rnr_retry=RNR_RETRY,
        max_rd_atomic=MAX_RD_ATOMIC,
    )
    mask = v.IBV_QP_TIMEOUT | v.IBV_QP_RETRY_CNT | v.IBV_QP_RNR_RETRY | v.IBV_QP_SQ_PSN
    v.ibv_modify_qp(qp, rts, v.IBV_QP_STATE | mask | v.IBV_QP_MAX_QP_RD_ATOMIC)
    ### END SOLUTION


def recover(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> list[v.ibv_wc]:
    """After an error: bring ep back to RTS, connected to ``remote`` again, and return every completion that
    was still in ep.cq (the failed WR and the ones flushed after it), oldest first."""
    ### BEGIN SOLUTION 06.recover
    flushed: list[v.ibv_wc] = []
    while batch := v.ibv_poll_cq(ep.cq, 16):  # poll until empty: each WR's fate, error or flush
        flushed += batch
    connect(ep, remote, gid_index=gid_index)  # ERR -> RESET -> INIT -> RTR -> RTS
    return flushed
    ### END SOLUTION
