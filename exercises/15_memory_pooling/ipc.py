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
    raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")


class BorrowedWindow:
    """Borrower side: the owner's window, mapped into this process.

    self.bytes: uint8 [grant.nbytes] on this process's GPU, aliasing the owner's window (no copy), and the
    only hold this object keeps on the owner's memory. Offsets in read/write are relative to the window.
    """

    def __init__(self, grant: Grant) -> None:
        """Map the window; allocates no GPU memory of its own."""
        self.grant = grant
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")

    def _check(self, offset: int, nbytes: int) -> None:
        """Raise WindowOutOfRange(offset, nbytes, grant.nbytes) unless the access lies inside the window."""
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")

    def read(self, offset: int, nbytes: int) -> torch.Tensor:
        """A copy of nbytes bytes of the window at `offset`: uint8 [nbytes] on this process's GPU, in memory
        of its own, so it keeps these bytes whatever later happens to the window (writes, close)."""
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")

    def write(self, offset: int, data: torch.Tensor) -> None:
        """Store `data` (uint8 [n], on this process's GPU) into the window at `offset`.

        When write returns, the bytes are in the owner's memory: the owner may read them at once, from its
        own process, with no further call here. A refused write changes no byte.
        """
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")

    def close(self) -> None:
        """Let go of the owner's memory: once close returns, the owner can free the pool and get it back,
        even while this object is still referenced. Using the window after close is an error: read and
        write raise (any exception)."""
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")
