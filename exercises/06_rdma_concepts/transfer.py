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
    raise NotImplementedError("TODO(06.send_recv): not implemented yet")


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    """Send every payload as its own message, in order, and return the messages as received, in order.

    Both buffers are cut into slots, one per queue entry: len(buf) // cap.max_recv_wr on the receiver,
    len(buf) // cap.max_send_wr on the sender (qp.cap); every payload fits a slot. Work in rounds of at most
    depth = min(receiver max_recv_wr, sender max_send_wr) messages: post the round's receives (message i of
    the round in slot i, wr_id = its index in payloads), then its signaled sends (from slot i), then poll all
    of the round's completions on both sides. Raise RuntimeError on any error completion.
    """
    raise NotImplementedError("TODO(06.send_recv): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_write: one-sided writes


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    """Write ``payload`` (copied to the start of src.buf) into the peer's registered memory at ``offset``
    bytes past remote["addr"], with remote["rkey"]; a signaled IBV_WR_RDMA_WRITE. Returns its completion."""
    raise NotImplementedError("TODO(06.rdma_write): not implemented yet")


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """As rdma_write, but with IBV_WR_RDMA_WRITE_WITH_IMM and imm_data ``imm``, so the peer learns the data is
    there: ``dst`` first posts a receive (wr_id) with no scatter entries, which the write consumes. Returns
    (src's completion, dst's completion)."""
    raise NotImplementedError("TODO(06.rdma_write): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_read: one-sided reads


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    """Read ``length`` bytes of the peer's registered memory, ``offset`` bytes past remote["addr"], into the
    start of dst.buf with a signaled IBV_WR_RDMA_READ. Returns (the bytes read, or b"" if the completion is an
    error; the completion)."""
    raise NotImplementedError("TODO(06.rdma_read): not implemented yet")
