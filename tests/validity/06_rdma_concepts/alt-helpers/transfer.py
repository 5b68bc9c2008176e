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


def _signaled(
    ep: Endpoint,
    opcode: int,
    length: int,
    wr_id: int,
    remote: dict | None = None,
    offset: int = 0,
    imm: int = 0,
) -> v.ibv_wc:
    """Post one signaled WR on ep's buffer start and wait for its completion."""
    wr = v.ibv_send_wr(wr_id, [v.ibv_sge(ep.mr.addr, length, ep.mr.lkey)], opcode, v.IBV_SEND_SIGNALED, imm)
    if remote is not None:
        wr.remote_addr, wr.rkey = remote["addr"] + offset, remote["rkey"]
    v.ibv_post_send(ep.qp, wr)
    return poll(ep.cq, 1)[0]


# ------------------------------------------------------------------------------------------------------------
# 06.send_recv: two-sided messages


def send_message(
    sender: Endpoint, receiver: Endpoint, payload: bytes, *, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """Send ``payload`` as one message. The receiver posts a receive (wr_id) covering its whole buffer; the
    payload is copied to the start of sender.buf and sent with a signaled SEND (wr_id). Returns (the send
    completion, the receive completion); error statuses are returned, not raised."""
    whole = v.ibv_sge(receiver.mr.addr, receiver.mr.length, receiver.mr.lkey)
    v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(wr_id, [whole]))
    sender.buf[0 : len(payload)] = payload
    sent = _signaled(sender, v.IBV_WR_SEND, len(payload), wr_id)
    return sent, poll(receiver.cq, 1)[0]


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    """Send every payload as its own message, in order, and return the messages as received, in order.

    Both buffers are cut into slots, one per queue entry: len(buf) // cap.max_recv_wr on the receiver,
    len(buf) // cap.max_send_wr on the sender (qp.cap); every payload fits a slot. Work in rounds of at most
    depth = min(receiver max_recv_wr, sender max_send_wr) messages: post the round's receives (message i of
    the round in slot i, wr_id = its index in payloads), then its signaled sends (from slot i), then poll all
    of the round's completions on both sides. Raise RuntimeError on any error completion.
    """
    rq, sq = receiver.qp.cap.max_recv_wr, sender.qp.cap.max_send_wr
    rslot, sslot = len(receiver.buf) // rq, len(sender.buf) // sq
    depth = min(rq, sq)
    received: list[bytes] = []
    todo = list(enumerate(payloads))
    while todo:
        batch, todo = todo[:depth], todo[depth:]
        for slot, (index, _) in enumerate(batch):
            sge = v.ibv_sge(receiver.mr.addr + slot * rslot, rslot, receiver.mr.lkey)
            v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(index, [sge]))
        for slot, (index, data) in enumerate(batch):
            at = slot * sslot
            sender.buf[at : at + len(data)] = data
            sge = v.ibv_sge(sender.mr.addr + at, len(data), sender.mr.lkey)
            v.ibv_post_send(sender.qp, v.ibv_send_wr(index, [sge], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
        sends = poll(sender.cq, len(batch))
        recvs = poll(receiver.cq, len(batch))
        bad = [wc for wc in sends + recvs if wc.status != v.IBV_WC_SUCCESS]
        if bad:
            raise RuntimeError(f"error completions: {[str(wc) for wc in bad]}")
        lengths = {wc.wr_id: wc.byte_len for wc in recvs}
        for slot, (index, _) in enumerate(batch):
            at = slot * rslot
            received.append(bytes(receiver.buf[at : at + lengths[index]]))
    return received


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_write: one-sided writes


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    """Write ``payload`` (copied to the start of src.buf) into the peer's registered memory at ``offset``
    bytes past remote["addr"], with remote["rkey"]; a signaled IBV_WR_RDMA_WRITE. Returns its completion."""
    src.buf[: len(payload)] = payload
    return _signaled(src, v.IBV_WR_RDMA_WRITE, len(payload), wr_id, remote, offset)


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """As rdma_write, but with IBV_WR_RDMA_WRITE_WITH_IMM and imm_data ``imm``, so the peer learns the data is
    there: ``dst`` first posts a receive (wr_id) with no scatter entries, which the write consumes. Returns
    (src's completion, dst's completion)."""
    v.ibv_post_recv(dst.qp, v.ibv_recv_wr(wr_id))
    src.buf[: len(payload)] = payload
    mine = _signaled(src, v.IBV_WR_RDMA_WRITE_WITH_IMM, len(payload), wr_id, remote, offset, imm)
    return mine, poll(dst.cq, 1)[0]


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_read: one-sided reads


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    """Read ``length`` bytes of the peer's registered memory, ``offset`` bytes past remote["addr"], into the
    start of dst.buf with a signaled IBV_WR_RDMA_READ. Returns (the bytes read, or b"" if the completion is an
    error; the completion)."""
    done = _signaled(dst, v.IBV_WR_RDMA_READ, length, wr_id, remote, offset)
    data = bytes(dst.buf[:length]) if done.status == v.IBV_WC_SUCCESS else b""
    return data, done
