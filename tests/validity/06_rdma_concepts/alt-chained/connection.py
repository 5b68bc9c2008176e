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
    """A PD; one CQ with room for 2 * depth completions; a zeroed bytearray of ``size`` bytes registered with
    ``access``; an RC QP on the PD using the CQ for both queues, max_send_wr = max_recv_wr = depth, one SGE
    per WR, sq_sig_all = 0 (only WRs flagged IBV_SEND_SIGNALED complete when they succeed). The QP stays in
    RESET."""
    pd = v.ibv_alloc_pd(ctx)
    cq = v.ibv_create_cq(ctx, 2 * depth)
    buf = bytearray(size)
    mr = v.ibv_reg_mr(pd, buf, access)
    init = v.ibv_qp_init_attr(
        send_cq=cq,
        recv_cq=cq,
        cap=v.ibv_qp_cap(max_send_wr=depth, max_recv_wr=depth, max_send_sge=1, max_recv_sge=1),
        qp_type=v.IBV_QPT_RC,
        sq_sig_all=0,
    )
    qp = v.ibv_create_qp(pd, init)
    return Endpoint(ctx=ctx, pd=pd, cq=cq, qp=qp, buf=buf, mr=mr, psn=psn)


def roce_v2_gid_index(ctx: v.ibv_context) -> int:
    """The index of port PORT's first GID of type RoCE v2 whose address is IPv4-mapped ("::ffff:a.b.c.d"), as
    NCCL picks by default (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET); ValueError if none.
    ibv_query_port gives gid_tbl_len; ibv_query_gid and ibv_query_gid_type read each entry."""
    port = v.ibv_query_port(ctx, PORT)
    candidates = [
        i
        for i in range(port.gid_tbl_len)
        if v.ibv_query_gid_type(ctx, PORT, i) == v.IBV_GID_TYPE_ROCE_V2
        and v.ibv_query_gid(ctx, PORT, i).lower().startswith("::ffff:")
    ]
    if not candidates:
        raise ValueError("no RoCE v2 GID with an IPv4-mapped address on this port")
    return min(candidates)


def local_info(ep: Endpoint, gid_index: int | None = None) -> dict:
    """What the peer needs to reach us, sent out of band (NCCL sends it over its bootstrap socket):
    {"lid": port LID, "gid": the GID at gid_index (None when gid_index is None), "mtu": the port's active_mtu,
     "qp_num", "psn": ep.psn, "addr": ep.mr.addr, "rkey": ep.mr.rkey}."""
    port = v.ibv_query_port(ep.ctx, PORT)
    gid = v.ibv_query_gid(ep.ctx, PORT, gid_index) if gid_index is not None else None
    return dict(
        lid=port.lid,
        gid=gid,
        mtu=port.active_mtu,
        qp_num=ep.qp.qp_num,
        psn=ep.psn,
        addr=ep.mr.addr,
        rkey=ep.mr.rkey,
    )


def connect(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> None:
    """Bring ep.qp to RTS, connected to the QP described by ``remote`` (the peer's local_info).

    A QP not in RESET (e.g. in ERR after a failure) is first moved to RESET. Then, with exactly the attributes
    each transition requires: INIT (PKEY_INDEX, PORT, qp_access_flags QP_ACCESS); RTR (the address: dlid =
    remote lid on InfiniBand, or, when gid_index is given (RoCE), is_global=1 with grh.dgid = remote gid,
    grh.sgid_index = gid_index, grh.hop_limit = HOP_LIMIT; ah_attr.port_num PORT; path_mtu = the smaller of
    ours and the remote's; dest_qp_num; rq_psn = the PSN the peer starts sending with; max_dest_rd_atomic
    MAX_RD_ATOMIC; min_rnr_timer MIN_RNR_TIMER); RTS (sq_psn = ep.psn, TIMEOUT, RETRY_CNT, RNR_RETRY,
    max_rd_atomic MAX_RD_ATOMIC).
    """
    if ep.qp.state != v.IBV_QPS_RESET:
        v.ibv_modify_qp(ep.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_RESET), v.IBV_QP_STATE)
    ah = v.ibv_ah_attr(port_num=PORT)
    if gid_index is None:
        ah.dlid = remote["lid"]
    else:
        ah.is_global = 1
        ah.grh = v.ibv_global_route(dgid=remote["gid"], sgid_index=gid_index, hop_limit=HOP_LIMIT)
    ours = v.ibv_query_port(ep.ctx, PORT).active_mtu
    steps = [
        (
            v.ibv_qp_attr(
                qp_state=v.IBV_QPS_INIT, pkey_index=PKEY_INDEX, port_num=PORT, qp_access_flags=QP_ACCESS
            ),
            v.IBV_QP_PKEY_INDEX | v.IBV_QP_PORT | v.IBV_QP_ACCESS_FLAGS,
        ),
        (
            v.ibv_qp_attr(
                qp_state=v.IBV_QPS_RTR,
                ah_attr=ah,
                path_mtu=min(ours, remote["mtu"]),
                dest_qp_num=remote["qp_num"],
                rq_psn=remote["psn"],
                max_dest_rd_atomic=MAX_RD_ATOMIC,
                min_rnr_timer=MIN_RNR_TIMER,
            ),
            v.IBV_QP_AV
            | v.IBV_QP_PATH_MTU
            | v.IBV_QP_DEST_QPN
            | v.IBV_QP_RQ_PSN
            | v.IBV_QP_MAX_DEST_RD_ATOMIC
            | v.IBV_QP_MIN_RNR_TIMER,
        ),
        (
            v.ibv_qp_attr(
                qp_state=v.IBV_QPS_RTS,
                sq_psn=ep.psn,
                timeout=TIMEOUT,
                retry_cnt=RETRY_CNT,
                rnr_retry=RNR_RETRY,
                max_rd_atomic=MAX_RD_ATOMIC,
            ),
            v.IBV_QP_TIMEOUT
            | v.IBV_QP_RETRY_CNT
            | v.IBV_QP_RNR_RETRY
            | v.IBV_QP_SQ_PSN
            | v.IBV_QP_MAX_QP_RD_ATOMIC,
        ),
    ]
    for attr, mask in steps:
        v.ibv_modify_qp(ep.qp, attr, v.IBV_QP_STATE | mask)


def recover(ep: Endpoint, remote: dict, *, gid_index: int | None = None) -> list[v.ibv_wc]:
    """After an error: collect every completion still in ep.cq (the failed WR and the flushed ones), then
    connect again. Returns the collected completions, oldest first. (Moving a QP to RESET discards its
    completions that were not polled yet, so collect them first.)"""
    collected: list[v.ibv_wc] = []
    while True:  # drain until the CQ is empty
        more = v.ibv_poll_cq(ep.cq, 8)
        if not more:
            break
        collected.extend(more)
    connect(ep, remote, gid_index=gid_index)
    return collected
