"""Moving bytes over a connected RC queue pair.

Two-sided: the receiver posts a receive WR naming where a message may land; the sender's SEND consumes it, and
both sides get a completion. One-sided: RDMA WRITE and READ name the remote address and rkey themselves; the
remote CPU posts nothing and sees no completion (unless a WRITE carries immediate data, which consumes a
receive to notify it; NCCL signals its transfers this way, net_ib.cc: IBV_WR_RDMA_WRITE_WITH_IMM).
Every WR here is signaled and every completion polled with connection.poll. Check: `grade exercise 06`.
"""

from __future__ import annotations

from connection import Endpoint, poll

from coursekit import verbs as v

# ------------------------------------------------------------------------------------------------------------
# 06.send_recv: two-sided messages


def send_message(
    sender: Endpoint, receiver: Endpoint, payload: bytes, *, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """Send ``payload`` as one message. The receiver posts a receive (wr_id) covering its whole buffer; the
    payload is copied to the start of sender.buf and sent with a signaled SEND (wr_id). Returns (the send
    completion, the receive completion); error statuses are returned, not raised."""
    n = len(payload)
    recv = v.ibv_recv_wr(
        wr_id=wr_id, sg_list=[v.ibv_sge(receiver.mr.addr, len(receiver.buf), receiver.mr.lkey)]
    )
    v.ibv_post_recv(receiver.qp, [recv])
    sender.buf[:n] = payload
    wr = v.ibv_send_wr(
        wr_id=wr_id,
        sg_list=[v.ibv_sge(sender.mr.addr, n, sender.mr.lkey)],
        opcode=v.IBV_WR_SEND,
        send_flags=v.IBV_SEND_SIGNALED,
    )
    v.ibv_post_send(sender.qp, [wr])
    [got] = poll(receiver.cq, 1)
    [sent] = poll(sender.cq, 1)
    return sent, got


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    """Send every payload as its own message, in order, and return the messages as received, in order.

    Both buffers are cut into slots, one per queue entry: len(buf) // cap.max_recv_wr on the receiver,
    len(buf) // cap.max_send_wr on the sender (qp.cap); every payload fits a slot. Work in rounds of at most
    depth = min(receiver max_recv_wr, sender max_send_wr) messages: post the round's receives (message i of
    the round in slot i, wr_id = its index in payloads), then its signaled sends (from slot i), then poll all
    of the round's completions on both sides. Raise RuntimeError on any error completion.
    """
    rslot = len(receiver.buf) // receiver.qp.cap.max_recv_wr
    sslot = len(sender.buf) // sender.qp.cap.max_send_wr
    depth = min(receiver.qp.cap.max_recv_wr, sender.qp.cap.max_send_wr)
    out: list[bytes] = [b""] * len(payloads)
    for start in range(0, len(payloads), depth):
        idx = list(range(start, min(start + depth, len(payloads))))
        # one chained post of every receive, then one chained post of every send
        v.ibv_post_recv(
            receiver.qp,
            [
                v.ibv_recv_wr(
                    wr_id=i, sg_list=[v.ibv_sge(receiver.mr.addr + j * rslot, rslot, receiver.mr.lkey)]
                )
                for j, i in enumerate(idx)
            ],
        )
        chain = []
        for j, i in enumerate(idx):
            data = payloads[i]
            sender.buf[j * sslot : j * sslot + len(data)] = data
            sge = v.ibv_sge(sender.mr.addr + j * sslot, len(data), sender.mr.lkey)
            chain.append(v.ibv_send_wr(i, [sge], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
        v.ibv_post_send(sender.qp, chain)
        for wc in poll(receiver.cq, len(idx)) + poll(sender.cq, len(idx)):
            if wc.status != v.IBV_WC_SUCCESS:
                raise RuntimeError(f"message {wc.wr_id}: {v.status_name(wc.status)}")
            if wc.opcode == v.IBV_WC_RECV:
                j = wc.wr_id - start
                out[wc.wr_id] = bytes(receiver.buf[j * rslot : j * rslot + wc.byte_len])
    return out


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_write: one-sided writes


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    """Write ``payload`` (copied to the start of src.buf) into the peer's registered memory at ``offset``
    bytes past remote["addr"], with remote["rkey"]; a signaled IBV_WR_RDMA_WRITE. Returns its completion."""
    src.buf[: len(payload)] = payload
    wr = v.ibv_send_wr(
        wr_id=wr_id,
        sg_list=[v.ibv_sge(src.mr.addr, len(payload), src.mr.lkey)],
        opcode=v.IBV_WR_RDMA_WRITE,
        send_flags=v.IBV_SEND_SIGNALED,
        remote_addr=remote["addr"] + offset,
        rkey=remote["rkey"],
    )
    v.ibv_post_send(src.qp, wr)
    return poll(src.cq, 1)[0]


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """As rdma_write, but with IBV_WR_RDMA_WRITE_WITH_IMM and imm_data ``imm``, so the peer learns the data is
    there: ``dst`` first posts a receive (wr_id) with no scatter entries, which the write consumes. Returns
    (src's completion, dst's completion)."""
    v.ibv_post_recv(dst.qp, v.ibv_recv_wr(wr_id=wr_id, sg_list=[]))
    src.buf[: len(payload)] = payload
    wr = v.ibv_send_wr(
        wr_id=wr_id,
        sg_list=[v.ibv_sge(src.mr.addr, len(payload), src.mr.lkey)],
        opcode=v.IBV_WR_RDMA_WRITE_WITH_IMM,
        send_flags=v.IBV_SEND_SIGNALED,
        imm_data=imm,
        remote_addr=remote["addr"] + offset,
        rkey=remote["rkey"],
    )
    v.ibv_post_send(src.qp, wr)
    return poll(src.cq, 1)[0], poll(dst.cq, 1)[0]


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_read: one-sided reads


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    """Read ``length`` bytes of the peer's registered memory, ``offset`` bytes past remote["addr"], into the
    start of dst.buf with a signaled IBV_WR_RDMA_READ. Returns (the bytes read, or b"" if the completion is an
    error; the completion)."""
    wr = v.ibv_send_wr(
        wr_id=wr_id,
        sg_list=[v.ibv_sge(dst.mr.addr, length, dst.mr.lkey)],
        opcode=v.IBV_WR_RDMA_READ,
        send_flags=v.IBV_SEND_SIGNALED,
        remote_addr=remote["addr"] + offset,
        rkey=remote["rkey"],
    )
    v.ibv_post_send(dst.qp, wr)
    [done] = poll(dst.cq, 1)
    if done.status != v.IBV_WC_SUCCESS:
        return b"", done
    return bytes(dst.buf[:length]), done
