"""CUDA IPC: two processes on one GPU share one allocation, and the owner lends a window of it.

Everything else in this exercise moves bytes with send/recv. Here no byte moves: the owner's pool is one
cudaMalloc'd block, another process on the same GPU maps it (cudaIpcGetMemHandle / cudaIpcOpenMemHandle,
which torch wraps in torch.multiprocessing.reductions), and both then load and store the same memory.
Three things the mapping does not do for you:
  bounds     a CUDA IPC handle maps the WHOLE cudaMalloc block, not the bytes you meant to lend
             (see the Note [CUDA IPC and the caching allocator] in torch/multiprocessing/reductions.py)
  ordering   a write is queued on a CUDA stream; returning from the call does not mean the bytes are there
  lifetime   the memory is the owner's; torch counts the borrower's hold and keeps the block until it ends
Who holds what: the owner (rank 0) holds `pool`, uint8 [capacity] on its GPU, and keeps it as long as it
likes; the borrower (rank 1) holds a BorrowedWindow. The Grant travels between them as a pickled Python object
(the process group here is gloo: two ranks share one GPU, which NCCL refuses).
Check: `grade exercise 15` on a machine with a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


class WindowOutOfRange(ValueError):
    """A window, or an access within one, that does not lie inside what it is carved from."""

    def __init__(self, offset: int, nbytes: int, limit: int) -> None:
        super().__init__(f"bytes [{offset}, {offset + nbytes}) are not inside [0, {limit})")
        self.offset, self.nbytes, self.limit = offset, nbytes, limit


@dataclass(frozen=True)
class Grant:
    """What the owner sends the borrower. Plain, picklable data: no tensor, no raw pointer."""

    offset: int  # first byte of the window in the owner's pool
    nbytes: int  # length of the window
    ipc: Any  # whatever the borrower needs to map the owner's memory in its own process (picklable)


def grant_window(pool: torch.Tensor, offset: int, nbytes: int) -> Grant:
    """Owner side: lend pool[offset : offset + nbytes] to another process on the same GPU.

    pool: uint8 [capacity], contiguous, on a CUDA device. The borrower must reach these very bytes: the
    owner allocates nothing for the grant and sees the borrower's writes in `pool` itself.
    Raises WindowOutOfRange(offset, nbytes, capacity) unless 0 <= offset, 1 <= nbytes and
    offset + nbytes <= capacity.
    """
    ### BEGIN SOLUTION 15.cuda_ipc
    from torch.multiprocessing.reductions import reduce_tensor

    capacity = pool.numel()
    if offset < 0 or nbytes < 1 or offset + nbytes > capacity:
        raise WindowOutOfRange(offset, nbytes, capacity)
    # reduce_tensor gives (rebuild function, its arguments): the IPC handle of the whole cudaMalloc block
    # behind the pool, where the pool's storage starts in it, and where this view starts in the storage.
    # The view is what confines the borrower to the window; the handle alone would open everything.
    return Grant(offset=offset, nbytes=nbytes, ipc=reduce_tensor(pool[offset : offset + nbytes]))
    ### END SOLUTION


class BorrowedWindow:
    """Borrower side: the owner's window, mapped into this process.

    self.bytes: uint8 [grant.nbytes] on this process's GPU, aliasing the owner's window (no copy), and the
    only hold this object keeps on the owner's memory. Offsets in read/write are relative to the window.
    """

    def __init__(self, grant: Grant) -> None:
        """Map the window; allocates no GPU memory of its own."""
        self.grant = grant
        ### BEGIN SOLUTION 15.cuda_ipc
        rebuild, args = grant.ipc
        self.bytes = rebuild(*args)  # opens the handle once; torch counts this as the borrower's one hold
        ### END SOLUTION

    def _check(self, offset: int, nbytes: int) -> None:
        """Raise WindowOutOfRange(offset, nbytes, grant.nbytes) unless the access lies inside the window."""
        ### BEGIN SOLUTION 15.cuda_ipc
        # Against what the owner granted: the mapping itself would let us reach the whole block.
        if offset < 0 or nbytes < 0 or offset + nbytes > self.grant.nbytes:
            raise WindowOutOfRange(offset, nbytes, self.grant.nbytes)
        ### END SOLUTION

    def read(self, offset: int, nbytes: int) -> torch.Tensor:
        """A copy of nbytes bytes of the window at `offset`: uint8 [nbytes] on this process's GPU, in memory
        of its own, so it keeps these bytes whatever later happens to the window (writes, close)."""
        ### BEGIN SOLUTION 15.cuda_ipc
        self._check(offset, nbytes)
        return self.bytes[offset : offset + nbytes].clone()
        ### END SOLUTION

    def write(self, offset: int, data: torch.Tensor) -> None:
        """Store `data` (uint8 [n], on this process's GPU) into the window at `offset`.

        When write returns, the bytes are in the owner's memory: the owner may read them at once, from its
        own process, with no further call here. A refused write changes no byte.
        """
        ### BEGIN SOLUTION 15.cuda_ipc
        self._check(offset, data.numel())
        self.bytes[offset : offset + data.numel()].copy_(data)  # queued on this process's current stream
        # The owner runs in another process, on its own streams: nothing orders its reads after our queued
        # copy. Wait for the copy to finish before anyone is told it happened.
        torch.cuda.current_stream(self.bytes.device).synchronize()
        ### END SOLUTION

    def close(self) -> None:
        """Let go of the owner's memory: once close returns, the owner can free the pool and get it back,
        even while this object is still referenced. Using the window after close is an error: read and
        write raise (any exception)."""
        ### BEGIN SOLUTION 15.cuda_ipc
        torch.cuda.synchronize(self.bytes.device)  # nothing of ours may still be queued on its memory
        del self.bytes  # the last reference to the mapped storage: torch closes it and drops our hold
        ### END SOLUTION
