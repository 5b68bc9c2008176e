"""Six collectives from send/recv only, written from the README and the hints (alternative-correct case).

Peers are named by their rank in `group` (group_src= / group_dst=), so any sub-group works."""

import torch
import torch.distributed as dist


def _tree(v: int, p: int) -> tuple[int, list[int]]:
    """(parent, children) of relative rank v in a binomial tree of p ranks rooted at 0 (parent -1: root)."""
    parent = -1 if v == 0 else v - (1 << (v.bit_length() - 1))  # clear the highest set bit
    children = []
    bit = 1 << v.bit_length() if v else 1  # the first power of two above v
    while v + bit < p:
        children.append(v + bit)
        bit <<= 1
    return parent, children


def broadcast(tensor: torch.Tensor, src: int, group=None) -> None:
    p, r = dist.get_world_size(group), dist.get_rank(group)
    v = (src - r) % p  # mirrored relative rank
    parent, children = _tree(v, p)
    if parent >= 0:
        dist.recv(tensor, group=group, group_src=(src - parent) % p)
    for c in children:
        dist.send(tensor, group=group, group_dst=(src - c) % p)


def reduce(tensor: torch.Tensor, dst: int, group=None) -> None:
    p, r = dist.get_world_size(group), dist.get_rank(group)
    v = (dst - r) % p
    parent, children = _tree(v, p)
    partial = tensor.clone()
    incoming = torch.empty_like(tensor)
    for c in reversed(children):  # farthest child first: any order works, each child sends once
        dist.recv(incoming, group=group, group_src=(dst - c) % p)
        partial.add_(incoming)
    if parent >= 0:
        dist.send(partial, group=group, group_dst=(dst - parent) % p)
    else:
        tensor.copy_(partial)


def _partners(r: int, p: int, k: int) -> tuple[int, int]:
    """(send_to, recv_from) in round k = 1..p-1."""
    if p & (p - 1) == 0:
        return r ^ k, r ^ k
    return (r - k) % p, (r + k) % p


def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, group=None) -> None:
    p, r = dist.get_world_size(group), dist.get_rank(group)
    tensor_list[r].copy_(tensor)
    for k in range(1, p):
        to, frm = _partners(r, p, k)
        rreq = dist.irecv(tensor_list[frm], group=group, group_src=frm)
        sreq = dist.isend(tensor, group=group, group_dst=to)
        rreq.wait()
        sreq.wait()


def reduce_scatter(output: torch.Tensor, input_list: list[torch.Tensor], group=None) -> None:
    p, r = dist.get_world_size(group), dist.get_rank(group)
    acc = input_list[r].clone()
    for k in range(1, p):
        to, frm = _partners(r, p, k)
        incoming = torch.empty_like(output)
        rreq = dist.irecv(incoming, group=group, group_src=frm)
        sreq = dist.isend(input_list[to], group=group, group_dst=to)
        rreq.wait()
        sreq.wait()
        acc.add_(incoming)
    output.copy_(acc)


def all_to_all(
    output_tensor_list: list[torch.Tensor], input_tensor_list: list[torch.Tensor], group=None
) -> None:
    p, r = dist.get_world_size(group), dist.get_rank(group)
    output_tensor_list[r].copy_(input_tensor_list[r])
    for k in range(1, p):
        to, frm = _partners(r, p, k)
        rreq = dist.irecv(output_tensor_list[frm], group=group, group_src=frm)
        sreq = dist.isend(input_tensor_list[to], group=group, group_dst=to)
        rreq.wait()
        sreq.wait()


def all_reduce(tensor: torch.Tensor, group=None) -> None:
    root = dist.get_world_size(group) // 2
    reduce(tensor, root, group=group)
    broadcast(tensor, root, group=group)
