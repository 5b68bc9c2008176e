"""Six collectives built from point-to-point messages only: dist.send / dist.recv / dist.isend / dist.irecv.

Each function has torch.distributed's signature and in-place semantics (sum is the only reduction):
  broadcast       binomial tree, ceil(log2 p) rounds     every rank's tensor := src's tensor
  reduce          the broadcast tree, played backwards   dst's tensor := sum over ranks; others unchanged
  all_gather      p-1 pairwise rounds                    tensor_list[j] := rank j's tensor
  reduce_scatter  p-1 pairwise rounds                    output := sum over ranks j of j's input_list[r]
  all_to_all      p-1 pairwise rounds                    output_tensor_list[j] := j's input_tensor_list[r]
  all_reduce      reduce to rank 0, broadcast from it    every rank's tensor := sum over ranks

Background: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005. Check: `grade exercise 01`.
Notation: p = world size, r = my rank, n = tensor.numel(). Tensors may have any shape; each message carries
one whole tensor (or one whole block of a list). `group` is None (the default group) or the whole world,
so a rank in `group` is also the global rank that dist.send/dist.recv address.

gloo's send blocks until the peer posts the matching recv. When two ranks must both send and receive in the
same round, each posts its send with isend first, then blocks in recv: nobody waits on a send nobody reads.
"""

import math

import torch
import torch.distributed as dist


def broadcast(tensor: torch.Tensor, src: int, group=None) -> None:
    """Copy `src`'s `tensor` into `tensor` on every rank, in place, along a binomial tree."""
    raise NotImplementedError("TODO(01.broadcast): not implemented yet")


def reduce(tensor: torch.Tensor, dst: int, group=None) -> None:
    """Sum `tensor` over all ranks into `dst`'s `tensor`, in place; other ranks' tensors stay unchanged."""
    raise NotImplementedError("TODO(01.reduce): not implemented yet")


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group=None) -> None:
    """Fill tensor_list[j] (in place) with rank j's `tensor`, on every rank. `tensor` is left unchanged."""
    raise NotImplementedError("TODO(01.all_gather): not implemented yet")


def reduce_scatter(output: torch.Tensor, input_list: list[torch.Tensor], group=None) -> None:
    """Set `output` (in place) to the sum over ranks of their input_list[r]. input_list is left unchanged."""
    raise NotImplementedError("TODO(01.reduce_scatter): not implemented yet")


def all_to_all(
    output_tensor_list: list[torch.Tensor], input_tensor_list: list[torch.Tensor], group=None
) -> None:
    """Set output_tensor_list[j] (in place) to rank j's input_tensor_list[r], in p-1 pairwise rounds."""
    raise NotImplementedError("TODO(01.all_to_all): not implemented yet")


def all_reduce(tensor: torch.Tensor, group=None) -> None:
    """Sum `tensor` over all ranks, in place on every rank: reduce to rank 0, then broadcast from it."""
    raise NotImplementedError("TODO(01.all_reduce): not implemented yet")
