"""Three distributed programs that hang (or crash) as written, and their fixes.

Each `*_hangs` function is given as found in a training script: leave it as it is. Write the function below it
that computes the same thing and always finishes. To see a hang for yourself, make the fix call the broken
version and run `grade exercise 08`: the report names every stuck rank and the line it is blocked on.
Shapes: n_r elements on rank r; p ranks; everything 1-D.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

# ---------------------------------------------------------------------------------------------------------
# 1. Halo exchange on a ring: every rank sends before it receives


def halo_stencil_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, deadlocks: y[i] = x[i-1] + x[i] + x[i+1] over the periodic array the ranks hold in order."""
    p, r = dist.get_world_size(), dist.get_rank()
    left, right = (r - 1) % p, (r + 1) % p
    halo_left, halo_right = torch.empty_like(x[:1]), torch.empty_like(x[:1])
    dist.send(x[-1:].clone(), right)  # my last element is my right neighbour's left halo
    dist.send(x[:1].clone(), left)  # my first element is my left neighbour's right halo
    dist.recv(halo_left, left)
    dist.recv(halo_right, right)
    padded = torch.cat([halo_left, x, halo_right])  # (n_r + 2,)
    return padded[:-2] + padded[1:-1] + padded[2:]  # (n_r,)


def halo_stencil(x: torch.Tensor) -> torch.Tensor:
    """The same stencil, on any number of ranks >= 2 (2 and 3 included: left may be right, p may be odd).

    Exactly one message to each neighbour and one from each, of one element: x[-1:] to the right, x[:1] to
    the left. Send/recv only (isend/irecv allowed); no collective.
    """
    raise NotImplementedError("TODO(08.halo_exchange): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# 2. Uneven micro-batches: a rank that runs out of data skips the remaining all-reduces


def sum_microbatches_hangs(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """GIVEN, hangs when ranks hold different numbers of micro-batches: each one's grad summed over ranks."""
    out = []
    for g in grads:
        g = g.clone()
        dist.all_reduce(g)  # a rank with fewer micro-batches stops calling this: the others wait forever
        out.append(g)
    return out


def sum_microbatches(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """Rank r holds len(grads) gradients (maybe none); `like` is a zero tensor of their shape and dtype.

    Return, on every rank, one tensor per micro-batch index i < max over ranks of len(grads): the sum over
    ranks of grads[i], where a rank without an i-th gradient contributes zeros. Every rank must issue the same
    collectives in the same order.
    """
    raise NotImplementedError("TODO(08.uneven_microbatches): not implemented yet")


# ---------------------------------------------------------------------------------------------------------
# 3. Uneven shards: all_gather with a different length on every rank


def gather_uneven_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, breaks when lengths differ: every rank's x, concatenated in rank order."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]  # assumes everyone has len(x)
    dist.all_gather(parts, x)
    return torch.cat(parts)


def gather_uneven(x: torch.Tensor) -> torch.Tensor:
    """The concatenation of every rank's x (n_r elements, n_r >= 0, different on each rank), in rank order.

    Collectives only, and at most two of them, each dist.all_gather or dist.all_gather_into_tensor; no
    send/recv and no *_object collective. The result keeps x's dtype.
    """
    raise NotImplementedError("TODO(08.uneven_gather): not implemented yet")
