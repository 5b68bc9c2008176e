"""Moving bytes over a connected RC queue pair (an alternative-correct case for exercise 06)."""

from __future__ import annotations

from connection import Endpoint, poll

from coursekit import verbs as v


def _post_one_sided(
    ep: Endpoint, opcode: int, length: int, remote: dict, offset: int, wr_id: int, **kw: int
) -> None:
    local = v.ibv_sge(ep.mr.addr, length, ep.mr.lkey)
    wr = v.ibv_send_wr(wr_id, [local], opcode, v.IBV_SEND_SIGNALED, **kw)
    wr.remote_addr = remote["addr"] + offset
    wr.rkey = remote["rkey"]
    v.ibv_post_send(ep.qp, wr)


def send_message(
    sender: Endpoint, receiver: Endpoint, payload: bytes, *, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    landing = v.ibv_sge(receiver.mr.addr, len(receiver.buf), receiver.mr.lkey)
    v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(wr_id=wr_id, sg_list=[landing]))
    sender.buf[: len(payload)] = payload
    source = v.ibv_sge(sender.mr.addr, len(payload), sender.mr.lkey)
    v.ibv_post_send(sender.qp, v.ibv_send_wr(wr_id, [source], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
    return poll(sender.cq, 1)[0], poll(receiver.cq, 1)[0]


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    window = min(receiver.qp.cap.max_recv_wr, sender.qp.cap.max_send_wr)
    r_size = len(receiver.buf) // receiver.qp.cap.max_recv_wr
    s_size = len(sender.buf) // sender.qp.cap.max_send_wr

    def post(i: int) -> None:
        k = i % window  # the slot message i uses on both sides
        landing = v.ibv_sge(receiver.mr.addr + k * r_size, r_size, receiver.mr.lkey)
        v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(wr_id=i, sg_list=[landing]))
        sender.buf[k * s_size : k * s_size + len(payloads[i])] = payloads[i]
        source = v.ibv_sge(sender.mr.addr + k * s_size, len(payloads[i]), sender.mr.lkey)
        v.ibv_post_send(sender.qp, v.ibv_send_wr(i, [source], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))

    posted = 0
    while posted < min(window, len(payloads)):
        post(posted)
        posted += 1
    received: list[bytes] = []
    while len(received) < len(payloads):
        [sent] = poll(sender.cq, 1)
        [got] = poll(receiver.cq, 1)
        if sent.status != v.IBV_WC_SUCCESS or got.status != v.IBV_WC_SUCCESS:
            raise RuntimeError(f"message {len(received)} failed: {sent} / {got}")
        k = got.wr_id % window
        received.append(bytes(receiver.buf[k * r_size : k * r_size + got.byte_len]))
        if posted < len(payloads):  # the slot just read is free again on both sides
            post(posted)
            posted += 1
    return received


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    src.buf[: len(payload)] = payload
    _post_one_sided(src, v.IBV_WR_RDMA_WRITE, len(payload), remote, offset, wr_id)
    return poll(src.cq, 1)[0]


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    no_scatter: list = []
    v.ibv_post_recv(dst.qp, v.ibv_recv_wr(wr_id=wr_id, sg_list=no_scatter))
    src.buf[: len(payload)] = payload
    _post_one_sided(src, v.IBV_WR_RDMA_WRITE_WITH_IMM, len(payload), remote, offset, wr_id, imm_data=imm)
    return poll(src.cq, 1)[0], poll(dst.cq, 1)[0]


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    _post_one_sided(dst, v.IBV_WR_RDMA_READ, length, remote, offset, wr_id)
    done = poll(dst.cq, 1)[0]
    if done.status != v.IBV_WC_SUCCESS:
        return b"", done
    return bytes(dst.buf[:length]), done
