"""A first-fit allocator with coalescing: how a pool hands out byte ranges of one big buffer.

One rank's share of the pool is a single buffer of `capacity` bytes (on a GPU: one cudaMalloc, or one
cuMemCreate'd chunk). The Arena only does the bookkeeping of which [offset, offset + size) ranges are taken:
  alloc(n)   round n up to the alignment, take the FRONT of the lowest-addressed free block that fits
  free(off)  give the block back and merge it with a free neighbour on either side (coalescing)

Invariants, after every call:
  free_list    sorted by offset; no two entries touch (they would have been merged); no empty entries
  allocated    {offset: rounded size}; every offset a multiple of the alignment
  together     the free and allocated blocks tile [0, capacity) exactly, without overlap

Why 256: "Any address of a variable residing in global memory or returned by one of the memory allocation
routines from the driver or runtime API is always aligned to at least 256 bytes" (CUDA C++ Programming Guide,
"Device Memory Accesses"). A pool that sub-allocates one cudaMalloc keeps that promise for every block.
Check: `grade exercise 15`.
"""

from __future__ import annotations

import bisect

ALIGNMENT = 256  # bytes; cudaMalloc's guarantee (CUDA C++ Programming Guide, "Device Memory Accesses")


class OutOfMemory(Exception):
    """No free block is big enough, even if the free bytes add up to enough (external fragmentation)."""

    def __init__(self, nbytes: int, largest_free: int) -> None:
        super().__init__(f"cannot allocate {nbytes} bytes: the largest free block has {largest_free} bytes")
        self.nbytes, self.largest_free = nbytes, largest_free


class InvalidFree(Exception):
    """free() of an offset where no live block starts (a double free, or a pointer into a block)."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"offset {offset} is not the start of an allocated block")
        self.offset = offset


def round_up(nbytes: int, alignment: int) -> int:
    """The smallest multiple of `alignment` (a power of two) that is >= nbytes."""
    return (nbytes + alignment - 1) // alignment * alignment


class Arena:
    """First-fit, address-ordered free list over [0, capacity); coalesces on free."""

    def __init__(self, capacity: int, alignment: int = ALIGNMENT) -> None:
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        if capacity < 0 or capacity % alignment:
            raise ValueError(f"capacity must be a multiple of the alignment {alignment}, got {capacity}")
        self.capacity, self.alignment = capacity, alignment
        self.free_list: list[tuple[int, int]] = [(0, capacity)] if capacity else []  # (offset, size)
        self.allocated: dict[int, int] = {}  # offset -> rounded size

    def alloc(self, nbytes: int) -> int:
        """Offset of a new block of round_up(nbytes) bytes: the front of the first free block that fits.

        Raises ValueError if nbytes < 1, and OutOfMemory(nbytes, largest free block size) if nothing fits.
        """
        if nbytes < 1:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        size = round_up(nbytes, self.alignment)
        for i, (off, free) in enumerate(self.free_list):
            if free >= size:
                if free == size:
                    del self.free_list[i]
                else:
                    self.free_list[i] = (off + size, free - size)
                self.allocated[off] = size
                return off
        raise OutOfMemory(nbytes, max((s for _, s in self.free_list), default=0))

    def free(self, offset: int) -> int:
        """Return the block at `offset` to the free list, merged with free neighbours; returns its size.

        Raises InvalidFree(offset) if no live block starts at `offset`.
        """
        if offset not in self.allocated:
            raise InvalidFree(offset)
        size = self.allocated.pop(offset)
        i = bisect.bisect_left(self.free_list, (offset, 0))
        start, end = offset, offset + size
        if i < len(self.free_list) and self.free_list[i][0] == end:  # merge right
            end += self.free_list.pop(i)[1]
        if i > 0 and sum(self.free_list[i - 1]) == start:  # merge left
            start = self.free_list.pop(i - 1)[0]
            i -= 1
        self.free_list.insert(i, (start, end - start))
        return size
