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
    """Send ``payload`` from the start of sender.buf as one message, into a receive that covers the receiver's
    whole buffer; both work requests carry ``wr_id`` and are signaled. Returns (the send completion, the
    receive completion); error statuses are returned, not raised."""
    raise NotImplementedError("TODO(06.send_recv): not implemented yet")


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    """Send every payload as its own message, in order, and return the messages exactly as received, in
    order. There may be many more payloads than either queue holds (qp.cap); every payload fits in
    len(buf) // max_wr bytes of each side's buffer, and no completion may be lost or left unpolled. Raise
    RuntimeError on any error completion.
    """
    raise NotImplementedError("TODO(06.send_recv): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_write: one-sided writes


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    """Write ``payload`` (from the start of src.buf) into the peer's registered memory, ``offset`` bytes into
    the buffer that ``remote`` (the peer's local_info) describes, with one signaled RDMA WRITE. Returns the
    writer's completion."""
    raise NotImplementedError("TODO(06.rdma_write): not implemented yet")


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """As rdma_write, but the target also learns that the data is there, with the 32-bit ``imm``
    (IBV_WR_RDMA_WRITE_WITH_IMM; ``dst`` is the target's Endpoint). Both sides' work requests carry ``wr_id``.
    Returns (src's completion, dst's completion)."""
    raise NotImplementedError("TODO(06.rdma_write): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_read: one-sided reads


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    """Read ``length`` bytes of the peer's registered memory, ``offset`` bytes into the buffer ``remote``
    describes, into the start of dst.buf with one signaled RDMA READ. Returns (the bytes read, or b"" if the
    read failed; the reader's completion)."""
    raise NotImplementedError("TODO(06.rdma_read): not implemented yet")
