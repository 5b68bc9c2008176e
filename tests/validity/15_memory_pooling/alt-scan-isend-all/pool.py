"""One rank's share of a supernode memory pool: regions behind handles, and who may touch which bytes.

A handle names a region without giving out its address: (owner rank, id, size asked for). Every access, local
or from a peer, goes through the owner's `check`, which enforces the boundary in a fixed order:
  1. the handle names a live region of this owner        else InvalidHandle
  2. the requester holds the permission the access needs  else PermissionDenied
  3. [offset, offset + nbytes) lies inside the region     else OutOfBounds
The order is the soft-RoCE responder's (linux drivers/infiniband/sw/rxe/rxe_resp.c, check_rkey: look the key
up together with the access it needs, then mr_check_range), which exercise 06 simulates.

Permissions are CUDA's virtual-memory access flags (CUmemAccess_flags in cuda.h, set per device with
cuMemSetAccess): PROT_NONE = 0, PROT_READ = 1, PROT_READWRITE = 3. There is no write-only. The owner always
has READ_WRITE; a peer has what the owner granted it (nothing by default).

Ids are 0, 1, 2, ... in allocation order on each owner and never reused, so a handle to a released region
stays invalid even after its bytes go to a new region. A new region reads as zeros: the pool scrubs freed
bytes, so one tenant never sees what the last one left (cudaMalloc itself does not clear memory).
Check: `grade exercise 15`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from arena import ALIGNMENT, Arena

NONE, READ, READ_WRITE = 0, 1, 3  # CUmemAccess_flags: CU_MEM_ACCESS_FLAGS_PROT_NONE / _READ / _READWRITE


@dataclass(frozen=True)
class Handle:
    """What a peer holds to address a region: never a raw offset into the owner's memory."""

    owner: int  # the rank whose memory holds the region
    id: int  # 0, 1, 2, ... per owner, in allocation order; never reused
    nbytes: int  # the size that was asked for (the arena may have rounded the block up)


class AccessError(Exception):
    """A refused access. `code` travels on the wire; the message is rebuilt from the request on arrival."""

    code = 0
    reason = "access error"

    def __init__(self, handle: Handle, requester: int, offset: int, nbytes: int, write: bool) -> None:
        verb = "write" if write else "read"
        super().__init__(
            f"rank {requester} {verb} of bytes [{offset}, {offset + nbytes}) of handle "
            f"{handle.owner}:{handle.id}: {self.reason}"
        )
        self.handle, self.requester, self.offset, self.nbytes = handle, requester, offset, nbytes
        self.write = write


class InvalidHandle(AccessError):
    code, reason = 1, "no such region (never allocated, or released)"


class PermissionDenied(AccessError):
    code, reason = 2, "permission denied"


class OutOfBounds(AccessError):
    code, reason = 3, "out of bounds"


ERRORS = {cls.code: cls for cls in (InvalidHandle, PermissionDenied, OutOfBounds)}


class MemoryPool:
    """This rank's bytes, the regions carved out of them, and the grants peers hold on each region."""

    def __init__(self, rank: int, capacity: int, alignment: int = ALIGNMENT, device: str = "cpu") -> None:
        self.rank = rank
        self.arena = Arena(capacity, alignment)
        self.memory = torch.zeros(capacity, dtype=torch.uint8, device=device)  # [capacity] the raw bytes
        self.regions: dict[int, tuple[int, int]] = {}  # handle id -> (arena offset, nbytes asked for)
        self.grants: dict[tuple[int, int], int] = {}  # (handle id, peer rank) -> NONE / READ / READ_WRITE
        self.next_id = 0

    def allocate(self, nbytes: int) -> Handle:
        """A new region of nbytes (reads as zeros), owned by this rank; arena errors propagate."""
        offset = self.arena.alloc(nbytes)
        handle = Handle(self.rank, self.next_id, nbytes)
        self.next_id += 1
        self.regions[handle.id] = (offset, nbytes)
        return handle

    def release(self, handle: Handle) -> None:
        """Free the region, scrub its bytes and drop every grant on it.

        Raises InvalidHandle, as check(handle, self.rank, 0, 0, write=True) would, if it is not live here.
        """
        self.check(handle, self.rank, 0, 0, write=True)
        offset, _ = self.regions.pop(handle.id)
        size = self.arena.free(offset)
        self.memory[offset : offset + size] = 0  # scrub: the next tenant must not see these bytes
        self.grants = {key: v for key, v in self.grants.items() if key[0] != handle.id}

    def grant(self, handle: Handle, peer: int, perms: int) -> None:
        """Set (not add to) `peer`'s permissions on a live region of this rank; NONE revokes.

        Raises InvalidHandle, as check(handle, self.rank, 0, 0, write=True) would, if it is not live here.
        """
        self.check(handle, self.rank, 0, 0, write=True)
        if perms == NONE:
            self.grants.pop((handle.id, peer), None)
        else:
            self.grants[(handle.id, peer)] = perms

    def check(self, handle: Handle, requester: int, offset: int, nbytes: int, write: bool) -> int:
        """Enforce the boundary for one access; return where its first byte is in self.memory.

        Raises, in this order: InvalidHandle, PermissionDenied, OutOfBounds (see the module docstring).
        """
        if handle.owner != self.rank or handle.id not in self.regions:
            raise InvalidHandle(handle, requester, offset, nbytes, write)
        have = READ_WRITE if requester == self.rank else self.grants.get((handle.id, requester), NONE)
        need = READ_WRITE if write else READ
        if have & need != need:
            raise PermissionDenied(handle, requester, offset, nbytes, write)
        base, size = self.regions[handle.id]
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise OutOfBounds(handle, requester, offset, nbytes, write)
        return base + offset

    def read(self, handle: Handle, offset: int, nbytes: int, requester: int) -> torch.Tensor:
        """A copy of nbytes bytes at `offset` in the region: uint8 [nbytes]."""
        start = self.check(handle, requester, offset, nbytes, write=False)
        return self.memory[start : start + nbytes].clone()

    def write(self, handle: Handle, offset: int, data: torch.Tensor, requester: int) -> None:
        """Copy `data` (uint8 [n]) into the region at `offset`."""
        start = self.check(handle, requester, offset, data.numel(), write=True)
        self.memory[start : start + data.numel()] = data.to(self.memory.device)


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of a tensor, uint8 [numel * element_size], to put into a region."""
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def from_bytes(data: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bytes read from a region, reinterpreted as a 1-D tensor of `dtype`."""
    return data.contiguous().view(dtype)
