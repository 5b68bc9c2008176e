"""Six collectives built from point-to-point messages only: dist.send / dist.recv / dist.isend / dist.irecv.

Each function has torch.distributed's signature and in-place semantics (sum is the only reduction):
  broadcast       a binomial tree, ceil(log2 p) rounds   every rank's tensor := src's tensor
  reduce          a binomial tree, ceil(log2 p) rounds   dst's tensor := sum over ranks; others unchanged
  all_gather      p-1 rounds                             tensor_list[j] := rank j's tensor
  reduce_scatter  p-1 rounds                             output := sum over ranks j of j's input_list[r]
  all_to_all      p-1 pairwise rounds                    output_tensor_list[j] := j's input_tensor_list[r]
  all_reduce      a reduce, then a broadcast             every rank's tensor := sum over ranks, same bits

Background: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005. Check: `grade exercise 01`.
Notation: p = the size of `group`, r = my rank in `group`, n = tensor.numel(). Tensors may have any shape;
each message carries one whole tensor (or one whole block of a list).

`group` is None (the default group: the whole world) or any process group this rank belongs to, made by
dist.new_group: a sub-group of the world, whose members may be any ranks (not necessarily 0, 1, ...,
nor contiguous). Every rank number in these contracts (`src`, `dst`, "rank j", the slots of the lists) is a
rank in `group`: group rank j is the j-th member in group order. dist.send/dist.recv address global ranks
(dist.get_global_rank, dist.get_group_rank translate; README, "Process groups"). Only members call these
functions; ranks outside `group` take no part, and no message may go to them.

gloo's send blocks until the peer posts the matching recv (README, "Messages, and why they deadlock").
"""

import math

import torch
import torch.distributed as dist


def broadcast(tensor: torch.Tensor, src: int, group=None) -> None:
    """Copy `src`'s `tensor` into `tensor` on every rank, in place, along a binomial tree.

    Budget: ceil(log2 p) rounds; the root receives nothing, every other rank receives the whole tensor exactly
    once; every message is the whole tensor. Works for any p and any root.
    """
    raise NotImplementedError("TODO(01.broadcast): not implemented yet")


def reduce(tensor: torch.Tensor, dst: int, group=None) -> None:
    """Sum `tensor` over all ranks into `dst`'s `tensor`, in place; other ranks' tensors stay unchanged.

    Budget: the root sends nothing, every other rank sends exactly one message (the whole tensor: its partial
    sum); no rank receives more than ceil(log2 p) messages, and no partial sum passes through more than
    ceil(log2 p) ranks on its way to `dst`. Sums in the tensor's own dtype.
    """
    raise NotImplementedError("TODO(01.reduce): not implemented yet")


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group=None) -> None:
    """Fill tensor_list[j] (in place) with rank j's `tensor`, on every rank. `tensor` is left unchanged.

    Slot j has rank j's shape (sizes may differ per rank). Budget: each rank receives exactly the other ranks'
    tensors once, (p-1) blocks in all; its own slot is a local copy.
    """
    raise NotImplementedError("TODO(01.all_gather): not implemented yet")


def reduce_scatter(output: torch.Tensor, input_list: list[torch.Tensor], group=None) -> None:
    """Set `output` (in place) to the sum over ranks of their input_list[r]. input_list is left unchanged.

    input_list[j] has rank j's output shape (sizes may differ per rank). Budget: each rank receives exactly
    one block from each other rank, the one meant for it: (p-1) blocks of its output's size. Sums in the
    tensors' own dtype.
    """
    raise NotImplementedError("TODO(01.reduce_scatter): not implemented yet")


def all_to_all(
    output_tensor_list: list[torch.Tensor], input_tensor_list: list[torch.Tensor], group=None
) -> None:
    """Set output_tensor_list[j] (in place) to rank j's input_tensor_list[r], in p-1 pairwise rounds.

    Block sizes may differ for every pair of ranks. Budget: every rank sends exactly one message to, and
    receives exactly one from, every other rank: the block meant for that receiver, nothing more.
    """
    raise NotImplementedError("TODO(01.all_to_all): not implemented yet")


def all_reduce(tensor: torch.Tensor, group=None) -> None:
    """Sum `tensor` over all ranks, in place on every rank, bitwise identical on every rank.

    A reduce followed by a broadcast is enough here; you may call your own `reduce` and `broadcast`.
    """
    raise NotImplementedError("TODO(01.all_reduce): not implemented yet")
