"""Borrowing a peer's memory: one-sided get/put on other ranks' pools, emulated over send/recv.

With NVSHMEM (nvshmem_getmem / nvshmem_putmem) or an RDMA NIC, the origin moves bytes and the target's CPU
does nothing. gloo has only two-sided send/recv, so the target must take part. We do what MPI's
active-target mode does (MPI_Win_fence(3), docs.open-mpi.org): get/put only queue an operation; the collective
fence() carries every queued operation to its owner, which checks and serves it, and returns the results.

The contract of one fence, on every rank: ops on my own memory are served from self.pool with no message;
every other op is checked and served by its owner, on behalf of the origin, and its result comes back.
Only point-to-point messages, and no deadlock whatever each rank queued (nothing at all, included).
Control travels as int64 and data as uint8: each put's bytes cross the wire once, each successful get's
once, and nothing else does. How the ranks agree on who sends what to whom, and when, is the part.
Within one fence, ops from one origin to one owner take effect in the order queued; as in MPI, two origins
touching the same bytes in one epoch (one of them writing) get an unspecified result.
Check: `grade exercise 15`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from pool import ERRORS, AccessError, Handle, MemoryPool


class Window:
    """Queue get/put against any rank's pool; fence() (collective) completes them all."""

    def __init__(self, pool: MemoryPool, group=None) -> None:
        self.pool, self.group = pool, group
        self.queue: list[tuple[Handle, int, int, torch.Tensor | None]] = []  # (handle, offset, nbytes, data)

    def put(self, handle: Handle, offset: int, data: torch.Tensor) -> None:
        """Queue a write of `data` (uint8 [n]) at `offset` in the region; it happens at the next fence."""
        if data.dtype != torch.uint8:
            raise TypeError(f"put takes bytes (uint8), got {data.dtype}: use pool.as_bytes(tensor)")
        self.queue.append((handle, offset, data.numel(), data.reshape(-1).clone()))

    def get(self, handle: Handle, offset: int, nbytes: int) -> None:
        """Queue a read of nbytes at `offset` in the region; its bytes come back from the next fence."""
        self.queue.append((handle, offset, nbytes, None))

    def fence(self) -> list[torch.Tensor | AccessError | None]:
        """Collective over the group: complete every queued op. One result per op, in queue order:
        the bytes read (uint8 [nbytes]) for a get, None for a put, the AccessError for a refused op.
        The queue is empty afterwards.
        """
        g = self.group
        me, p = dist.get_rank(g), dist.get_world_size(g)
        dev = self.pool.memory.device
        ops, self.queue = self.queue, []
        out: list = [None] * len(ops)
        for i, op in enumerate(ops):
            if op[0].owner == me:
                out[i] = self._serve(op, requester=me)
        peers = [q for q in range(p) if q != me]
        to_peer = {q: [i for i, op in enumerate(ops) if op[0].owner == q] for q in peers}

        def i64(values):
            return torch.tensor(values, dtype=torch.int64, device=dev).reshape(-1)

        def send_all(messages):  # [(peer, tensor)]: post every send, nothing empty
            return [dist.isend(t, q, group=g) for q, t in messages if t.numel()]

        # phase 1: how many ops I have for each peer, and how many each peer has for me
        reqs = send_all([(q, i64([len(to_peer[q])])) for q in peers])
        n_from = {}
        for q in peers:
            buf = torch.empty(1, dtype=torch.int64, device=dev)
            dist.recv(buf, q, group=g)
            n_from[q] = int(buf)
        for r in reqs:
            r.wait()
        # phase 2: descriptors and put payloads
        msgs = []
        for q in peers:
            mine = [ops[i] for i in to_peer[q]]
            msgs.append((q, i64([[int(d is not None), h.id, o, n] for h, o, n, d in mine])))
            puts = [d for _, _, _, d in mine if d is not None]
            msgs.append(
                (q, torch.cat(puts).to(dev) if puts else torch.empty(0, dtype=torch.uint8, device=dev))
            )
        reqs = send_all(msgs)
        answers = {}
        for q in peers:
            if not n_from[q]:
                answers[q] = ([], [])
                continue
            desc = torch.empty(n_from[q], 4, dtype=torch.int64, device=dev)
            dist.recv(desc, q, group=g)
            desc = desc.tolist()
            payload = torch.empty(sum(n for w, _, _, n in desc if w), dtype=torch.uint8, device=dev)
            if payload.numel():
                dist.recv(payload, q, group=g)
            codes, data, at = [], [], 0
            for w, hid, off, n in desc:
                d = payload[at : at + n] if w else None
                at += n if w else 0
                res = self._serve((Handle(self.pool.rank, hid, n), off, n, d), requester=q)
                codes.append(res.code if isinstance(res, AccessError) else 0)
                if isinstance(res, torch.Tensor):
                    data.append(res)
            answers[q] = (codes, data)
        for r in reqs:
            r.wait()
        # phase 3: statuses and the bytes of served gets go back to each origin
        msgs = []
        for q in peers:
            codes, data = answers[q]
            msgs.append((q, i64(codes)))
            msgs.append((q, torch.cat(data) if data else torch.empty(0, dtype=torch.uint8, device=dev)))
        reqs = send_all(msgs)
        for q in peers:
            mine = [ops[i] for i in to_peer[q]]
            if not mine:
                continue
            status = torch.empty(len(mine), dtype=torch.int64, device=dev)
            dist.recv(status, q, group=g)
            status = status.tolist()
            got = sum(n for (h, o, n, d), c in zip(mine, status, strict=True) if d is None and c == 0)
            data = torch.empty(got, dtype=torch.uint8, device=dev)
            if got:
                dist.recv(data, q, group=g)
            at = 0
            for i, (h, o, n, d), c in zip(to_peer[q], mine, status, strict=True):
                if c:
                    out[i] = ERRORS[c](h, self.pool.rank, o, n, d is not None)
                elif d is None:
                    out[i] = data[at : at + n].clone()
                    at += n
        for r in reqs:
            r.wait()
        return out

    def _serve(self, op: tuple, requester: int) -> torch.Tensor | AccessError | None:
        """Apply one op to my own pool on behalf of `requester`: bytes, None, or the refusal."""
        handle, offset, nbytes, data = op
        try:
            if data is None:
                return self.pool.read(handle, offset, nbytes, requester)
            self.pool.write(handle, offset, data, requester)
            return None
        except AccessError as err:
            return err

    def _round(self, frm: int, to: int, mine: list[tuple], dev: torch.device) -> list:
        """A suggested helper for fence(): send my ops for `to`, serve the ops `frm` sends me, and return
        the results of `mine`, in order. You may restructure fence() as you like.
        """
        raise NotImplementedError("this solution does its exchange in fence() by phases, not by rounds")


def _exchange(out: torch.Tensor, dst: int, into: torch.Tensor, src: int, group) -> None:
    """Send `out` to dst while receiving `into` from src; an empty tensor is neither sent nor received.

    isend first, then recv: gloo's send blocks until the peer posts its recv, and the peer is doing the same.
    """
    req = dist.isend(out, dst, group=group) if out.numel() else None
    if into.numel():
        dist.recv(into, src, group=group)
    if req is not None:
        req.wait()
