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
        if seq in self.homes:
            raise ValueError(f"sequence {seq} was already added")
        self.homes[seq] = home
        self.tables[seq] = []
        self.lengths[seq] = 0
        self.clock += 1
        self.last_used[seq] = self.clock

    def touch(self, seq: int) -> None:
        """Mark `seq` as used now. UnknownSequence if it does not exist."""
        if seq not in self.homes:
            raise UnknownSequence(seq)
        self.clock += 1
        self.last_used[seq] = self.clock

    def append_slots(self, seq: int, n: int) -> list[Slot]:
        """Make room for n more tokens of `seq`; return (rank, slot, offset) for each, in token order.

        Marks `seq` used first, then adds pages (placement, evicting as needed). Before changing anything,
        raises UnknownSequence, or PoolExhausted(seq, pages needed, pages the pool can free) when the pages
        needed exceed every page not already held by `seq`.
        """
        if seq not in self.homes:
            raise UnknownSequence(seq)
        B = self.block_size
        old = self.lengths[seq]
        have = len(self.tables[seq])
        pages_after = (old + n + B - 1) // B
        held_elsewhere_or_free = self.world_size * self.pages_per_rank - have
        if pages_after - have > held_elsewhere_or_free:
            raise PoolExhausted(seq, pages_after - have, held_elsewhere_or_free)
        self.touch(seq)
        while len(self.tables[seq]) < pages_after:
            self.tables[seq].append(self._place(seq))
        self.lengths[seq] = old + n
        out: list[Slot] = []
        for pos in range(old, old + n):
            rank, slot = self.tables[seq][pos // B]
            out.append((rank, slot, pos % B))
        return out

    def free_sequence(self, seq: int) -> None:
        """Drop `seq`; its pages go back to their ranks' free lists. UnknownSequence if it does not exist."""
        if seq not in self.homes:
            raise UnknownSequence(seq)
        for rank, slot in self.tables[seq]:
            self.free[rank].append(slot)
            self.free[rank].sort()
        for table in (self.tables, self.lengths, self.homes, self.last_used):
            del table[seq]

    def _place(self, seq: int) -> tuple[int, int]:
        """A free page for a new block of `seq`, by the placement policy, evicting LRU sequences if needed."""
        while not any(self.free):
            by_age = sorted((t, s) for s, t in self.last_used.items() if s != seq and self.tables[s])
            victim = by_age[0][1]  # the least recently used other sequence that holds pages
            self.free_sequence(victim)
            self.evicted.append(victim)
        home = self.homes[seq]
        if not self.free[home]:
            # the rank with the most free pages; sorting by (-free, rank) breaks ties toward the lowest rank
            home = sorted(range(self.world_size), key=lambda q: (-len(self.free[q]), q))[0]
        slot = self.free[home][0]
        self.free[home] = self.free[home][1:]
        return home, slot
