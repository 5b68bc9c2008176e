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
    ### BEGIN SOLUTION 01.broadcast
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    ranks = dist.get_process_group_ranks(group)  # ranks[j]: global rank of group rank j (None: the world)
    vrank = (rank - src) % world_size  # rank relative to the root: the root is vrank 0
    # Round k: the 2^k ranks vrank < 2^k hold the data and each sends it 2^k places on, so the holders
    # double every round. ceil, not floor: with p = 3, one round reaches only 2 ranks.
    num_rounds = math.ceil(math.log2(world_size))
    for k in range(num_rounds):
        mask = 1 << k
        if vrank < mask and vrank + mask < world_size:
            # I hold the data: my child this round is mask places on (if that rank exists).
            dist.send(tensor, ranks[(vrank + mask + src) % world_size], group=group)
        elif mask <= vrank < 2 * mask:
            # My round: my parent is mask places back. Receive straight into the caller's tensor.
            dist.recv(tensor, ranks[(vrank - mask + src) % world_size], group=group)
    ### END SOLUTION


def reduce(tensor: torch.Tensor, dst: int, group=None) -> None:
    """Sum `tensor` over all ranks into `dst`'s `tensor`, in place; other ranks' tensors stay unchanged.

    Budget: the root sends nothing, every other rank sends exactly one message (the whole tensor: its partial
    sum); no rank receives more than ceil(log2 p) messages, and no partial sum passes through more than
    ceil(log2 p) ranks on its way to `dst`. Sums in the tensor's own dtype.
    """
    ### BEGIN SOLUTION 01.reduce
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    ranks = dist.get_process_group_ranks(group)  # group rank -> global rank, which send/recv address
    vrank = (rank - dst) % world_size  # the root of the tree is dst
    acc = tensor.clone()  # partial sum of my subtree; a copy, so the caller's tensor stays untouched
    buf = torch.empty_like(tensor)  # one child's partial sum, same shape as tensor
    # broadcast's rounds in reverse: whoever received from vrank - mask in round k now sends its partial
    # sum back to vrank - mask. A rank sends once, after all its children (later rounds) have reported.
    num_rounds = math.ceil(math.log2(world_size))
    for k in reversed(range(num_rounds)):
        mask = 1 << k
        if mask <= vrank < 2 * mask:
            # My whole subtree is summed in acc: hand it to my parent. I take no further part.
            dist.send(acc, ranks[(vrank - mask + dst) % world_size], group=group)
        elif vrank < mask and vrank + mask < world_size:
            # My child's subtree arrives and joins mine.
            dist.recv(buf, ranks[(vrank + mask + dst) % world_size], group=group)
            acc += buf
    if rank == dst:
        tensor.copy_(acc)  # write into the caller's tensor, not a new one
    ### END SOLUTION


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group=None) -> None:
    """Fill tensor_list[j] (in place) with rank j's `tensor`, on every rank. `tensor` is left unchanged.

    Slot j has rank j's shape (sizes may differ per rank). Budget: each rank receives exactly the other ranks'
    tensors once, (p-1) blocks in all; its own slot is a local copy.
    """
    ### BEGIN SOLUTION 01.all_gather
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    ranks = dist.get_process_group_ranks(group)  # slots and rounds count in group ranks; messages need global
    tensor_list[rank].copy_(tensor)  # my own slot needs no message
    # Round k pairs me with two ranks: I send to r+k and receive from r-k. Over p-1 rounds everyone sends
    # its tensor to everyone else exactly once. The slot shapes (which may differ) come from tensor_list.
    for k in range(1, world_size):
        send_to, recv_from = (rank + k) % world_size, (rank - k) % world_size
        req = dist.isend(tensor, ranks[send_to], group=group)  # post first: r+k is itself blocked receiving
        dist.recv(tensor_list[recv_from], ranks[recv_from], group=group)
        req.wait()  # tensor must not change before the send is done
    ### END SOLUTION


def reduce_scatter(output: torch.Tensor, input_list: list[torch.Tensor], group=None) -> None:
    """Set `output` (in place) to the sum over ranks of their input_list[r]. input_list is left unchanged.

    input_list[j] has rank j's output shape (sizes may differ per rank). Budget: each rank receives exactly
    one block from each other rank, the one meant for it: (p-1) blocks of its output's size. Sums in the
    tensors' own dtype.
    """
    ### BEGIN SOLUTION 01.reduce_scatter
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    ranks = dist.get_process_group_ranks(group)  # group rank -> global rank
    # input_list[j]: my contribution to rank j's output, same shape as rank j's output.
    output.copy_(input_list[rank])  # my own contribution to my own block
    buf = torch.empty_like(output)  # one other rank's contribution to my block
    for k in range(1, world_size):
        send_to, recv_from = (rank + k) % world_size, (rank - k) % world_size
        # The all_to_all exchange, with a sum on arrival instead of a copy.
        req = dist.isend(input_list[send_to], ranks[send_to], group=group)
        dist.recv(buf, ranks[recv_from], group=group)
        req.wait()
        output += buf
    ### END SOLUTION


def all_to_all(
    output_tensor_list: list[torch.Tensor], input_tensor_list: list[torch.Tensor], group=None
) -> None:
    """Set output_tensor_list[j] (in place) to rank j's input_tensor_list[r], in p-1 pairwise rounds.

    Block sizes may differ for every pair of ranks. Budget: every rank sends exactly one message to, and
    receives exactly one from, every other rank: the block meant for that receiver, nothing more.
    """
    ### BEGIN SOLUTION 01.all_to_all
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    ranks = dist.get_process_group_ranks(group)  # group rank -> global rank
    # input_tensor_list[j] goes to rank j; output_tensor_list[j] comes from rank j (sizes may differ per j).
    output_tensor_list[rank].copy_(input_tensor_list[rank])  # the block I send myself is a local copy
    # Round k: send to r+k, receive from r-k. In every round each rank sends one message and receives one,
    # so no rank idles and no link carries two messages at once.
    for k in range(1, world_size):
        send_to, recv_from = (rank + k) % world_size, (rank - k) % world_size
        # post the send first: gloo's send blocks. r-k sends me its block for r.
        req = dist.isend(input_tensor_list[send_to], ranks[send_to], group=group)
        dist.recv(output_tensor_list[recv_from], ranks[recv_from], group=group)
        req.wait()
    ### END SOLUTION


def all_reduce(tensor: torch.Tensor, group=None) -> None:
    """Sum `tensor` over all ranks, in place on every rank, bitwise identical on every rank.

    A reduce followed by a broadcast is enough here; you may call your own `reduce` and `broadcast`.
    """
    ### BEGIN SOLUTION 01.all_reduce
    # Naive: 2 * ceil(log2 p) rounds, each moving the whole tensor. Exercise 02's ring moves only
    # 2 (p-1)/p * n elements per rank. Every rank ends with rank 0's bytes, so results are bitwise identical.
    reduce(tensor, 0, group=group)  # rank 0: the sum; others: unchanged
    broadcast(tensor, 0, group=group)  # now everyone: the sum
    ### END SOLUTION
