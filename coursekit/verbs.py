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

Where it lives: this module holds the verbs, and every public name is reachable from it. The constants, names
and C structs are in ``coursekit.verbs_defs``; the objects (Fabric, ibv_context, ibv_pd, ibv_mr, ibv_cq,
ibv_qp) in ``coursekit.verbs_objects``; the state machine's tables in ``coursekit.verbs_states``; the wire
that carries posted work to the responder in ``coursekit.verbs_wire``.
"""

# ruff: noqa: F405  (the constants and structs come from coursekit.verbs_defs by *)
from __future__ import annotations

import errno
from collections import deque
from dataclasses import replace

from coursekit import verbs_wire as _wire
from coursekit.verbs_defs import *  # noqa: F403  (the public constants and structs live there)
from coursekit.verbs_defs import _WC_OPCODE, _check
from coursekit.verbs_objects import Fabric as Fabric  # re-exported: a simulation starts with v.Fabric()
from coursekit.verbs_objects import ibv_context, ibv_cq, ibv_mr, ibv_pd, ibv_qp, ibv_qp_init_attr
from coursekit.verbs_states import _ALL_ACCESS, _RANGES, _TRANSITIONS

# ---------------------------------------------------------------------------------------------------------
# device, PD, MR and CQ verbs


def ibv_query_port(context: ibv_context, port_num: int) -> ibv_port_attr:
    _check(port_num == 1, errno.EINVAL, f"{context.name} has one port, port 1; got port {port_num}")
    mtu = context.active_mtu
    return ibv_port_attr(IBV_PORT_ACTIVE, mtu, mtu, context.lid, context.fabric.link_layer, len(context.gids))


def ibv_query_gid(context: ibv_context, port_num: int, index: int) -> str:
    ibv_query_port(context, port_num)
    _check(0 <= index < len(context.gids), errno.EINVAL, f"GID index {index} is out of the GID table")
    return context.gids[index][0]


def ibv_query_gid_type(context: ibv_context, port_num: int, index: int) -> int:
    ibv_query_gid(context, port_num, index)
    return context.gids[index][1]


def ibv_alloc_pd(context: ibv_context) -> ibv_pd:
    return ibv_pd(context)


def ibv_dealloc_pd(pd: ibv_pd) -> None:
    _check(pd._users == 0, errno.EBUSY, f"the PD still has {pd._users} MRs/QPs")
    pd._users = -1


def ibv_reg_mr(pd: ibv_pd, buf: bytearray, access: int) -> ibv_mr:
    """Register all of ``buf``. Remote write or atomic access needs local write too (ibv_reg_mr(3))."""
    _check(pd._users >= 0, errno.EINVAL, "the PD was deallocated")
    _check(isinstance(buf, bytearray), errno.EINVAL, "register a bytearray (writable, like pinned memory)")
    remote_w = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
    _check(not remote_w or access & IBV_ACCESS_LOCAL_WRITE, errno.EINVAL,
           "IBV_ACCESS_REMOTE_WRITE/ATOMIC require IBV_ACCESS_LOCAL_WRITE")  # fmt: skip
    ctx = pd.context
    ctx._nkeys += 1
    key = ((ctx._index + 1) << 24) | (ctx._nkeys << 8)  # keys name the device: another host's key is invalid
    mr = ibv_mr(pd, buf, access, lkey=key | 0x11, rkey=key | 0x22)
    ctx._mrs[mr.lkey] = ctx._mrs[mr.rkey] = mr
    pd._users += 1
    return mr


def ibv_dereg_mr(mr: ibv_mr) -> None:
    mr.context._mrs.pop(mr.lkey, None)
    mr.context._mrs.pop(mr.rkey, None)
    mr._view = None  # unpinned
    mr.pd._users -= 1


def ibv_create_cq(context: ibv_context, cqe: int) -> ibv_cq:
    _check(cqe >= 1, errno.EINVAL, f"a CQ needs cqe >= 1, got {cqe}")
    return ibv_cq(context, cqe)


def ibv_destroy_cq(cq: ibv_cq) -> None:
    _check(cq._users == 0, errno.EBUSY, f"{cq._users} QPs still use the CQ")


def ibv_poll_cq(cq: ibv_cq, num_entries: int) -> list[ibv_wc]:
    """Up to ``num_entries`` completions, oldest first; [] when there are none (poll again later)."""
    if cq._overrun:
        raise VerbsError(errno.EOVERFLOW, f"CQ overrun: more than cqe={cq.cqe} completions were not polled")
    polled = [cq._entries.popleft() for _ in range(min(num_entries, len(cq._entries)))]
    for wc in polled:
        qp, seq = getattr(wc, "_frees", (None, 0))
        if qp is not None:
            qp._sq_freed = max(qp._sq_freed, seq + 1)
    return polled


# ---------------------------------------------------------------------------------------------------------
# QP verbs and the state machine


def ibv_create_qp(pd: ibv_pd, init_attr: ibv_qp_init_attr) -> ibv_qp:
    ctx, cap = pd.context, init_attr.cap
    _check(init_attr.qp_type == IBV_QPT_RC, errno.EOPNOTSUPP, "the simulator models RC QPs only")
    _check(pd._users >= 0, errno.EINVAL, "the PD was deallocated")
    for cq in (init_attr.send_cq, init_attr.recv_cq):
        _check(
            isinstance(cq, ibv_cq) and cq.context is ctx, errno.EINVAL, "the CQs must be on the PD's device"
        )
    _check(
        1 <= cap.max_send_wr <= 4096 and 1 <= cap.max_recv_wr <= 4096, errno.EINVAL, f"bad queue sizes {cap}"
    )
    _check(0 <= cap.max_send_sge <= 30 and 0 <= cap.max_recv_sge <= 30, errno.EINVAL, f"bad SGE counts {cap}")
    qp = ibv_qp(pd, init_attr, qp_num=((ctx._index + 1) << 12) | (0x10 + len(ctx._qps)))
    ctx._qps[qp.qp_num] = qp
    pd._users += 1
    init_attr.send_cq._users += 1
    init_attr.recv_cq._users += 1
    return qp


def ibv_destroy_qp(qp: ibv_qp) -> None:
    qp.context._qps.pop(qp.qp_num)
    qp.pd._users -= 1
    qp.send_cq._users -= 1
    qp.recv_cq._users -= 1


_RESET, _RTR, _RTS, _ERR = IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR


def ibv_modify_qp(qp: ibv_qp, attr: ibv_qp_attr, attr_mask: int) -> None:
    """Move ``qp`` to ``attr.qp_state`` (when IBV_QP_STATE is in the mask) setting the attributes in the mask.

    EINVAL for an illegal transition, a missing required attribute, an attribute the transition does not
    allow, or a bad value; the QP is then unchanged (ibv_modify_qp(3)).
    """
    cur = qp._state
    new = attr.qp_state if attr_mask & IBV_QP_STATE else cur
    where = f"ibv_modify_qp {state_name(cur)} -> {state_name(new)}"
    if attr_mask & IBV_QP_CUR_STATE:
        _check(cur in (_RTR, _RTS) and attr.cur_qp_state == cur, errno.EINVAL, f"{where}: bad cur_qp_state")
    _check((cur, new) in _TRANSITIONS, errno.EINVAL, f"{where}: not a legal transition")
    required, optional = _TRANSITIONS[(cur, new)]
    missing, extra = required & ~attr_mask, attr_mask & ~(required | optional | IBV_QP_STATE)
    _check(not missing, errno.EINVAL, f"{where}: missing required attributes {mask_names(missing)}")
    _check(not extra, errno.EINVAL, f"{where}: attributes not allowed here: {mask_names(extra)}")
    for bit, (name, low, high) in _RANGES.items():
        value = getattr(attr, name)
        if attr_mask & bit:
            _check(low <= value <= high, errno.EINVAL, f"{where}: {name}={value} is outside [{low}, {high}]")
    if attr_mask & IBV_QP_ACCESS_FLAGS:
        _check(not attr.qp_access_flags & ~_ALL_ACCESS, errno.EINVAL, f"{where}: unknown access flags")
    if attr_mask & IBV_QP_PATH_MTU:
        top = qp.context.active_mtu
        _check(
            1 <= attr.path_mtu <= top, errno.EINVAL, f"{where}: path_mtu {attr.path_mtu} > active_mtu {top}"
        )
    if attr_mask & IBV_QP_AV:
        _check_av(qp.context, attr.ah_attr, where)
    _apply(qp, attr, attr_mask, new)
    qp.transitions.append((cur, new, attr_mask))


def _check_av(ctx: ibv_context, ah: ibv_ah_attr, where: str) -> None:
    _check(ah.port_num == 1, errno.EINVAL, f"{where}: ah_attr.port_num must be 1")
    if ctx.fabric.link_layer == IBV_LINK_LAYER_ETHERNET:
        # RoCE has no LIDs: every packet carries a GRH (rdma_check_ah_attr in linux core/verbs.c)
        _check(ah.is_global, errno.EINVAL, f"{where}: RoCE needs ah_attr.is_global=1 and a grh.dgid")
    if ah.is_global:
        _check(0 <= ah.grh.sgid_index < len(ctx.gids), errno.EINVAL, f"{where}: bad grh.sgid_index")
        _check(isinstance(ah.grh.dgid, str) and ah.grh.dgid, errno.EINVAL, f"{where}: empty grh.dgid")
    else:
        _check(ah.dlid > 0, errno.EINVAL, f"{where}: ah_attr.dlid must name the remote port's LID")


def _apply(qp: ibv_qp, attr: ibv_qp_attr, mask: int, new: int) -> None:
    if new == _RESET:
        qp._sq.clear()
        qp._rq.clear()
        for cq in {qp.send_cq, qp.recv_cq}:  # mlx5_cq_clean: completions not yet polled are dropped
            cq._entries = deque(wc for wc in cq._entries if wc.qp_num != qp.qp_num)
        qp._attr, qp._state = ibv_qp_attr(), _RESET
        qp._sq_posted = qp._sq_freed = 0
        return
    for bit, (name, _, _) in _RANGES.items():
        if mask & bit:
            setattr(qp._attr, name, getattr(attr, name))
    if mask & IBV_QP_PATH_MTU:
        qp._attr.path_mtu = attr.path_mtu
    if mask & IBV_QP_AV:
        qp._attr.ah_attr = replace(attr.ah_attr, grh=replace(attr.ah_attr.grh))
    if mask & IBV_QP_RQ_PSN:
        qp._expected_psn = attr.rq_psn
    if mask & IBV_QP_SQ_PSN:
        qp._next_psn = attr.sq_psn
    if new == _ERR:
        _wire.to_error(qp)
    qp._state = new
    _wire.progress_all(qp.context.fabric)


def ibv_query_qp(qp: ibv_qp) -> ibv_qp_attr:
    """A copy of the QP's current attributes (the C verb also takes a mask and an init_attr; not needed)."""
    return replace(qp._attr, qp_state=qp._state, cur_qp_state=qp._state,
                   ah_attr=replace(qp._attr.ah_attr, grh=replace(qp._attr.ah_attr.grh)))  # fmt: skip


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
    if qp._state == _ERR:
        qp.send_cq._push(
            ibv_wc(wr.wr_id, IBV_WC_WR_FLUSH_ERR, _WC_OPCODE.get(wr.opcode, 0), qp_num=qp.qp_num)
        )
        return
    _check(qp._state == _RTS, errno.EINVAL, f"ibv_post_send needs RTS; the QP is in {state_name(qp._state)}")
    _check(wr.opcode in _WC_OPCODE, errno.EINVAL, f"opcode {wr.opcode} is not modelled (no atomics)")
    _check(
        len(wr.sg_list) <= qp.cap.max_send_sge, errno.EINVAL, f"more than max_send_sge={qp.cap.max_send_sge}"
    )
    # A send WR holds its slot until a completion of it, or of a later WR, is polled: unsignaled WRs are
    # freed by the next signaled one (as mlx5 advances its SQ tail from the polled CQE's wqe_counter).
    in_use = qp._sq_posted - qp._sq_freed
    _check(
        in_use < qp.cap.max_send_wr, errno.ENOMEM, f"send queue full: {in_use} WRs not yet completed+polled"
    )
    inline = bool(wr.send_flags & IBV_SEND_INLINE) and wr.opcode != IBV_WR_RDMA_READ
    copy = replace(wr, sg_list=[replace(s) for s in wr.sg_list])
    if inline:  # the data is copied now, from plain memory: no lkey is checked
        size = sum(s.length for s in wr.sg_list)
        _check(size <= qp.cap.max_inline_data, errno.EINVAL, f"{size} B inline > max_inline_data")
        copy._inline = b"".join(_peek(qp.context, s) for s in wr.sg_list)  # type: ignore[attr-defined]
    copy._seq = qp._sq_posted  # type: ignore[attr-defined]
    qp._sq_posted += 1
    qp._sq.append(copy)
    _wire.progress(qp)


def ibv_post_recv(qp: ibv_qp, wr: ibv_recv_wr | list[ibv_recv_wr]) -> None:
    """Post receive WRs; they may be posted from INIT on (processed once the QP is in RTR)."""
    for i, one in enumerate(wr if isinstance(wr, list) else [wr]):
        try:
            _post_recv(qp, one)
        except VerbsError as exc:
            exc.bad_wr = i
            raise
    _wire.progress_all(qp.context.fabric)  # a SEND waiting on "receiver not ready" may go now


def _post_recv(qp: ibv_qp, wr: ibv_recv_wr) -> None:
    if qp._state == _ERR:
        qp.recv_cq._push(ibv_wc(wr.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp_num=qp.qp_num))
        return
    _check(qp._state != _RESET, errno.EINVAL, "ibv_post_recv needs INIT, RTR or RTS; the QP is in RESET")
    _check(
        len(wr.sg_list) <= qp.cap.max_recv_sge, errno.EINVAL, f"more than max_recv_sge={qp.cap.max_recv_sge}"
    )
    _check(
        len(qp._rq) < qp.cap.max_recv_wr,
        errno.ENOMEM,
        f"receive queue full: max_recv_wr={qp.cap.max_recv_wr}",
    )
    qp._rq.append(replace(wr, sg_list=[replace(s) for s in wr.sg_list]))


def _peek(ctx: ibv_context, sge: ibv_sge) -> bytes:
    for buf, base in ctx._bases.values():
        if base <= sge.addr and sge.addr + sge.length <= base + len(buf):
            return bytes(buf[sge.addr - base : sge.addr - base + sge.length])
    raise VerbsError(errno.EFAULT, f"inline data at {sge.addr:#x} is not in this host's memory")
