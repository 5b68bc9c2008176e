"""Trusted rank programs for exercise 06: two simulated hosts, the student's code, plain data back.

Verbs objects cannot cross the judge/worker boundary, so every scenario runs here, on the rank, and returns
JSON values: completions as dicts of ints, buffers as hex strings, QP states by name. Where a scenario needs a
connected pair that the student did not build, ``_wired`` sets the simulator's QP state directly (a test
backdoor, so this file does not give the answer to 06.connect away).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from coursekit import verbs as v

RW = v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_WRITE | v.IBV_ACCESS_REMOTE_READ
PSN_A, PSN_B = 0x1234, 0xABCDE  # distinct, so rq_psn and sq_psn cannot be swapped unnoticed


def wc(done: v.ibv_wc) -> dict[str, Any]:
    return {**asdict(done), "status_name": v.status_name(done.status)}


def _endpoint(mod: Any, ctx: v.ibv_context, size: int, access: int, psn: int, depth: int = 16) -> Any:
    """A trusted Endpoint (the student's dataclass), built without the student's create_endpoint."""
    pd, memory = v.ibv_alloc_pd(ctx), bytearray(size)
    region = v.ibv_reg_mr(pd, memory, access)
    cq = v.ibv_create_cq(ctx, 4 * depth)  # roomy: these endpoints are the judge's, not graded
    qp = v.ibv_create_qp(
        pd, v.ibv_qp_init_attr(send_cq=cq, recv_cq=cq, cap=v.ibv_qp_cap(max_send_wr=depth, max_recv_wr=depth))
    )
    return mod.Endpoint(ctx, pd, cq, qp, memory, region, psn)


def _wired(ep: Any, peer: Any, qp_access: int = RW, rnr_retry: int = 7) -> None:
    """Backdoor: put ep.qp straight into RTS, connected to peer.qp (InfiniBand addressing)."""
    attr = ep.qp.sim.attr
    attr.qp_access_flags, attr.port_num, attr.pkey_index = qp_access, 1, 0
    attr.ah_attr = v.ibv_ah_attr(dlid=peer.ctx.lid, port_num=1)
    attr.path_mtu, attr.dest_qp_num = v.IBV_MTU_1024, peer.qp.qp_num
    attr.rq_psn, attr.sq_psn, attr.max_dest_rd_atomic, attr.max_rd_atomic = peer.psn, ep.psn, 1, 1
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 20, 7, rnr_retry
    ep.qp.sim.expected_psn, ep.qp.sim.next_psn, ep.qp.sim.state = peer.psn, ep.psn, v.IBV_QPS_RTS


def _info(ep: Any, gid_index: int | None = None) -> dict[str, Any]:
    """The out-of-band blob, built by trusted code (the student's local_info is tested on its own)."""
    mr, qp = ep.mr, ep.qp
    return dict(
        lid=ep.ctx.lid,
        gid=None if gid_index is None else v.ibv_query_gid(ep.ctx, 1, gid_index),
        mtu=ep.ctx.active_mtu,
        qp_num=qp.qp_num,
        psn=ep.psn,
        addr=mr.addr,
        rkey=mr.rkey,
    )


def _pair(ctx: Any, size_a: int = 256, size_b: int = 256, access_b: int = RW, qp_access_b: int = RW) -> tuple:
    conn = ctx.submission("connection")
    fabric = v.Fabric("infiniband")
    a = _endpoint(conn, fabric.open_device("hostA/mlx5_0"), size_a, RW, PSN_A)
    b = _endpoint(conn, fabric.open_device("hostB/mlx5_0"), size_b, access_b, PSN_B)
    _wired(a, b)
    _wired(b, a, qp_access=qp_access_b)
    return a, b


def _exchange(a: Any, b: Any, payload: bytes) -> dict[str, Any]:
    """Trusted check that a connection works: a SEND from a to b with raw verbs."""
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(wr_id=77, sg_list=[v.ibv_sge(b.mr.addr, len(b.buf), b.mr.lkey)]))
    a.buf[: len(payload)] = payload
    sge = v.ibv_sge(a.mr.addr, len(payload), a.mr.lkey)
    v.ibv_post_send(a.qp, v.ibv_send_wr(78, [sge], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
    sent, got = v.ibv_poll_cq(a.cq, 4), v.ibv_poll_cq(b.cq, 4)
    return {
        "sent": [wc(w) for w in sent],
        "got": [wc(w) for w in got],
        "data": bytes(b.buf[: len(payload)]).hex(),
    }


# ------------------------------------------------------------------------------------------------------------
# 06.connect


def endpoint_facts(ctx: Any, *, size: int, access: int, psn: int, depth: int) -> dict[str, Any]:
    conn = ctx.submission("connection")
    ep = conn.create_endpoint(v.Fabric().open_device("host/mlx5_0"), size, access, psn=psn, depth=depth)
    qp = ep.qp
    return {
        "state": v.state_name(qp.state),
        "qp_type": qp.qp_type,
        "same_cq": qp.send_cq is ep.cq is qp.recv_cq,
        "cqe": ep.cq.cqe,
        "cap": asdict(qp.cap),
        "sq_sig_all": qp.sq_sig_all,
        "pd_shared": qp.pd is ep.pd is ep.mr.pd,
        "buf_is_mr": ep.mr.length == len(ep.buf) == size and ep.mr.addr == ep.ctx.sim.base(ep.buf),
        "zeroed": not any(ep.buf),
        "access": ep.mr.access,
        "psn": ep.psn,
    }


def gid_index(ctx: Any, *, routed: bool, table: list[list[Any]] | None = None) -> Any:
    """The student's roce_v2_gid_index on a RoCE port: the usual mlx5 GID table, or ``table`` (the judge's
    [gid, type] entries, in its order) in its place."""
    conn = ctx.submission("connection")
    device = v.Fabric("ethernet", routed=routed).open_device("host/mlx5_0")
    if table is not None:
        device.gids = [(gid, kind) for gid, kind in table]
    return conn.roce_v2_gid_index(device)


def local_info_of(ctx: Any, *, link_layer: str, gid_index: int | None, eth_mtu: int = 1500) -> dict[str, Any]:
    conn = ctx.submission("connection")
    fabric = v.Fabric(link_layer, eth_mtu=eth_mtu)
    fabric.open_device("other/mlx5_0")  # so this host is not the first one
    ep = _endpoint(conn, fabric.open_device("host/mlx5_0"), 64, RW, 0x777)
    return {"got": conn.local_info(ep, gid_index), "expected": _info(ep, gid_index)}


def connect_pair(ctx: Any, *, link_layer: str, routed: bool, gid: int | None, start: str) -> dict[str, Any]:
    """Connect two trusted endpoints with the student's connect, from RESET or from `start`, then use them."""
    conn = ctx.submission("connection")
    fabric = v.Fabric(link_layer, routed=routed, eth_mtu=1500 if link_layer == "ethernet" else 4200)
    a = _endpoint(conn, fabric.open_device("hostA/mlx5_0"), 128, RW, PSN_A)
    b = _endpoint(conn, fabric.open_device("hostB/mlx5_0"), 128, RW, PSN_B)
    if start != "RESET":  # e.g. wired, then broken: ERR
        _wired(a, b)
        _wired(b, a)
        if start == "ERR":
            v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_ERR), v.IBV_QP_STATE)
            v.ibv_modify_qp(b.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_ERR), v.IBV_QP_STATE)
    a.qp.transitions.clear()
    b.qp.transitions.clear()
    conn.connect(a, _info(b, gid), gid_index=gid)
    conn.connect(b, _info(a, gid), gid_index=gid)
    out: dict[str, Any] = {"transitions": [[list(t) for t in ep.qp.transitions] for ep in (a, b)]}
    out["attrs"] = [asdict(v.ibv_query_qp(ep.qp)) for ep in (a, b)]
    out["a_to_b"], out["b_to_a"] = _exchange(a, b, b"ping over RC"), _exchange(b, a, b"pong")
    return out


def recover_pair(ctx: Any, *, receives: int) -> dict[str, Any]:
    """Break a wired pair with a bad-rkey write while ``receives`` receives wait on A; then both recover."""
    conn = ctx.submission("connection")
    a, b = _pair(ctx)
    for i in range(receives):
        v.ibv_post_recv(a.qp, v.ibv_recv_wr(wr_id=100 + i, sg_list=[v.ibv_sge(a.mr.addr, 16, a.mr.lkey)]))
    wr = v.ibv_send_wr(9, [v.ibv_sge(a.mr.addr, 8, a.mr.lkey)], v.IBV_WR_RDMA_WRITE, v.IBV_SEND_SIGNALED)
    wr.remote_addr, wr.rkey = b.mr.addr, a.mr.rkey  # A's own rkey is not valid on B: remote access error
    v.ibv_post_send(a.qp, wr)
    states = [v.state_name(ep.qp.state) for ep in (a, b)]
    a.qp.transitions.clear()
    got_a = conn.recover(a, _info(b))
    got_b = conn.recover(b, _info(a))
    return {
        "states_after_error": states,
        "recovered_a": [wc(w) for w in got_a] if isinstance(got_a, list) else repr(got_a),
        "recovered_b": [wc(w) for w in got_b] if isinstance(got_b, list) else repr(got_b),
        "transitions_a": [list(t) for t in a.qp.transitions],
        "left_in_cq": len(v.ibv_poll_cq(a.cq, 64)),
        "after": _exchange(a, b, b"alive again"),
    }


# ------------------------------------------------------------------------------------------------------------
# 06.send_recv, 06.rdma_write, 06.rdma_read


def send_one(ctx: Any, *, payload: str, size_b: int, access_b: int, wr_id: int) -> dict[str, Any]:
    a, b = _pair(ctx, size_b=size_b, access_b=access_b)
    sent, got = ctx.submission("transfer").send_message(a, b, bytes.fromhex(payload), wr_id=wr_id)
    return {
        "sent": wc(sent),
        "got": wc(got),
        "data": bytes(b.buf).hex(),
        "qp_a": a.qp.qp_num,
        "qp_b": b.qp.qp_num,
        "states": [v.state_name(ep.qp.state) for ep in (a, b)],
    }


def send_many(ctx: Any, *, payloads: list[str], depth: int, slot: int) -> dict[str, Any]:
    conn = ctx.submission("connection")
    fabric = v.Fabric("infiniband")
    a = _endpoint(conn, fabric.open_device("hostA/mlx5_0"), depth * slot, RW, PSN_A, depth)
    b = _endpoint(conn, fabric.open_device("hostB/mlx5_0"), depth * slot, RW, PSN_B, depth)
    _wired(a, b)
    _wired(b, a)
    got = ctx.submission("transfer").send_messages(a, b, [bytes.fromhex(p) for p in payloads])
    return {"got": [g.hex() if isinstance(g, bytes | bytearray) else repr(g) for g in got]}


def _remote(a: Any, b: Any, key: str) -> dict[str, Any]:
    """B's blob as A sees it, with the rkey replaced by a wrong one when asked."""
    info = _info(b)
    if key == "lkey":
        info["rkey"] = b.mr.lkey  # the local key of the right MR: not valid for remote access
    elif key == "local_rkey":
        info["rkey"] = a.mr.rkey  # A's own rkey
    return info


def write_one(
    ctx: Any, *, payload: str, offset: int, key: str, access_b: int, qp_access_b: int, imm: int | None
) -> dict[str, Any]:
    a, b = _pair(ctx, access_b=access_b, qp_access_b=qp_access_b)
    transfer, data = ctx.submission("transfer"), bytes.fromhex(payload)
    b.buf[:] = bytes(range(256))[: len(b.buf)]  # a pattern: bytes written outside the target show
    if imm is None:
        done = transfer.rdma_write(a, _remote(a, b, key), data, offset=offset, wr_id=5)
        noticed = [wc(w) for w in v.ibv_poll_cq(b.cq, 4)]  # one-sided: B must see nothing
        out = {"done": wc(done), "target_cq": noticed}
    else:
        done, seen = transfer.rdma_write_with_imm(
            a, b, _remote(a, b, key), data, offset=offset, imm=imm, wr_id=6
        )
        out = {"done": wc(done), "target_cq": [wc(seen)]}
    return out | {"data": bytes(b.buf).hex(), "states": [v.state_name(ep.qp.state) for ep in (a, b)]}


def read_one(
    ctx: Any, *, offset: int, length: int, access_a: int, access_b: int, qp_access_b: int
) -> dict[str, Any]:
    conn = ctx.submission("connection")
    fabric = v.Fabric("infiniband")
    a = _endpoint(conn, fabric.open_device("hostA/mlx5_0"), 256, access_a, PSN_A)
    b = _endpoint(conn, fabric.open_device("hostB/mlx5_0"), 256, access_b, PSN_B)
    _wired(a, b)
    _wired(b, a, qp_access=qp_access_b)
    b.buf[:] = bytes((7 * i + 3) % 256 for i in range(256))
    data, done = ctx.submission("transfer").rdma_read(a, _info(b), offset=offset, length=length, wr_id=8)
    return {
        "data": data.hex() if isinstance(data, bytes | bytearray) else repr(data),
        "done": wc(done),
        "local": bytes(a.buf[:length]).hex(),
    }


# ------------------------------------------------------------------------------------------------------------
# 06.ib_vs_roce


def questions(ctx: Any) -> dict[str, Any]:
    """{key: the choice letters, or None for a number} of the student's answers.QUESTIONS."""
    asked = ctx.submission("answers").QUESTIONS
    return {key: None if choices is None else sorted(choices) for key, (_, choices) in asked.items()}
