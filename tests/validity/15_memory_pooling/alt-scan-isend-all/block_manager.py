"""The page table of a paged KV cache whose pages live on several ranks (PagedAttention over a supernode).

PagedAttention (Kwon et al., SOSP 2023, arXiv:2309.06180, Sec. 4.1-4.2) stores a sequence's keys and values
in fixed-size blocks of `block_size` tokens; a per-sequence block table maps logical block j (tokens
j*B .. j*B+B-1) to a physical block. Blocks are allocated only when a token needs one, and only a sequence's
last block can be partly empty. Here a physical block is a page (rank, slot): slot `slot` of `rank`'s pool.

Every rank runs the same BlockManager calls in the same order (replicated metadata, like vLLM's one
scheduler), so every rank knows where every page is and nobody has to ask. Policies, exactly:
  placement  a new page for sequence s goes to the lowest free slot of s's home rank; if the home rank is
             full, to the lowest free slot of the rank with the most free pages (ties: the lowest rank)
  eviction   when no rank has a free page, evict a whole sequence (all-or-nothing, Kwon et al. Sec. 4.5):
             the least recently used one that holds at least one page, never the one being appended to.
             Its pages are freed, its table dropped and its id appended to `evicted`; then place again.
  recency    a clock ticks on every add_sequence, append_slots and touch; last_used[s] = the clock then.
vLLM itself preempts the most recently admitted request (FCFS, vllm/v1/core/sched/scheduler.py:
`self.running.pop()`), and evicts freed prefix-cache blocks in LRU order (vllm/v1/core/kv_cache_utils.py,
FreeKVCacheBlockQueue). LRU over sequences is this course's choice: it makes victims easy to predict.
Check: `grade exercise 15`.
"""

from __future__ import annotations

import bisect

Slot = tuple[int, int, int]  # (rank, slot, offset in the page) of one token


class PoolExhausted(Exception):
    """Even after evicting every other sequence there are not enough pages."""

    def __init__(self, seq: int, needed: int, available: int) -> None:
        super().__init__(f"sequence {seq} needs {needed} more pages but the pool can free only {available}")


class UnknownSequence(KeyError):
    """A sequence that was never added, or was evicted or freed: raise UnknownSequence(seq)."""


class BlockManager:
    """Replicated page table: free pages per rank, block tables, lengths, homes and LRU clock."""

    def __init__(self, world_size: int, pages_per_rank: int, block_size: int) -> None:
        self.world_size, self.pages_per_rank, self.block_size = world_size, pages_per_rank, block_size
        self.free: list[list[int]] = [list(range(pages_per_rank)) for _ in range(world_size)]  # sorted slots
        self.tables: dict[int, list[tuple[int, int]]] = {}  # seq -> [(rank, slot)] by logical block
        self.lengths: dict[int, int] = {}  # seq -> tokens stored
        self.homes: dict[int, int] = {}  # seq -> the rank that produces its tokens
        self.last_used: dict[int, int] = {}  # seq -> clock value of its last use
        self.clock = 0
        self.evicted: list[int] = []  # victims, in eviction order

    def add_sequence(self, seq: int, home: int) -> None:
        """Register an empty sequence produced on rank `home` (counts as a use). ValueError if it exists."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq} already exists")
        self.tables[seq], self.lengths[seq], self.homes[seq] = [], 0, home
        self._use(seq)

    def _use(self, seq: int) -> None:
        self.clock += 1
        self.last_used[seq] = self.clock

    def _known(self, seq: int) -> None:
        if seq not in self.tables:
            raise UnknownSequence(seq)

    def touch(self, seq: int) -> None:
        """Mark `seq` as used now. UnknownSequence if it does not exist."""
        self._known(seq)
        self._use(seq)

    def append_slots(self, seq: int, n: int) -> list[Slot]:
        """Make room for n more tokens of `seq`; return (rank, slot, offset) for each, in token order.

        Marks `seq` used first, then adds pages (placement, evicting as needed). Before changing anything,
        raises UnknownSequence, or PoolExhausted(seq, pages needed, pages the pool can free) when the pages
        needed exceed every page not already held by `seq`.
        """
        self._known(seq)
        B, length, table = self.block_size, self.lengths[seq], self.tables[seq]
        needed = -(-(length + n) // B) - len(table)
        available = self.world_size * self.pages_per_rank - len(table)
        if needed > available:
            raise PoolExhausted(seq, needed, available)
        self._use(seq)
        for _ in range(needed):
            table.append(self._place(seq))
        self.lengths[seq] = length + n
        return [(*table[pos // B], pos % B) for pos in range(length, length + n)]

    def free_sequence(self, seq: int) -> None:
        """Drop `seq`; its pages go back to their ranks' free lists. UnknownSequence if it does not exist."""
        self._known(seq)
        for rank, slot in self.tables.pop(seq):
            bisect.insort(self.free[rank], slot)
        del self.lengths[seq], self.homes[seq], self.last_used[seq]

    def _place(self, seq: int) -> tuple[int, int]:
        """A free page for a new block of `seq`, by the placement policy, evicting LRU sequences if needed."""
        while True:
            home = self.homes[seq]
            if self.free[home]:
                return home, self.free[home].pop(0)
            most = max(range(self.world_size), key=lambda q: (len(self.free[q]), -q))
            if self.free[most]:
                return most, self.free[most].pop(0)
            victims = [s for s, t in self.tables.items() if s != seq and t]
            victim = min(victims, key=lambda s: self.last_used[s])
            self.free_sequence(victim)
            self.evicted.append(victim)
