"""The device, PD, MR and CQ verbs of the simulator (``coursekit.verbs`` is the module to import)."""

from __future__ import annotations

import errno

from coursekit.verbs_defs import (
    IBV_ACCESS_LOCAL_WRITE,
    IBV_ACCESS_REMOTE_ATOMIC,
    IBV_ACCESS_REMOTE_WRITE,
    IBV_PORT_ACTIVE,
    VerbsError,
    check,
    ibv_port_attr,
    ibv_wc,
)
from coursekit.verbs_objects import ibv_context, ibv_cq, ibv_mr, ibv_pd

# ---------------------------------------------------------------------------------------------------------
# device, PD, MR and CQ verbs


def ibv_query_port(context: ibv_context, port_num: int) -> ibv_port_attr:
    check(port_num == 1, errno.EINVAL, f"{context.name} has one port, port 1; got port {port_num}")
    mtu = context.active_mtu
    return ibv_port_attr(IBV_PORT_ACTIVE, mtu, mtu, context.lid, context.fabric.link_layer, len(context.gids))


def ibv_query_gid(context: ibv_context, port_num: int, index: int) -> str:
    ibv_query_port(context, port_num)
    check(0 <= index < len(context.gids), errno.EINVAL, f"GID index {index} is out of the GID table")
    return context.gids[index][0]


def ibv_query_gid_type(context: ibv_context, port_num: int, index: int) -> int:
    ibv_query_gid(context, port_num, index)
    return context.gids[index][1]


def ibv_alloc_pd(context: ibv_context) -> ibv_pd:
    return ibv_pd(context)


def ibv_dealloc_pd(pd: ibv_pd) -> None:
    check(pd.sim.users == 0, errno.EBUSY, f"the PD still has {pd.sim.users} MRs/QPs")
    pd.sim.users = -1


def ibv_reg_mr(pd: ibv_pd, buf: bytearray, access: int) -> ibv_mr:
    """Register all of ``buf``. Remote write or atomic access needs local write too (ibv_reg_mr(3))."""
    check(pd.sim.users >= 0, errno.EINVAL, "the PD was deallocated")
    check(isinstance(buf, bytearray), errno.EINVAL, "register a bytearray (writable, like pinned memory)")
    remote_w = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
    check(not remote_w or access & IBV_ACCESS_LOCAL_WRITE, errno.EINVAL,
           "IBV_ACCESS_REMOTE_WRITE/ATOMIC require IBV_ACCESS_LOCAL_WRITE")  # fmt: skip
    ctx = pd.context
    ctx.sim.nkeys += 1
    # keys name the device: another host's key is invalid
    key = ((ctx.sim.index + 1) << 24) | (ctx.sim.nkeys << 8)
    mr = ibv_mr(pd, buf, access, lkey=key | 0x11, rkey=key | 0x22)
    ctx.sim.mrs[mr.lkey] = ctx.sim.mrs[mr.rkey] = mr
    pd.sim.users += 1
    return mr


def ibv_dereg_mr(mr: ibv_mr) -> None:
    mr.context.sim.mrs.pop(mr.lkey, None)
    mr.context.sim.mrs.pop(mr.rkey, None)
    mr.sim.view = None  # unpinned
    mr.pd.sim.users -= 1


def ibv_create_cq(context: ibv_context, cqe: int) -> ibv_cq:
    check(cqe >= 1, errno.EINVAL, f"a CQ needs cqe >= 1, got {cqe}")
    return ibv_cq(context, cqe)


def ibv_destroy_cq(cq: ibv_cq) -> None:
    check(cq.sim.users == 0, errno.EBUSY, f"{cq.sim.users} QPs still use the CQ")


def ibv_poll_cq(cq: ibv_cq, num_entries: int) -> list[ibv_wc]:
    """Up to ``num_entries`` completions, oldest first; [] when there are none (poll again later)."""
    if cq.sim.overrun:
        raise VerbsError(errno.EOVERFLOW, f"CQ overrun: more than cqe={cq.cqe} completions were not polled")
    polled = [cq.sim.entries.popleft() for _ in range(min(num_entries, len(cq.sim.entries)))]
    for entry in polled:
        if entry.frees is not None:
            qp, seq = entry.frees
            qp.sim.sq_freed = max(qp.sim.sq_freed, seq + 1)
    return [entry.wc for entry in polled]
