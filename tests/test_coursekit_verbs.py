"""The verbs simulator (coursekit.verbs) behaves like libibverbs on an RC connection.

Constants against rdma-core libibverbs/verbs.h; the state machine against the kernel's qp_state_table
(drivers/infiniband/core/verbs.c); posting rules, completions and error statuses against rdmamojo's
ibv_poll_cq table, the IBTA RC error classes as the rxe driver implements them, and the mlx5 provider (CQ
clean on RESET).
"""

from __future__ import annotations

import errno
import itertools
from typing import Any

import pytest

from coursekit import verbs as v

RW = v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_WRITE | v.IBV_ACCESS_REMOTE_READ
INIT = v.IBV_QP_STATE | v.IBV_QP_PKEY_INDEX | v.IBV_QP_PORT | v.IBV_QP_ACCESS_FLAGS
RTR = (v.IBV_QP_STATE | v.IBV_QP_AV | v.IBV_QP_PATH_MTU | v.IBV_QP_DEST_QPN | v.IBV_QP_RQ_PSN
       | v.IBV_QP_MAX_DEST_RD_ATOMIC | v.IBV_QP_MIN_RNR_TIMER)  # fmt: skip
RTS = (v.IBV_QP_STATE | v.IBV_QP_TIMEOUT | v.IBV_QP_RETRY_CNT | v.IBV_QP_RNR_RETRY | v.IBV_QP_SQ_PSN
       | v.IBV_QP_MAX_QP_RD_ATOMIC)  # fmt: skip


class Host:
    """One side: PD, CQ, a 256-byte registered buffer and an RC QP."""

    def __init__(
        self, fabric: v.Fabric, name: str, *, access: int = RW, depth: int = 8, psn: int = 0
    ) -> None:
        self.ctx = fabric.open_device(name)
        self.pd = v.ibv_alloc_pd(self.ctx)
        self.cq = v.ibv_create_cq(self.ctx, 4 * depth)
        self.buf = bytearray(256)
        self.mr = v.ibv_reg_mr(self.pd, self.buf, access)
        cap = v.ibv_qp_cap(max_send_wr=depth, max_recv_wr=depth, max_send_sge=2, max_recv_sge=2)
        self.qp = v.ibv_create_qp(self.pd, v.ibv_qp_init_attr(self.cq, self.cq, cap))
        self.psn = psn

    def sge(self, offset: int = 0, length: int = 16) -> v.ibv_sge:
        return v.ibv_sge(self.mr.addr + offset, length, self.mr.lkey)


def bring_up(me: Host, peer: Host, *, gid: int | None = None, qp_access: int = RW, rnr_retry: int = 7,
             rd_atomic: int = 1, dest_qpn: int | None = None) -> None:  # fmt: skip
    v.ibv_modify_qp(
        me.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_INIT, port_num=1, qp_access_flags=qp_access), INIT
    )
    ah = v.ibv_ah_attr(port_num=1, dlid=peer.ctx.lid)
    if gid is not None:
        ah = v.ibv_ah_attr(port_num=1, is_global=1)
        ah.grh = v.ibv_global_route(dgid=v.ibv_query_gid(peer.ctx, 1, gid), sgid_index=gid, hop_limit=64)
    rtr = v.ibv_qp_attr(qp_state=v.IBV_QPS_RTR, ah_attr=ah, path_mtu=v.IBV_MTU_1024, rq_psn=peer.psn,
                        dest_qp_num=peer.qp.qp_num if dest_qpn is None else dest_qpn,
                        max_dest_rd_atomic=rd_atomic, min_rnr_timer=12)  # fmt: skip
    v.ibv_modify_qp(me.qp, rtr, RTR)
    rts = v.ibv_qp_attr(qp_state=v.IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=rnr_retry, sq_psn=me.psn,
                        max_rd_atomic=rd_atomic)  # fmt: skip
    v.ibv_modify_qp(me.qp, rts, RTS)


def pair(link: str = "infiniband", **kw: Any) -> tuple[Host, Host]:
    fabric = v.Fabric(link, routed=kw.pop("routed", False))
    a = Host(fabric, "A", psn=11, access=kw.pop("access_a", RW))
    b = Host(fabric, "B", psn=22, access=kw.pop("access_b", RW))
    bring_up(a, b, **{k: kw[k] for k in kw if k in ("gid", "rnr_retry", "rd_atomic")})
    bring_up(b, a, **{k: kw[k] for k in kw if k in ("gid", "qp_access")})
    return a, b


def send(
    a: Host, b: Host, data: bytes, *, post_recv: bool = True, opcode: int = v.IBV_WR_SEND, **wr: Any
) -> None:
    if post_recv:
        v.ibv_post_recv(b.qp, v.ibv_recv_wr(wr_id=2, sg_list=[b.sge(0, 64)]))
    a.buf[: len(data)] = data
    v.ibv_post_send(a.qp, v.ibv_send_wr(1, [a.sge(0, len(data))], opcode, v.IBV_SEND_SIGNALED, **wr))


def statuses(cq: v.ibv_cq) -> list[int]:
    return [wc.status for wc in v.ibv_poll_cq(cq, 64)]


def raises(code: int, fn: Any, *args: Any) -> v.VerbsError:
    with pytest.raises(v.VerbsError) as info:
        fn(*args)
    assert info.value.errno == code, info.value
    return info.value


# ---------------------------------------------------------------------------------------------------------
# constants and resources


def test_constants_are_libibverbs() -> None:
    # rdma-core libibverbs/verbs.h
    assert (v.IBV_WC_SUCCESS, v.IBV_WC_LOC_LEN_ERR, v.IBV_WC_LOC_PROT_ERR, v.IBV_WC_WR_FLUSH_ERR) == (
        0,
        1,
        4,
        5,
    )
    assert (v.IBV_WC_REM_INV_REQ_ERR, v.IBV_WC_REM_ACCESS_ERR, v.IBV_WC_RETRY_EXC_ERR) == (9, 10, 12)
    assert (v.IBV_WC_RECV, v.IBV_WC_RECV_RDMA_WITH_IMM, v.IBV_WR_RDMA_READ, v.IBV_QPT_RC) == (128, 129, 4, 2)
    assert (v.IBV_ACCESS_REMOTE_WRITE, v.IBV_ACCESS_REMOTE_READ, v.IBV_QP_DEST_QPN) == (2, 4, 1 << 20)
    assert v.status_name(12) == "IBV_WC_RETRY_EXC_ERR" and v.mtu_bytes(v.IBV_MTU_4096) == 4096


def test_memory_registration_rules() -> None:
    fabric = v.Fabric()
    a, b = fabric.open_device("A"), fabric.open_device("B")
    pd = v.ibv_alloc_pd(a)
    raises(errno.EINVAL, v.ibv_reg_mr, pd, bytearray(8), v.IBV_ACCESS_REMOTE_WRITE)  # needs LOCAL_WRITE
    mr = v.ibv_reg_mr(pd, buf := bytearray(8), RW)
    other = v.ibv_reg_mr(v.ibv_alloc_pd(b), bytearray(8), RW)
    assert mr.lkey != mr.rkey and {mr.lkey, mr.rkey}.isdisjoint({other.lkey, other.rkey})
    with pytest.raises(BufferError):  # registered memory is pinned
        buf.extend(b"x")
    raises(errno.EBUSY, v.ibv_dealloc_pd, pd)
    v.ibv_dereg_mr(mr)
    v.ibv_dealloc_pd(pd)


def test_port_gid_and_mtu() -> None:
    ib = v.Fabric().open_device("A")
    assert v.ibv_query_port(ib, 1).lid == 1 and v.ibv_query_port(ib, 1).active_mtu == v.IBV_MTU_4096
    raises(errno.EINVAL, v.ibv_query_port, ib, 2)
    for eth_mtu, mtu in [(1500, v.IBV_MTU_1024), (4191, v.IBV_MTU_2048), (4192, v.IBV_MTU_4096)]:
        ctx = v.Fabric("ethernet", eth_mtu=eth_mtu).open_device("A")  # iboe_get_mtu: 96 bytes of headers
        assert v.ibv_query_port(ctx, 1).active_mtu == mtu and v.ibv_query_port(ctx, 1).lid == 0
    types = [v.ibv_query_gid_type(ctx, 1, i) for i in range(v.ibv_query_port(ctx, 1).gid_tbl_len)]
    assert types == [v.IBV_GID_TYPE_ROCE_V1, v.IBV_GID_TYPE_ROCE_V2] * 2


# ---------------------------------------------------------------------------------------------------------
# the QP state machine

STATES = [v.IBV_QPS_RESET, v.IBV_QPS_INIT, v.IBV_QPS_RTR, v.IBV_QPS_RTS, v.IBV_QPS_ERR]
LEGAL = {(0, 0), (0, 1), (1, 0), (1, 6), (1, 1), (1, 2), (2, 0), (2, 6), (2, 3), (3, 0), (3, 6), (3, 3),
         (6, 0), (6, 6)}  # fmt: skip
NEEDS = {(0, 1): INIT, (1, 2): RTR, (2, 3): RTS}


def any_attr(state: int, dest: int = 7) -> v.ibv_qp_attr:
    """Attributes good enough for any transition (each transition reads only those in its mask)."""
    ah = v.ibv_ah_attr(dlid=2, port_num=1)
    return v.ibv_qp_attr(qp_state=state, port_num=1, qp_access_flags=RW, ah_attr=ah, path_mtu=3,
                         dest_qp_num=dest, timeout=14, retry_cnt=7, rnr_retry=7)  # fmt: skip


def qp_in(state: int) -> Host:
    a, b = Host(fabric := v.Fabric(), "A"), Host(fabric, "B")
    climb = {v.IBV_QPS_INIT: 1, v.IBV_QPS_RTR: 2, v.IBV_QPS_RTS: 3}
    if state == v.IBV_QPS_ERR:
        bring_up(a, b)
        v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_ERR), v.IBV_QP_STATE)
    elif state != v.IBV_QPS_RESET:
        bring_up(a, b)  # then walk back is impossible: rebuild by resetting and climbing part way
        v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_RESET), v.IBV_QP_STATE)
        full = any_attr(0, dest=b.qp.qp_num)
        for step in range(climb[state]):
            full.qp_state = STATES[step + 1]
            v.ibv_modify_qp(a.qp, full, [INIT, RTR, RTS][step])
    assert a.qp.state == state
    return a


@pytest.mark.parametrize(("cur", "new"), list(itertools.product(STATES, STATES)))
def test_transition_table(cur: int, new: int) -> None:
    host = qp_in(cur)
    attr = any_attr(new)
    mask = NEEDS.get((cur, new), v.IBV_QP_STATE)
    if (cur, new) in LEGAL:
        v.ibv_modify_qp(host.qp, attr, mask)
        assert host.qp.state == new and host.qp.transitions[-1] == (cur, new, mask)
    else:
        raises(errno.EINVAL, v.ibv_modify_qp, host.qp, attr, mask)
        assert host.qp.state == cur


def test_masks_must_be_exact() -> None:
    host = qp_in(v.IBV_QPS_RESET)
    attr = v.ibv_qp_attr(qp_state=v.IBV_QPS_INIT, port_num=1, qp_access_flags=RW)
    err = raises(errno.EINVAL, v.ibv_modify_qp, host.qp, attr, INIT & ~v.IBV_QP_ACCESS_FLAGS)
    assert "IBV_QP_ACCESS_FLAGS" in str(err)  # names what is missing
    err = raises(errno.EINVAL, v.ibv_modify_qp, host.qp, attr, INIT | v.IBV_QP_TIMEOUT)
    assert "IBV_QP_TIMEOUT" in str(err)  # timeout belongs to RTR -> RTS
    attr.port_num = 2
    raises(errno.EINVAL, v.ibv_modify_qp, host.qp, attr, INIT)
    attr.port_num = 1
    raises(errno.EINVAL, v.ibv_modify_qp, host.qp, attr, INIT | v.IBV_QP_CUR_STATE)
    v.ibv_modify_qp(host.qp, attr, INIT)
    rtr = v.ibv_qp_attr(qp_state=v.IBV_QPS_RTR, ah_attr=v.ibv_ah_attr(dlid=2, port_num=1), path_mtu=6)
    raises(errno.EINVAL, v.ibv_modify_qp, host.qp, rtr, RTR)  # path_mtu 6 is past IBV_MTU_4096


def test_roce_needs_a_grh() -> None:
    fabric = v.Fabric("ethernet")
    a = Host(fabric, "A")
    v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_INIT, port_num=1, qp_access_flags=RW), INIT)
    rtr = v.ibv_qp_attr(qp_state=v.IBV_QPS_RTR, ah_attr=v.ibv_ah_attr(dlid=2, port_num=1), path_mtu=3)
    assert "is_global" in str(raises(errno.EINVAL, v.ibv_modify_qp, a.qp, rtr, RTR))


# ---------------------------------------------------------------------------------------------------------
# posting rules and completions


def test_posting_rules() -> None:
    fabric = v.Fabric()
    a, b = Host(fabric, "A", depth=2), Host(fabric, "B", depth=2)
    raises(errno.EINVAL, v.ibv_post_recv, a.qp, v.ibv_recv_wr(1, [a.sge()]))  # RESET
    v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_INIT, port_num=1, qp_access_flags=RW), INIT)
    v.ibv_post_recv(a.qp, v.ibv_recv_wr(1, [a.sge()]))  # INIT: receives may be posted
    raises(errno.EINVAL, v.ibv_post_send, a.qp, v.ibv_send_wr(1, [a.sge()]))  # sends need RTS
    err = raises(
        errno.ENOMEM, v.ibv_post_recv, a.qp, [v.ibv_recv_wr(2, [a.sge()]), v.ibv_recv_wr(3, [a.sge()])]
    )
    assert err.bad_wr == 1  # the first of the list was posted, the second did not fit
    raises(errno.EINVAL, v.ibv_post_recv, a.qp, v.ibv_recv_wr(4, [a.sge()] * 3))  # max_recv_sge = 2
    del b


def test_send_recv_and_immediate() -> None:
    a, b = pair()
    send(a, b, b"hello", opcode=v.IBV_WR_SEND_WITH_IMM, imm_data=0xBEEF)
    [sent], [got] = v.ibv_poll_cq(a.cq, 4), v.ibv_poll_cq(b.cq, 4)
    assert (sent.status, sent.opcode, sent.wr_id) == (0, v.IBV_WC_SEND, 1)
    assert (got.status, got.opcode, got.byte_len, got.imm_data, got.wc_flags) == (0, 128, 5, 0xBEEF, 2)
    assert (got.qp_num, got.src_qp, bytes(b.buf[:5])) == (b.qp.qp_num, a.qp.qp_num, b"hello")


def test_unsignaled_sends_hold_their_slots_until_a_completion_is_polled() -> None:
    a, b = pair()
    for i in range(8):  # depth 8; only the last WR is signaled
        v.ibv_post_recv(b.qp, v.ibv_recv_wr(i, [b.sge()]))
        v.ibv_post_send(
            a.qp, v.ibv_send_wr(i, [a.sge(0, 4)], send_flags=v.IBV_SEND_SIGNALED if i == 7 else 0)
        )
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(8, [b.sge()]))
    raises(errno.ENOMEM, v.ibv_post_send, a.qp, v.ibv_send_wr(8, [a.sge(0, 4)]))  # done, but not polled
    assert [wc.wr_id for wc in v.ibv_poll_cq(a.cq, 4)] == [7]  # unsignaled successes never complete
    v.ibv_post_send(a.qp, v.ibv_send_wr(8, [a.sge(0, 4)]))  # polling WR 7 freed it and every slot before


def test_receiver_not_ready() -> None:
    a, b = pair()  # rnr_retry = 7: the SEND waits for a receive
    send(a, b, b"late", post_recv=False)
    assert v.ibv_poll_cq(a.cq, 4) == []
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(5, [b.sge()]))
    assert statuses(a.cq) == [0] and bytes(b.buf[:4]) == b"late"
    a, b = pair(rnr_retry=3)  # a finite budget is spent at once in this clockless simulator
    send(a, b, b"late", post_recv=False)
    assert statuses(a.cq) == [v.IBV_WC_RNR_RETRY_EXC_ERR] and a.qp.state == v.IBV_QPS_ERR
    assert b.qp.state == v.IBV_QPS_RTS  # an RNR NAK is not an error at the responder


# ---------------------------------------------------------------------------------------------------------
# error completions


def rdma(a: Host, b: Host, opcode: int, *, rkey: int | None = None, offset: int = 0, length: int = 8) -> None:
    wr = v.ibv_send_wr(3, [a.sge(0, length)], opcode, v.IBV_SEND_SIGNALED)
    wr.remote_addr, wr.rkey = b.mr.addr + offset, b.mr.rkey if rkey is None else rkey
    v.ibv_post_send(a.qp, wr)


@pytest.mark.parametrize(
    ("setup", "opcode", "kw", "expected"),
    [({}, v.IBV_WR_RDMA_WRITE, {"rkey": 0x12345622}, v.IBV_WC_REM_ACCESS_ERR),
     ({}, v.IBV_WR_RDMA_WRITE, {"offset": 250}, v.IBV_WC_REM_ACCESS_ERR),
     ({"access_b": v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_READ}, v.IBV_WR_RDMA_WRITE, {},
      v.IBV_WC_REM_ACCESS_ERR),
     ({"qp_access": v.IBV_ACCESS_LOCAL_WRITE}, v.IBV_WR_RDMA_WRITE, {}, v.IBV_WC_REM_INV_REQ_ERR),
     ({"qp_access": v.IBV_ACCESS_LOCAL_WRITE}, v.IBV_WR_RDMA_READ, {}, v.IBV_WC_REM_INV_REQ_ERR),
     ({"access_a": v.IBV_ACCESS_REMOTE_READ}, v.IBV_WR_RDMA_READ, {}, v.IBV_WC_LOC_PROT_ERR),
     ({}, v.IBV_WR_RDMA_WRITE, {"length": 300}, v.IBV_WC_LOC_PROT_ERR)],
)  # fmt: skip
def test_rdma_errors(setup: dict, opcode: int, kw: dict, expected: int) -> None:
    a, b = pair(**setup)
    v.ibv_post_recv(a.qp, v.ibv_recv_wr(40, [a.sge()]))  # outstanding: must be flushed
    rdma(a, b, opcode, **kw)
    got = v.ibv_poll_cq(a.cq, 8)
    assert [(wc.wr_id, wc.status) for wc in got] == [(3, expected), (40, v.IBV_WC_WR_FLUSH_ERR)]
    assert a.qp.state == v.IBV_QPS_ERR
    responder_error = expected in (v.IBV_WC_REM_ACCESS_ERR, v.IBV_WC_REM_INV_REQ_ERR)
    assert b.qp.state == (v.IBV_QPS_ERR if responder_error else v.IBV_QPS_RTS)  # class C errors hit both
    assert b.buf == bytearray(256)  # nothing was written


def test_receive_side_errors() -> None:
    a, b = pair()
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(2, [b.sge(0, 4)]))
    send(a, b, b"too long", post_recv=False)
    assert statuses(a.cq) == [v.IBV_WC_REM_INV_REQ_ERR] and statuses(b.cq) == [v.IBV_WC_LOC_LEN_ERR]
    a, b = pair(access_b=v.IBV_ACCESS_REMOTE_READ)  # a receive buffer the NIC may not write
    send(a, b, b"hi")
    assert statuses(a.cq) == [v.IBV_WC_REM_OP_ERR] and statuses(b.cq) == [v.IBV_WC_LOC_PROT_ERR]
    a, b = pair()
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(2, []))
    rdma(a, b, v.IBV_WR_RDMA_WRITE_WITH_IMM, rkey=b.mr.lkey)
    assert statuses(a.cq) == [v.IBV_WC_REM_ACCESS_ERR] and statuses(b.cq) == [v.IBV_WC_LOC_ACCESS_ERR]


def test_error_state_flushes_new_work_and_reset_drops_completions() -> None:
    a, _ = pair()
    v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_ERR), v.IBV_QP_STATE)
    v.ibv_post_recv(a.qp, v.ibv_recv_wr(1, [a.sge()]))
    v.ibv_post_send(a.qp, v.ibv_send_wr(2, [a.sge()]))  # unsignaled: a flush still completes
    v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_RESET), v.IBV_QP_STATE)
    assert v.ibv_poll_cq(a.cq, 8) == []  # mlx5_cq_clean on the way to RESET
    a, _ = pair()
    v.ibv_modify_qp(a.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_ERR), v.IBV_QP_STATE)
    v.ibv_post_recv(a.qp, v.ibv_recv_wr(1, [a.sge()]))
    assert statuses(a.cq) == [v.IBV_WC_WR_FLUSH_ERR]


@pytest.mark.parametrize(
    ("link", "kw"),
    [("infiniband", {"dest": "wrong_qpn"}), ("infiniband", {"dest": "peer_in_init"}),
     ("infiniband", {"dest": "psn"}), ("ethernet", {"routed": True, "gid": 2}),
     ("ethernet", {"routed": True, "gid": 1})],
)  # fmt: skip
def test_lost_packets_exhaust_the_retries(link: str, kw: dict) -> None:
    dest = kw.pop("dest", None)
    fabric = v.Fabric(link, routed=kw.pop("routed", False))
    a, b = Host(fabric, "A", psn=1), Host(fabric, "B", psn=2)
    gid = kw.get("gid")
    bring_up(a, b, gid=gid, dest_qpn=a.qp.qp_num if dest == "wrong_qpn" else None)
    if dest == "peer_in_init":
        v.ibv_modify_qp(b.qp, v.ibv_qp_attr(qp_state=v.IBV_QPS_INIT, port_num=1, qp_access_flags=RW), INIT)
    else:
        a.psn = 99 if dest == "psn" else a.psn  # B then expects A to start at PSN 99; A starts at 1
        bring_up(b, a, gid=gid)
    send(a, b, b"x")
    assert statuses(a.cq) == [v.IBV_WC_RETRY_EXC_ERR]


def test_roce_v2_routes_and_v1_does_not_need_to_on_one_subnet() -> None:
    for routed, gid in [(True, 3), (False, 0), (False, 2)]:
        a, b = pair("ethernet", routed=routed, gid=gid)
        send(a, b, b"ok")
        assert statuses(a.cq) == [0], (routed, gid)


def test_acks_follow_the_responders_own_address() -> None:
    fabric = v.Fabric()
    a, b, c = Host(fabric, "A"), Host(fabric, "B"), Host(fabric, "C")
    bring_up(a, b)
    bring_up(b, c)  # B answers C, not A
    send(a, b, b"lost ack")
    assert statuses(a.cq) == [v.IBV_WC_RETRY_EXC_ERR] and bytes(b.buf[:8]) == b"lost ack"  # data did land


def test_reads_need_read_credits() -> None:
    a, b = pair(rd_atomic=0)  # A may not have any RDMA READ outstanding: it is never issued
    rdma(a, b, v.IBV_WR_RDMA_READ)
    assert v.ibv_poll_cq(a.cq, 4) == []
    a, b = pair()
    b.qp.sim.attr.max_dest_rd_atomic = 0  # B accepts no reads
    rdma(a, b, v.IBV_WR_RDMA_READ)
    assert statuses(a.cq) == [v.IBV_WC_REM_INV_REQ_ERR]


def test_zero_length_query_copy_and_deregistration() -> None:
    a, b = pair()
    for i in range(8):
        v.ibv_post_recv(b.qp, v.ibv_recv_wr(i, [b.sge()]))
        v.ibv_post_send(a.qp, v.ibv_send_wr(i, [a.sge(0, 1)], send_flags=v.IBV_SEND_SIGNALED))
        [done] = v.ibv_poll_cq(a.cq, 1)
        assert done.status == 0
    wr = v.ibv_send_wr(1, [], v.IBV_WR_RDMA_WRITE, v.IBV_SEND_SIGNALED)
    wr.rkey = 0xDEAD  # zero bytes: no rkey check
    v.ibv_post_send(a.qp, wr)
    assert statuses(a.cq) == [0]
    attr = v.ibv_query_qp(a.qp)
    attr.timeout = 1
    assert v.ibv_query_qp(a.qp).timeout == 14 and attr.qp_state == v.IBV_QPS_RTS
    v.ibv_dereg_mr(b.mr)
    rdma(a, b, v.IBV_WR_RDMA_WRITE)
    assert statuses(a.cq) == [v.IBV_WC_REM_ACCESS_ERR]


def test_cq_overrun_raises() -> None:
    fabric = v.Fabric()
    a, b = Host(fabric, "A", depth=8), Host(fabric, "B", depth=8)
    b.cq.cqe = 2  # too small a CQ for what is coming
    bring_up(a, b)
    bring_up(b, a)
    for i in range(3):
        v.ibv_post_recv(b.qp, v.ibv_recv_wr(i, [b.sge()]))
        v.ibv_post_send(a.qp, v.ibv_send_wr(i, [a.sge(0, 1)], send_flags=v.IBV_SEND_SIGNALED))
    raises(errno.EOVERFLOW, v.ibv_poll_cq, b.cq, 4)


def test_inline_data_and_psns() -> None:
    a, b = pair()
    a.qp.cap.max_inline_data = 16
    a.buf[:3] = b"inl"
    v.ibv_post_recv(b.qp, v.ibv_recv_wr(2, [b.sge(0, 64)]))
    wr = v.ibv_send_wr(
        1, [v.ibv_sge(a.mr.addr, 3, 0)], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED | v.IBV_SEND_INLINE
    )
    v.ibv_post_send(a.qp, wr)  # lkey 0: inline data is copied at post time, no key is checked
    assert statuses(a.cq) == [0] and bytes(b.buf[:3]) == b"inl"
    for _ in range(3):  # PSNs stay in step, message after message
        send(a, b, bytes(60))
        assert statuses(a.cq) == [0]
    wr = v.ibv_send_wr(1, [a.sge(0, 200)], v.IBV_WR_SEND, v.IBV_SEND_INLINE)
    raises(errno.EINVAL, v.ibv_post_send, a.qp, wr)  # 200 > max_inline_data
