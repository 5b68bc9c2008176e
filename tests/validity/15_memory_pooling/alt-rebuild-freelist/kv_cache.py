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
        home = self.manager.homes[seq]
        owners = sorted({rank for rank, _, _ in slots})
        for owner in owners:
            picked = [t for t, (rank, _, _) in enumerate(slots) if rank == owner]
            where = [slots[t] for t in picked]
            if self.rank == home:
                rows = torch.stack([k[picked], v[picked]], dim=1)  # [m, 2, H, D]
                if owner == home:
                    self._store(rows, where)
                else:
                    dist.send(rows.contiguous(), _global(self.group, owner), group=self.group)
            elif self.rank == owner:
                rows = self.pages.new_empty((len(picked), *self.token_shape))
                dist.recv(rows, _global(self.group, home), group=self.group)
                self._store(rows, where)

    def gather(self, requests: list[tuple[int, int]]) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Collective: for each (seq, dst), rank dst gets (K, V), each [L, H, D]; other ranks get None.

        Each request counts as a use of seq (manager.touch), in request order.
        """
        B = self.manager.block_size
        out: list = []
        for seq, dst in requests:
            self.manager.touch(seq)
            L = self.manager.lengths[seq]
            keys, values = [], []
            for j, (owner, slot) in enumerate(self.manager.tables[seq]):
                f = min(B, L - j * B)
                if owner == dst == self.rank:
                    page = self.pages[slot, :, :f]
                elif self.rank == dst:
                    page = self.pages.new_empty((2, f, *self.token_shape[1:]))
                    dist.recv(page, _global(self.group, owner), group=self.group)
                elif self.rank == owner:
                    dist.send(
                        self.pages[slot, :, :f].contiguous(), _global(self.group, dst), group=self.group
                    )
                    continue
                else:
                    continue
                keys.append(page[0])
                values.append(page[1])
            if self.rank != dst:
                out.append(None)
                continue
            empty = self.pages.new_empty((0, *self.token_shape[1:]))  # a sequence with no token yet
            out.append((torch.cat([empty, *keys]), torch.cat([empty, *values])))
        return out

    def _store(self, kv: torch.Tensor, slots: list[Slot]) -> None:
        """Write tokens kv [m, 2, H, D] into this rank's pages at their (rank, slot, offset)."""
        for row, (_, slot, offset) in zip(kv, slots, strict=True):
            self.pages[slot, :, offset] = row  # [2, H, D]


def _global(group, rank: int) -> int:
    """Rank in `group` -> global rank, which is what send/recv address."""
    return rank if group is None else dist.get_global_rank(group, rank)
