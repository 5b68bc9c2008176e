"""Fused all-gather + matmul as a direct exchange with every peer (written from the README and the stub)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist


def fused_allgather_matmul(
    x: torch.Tensor,
    w: torch.Tensor,
    mm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Y = cat(x_0, ..., x_{p-1}) @ w."""
    p, me = dist.get_world_size(group), dist.get_rank(group)
    members = [dist.get_global_rank(group, j) if group is not None else j for j in range(p)]
    m = x.shape[0]
    mine = x.contiguous()
    inbox = {j: torch.empty_like(mine) for j in range(p) if j != me}
    sends = [dist.isend(mine, members[j], group=group) for j in range(p) if j != me]
    recvs = {j: dist.irecv(buf, members[j], group=group) for j, buf in inbox.items()}
    first = mm(mine, w)
    y = torch.empty((p * m, first.shape[1]), dtype=first.dtype)
    y[me * m : (me + 1) * m] = first
    for step in range(1, p):
        j = (me + step) % p
        recvs[j].wait()
        y[j * m : (j + 1) * m] = mm(inbox[j], w)
    for req in sends:
        req.wait()
    return y
