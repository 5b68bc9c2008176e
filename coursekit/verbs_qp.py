"""The QP verbs of the simulator: create, modify (the state machine), post (``coursekit.verbs`` is the module
to import)."""

from __future__ import annotations

import errno
from collections import deque
from dataclasses import replace

from coursekit import verbs_wire
from coursekit.verbs_defs import (
    IBV_LINK_LAYER_ETHERNET,
    IBV_QP_ACCESS_FLAGS,
    IBV_QP_AV,
    IBV_QP_CUR_STATE,
    IBV_QP_PATH_MTU,
    IBV_QP_RQ_PSN,
    IBV_QP_SQ_PSN,
    IBV_QP_STATE,
    IBV_QPS_ERR,
    IBV_QPS_RESET,
    IBV_QPS_RTR,
    IBV_QPS_RTS,
    IBV_QPT_RC,
    IBV_SEND_INLINE,
    IBV_WC_RECV,
    IBV_WC_WR_FLUSH_ERR,
    IBV_WR_RDMA_READ,
    WC_OPCODE,
    VerbsError,
    check,
    ibv_ah_attr,
    ibv_qp_attr,
    ibv_recv_wr,
    ibv_send_wr,
    ibv_sge,
    ibv_wc,
    mask_names,
    state_name,
)
from coursekit.verbs_objects import PostedSend, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_init_attr
from coursekit.verbs_states import ALL_ACCESS, RANGES, TRANSITIONS

# ---------------------------------------------------------------------------------------------------------
# QP verbs and the state machine


def ibv_create_qp(pd: ibv_pd, init_attr: ibv_qp_init_attr) -> ibv_qp:
    ctx, cap = pd.context, init_attr.cap
    check(init_attr.qp_type == IBV_QPT_RC, errno.EOPNOTSUPP, "the simulator models RC QPs only")
    check(pd.sim.users >= 0, errno.EINVAL, "the PD was deallocated")
    for cq in (init_attr.send_cq, init_attr.recv_cq):
        check(
            isinstance(cq, ibv_cq) and cq.context is ctx, errno.EINVAL, "the CQs must be on the PD's device"
        )
    check(
        1 <= cap.max_send_wr <= 4096 and 1 <= cap.max_recv_wr <= 4096, errno.EINVAL, f"bad queue sizes {cap}"
    )
    check(0 <= cap.max_send_sge <= 30 and 0 <= cap.max_recv_sge <= 30, errno.EINVAL, f"bad SGE counts {cap}")
    qp = ibv_qp(pd, init_attr, qp_num=((ctx.sim.index + 1) << 12) | (0x10 + len(ctx.sim.qps)))
    ctx.sim.qps[qp.qp_num] = qp
    pd.sim.users += 1
    init_attr.send_cq.sim.users += 1
    init_attr.recv_cq.sim.users += 1
    return qp


def ibv_destroy_qp(qp: ibv_qp) -> None:
    qp.context.sim.qps.pop(qp.qp_num)
    qp.pd.sim.users -= 1
    qp.send_cq.sim.users -= 1
    qp.recv_cq.sim.users -= 1


_RESET, _RTR, _RTS, _ERR = IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR


def ibv_modify_qp(qp: ibv_qp, attr: ibv_qp_attr, attr_mask: int) -> None:
    """Move ``qp`` to ``attr.qp_state`` (when IBV_QP_STATE is in the mask) setting the attributes in the mask.

    EINVAL for an illegal transition, a missing required attribute, an attribute the transition does not
    allow, or a bad value; the QP is then unchanged (ibv_modify_qp(3)).
    """
    cur = qp.sim.state
    new = attr.qp_state if attr_mask & IBV_QP_STATE else cur
    where = f"ibv_modify_qp {state_name(cur)} -> {state_name(new)}"
    if attr_mask & IBV_QP_CUR_STATE:
        check(cur in (_RTR, _RTS) and attr.cur_qp_state == cur, errno.EINVAL, f"{where}: bad cur_qp_state")
    check((cur, new) in TRANSITIONS, errno.EINVAL, f"{where}: not a legal transition")
    required, optional = TRANSITIONS[(cur, new)]
    missing, extra = required & ~attr_mask, attr_mask & ~(required | optional | IBV_QP_STATE)
    check(not missing, errno.EINVAL, f"{where}: missing required attributes {mask_names(missing)}")
    check(not extra, errno.EINVAL, f"{where}: attributes not allowed here: {mask_names(extra)}")
    for bit, (name, low, high) in RANGES.items():
        value = getattr(attr, name)
        if attr_mask & bit:
            check(low <= value <= high, errno.EINVAL, f"{where}: {name}={value} is outside [{low}, {high}]")
    if attr_mask & IBV_QP_ACCESS_FLAGS:
        check(not attr.qp_access_flags & ~ALL_ACCESS, errno.EINVAL, f"{where}: unknown access flags")
    if attr_mask & IBV_QP_PATH_MTU:
        top = qp.context.active_mtu
        check(
            1 <= attr.path_mtu <= top, errno.EINVAL, f"{where}: path_mtu {attr.path_mtu} > active_mtu {top}"
        )
    if attr_mask & IBV_QP_AV:
        _check_av(qp.context, attr.ah_attr, where)
    _apply(qp, attr, attr_mask, new)
    qp.transitions.append((cur, new, attr_mask))


def _check_av(ctx: ibv_context, ah: ibv_ah_attr, where: str) -> None:
    check(ah.port_num == 1, errno.EINVAL, f"{where}: ah_attr.port_num must be 1")
    if ctx.fabric.link_layer == IBV_LINK_LAYER_ETHERNET:
        # RoCE has no LIDs: every packet carries a GRH (rdma_check_ah_attr in linux core/verbs.c)
        check(ah.is_global, errno.EINVAL, f"{where}: RoCE needs ah_attr.is_global=1 and a grh.dgid")
    if ah.is_global:
        check(0 <= ah.grh.sgid_index < len(ctx.gids), errno.EINVAL, f"{where}: bad grh.sgid_index")
        check(isinstance(ah.grh.dgid, str) and ah.grh.dgid, errno.EINVAL, f"{where}: empty grh.dgid")
    else:
        check(ah.dlid > 0, errno.EINVAL, f"{where}: ah_attr.dlid must name the remote port's LID")


def _apply(qp: ibv_qp, attr: ibv_qp_attr, mask: int, new: int) -> None:
    if new == _RESET:
        qp.sim.sq.clear()
        qp.sim.rq.clear()
        for cq in {qp.send_cq, qp.recv_cq}:  # mlx5_cq_clean: completions not yet polled are dropped
            cq.sim.entries = deque(e for e in cq.sim.entries if e.wc.qp_num != qp.qp_num)
        qp.sim.attr, qp.sim.state = ibv_qp_attr(), _RESET
        qp.sim.sq_posted = qp.sim.sq_freed = 0
        return
    for bit, (name, _, _) in RANGES.items():
        if mask & bit:
            setattr(qp.sim.attr, name, getattr(attr, name))
    if mask & IBV_QP_PATH_MTU:
        qp.sim.attr.path_mtu = attr.path_mtu
    if mask & IBV_QP_AV:
        qp.sim.attr.ah_attr = replace(attr.ah_attr, grh=replace(attr.ah_attr.grh))
    if mask & IBV_QP_RQ_PSN:
        qp.sim.expected_psn = attr.rq_psn
    if mask & IBV_QP_SQ_PSN:
        qp.sim.next_psn = attr.sq_psn
    if new == _ERR:
        verbs_wire.to_error(qp)
    qp.sim.state = new
    verbs_wire.progress_all(qp.context.fabric)


def ibv_query_qp(qp: ibv_qp) -> ibv_qp_attr:
    """A copy of the QP's current attributes (the C verb also takes a mask and an init_attr; not needed)."""
    return replace(qp.sim.attr, qp_state=qp.sim.state, cur_qp_state=qp.sim.state,
                   ah_attr=replace(qp.sim.attr.ah_attr, grh=replace(qp.sim.attr.ah_attr.grh)))  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# posting work


def ibv_post_send(qp: ibv_qp, wr: ibv_send_wr | list[ibv_send_wr]) -> None:
    """Post one WR or a list (C's ``next`` chain). The WRs are copied: the caller may reuse them at once."""
    for i, one in enumerate(wr if isinstance(wr, list) else [wr]):
        try:
            _post_send(qp, one)
        except VerbsError as exc:
            exc.bad_wr = i
            raise


def _post_send(qp: ibv_qp, wr: ibv_send_wr) -> None:
    if qp.sim.state == _ERR:
        qp.send_cq.deliver(
            ibv_wc(wr.wr_id, IBV_WC_WR_FLUSH_ERR, WC_OPCODE.get(wr.opcode, 0), qp_num=qp.qp_num)
        )
        return
    check(
        qp.sim.state == _RTS,
        errno.EINVAL,
        f"ibv_post_send needs RTS; the QP is in {state_name(qp.sim.state)}",
    )
    check(wr.opcode in WC_OPCODE, errno.EINVAL, f"opcode {wr.opcode} is not modelled (no atomics)")
    check(
        len(wr.sg_list) <= qp.cap.max_send_sge, errno.EINVAL, f"more than max_send_sge={qp.cap.max_send_sge}"
    )
    # A send WR holds its slot until a completion of it, or of a later WR, is polled: unsignaled WRs are
    # freed by the next signaled one (as mlx5 advances its SQ tail from the polled CQE's wqe_counter).
    in_use = qp.sim.sq_posted - qp.sim.sq_freed
    check(
        in_use < qp.cap.max_send_wr, errno.ENOMEM, f"send queue full: {in_use} WRs not yet completed+polled"
    )
    inline = None
    if wr.send_flags & IBV_SEND_INLINE and wr.opcode != IBV_WR_RDMA_READ:
        # the data is copied now, from plain memory: no lkey is checked
        size = sum(s.length for s in wr.sg_list)
        check(size <= qp.cap.max_inline_data, errno.EINVAL, f"{size} B inline > max_inline_data")
        inline = b"".join(_peek(qp.context, s) for s in wr.sg_list)
    copy = replace(wr, sg_list=[replace(s) for s in wr.sg_list])
    qp.sim.sq.append(PostedSend(copy, qp.sim.sq_posted, inline))
    qp.sim.sq_posted += 1
    verbs_wire.progress(qp)


def ibv_post_recv(qp: ibv_qp, wr: ibv_recv_wr | list[ibv_recv_wr]) -> None:
    """Post receive WRs; they may be posted from INIT on (processed once the QP is in RTR)."""
    for i, one in enumerate(wr if isinstance(wr, list) else [wr]):
        try:
            _post_recv(qp, one)
        except VerbsError as exc:
            exc.bad_wr = i
            raise
    verbs_wire.progress_all(qp.context.fabric)  # a SEND waiting on "receiver not ready" may go now


def _post_recv(qp: ibv_qp, wr: ibv_recv_wr) -> None:
    if qp.sim.state == _ERR:
        qp.recv_cq.deliver(ibv_wc(wr.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp_num=qp.qp_num))
        return
    check(qp.sim.state != _RESET, errno.EINVAL, "ibv_post_recv needs INIT, RTR or RTS; the QP is in RESET")
    check(
        len(wr.sg_list) <= qp.cap.max_recv_sge, errno.EINVAL, f"more than max_recv_sge={qp.cap.max_recv_sge}"
    )
    check(
        len(qp.sim.rq) < qp.cap.max_recv_wr,
        errno.ENOMEM,
        f"receive queue full: max_recv_wr={qp.cap.max_recv_wr}",
    )
    qp.sim.rq.append(replace(wr, sg_list=[replace(s) for s in wr.sg_list]))


def _peek(ctx: ibv_context, sge: ibv_sge) -> bytes:
    for buf, base in ctx.sim.bases.values():
        if base <= sge.addr and sge.addr + sge.length <= base + len(buf):
            return bytes(buf[sge.addr - base : sge.addr - base + sge.length])
    raise VerbsError(errno.EFAULT, f"inline data at {sge.addr:#x} is not in this host's memory")
