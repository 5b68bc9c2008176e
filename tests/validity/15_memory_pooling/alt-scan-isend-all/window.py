"""Borrowing a peer's memory: one-sided get/put on other ranks' pools, emulated over send/recv.

With NVSHMEM (nvshmem_getmem / nvshmem_putmem) or an RDMA NIC, the origin moves bytes and the target's CPU
does nothing. gloo has only two-sided send/recv, so the target must take part. We do what MPI's
active-target mode does (MPI_Win_fence(3), docs.open-mpi.org): get/put only queue an operation; the collective
fence() carries every queued operation to its owner, which checks and serves it, and returns the results.

One fence, on rank r of p, with ops queued for owners t (any rank, r included):
  own ops         served straight from self.pool, before any message
  round k=1..p-1  to = r+k, frm = r-k (mod p), as in exercise 01's pairwise exchange:
    request   -> to   : count [1], then if count > 0: descriptors [count, 4] = (write, id, offset, nbytes),
                        then the put payloads, concatenated (uint8), if there are any
    serve the ops frm sent me, in its order, through self.pool with requester = frm
    reply     -> frm  : status per op [count] (0 = done, else AccessError.code), then the bytes of the
                        successful gets, concatenated (uint8), if there are any
Control travels as int64 and data as uint8: each put's bytes cross the wire once, each successful get's
once, and nothing else does. A message nobody needs (empty) is not sent, and both sides know it is empty.
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
        p, r = dist.get_world_size(self.group), dist.get_rank(self.group)
        dev = self.pool.memory.device
        queue, self.queue = self.queue, []
        results: list = [None] * len(queue)
        by_owner: dict[int, list[int]] = {}
        for n, op in enumerate(queue):
            if op[0].owner == r:
                results[n] = self._serve(op, r)  # my own pool: no message
            else:
                by_owner.setdefault(op[0].owner, []).append(n)
        for k in range(1, p):
            to, frm = (r + k) % p, (r - k) % p
            idx = by_owner.get(to, [])
            for n, res in zip(idx, self._round(frm, to, [queue[n] for n in idx], dev), strict=True):
                results[n] = res
        return results

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
        """One round of the fence: my ops for `to` go out, frm's ops on my pool are served and answered.

        Returns the results of `mine`, in order. (A suggested split of fence(); you may restructure.)
        """
        g = self.group
        to_g = to if g is None else dist.get_global_rank(g, to)
        frm_g = frm if g is None else dist.get_global_rank(g, frm)
        i64 = dict(dtype=torch.int64, device=dev)
        u8 = dict(dtype=torch.uint8, device=dev)
        # request: count, descriptors, put payloads
        count_in = torch.zeros(1, **i64)
        _exchange(torch.tensor([len(mine)], **i64), to_g, count_in, frm_g, g)
        n_in = int(count_in[0])
        desc_out = torch.tensor(
            [[int(data is not None), h.id, off, nb] for h, off, nb, data in mine], **i64
        ).reshape(-1, 4)
        desc_in = torch.zeros(n_in, 4, **i64)
        _exchange(desc_out, to_g, desc_in, frm_g, g)
        puts = [data.to(dev) for _, _, _, data in mine if data is not None]
        pay_out = torch.cat(puts) if puts else torch.zeros(0, **u8)
        pay_in = torch.zeros(int(desc_in[:, 3][desc_in[:, 0] == 1].sum()), **u8)
        _exchange(pay_out, to_g, pay_in, frm_g, g)
        # serve frm's ops on my pool, in its order
        status, served, cursor = [], [], 0
        for write, hid, off, nb in desc_in.tolist():
            data = None
            if write:
                data, cursor = pay_in[cursor : cursor + nb], cursor + nb
            res = self._serve((Handle(self.pool.rank, hid, nb), off, nb, data), frm)
            status.append(res.code if isinstance(res, AccessError) else 0)
            if not write and not isinstance(res, AccessError):
                served.append(res)
        # reply: status, then the bytes of the gets served
        status_in = torch.zeros(len(mine), **i64)
        _exchange(torch.tensor(status, **i64), frm_g, status_in, to_g, g)
        got_bytes = sum(
            nb
            for (h, off, nb, data), s in zip(mine, status_in.tolist(), strict=True)
            if data is None and s == 0
        )
        back_in = torch.zeros(got_bytes, **u8)
        _exchange(torch.cat(served) if served else torch.zeros(0, **u8), frm_g, back_in, to_g, g)
        out, cursor = [], 0
        for (h, off, nb, data), s in zip(mine, status_in.tolist(), strict=True):
            if s:
                out.append(ERRORS[s](h, self.pool.rank, off, nb, data is not None))
            elif data is None:
                out.append(back_in[cursor : cursor + nb].clone())
                cursor += nb
            else:
                out.append(None)
        return out


def _exchange(out: torch.Tensor, dst: int, into: torch.Tensor, src: int, group) -> None:
    """Send `out` to dst while receiving `into` from src; an empty tensor is neither sent nor received.

    isend first, then recv: gloo's send blocks until the peer posts its recv, and the peer is doing the same.
    """
    req = dist.isend(out, dst, group=group) if out.numel() else None
    if into.numel():
        dist.recv(into, src, group=group)
    if req is not None:
        req.wait()
