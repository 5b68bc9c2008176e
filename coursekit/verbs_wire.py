"""The wire of the verbs simulator: a posted send WR travels to the responder QP and completes.

Responder checks follow rxe's order (linux ``drivers/infiniband/sw/rxe/rxe_resp.c``); statuses follow
rdmamojo's ibv_poll_cq table and the IBTA RC error classes. See ``coursekit.verbs`` for the model.
"""

from __future__ import annotations

import math
from dataclasses import replace

from coursekit.verbs_defs import (
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE,
    IBV_GID_TYPE_ROCE_V2,
    IBV_QPS_ERR,
    IBV_QPS_RTR,
    IBV_QPS_RTS,
    IBV_SEND_SIGNALED,
    IBV_WC_LOC_ACCESS_ERR,
    IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_PROT_ERR,
    IBV_WC_RECV,
    IBV_WC_RECV_RDMA_WITH_IMM,
    IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_OP_ERR,
    IBV_WC_RETRY_EXC_ERR,
    IBV_WC_RNR_RETRY_EXC_ERR,
    IBV_WC_SUCCESS,
    IBV_WC_WITH_IMM,
    IBV_WC_WR_FLUSH_ERR,
    IBV_WR_RDMA_READ,
    IBV_WR_RDMA_WRITE,
    IBV_WR_RDMA_WRITE_WITH_IMM,
    IBV_WR_SEND,
    IBV_WR_SEND_WITH_IMM,
    WC_OPCODE,
    ibv_send_wr,
    ibv_sge,
    ibv_wc,
    mtu_bytes,
)
from coursekit.verbs_objects import Fabric, PostedSend, ibv_mr, ibv_pd, ibv_qp

_RTR, _RTS, _ERR = IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR


def to_error(qp: ibv_qp) -> None:
    """The QP enters ERR: every WR still queued completes with IBV_WC_WR_FLUSH_ERR, signaled or not."""
    qp.sim.state = _ERR
    while qp.sim.sq:
        posted = qp.sim.sq.popleft()
        wc = ibv_wc(posted.wr.wr_id, IBV_WC_WR_FLUSH_ERR, WC_OPCODE[posted.wr.opcode], qp_num=qp.qp_num)
        send_completion(qp, posted, wc)
    while qp.sim.rq:
        qp.recv_cq.deliver(
            ibv_wc(qp.sim.rq.popleft().wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp_num=qp.qp_num)
        )


_BLOCKED = None  # the WR cannot go yet (receiver not ready, rnr_retry=7); it stays at the head of the SQ
_NEEDS = {IBV_WR_RDMA_WRITE: IBV_ACCESS_REMOTE_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM: IBV_ACCESS_REMOTE_WRITE,
          IBV_WR_RDMA_READ: IBV_ACCESS_REMOTE_READ}  # fmt: skip
_USES_RECV_WQE = (IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM)


def progress_all(fabric: Fabric) -> None:
    for qp in fabric.all_qps():
        progress(qp)


def progress(qp: ibv_qp) -> None:
    """Run the requester's send queue in order until it is empty or its head is blocked."""
    while qp.sim.state == _RTS and qp.sim.sq:
        posted = qp.sim.sq[0]
        wr = posted.wr
        outcome = _execute(qp, wr, posted.inline)
        if outcome is _BLOCKED:
            return
        status, byte_len = outcome
        qp.sim.sq.popleft()
        if status != IBV_WC_SUCCESS:  # an error completion is always generated, then the QP enters ERR
            send_completion(qp, posted, ibv_wc(wr.wr_id, status, WC_OPCODE[wr.opcode], qp_num=qp.qp_num))
            to_error(qp)
        elif qp.sq_sig_all or wr.send_flags & IBV_SEND_SIGNALED:
            wc = ibv_wc(wr.wr_id, status, WC_OPCODE[wr.opcode], byte_len, qp_num=qp.qp_num)
            send_completion(qp, posted, wc)


def send_completion(qp: ibv_qp, posted: PostedSend, wc: ibv_wc) -> None:
    """Queue a send-side completion; polling it frees the WR's send-queue slot and all earlier ones."""
    qp.send_cq.deliver(wc, frees=(qp, posted.seq))


def _route(qp: ibv_qp) -> ibv_qp | None:
    """The QP that qp's address vector and dest_qp_num reach, or None (packets are lost)."""
    av, fabric = qp.sim.attr.ah_attr, qp.context.fabric
    if av.is_global:
        sgid, kind = qp.context.gids[av.grh.sgid_index]
        target = next((c for c in fabric.devices if (av.grh.dgid, kind) in c.gids), None)
        if target is not None and target is not qp.context and fabric.routed:
            # a router forwards IP (RoCE v2) only, and never link-local fe80:: addresses
            if kind != IBV_GID_TYPE_ROCE_V2 or sgid.startswith("fe80") or av.grh.dgid.startswith("fe80"):
                return None
    else:
        target = next((c for c in fabric.devices if c.lid == av.dlid), None)
    return None if target is None else target.sim.qps.get(qp.sim.attr.dest_qp_num)


def _local(qp: ibv_qp, sges: list[ibv_sge], need: int) -> list[memoryview] | None:
    """Views of the local buffers named by ``sges``, or None on a local protection error."""
    views = []
    for sge in sges:
        mr = qp.context.sim.mrs.get(sge.lkey)
        view = None if mr is None or mr.lkey != sge.lkey else _span(mr, qp.pd, need, sge.addr, sge.length)
        if view is None:
            return None
        views.append(view)
    return views


def _remote(peer: ibv_qp, rkey: int, addr: int, length: int, need: int) -> memoryview | None:
    mr = peer.context.sim.mrs.get(rkey)
    return None if mr is None or mr.rkey != rkey else _span(mr, peer.pd, need, addr, length)


def _span(mr: ibv_mr, pd: ibv_pd, need: int, addr: int, length: int) -> memoryview | None:
    """mr's bytes [addr, addr + length), or None: mr is on another PD, lacks ``need`` or is too short."""
    if mr.pd is not pd or (mr.access & need) != need:
        return None
    if not (mr.addr <= addr and addr + length <= mr.addr + mr.length):
        return None
    assert mr.sim.view is not None  # only ibv_dereg_mr clears it, and it takes the MR out of the key table
    return mr.sim.view[addr - mr.addr : addr - mr.addr + length]


def _scatter(data: bytes, views: list[memoryview]) -> None:
    at = 0
    for view in views:
        chunk = data[at : at + len(view)]
        view[: len(chunk)] = chunk
        at += len(chunk)


def _execute(qp: ibv_qp, wr: ibv_send_wr, inline: bytes | None) -> tuple[int, int] | None:
    """Carry one WR to the responder (its data already copied when it was posted inline); return
    (requester status, byte_len) or _BLOCKED."""
    is_read = wr.opcode == IBV_WR_RDMA_READ
    local = None if inline is not None else _local(qp, wr.sg_list, IBV_ACCESS_LOCAL_WRITE if is_read else 0)
    if local is None and inline is None:
        return IBV_WC_LOC_PROT_ERR, 0  # rdmamojo: the SGEs do not reference an MR valid for the operation
    data = inline if inline is not None else b"".join(bytes(v) for v in local or [])
    length = sum(s.length for s in wr.sg_list)
    peer = _route(qp)
    if peer is None or peer.sim.state not in (_RTR, _RTS) or peer.sim.expected_psn != qp.sim.next_psn:
        return IBV_WC_RETRY_EXC_ERR, 0  # nothing answers: retry_cnt transport retries, then this
    if is_read and qp.sim.attr.max_rd_atomic == 0:
        return _BLOCKED  # no RDMA READ may be outstanding: it is never issued (rxe check_init_depth)
    acked = _route(peer) is qp  # the responder sends its ACK/NAK to ITS dest_qp_num
    if is_read and not acked:
        return IBV_WC_RETRY_EXC_ERR, 0  # the read responses went elsewhere
    outcome = _respond(qp, peer, wr, data, length, local)
    if outcome is _BLOCKED:
        return _BLOCKED if acked else (IBV_WC_RETRY_EXC_ERR, 0)
    if outcome[0] == IBV_WC_SUCCESS:  # both ends move their PSN past the message's packets
        packets = max(1, math.ceil(length / mtu_bytes(qp.sim.attr.path_mtu)))
        qp.sim.next_psn = (qp.sim.next_psn + packets) & 0xFFFFFF
        peer.sim.expected_psn = (peer.sim.expected_psn + packets) & 0xFFFFFF
    return outcome if acked else (IBV_WC_RETRY_EXC_ERR, 0)


def _nak(peer: ibv_qp, status: int) -> tuple[int, int]:
    """A responder-detected error (IBTA class C): the responder QP enters ERR, the requester gets status."""
    to_error(peer)
    return status, 0


def _respond(
    qp: ibv_qp, peer: ibv_qp, wr: ibv_send_wr, data: bytes, length: int, local: list[memoryview] | None
) -> tuple[int, int] | None:
    op = wr.opcode
    need = _NEEDS.get(op, 0)
    # rxe_resp.c order: check_op_valid (QP access flags), check_resource (RQ WQE, read credits), check_rkey
    if need and not peer.sim.attr.qp_access_flags & need:
        return _nak(peer, IBV_WC_REM_INV_REQ_ERR)
    if op == IBV_WR_RDMA_READ and peer.sim.attr.max_dest_rd_atomic == 0:
        return _nak(peer, IBV_WC_REM_INV_REQ_ERR)
    if op in _USES_RECV_WQE and not peer.sim.rq:
        # RNR NAK: the requester retries rnr_retry times; 7 means forever (IB spec; NCCL sets 7)
        return _BLOCKED if qp.sim.attr.rnr_retry == 7 else (IBV_WC_RNR_RETRY_EXC_ERR, 0)
    recv = peer.sim.rq.popleft() if op in _USES_RECV_WQE else None
    imm = op in (IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM)
    done = ibv_wc(0, IBV_WC_SUCCESS, IBV_WC_RECV, length, wr.imm_data if imm else 0, peer.qp_num, qp.qp_num,
                  IBV_WC_WITH_IMM if imm else 0)  # fmt: skip
    if need:
        target = _remote(peer, wr.rkey, wr.remote_addr, length, need) if length else memoryview(bytearray())
        if target is None:
            if recv is not None:  # rdmamojo: IBV_WC_LOC_ACCESS_ERR on a WRITE_WITH_IMM's receive
                peer.recv_cq.deliver(replace(done, wr_id=recv.wr_id, status=IBV_WC_LOC_ACCESS_ERR))
            return _nak(peer, IBV_WC_REM_ACCESS_ERR)
        if op == IBV_WR_RDMA_READ:
            _scatter(bytes(target), local or [])
            return IBV_WC_SUCCESS, length
        target[:] = data
        if recv is not None:
            peer.recv_cq.deliver(replace(done, wr_id=recv.wr_id, opcode=IBV_WC_RECV_RDMA_WITH_IMM))
        return IBV_WC_SUCCESS, 0
    assert recv is not None  # an op that needs no remote access is a SEND: it took a receive WQE above
    views = _local(peer, recv.sg_list, IBV_ACCESS_LOCAL_WRITE)
    if views is None:  # a bad receive WQE: responder LOC_PROT_ERR, requester REM_OP_ERR (IBTA class A)
        peer.recv_cq.deliver(replace(done, wr_id=recv.wr_id, status=IBV_WC_LOC_PROT_ERR))
        return _nak(peer, IBV_WC_REM_OP_ERR)
    # The message does not fit the receive buffers: the receive completes with LOC_LEN_ERR (rdmamojo; the
    # Marvell FastLinQ guide's "Responder local length" counter); rxe reports REM_INV_REQ_ERR there instead
    if length > sum(len(v) for v in views):
        peer.recv_cq.deliver(replace(done, wr_id=recv.wr_id, status=IBV_WC_LOC_LEN_ERR))
        return _nak(peer, IBV_WC_REM_INV_REQ_ERR)
    _scatter(data, views)
    peer.recv_cq.deliver(replace(done, wr_id=recv.wr_id))
    return IBV_WC_SUCCESS, 0
