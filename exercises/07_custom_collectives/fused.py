"""All-gather fused with the matmul that consumes it: multiply each shard while the next one travels.

Sequence-parallel tensor parallelism gathers the activation X (rows sharded over p ranks) and multiplies it by
this rank's column shard of a weight: Y = all_gather(X) @ W. Done one after the other, the all-gather's time
is exposed. Decomposed (Wang et al., ASPLOS 2023; PyTorch's async TP,
torch.distributed._symmetric_memory._pipelined_all_gather_and_consume), every shard's product starts as
soon as that shard is here, while the next shard is on the wire.
Shapes: p ranks in `group`, m rows per shard, k inner dimension, n this rank's output columns.
Check: `grade exercise 07`.
"""

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
    """Y = cat(x_0, ..., x_{p-1}) @ w, computed shard by shard while the all-gather runs.

    x: (m, k), this rank's shard; rank j of `group` holds rows j*m .. (j+1)*m - 1 of X, every shard has the
    same shape and dtype. w: (k, n), this rank's own weight (it differs between ranks). Returns Y: (p*m, n),
    rows j*m .. (j+1)*m - 1 being x_j @ w, on every rank.

    Budget, checked from the calls the rank makes:
    - compute: every product goes through `mm(shard, w)`, the course's stand-in for a GEMM launch: exactly p
      calls, each on one whole (m, k) shard and the whole w;
    - communication: point-to-point only (dist.isend / dist.irecv, dist.P2POp with dist.batch_isend_irecv,
      or blocking dist.send / dist.recv), no collective; every message is one whole shard, and the rank
      receives every other shard exactly once. A receive is complete when its request's `.wait()` returns
      (or when the blocking `dist.recv` does);
    - overlap: number the shards 0..p-1 in the order you multiply them; the first needs no receive. For
      every i, the receive of shard i+1 is posted before the product of shard i is issued, and waited for
      only after it; a shard you send on to another rank is posted before you multiply it yourself.
    Ranks are numbered within `group` (dist.get_rank(group)); peers in calls are global ranks
    (dist.get_global_rank(group, j)). Any p >= 1.
    """
    raise NotImplementedError("TODO(07.fused_allgather_matmul): not implemented yet")
