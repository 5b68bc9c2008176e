"""Three distributed programs that hang (or crash) as written, and their fixes (an alternative solution)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def halo_stencil_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, deadlocks: y[i] = x[i-1] + x[i] + x[i+1] over the periodic array the ranks hold in order."""
    p, r = dist.get_world_size(), dist.get_rank()
    left, right = (r - 1) % p, (r + 1) % p
    halo_left, halo_right = torch.empty_like(x[:1]), torch.empty_like(x[:1])
    dist.send(x[-1:].clone(), right)
    dist.send(x[:1].clone(), left)
    dist.recv(halo_left, left)
    dist.recv(halo_right, right)
    padded = torch.cat([halo_left, x, halo_right])
    return padded[:-2] + padded[1:-1] + padded[2:]


def halo_stencil(x: torch.Tensor) -> torch.Tensor:
    """The same stencil, on any number of ranks >= 2."""
    world, me = dist.get_world_size(), dist.get_rank()
    nxt, prv = (me + 1) % world, (me - 1) % world
    from_prev = x.new_empty(1)
    from_next = x.new_empty(1)
    # both receives are posted before anything blocks, so a blocking send always finds its receiver
    pending = [dist.irecv(from_prev, prv, tag=7), dist.irecv(from_next, nxt, tag=8)]
    dist.send(x[-1:].contiguous(), nxt, tag=7)  # travels forwards
    dist.send(x[:1].contiguous(), prv, tag=8)  # travels backwards
    for req in pending:
        req.wait()
    out = x.clone()
    out[1:] += x[:-1]
    out[:1] += from_prev
    out[:-1] += x[1:]
    out[-1:] += from_next
    return out


def sum_microbatches_hangs(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """GIVEN, hangs when ranks hold different numbers of micro-batches."""
    out = []
    for g in grads:
        g = g.clone()
        dist.all_reduce(g)
        out.append(g)
    return out


def sum_microbatches(grads: list[torch.Tensor], like: torch.Tensor) -> list[torch.Tensor]:
    """Per-micro-batch sums over ranks; missing micro-batches count as zeros."""
    count = torch.tensor([len(grads)], dtype=torch.int32)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    sums = []
    for i in range(int(count[0])):
        mine = grads[i].clone() if i < len(grads) else like.new_zeros(like.shape)
        dist.all_reduce(mine, op=dist.ReduceOp.SUM)
        sums.append(mine)
    return sums


def gather_uneven_hangs(x: torch.Tensor) -> torch.Tensor:
    """GIVEN, breaks when lengths differ."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.cat(parts)


def gather_uneven(x: torch.Tensor) -> torch.Tensor:
    """Every rank's x, concatenated in rank order, with two all_gather_into_tensor calls."""
    world = dist.get_world_size()
    sizes = torch.empty(world, dtype=torch.int64)
    dist.all_gather_into_tensor(sizes, torch.tensor([x.numel()], dtype=torch.int64))
    width = int(sizes.max())
    mine = torch.zeros(width, dtype=x.dtype)
    mine[: x.numel()] = x
    flat = torch.empty(world * width, dtype=x.dtype)
    dist.all_gather_into_tensor(flat, mine)
    rows = flat.view(world, width)
    return torch.cat([rows[j, : int(sizes[j])] for j in range(world)])
