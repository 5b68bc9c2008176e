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
    ### BEGIN SOLUTION 06.send_recv
    n = len(payload)
    # pre-post the receive: a SEND that finds none is NAKed "receiver not ready" (RNR) and retried
    where = v.ibv_sge(receiver.mr.addr, len(receiver.buf), receiver.mr.lkey)
    v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(wr_id=wr_id, sg_list=[where]))
    sender.buf[:n] = payload  # the NIC reads registered memory only: copy in first
    what = v.ibv_sge(sender.mr.addr, n, sender.mr.lkey)
    v.ibv_post_send(sender.qp, v.ibv_send_wr(wr_id, [what], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
    [sent] = poll(sender.cq, 1)
    [received] = poll(receiver.cq, 1)  # byte_len says how much of the buffer the message filled
    return sent, received
    ### END SOLUTION


def send_messages(sender: Endpoint, receiver: Endpoint, payloads: list[bytes]) -> list[bytes]:
    """Send every payload as its own message, in order, and return the messages exactly as received, in
    order. There may be many more payloads than either queue holds (qp.cap); every payload fits in
    len(buf) // max_wr bytes of each side's buffer, and no completion may be lost or left unpolled. Raise
    RuntimeError on any error completion.
    """
    ### BEGIN SOLUTION 06.send_recv
    depth = min(receiver.qp.cap.max_recv_wr, sender.qp.cap.max_send_wr)  # credits: never post more
    r_slot, s_slot = (
        len(receiver.buf) // receiver.qp.cap.max_recv_wr,
        len(sender.buf) // sender.qp.cap.max_send_wr,
    )
    received: list[bytes] = []
    for start in range(0, len(payloads), depth):
        batch = payloads[start : start + depth]
        for i in range(len(batch)):  # receives before sends, one slot each
            where = v.ibv_sge(receiver.mr.addr + i * r_slot, r_slot, receiver.mr.lkey)
            v.ibv_post_recv(receiver.qp, v.ibv_recv_wr(wr_id=start + i, sg_list=[where]))
        for i, payload in enumerate(batch):
            sender.buf[i * s_slot : i * s_slot + len(payload)] = payload
            what = v.ibv_sge(sender.mr.addr + i * s_slot, len(payload), sender.mr.lkey)
            v.ibv_post_send(sender.qp, v.ibv_send_wr(start + i, [what], v.IBV_WR_SEND, v.IBV_SEND_SIGNALED))
        done = poll(sender.cq, len(batch)) + poll(receiver.cq, len(batch))  # frees the slots for reuse
        if bad := [str(wc) for wc in done if wc.status != v.IBV_WC_SUCCESS]:
            raise RuntimeError(f"messages {start}..{start + len(batch) - 1} failed: {bad}")
        for wc in sorted(done[len(batch) :], key=lambda wc: wc.wr_id):  # RC delivers in order anyway
            at = (wc.wr_id - start) * r_slot
            received.append(bytes(receiver.buf[at : at + wc.byte_len]))  # byte_len, not the whole slot
    return received
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_write: one-sided writes


def rdma_write(src: Endpoint, remote: dict, payload: bytes, *, offset: int, wr_id: int = 1) -> v.ibv_wc:
    """Write ``payload`` (from the start of src.buf) into the peer's registered memory, ``offset`` bytes into
    the buffer that ``remote`` (the peer's local_info) describes, with one signaled RDMA WRITE. Returns the
    writer's completion."""
    ### BEGIN SOLUTION 06.rdma_write
    src.buf[: len(payload)] = payload
    what = v.ibv_sge(src.mr.addr, len(payload), src.mr.lkey)  # lkey: our own memory
    wr = v.ibv_send_wr(wr_id, [what], v.IBV_WR_RDMA_WRITE, v.IBV_SEND_SIGNALED)
    wr.remote_addr, wr.rkey = remote["addr"] + offset, remote["rkey"]  # a virtual address and the peer's key
    v.ibv_post_send(src.qp, wr)
    [done] = poll(src.cq, 1)  # the peer's CPU does nothing and sees nothing
    return done
    ### END SOLUTION


def rdma_write_with_imm(
    src: Endpoint, dst: Endpoint, remote: dict, payload: bytes, *, offset: int, imm: int, wr_id: int = 1
) -> tuple[v.ibv_wc, v.ibv_wc]:
    """As rdma_write, but the target also learns that the data is there, with the 32-bit ``imm``
    (IBV_WR_RDMA_WRITE_WITH_IMM; ``dst`` is the target's Endpoint). Both sides' work requests carry ``wr_id``.
    Returns (src's completion, dst's completion)."""
    ### BEGIN SOLUTION 06.rdma_write
    v.ibv_post_recv(dst.qp, v.ibv_recv_wr(wr_id=wr_id, sg_list=[]))  # the data goes where the rkey says
    src.buf[: len(payload)] = payload
    what = v.ibv_sge(src.mr.addr, len(payload), src.mr.lkey)
    wr = v.ibv_send_wr(wr_id, [what], v.IBV_WR_RDMA_WRITE_WITH_IMM, v.IBV_SEND_SIGNALED, imm_data=imm)
    wr.remote_addr, wr.rkey = remote["addr"] + offset, remote["rkey"]
    v.ibv_post_send(src.qp, wr)
    [sent] = poll(src.cq, 1)
    [noticed] = poll(dst.cq, 1)  # IBV_WC_RECV_RDMA_WITH_IMM, byte_len = bytes written, imm_data = imm
    return sent, noticed
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 06.rdma_read: one-sided reads


def rdma_read(
    dst: Endpoint, remote: dict, *, offset: int, length: int, wr_id: int = 1
) -> tuple[bytes, v.ibv_wc]:
    """Read ``length`` bytes of the peer's registered memory, ``offset`` bytes into the buffer ``remote``
    describes, into the start of dst.buf with one signaled RDMA READ. Returns (the bytes read, or b"" if the
    read failed; the reader's completion)."""
    ### BEGIN SOLUTION 06.rdma_read
    into = v.ibv_sge(dst.mr.addr, length, dst.mr.lkey)  # the NIC WRITES here: the MR needs LOCAL_WRITE
    wr = v.ibv_send_wr(wr_id, [into], v.IBV_WR_RDMA_READ, v.IBV_SEND_SIGNALED)
    wr.remote_addr, wr.rkey = remote["addr"] + offset, remote["rkey"]
    v.ibv_post_send(dst.qp, wr)
    [done] = poll(dst.cq, 1)
    return (bytes(dst.buf[:length]) if done.status == v.IBV_WC_SUCCESS else b""), done
    ### END SOLUTION
