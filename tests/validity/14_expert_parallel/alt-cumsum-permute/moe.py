"""Expert parallelism: route tokens to their top-k experts, ship them to the ranks holding those, and back.

    y_t = sum_j keep[t, j] * gate[t, j] * expert_{e[t, j]}(x_t),   e[t, :] = the top-k experts of token t
Capacity C = ceil(k * T * capacity_factor / E) slots per expert per rank (Megatron-LM moe_utils.get_capacity
with num_tokens = T*k; DeepSpeed top2gating uses ceil(2T/E * cf); Switch Transformer §2.2 for k = 1).
Dispatch and combine are two all-to-alls with uneven splits (GShard, Lepikhin et al. 2020, arXiv 2006.16668).
Check: `grade exercise 14`. Shapes: T local tokens, h hidden, f expert width, E experts, k experts per token,
p ranks, El = E / p experts per rank (rank r holds experts r*El .. r*El + El-1), N rows sent or received.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

# ------------------------------------------------------------------------------------------------------------
# 14.routing: which experts, with which weights, and who gets dropped


def expert_capacity(num_tokens: int, num_experts: int, k: int, capacity_factor: float) -> int:
    """Slots per expert for one rank's batch: ceil(k * T * capacity_factor / E), computed in that order."""
    return math.ceil(k * num_tokens * capacity_factor / num_experts)


def route(logits: torch.Tensor, k: int, capacity: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-k routing, capacity per expert: logits (T, E) -> experts (T, k) int64, gates (T, k), keep (T, k).

    experts[t] are the k largest of softmax(logits[t]), largest first; gates[t] are those k probabilities
    divided by their sum (so they sum to 1 before any dropping). Dropping: expert e takes at most `capacity`
    assignments, filled in this priority order: every token's 1st choice in token order, then every token's
    2nd choice, and so on. keep[t, j] is False for an assignment that finds its expert full. A dropped
    assignment's gate is NOT redistributed to the token's other choices.
    """
    T, E = logits.shape
    probs = logits.softmax(dim=-1)
    top, experts = probs.topk(k, dim=-1)  # sorted, largest first
    gates = top / top.sum(dim=-1, keepdim=True)
    # GShard: the queue position of each assignment in its expert, choices in priority order (j-major)
    onehot = torch.nn.functional.one_hot(experts.t().reshape(-1), E)  # (k*T, E), row j*T + t
    position = (onehot.cumsum(dim=0) * onehot).sum(dim=1)  # 1-based place in the expert's queue
    keep = (position <= capacity).view(k, T).t().contiguous()
    return experts, gates, keep


# ------------------------------------------------------------------------------------------------------------
# 14.dispatch: two all-to-alls with uneven splits


@dataclass
class DispatchPlan:
    """What combine needs to send every row back where it came from."""

    send_order: torch.Tensor  # (N_send,) int64: flat slot t*k + j of each row sent, in send order
    input_splits: list[int]  # (p,) rows sent to each rank
    output_splits: list[int]  # (p,) rows received from each rank
    recv_counts: torch.Tensor  # (p, El) int64: rows received from rank i for my local expert e


def dispatch(
    x: torch.Tensor, experts: torch.Tensor, keep: torch.Tensor, num_experts: int, group=None
) -> tuple[torch.Tensor, DispatchPlan]:
    """Send x[t] to the owner of expert experts[t, j], for every kept (t, j): x (T, h) -> recv_x (N_recv, h).

    Send order: kept slots sorted by global expert id, ties in token order (so rank-major, then expert).
    Received rows are grouped by source rank, then by local expert, then in the source's token order.
    Two dist.all_to_all_single calls: first the (E,) per-expert counts (so each rank learns what it will
    receive), then the rows with input_split_sizes / output_split_sizes.
    """
    p = dist.get_world_size(group)
    T, k = experts.shape
    El = num_experts // p
    flat_e = experts.reshape(-1)  # slot t*k + j
    slots = torch.nonzero(keep.reshape(-1)).squeeze(1)  # kept slots in token order
    key = flat_e[slots] * (T * k) + slots  # by expert, then slot (= token order, one slot per expert)
    send_order = slots[torch.argsort(key)]
    counts = torch.bincount(flat_e[send_order], minlength=num_experts).view(p, El)  # (p, El) as sent
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)  # row j of mine goes to rank j
    input_splits = counts.sum(dim=1).tolist()
    output_splits = recv_counts.sum(dim=1).tolist()
    recv_x = x.new_empty((sum(output_splits), x.shape[1]))
    dist.all_to_all_single(recv_x, x[send_order // k], output_splits, input_splits, group=group)
    return recv_x, DispatchPlan(
        send_order=send_order, input_splits=input_splits, output_splits=output_splits, recv_counts=recv_counts
    )


def combine(expert_out: torch.Tensor, plan: DispatchPlan, gates: torch.Tensor, group=None) -> torch.Tensor:
    """Send expert outputs (N_recv, h) back to their tokens and sum them with their gates: -> y (T, h).

    y[t] = sum over kept j of gates[t, j] * (the row that came back for slot t*k + j); y[t] = 0 for a token
    whose every assignment was dropped (in a transformer the residual connection still carries it).
    """
    T, k = gates.shape
    returned = torch.empty(
        (sum(plan.input_splits), expert_out.shape[1]), dtype=expert_out.dtype, device=expert_out.device
    )
    dist.all_to_all_single(returned, expert_out, plan.input_splits, plan.output_splits, group=group)
    weighted = returned * gates.reshape(-1)[plan.send_order].unsqueeze(1)
    return torch.zeros(T, expert_out.shape[1], dtype=expert_out.dtype, device=expert_out.device).index_add_(
        0, plan.send_order // k, weighted
    )


# ------------------------------------------------------------------------------------------------------------
# 14.moe_layer: router + dispatch + local experts + combine


def expert_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """One expert: relu(x @ w1) @ w2, (n, h) -> (n, h) with w1 (h, f), w2 (f, h)."""
    return torch.relu(x @ w1) @ w2


def moe_forward(
    x: torch.Tensor,
    router_weight: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    k: int,
    capacity_factor: float,
    group=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The expert-parallel MoE layer on this rank's tokens x (T, h): returns y (T, h) and tokens_per_expert.

    router_weight (h, E) is the same on every rank: logits = x @ router_weight. w1 (El, h, f) and
    w2 (El, f, h) are this rank's experts. Capacity: expert_capacity(T, E, k, capacity_factor), per rank.
    tokens_per_expert (El,) int64: rows each local expert processed, from all ranks.
    """
    E = router_weight.shape[1]
    experts, gates, keep = route(x @ router_weight, k, expert_capacity(x.shape[0], E, k, capacity_factor))
    recv_x, plan = dispatch(x, experts, keep, E, group)
    El = w1.shape[0]
    p = plan.recv_counts.shape[0]
    # permute the received rows expert-major (torchtitan's generate_permute_indices idea), run, un-permute
    local = torch.arange(El, device=x.device).repeat(p).repeat_interleave(plan.recv_counts.reshape(-1))
    perm = torch.argsort(local, stable=True)
    per_expert = plan.recv_counts.sum(dim=0)  # (El,)
    outs = [
        expert_mlp(rows, w1[e], w2[e])
        for e, rows in enumerate(recv_x[perm].split(per_expert.tolist(), dim=0))
    ]
    out = torch.empty_like(recv_x)
    out[perm] = torch.cat(outs) if outs else recv_x[perm]
    return combine(out, plan, gates, group), per_expert
