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
Notation: p = the size of `group`, r = my rank in it, n = tensor.numel(). Tensors may have any shape; each
message carries one whole tensor (or one whole block of a list). `group` may be a sub-group: ranks, roots
and slots count in group ranks; dist.get_process_group_ranks(group) lists the global rank of each.

gloo's send blocks until the peer posts the matching recv. When two ranks must both send and receive in the
same round, each posts its send with isend first, then blocks in recv: nobody waits on a send nobody reads.
"""

import torch
import torch.distributed as dist


def broadcast(tensor: torch.Tensor, src: int, group=None) -> None:
    """Copy `src`'s `tensor` into `tensor` on every rank, in place, along a binomial tree."""
    p, r = dist.get_world_size(group), dist.get_rank(group)
    vr = (r - src) % p
    # who do I hear from, and when? rank vr > 0 receives in the round of its highest set bit
    if vr:
        top = 1 << (vr.bit_length() - 1)
        dist.recv(tensor, dist.get_process_group_ranks(group)[(vr - top + src) % p], group=group)
        mask = top << 1
    else:
        mask = 1
    while mask < p:
        if vr + mask < p:
            dist.send(tensor, dist.get_process_group_ranks(group)[(vr + mask + src) % p], group=group)
        mask <<= 1


def reduce(tensor: torch.Tensor, dst: int, group=None) -> None:
    """Sum `tensor` over all ranks into `dst`'s `tensor`, in place; other ranks' tensors stay unchanged."""
    p, r = dist.get_world_size(group), dist.get_rank(group)
    vr = (r - dst) % p
    # the broadcast tree, leaves first: children of vr are vr + 2^k for 2^k above vr's highest bit
    first = 1 << vr.bit_length() if vr else 1
    children = []
    mask = first
    while vr + mask < p:
        children.append(vr + mask)
        mask <<= 1
    acc = tensor if vr == 0 else tensor.clone()
    for child in reversed(children):  # deepest subtree last to be complete is the farthest one
        incoming = torch.empty_like(tensor)
        dist.recv(incoming, dist.get_process_group_ranks(group)[(child + dst) % p], group=group)
        acc += incoming
    if vr:
        parent = vr - (1 << (vr.bit_length() - 1))
        dist.send(acc, dist.get_process_group_ranks(group)[(parent + dst) % p], group=group)


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group=None) -> None:
    """Fill tensor_list[j] (in place) with rank j's `tensor`, on every rank. `tensor` is left unchanged."""
    p, r = dist.get_world_size(group), dist.get_rank(group)
    tensor_list[r].copy_(tensor)
    # post every receive, then every send, then wait for all of them
    reqs = [
        dist.irecv(tensor_list[(r - k) % p], dist.get_process_group_ranks(group)[(r - k) % p], group=group)
        for k in range(1, p)
    ]
    reqs += [
        dist.isend(tensor, dist.get_process_group_ranks(group)[(r + k) % p], group=group) for k in range(1, p)
    ]
    for req in reqs:
        req.wait()


def reduce_scatter(output: torch.Tensor, input_list: list[torch.Tensor], group=None) -> None:
    """Set `output` (in place) to the sum over ranks of their input_list[r]. input_list is left unchanged."""
    p, r = dist.get_world_size(group), dist.get_rank(group)
    # ring reduce-scatter: the partial sum of block b travels right and ends on rank b
    acc = input_list[(r - 1) % p].clone()
    for s in range(p - 1):
        b = (r - s - 2) % p  # block that arrives now
        incoming = torch.empty_like(input_list[b])
        req = dist.isend(acc, dist.get_process_group_ranks(group)[(r + 1) % p], group=group)
        dist.recv(incoming, dist.get_process_group_ranks(group)[(r - 1) % p], group=group)
        req.wait()
        acc = incoming + input_list[b]
    output.copy_(acc)


def all_to_all(
    output_tensor_list: list[torch.Tensor], input_tensor_list: list[torch.Tensor], group=None
) -> None:
    """Set output_tensor_list[j] (in place) to rank j's input_tensor_list[r], in p-1 pairwise rounds."""
    p, r = dist.get_world_size(group), dist.get_rank(group)
    output_tensor_list[r].copy_(input_tensor_list[r])
    reqs = []
    for k in range(1, p):
        reqs.append(
            dist.irecv(
                output_tensor_list[(r - k) % p], dist.get_process_group_ranks(group)[(r - k) % p], group=group
            )
        )
        reqs.append(
            dist.isend(
                input_tensor_list[(r + k) % p], dist.get_process_group_ranks(group)[(r + k) % p], group=group
            )
        )
    for req in reqs:
        req.wait()


def all_reduce(tensor: torch.Tensor, group=None) -> None:
    """Sum `tensor` over all ranks, in place on every rank: reduce to rank 0, then broadcast from it."""
    # a ring all-reduce (exercise 02): each chunk is summed once, on one rank, then copied, so every rank
    # holds the same bits
    p, r = dist.get_world_size(group), dist.get_rank(group)
    chunks = torch.tensor_split(tensor.view(-1), p)
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        send_i, recv_i = (r - s) % p, (r - s - 1) % p
        incoming = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], dist.get_process_group_ranks(group)[right], group=group)
        dist.recv(incoming, dist.get_process_group_ranks(group)[left], group=group)
        req.wait()
        chunks[recv_i].add_(incoming)
    for s in range(p - 1):
        send_i, recv_i = (r + 1 - s) % p, (r - s) % p
        req = dist.isend(chunks[send_i], dist.get_process_group_ranks(group)[right], group=group)
        dist.recv(chunks[recv_i], dist.get_process_group_ranks(group)[left], group=group)
        req.wait()
