"""A paged KV cache whose pages live on several ranks: tokens go to their page's rank, reads fetch them back.

Shapes: n new tokens, H kv heads, D head dim, B block size (tokens per page), P pages per rank, L sequence
length. This rank's share of the pool is one tensor, pages [P, 2, B, H, D]: pages[slot, 0] holds keys and
pages[slot, 1] values of the B tokens of one block.

Every rank holds an identical BlockManager (block_manager.py) and calls append/gather with the same
arguments, so every rank can work out the same list of transfers, in the same order, without asking anyone:
  append(seq, n, k, v)   the home rank has the new tokens; those whose page is on another rank go there,
                         one message per owner: [m, 2, H, D] (the owner's m tokens, in token order)
  gather(requests)       for each (seq, dst) in order, for each page of seq in logical order, a page on
                         rank o != dst goes o -> dst as one message [2, f, H, D]: only its f filled tokens
                         (f = B except maybe in the last page). dst assembles K, V [L, H, D].
Because everyone walks the same transfer list in the same order, each send meets its recv and nothing
deadlocks. The bytes that cross the wire are exactly the tokens that live on another rank than the one that
needs them. Check: `grade exercise 15`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from block_manager import BlockManager, Slot


class PagedKVCache:
    """This rank's pages, and the collective append/gather that move tokens between ranks."""

    def __init__(
        self,
        manager: BlockManager,
        num_heads: int,
        head_dim: int,
        group=None,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> None:
        self.manager, self.group = manager, group
        self.rank = dist.get_rank(group)
        self.token_shape = (2, num_heads, head_dim)  # one token's K and V
        # [P, 2, B, H, D]: this rank's pages; the other ranks' pages exist only on those ranks
        self.pages = torch.zeros(
            manager.pages_per_rank, 2, manager.block_size, num_heads, head_dim, dtype=dtype, device=device
        )

    def append(self, seq: int, n: int, k: torch.Tensor | None = None, v: torch.Tensor | None = None) -> None:
        """Collective: store n new tokens of `seq`. The home rank passes k, v [n, H, D]; the others None."""
        slots = self.manager.append_slots(seq, n)
        home, p = self.manager.homes[seq], dist.get_world_size(self.group)
        g = self.group
        if self.rank == home:
            kv = torch.stack([k, v], dim=1).to(self.pages.dtype)  # [n, 2, H, D]
            reqs = []
            for owner in range(p):
                idx = [t for t, s in enumerate(slots) if s[0] == owner]
                if not idx:
                    continue
                part = kv[idx].contiguous()
                if owner == self.rank:
                    self._store(part, [slots[t] for t in idx])
                else:
                    dst = owner if g is None else dist.get_global_rank(g, owner)
                    reqs.append((dist.isend(part, dst, group=g), part))
            for req, _ in reqs:
                req.wait()
        else:
            mine = [s for s in slots if s[0] == self.rank]
            if mine:
                buf = torch.empty(
                    len(mine), *self.token_shape, dtype=self.pages.dtype, device=self.pages.device
                )
                src = home if g is None else dist.get_global_rank(g, home)
                dist.recv(buf, src, group=g)
                self._store(buf, mine)

    def gather(self, requests: list[tuple[int, int]]) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Collective: for each (seq, dst), rank dst gets (K, V), each [L, H, D]; other ranks get None.

        Each request counts as a use of seq (manager.touch), in request order.
        """
        g, B = self.group, self.manager.block_size
        results: list = []
        pending = []
        for seq, dst in requests:
            self.manager.touch(seq)
            length = self.manager.lengths[seq]
            parts = []
            for j, (owner, slot) in enumerate(self.manager.tables[seq]):
                f = min(B, length - j * B)
                if self.rank == dst:
                    if owner == dst:
                        parts.append(self.pages[slot, :, :f].clone())
                    else:
                        buf = torch.empty(
                            2, f, *self.token_shape[1:], dtype=self.pages.dtype, device=self.pages.device
                        )
                        dist.recv(buf, owner if g is None else dist.get_global_rank(g, owner), group=g)
                        parts.append(buf)
                elif self.rank == owner:
                    page = self.pages[slot, :, :f].contiguous()
                    pending.append(
                        (dist.isend(page, dst if g is None else dist.get_global_rank(g, dst), group=g), page)
                    )
            if self.rank == dst:
                kv = torch.cat(parts, dim=1) if parts else self.pages.new_zeros(2, 0, *self.token_shape[1:])
                results.append((kv[0], kv[1]))
            else:
                results.append(None)
        for req, _ in pending:
            req.wait()
        return results

    def _store(self, kv: torch.Tensor, slots: list[Slot]) -> None:
        """Write tokens kv [m, 2, H, D] into this rank's pages at their (rank, slot, offset)."""
        for row, (_, slot, offset) in zip(kv, slots, strict=True):
            self.pages[slot, :, offset] = row  # [2, H, D]
