"""Expert parallelism: route tokens to their top-k experts, ship them to the ranks holding those, and back.

    y_t = sum_j keep[t, j] * gate[t, j] * expert_{e[t, j]}(x_t),   e[t, :] = the top-k experts of token t
Capacity C: slots per expert per rank, from this rank's T*k assignments and the capacity factor
(Megatron-LM moe_utils.get_capacity; DeepSpeed top2gating; Switch Transformer §2.2).
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
    """Slots per expert for one rank's batch of T tokens, each routed to k of E experts: an int, the fair
    share stretched by capacity_factor and rounded up (README, "Capacity and dropping")."""
    ### BEGIN SOLUTION 14.routing
    # k*T assignments spread over E experts is k*T/E each if perfectly balanced; the factor adds headroom.
    # Megatron-LM moe_utils.py (commit 00611e6e) topk_softmax_with_capacity calls
    # get_capacity(num_tokens=num_tokens * topk, ...), which is math.ceil((num_tokens / num_experts) * cf)
    return math.ceil(k * num_tokens * capacity_factor / num_experts)
    ### END SOLUTION


def route(logits: torch.Tensor, k: int, capacity: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-k routing, capacity per expert: logits (T, E) -> experts (T, k) int64, gates (T, k), keep (T, k).

    experts[t] are the k largest of softmax(logits[t]), largest first; gates[t] are those k probabilities
    divided by their sum (so they sum to 1 before any dropping). Dropping: expert e takes at most `capacity`
    assignments, filled in this priority order: every token's 1st choice in token order, then every token's
    2nd choice, and so on. keep[t, j] is False for an assignment that finds its expert full. A dropped
    assignment's gate is NOT redistributed to the token's other choices.
    """
    ### BEGIN SOLUTION 14.routing
    T, E = logits.shape
    probs = torch.softmax(logits, dim=-1)  # (T, E)
    top, experts = probs.topk(k, dim=-1)  # (T, k) each, largest first
    # Renormalize over the chosen k, as Mixtral does; Megatron-LM's default, softmax over the top-k logits,
    # is the same thing. Dropping happens after, and does not renormalize again.
    gates = top / top.sum(dim=-1, keepdim=True)  # (T, k)
    # Position of each assignment in its expert's queue, choice-major then token order: GShard Algorithm 1,
    # DeepSpeed deepspeed/moe/sharded_moe.py top2gating: "locations2 += torch.sum(mask1, dim=0)".
    chosen = torch.nn.functional.one_hot(experts.T.reshape(-1), E)  # (k*T, E): row j*T + t, choice j of t
    position = (chosen.cumsum(dim=0) - 1) * chosen  # (k*T, E): queue slot of each assignment, 0 elsewhere
    keep = position.sum(dim=-1).view(k, T).T < capacity  # (T, k): slots 0..C-1 are kept
    return experts, gates, keep
    ### END SOLUTION


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
    receive), then the rows with input_split_sizes / output_split_sizes. x, experts and keep are left
    unchanged (the caller uses the routing again); recv_x is a new tensor, sharing no memory with them.
    """
    ### BEGIN SOLUTION 14.dispatch
    p = dist.get_world_size(group)
    k = experts.shape[1]
    slots = keep.reshape(-1).nonzero().squeeze(1)  # (N_send,) kept flat slots t*k + j, token order
    flat_experts = experts.reshape(-1)  # (T*k,)
    # stable sort by destination expert: rows for rank 0's experts first, each expert's rows in token order
    send_order = slots[torch.sort(flat_experts[slots], stable=True).indices]  # (N_send,)
    send_x = x[send_order // k]  # (N_send, h): token t goes once per kept choice
    counts = torch.bincount(flat_experts[send_order], minlength=num_experts)  # (E,) rows per expert
    # Counts first: rank i must size its receive buffer before the rows arrive. Equal splits of E/p, so
    # rank i gets my counts for its own experts (torchtitan torchtitan/distributed/expert_parallel.py,
    # commit 03a13843, ExpertParallel._token_dispatch does the same exchange and the same row layout).
    recv_counts = torch.empty_like(counts)  # (E,) = (p, El): from rank i, for my local expert e
    dist.all_to_all_single(recv_counts, counts, group=group)
    recv_counts = recv_counts.view(p, num_experts // p)
    input_splits = counts.view(p, -1).sum(dim=1).tolist()  # split sizes must be Python ints (also on NCCL)
    output_splits = recv_counts.sum(dim=1).tolist()
    recv_x = x.new_empty(sum(output_splits), x.shape[1])  # (N_recv, h)
    dist.all_to_all_single(recv_x, send_x, output_splits, input_splits, group=group)
    return recv_x, DispatchPlan(send_order, input_splits, output_splits, recv_counts)
    ### END SOLUTION


def combine(expert_out: torch.Tensor, plan: DispatchPlan, gates: torch.Tensor, group=None) -> torch.Tensor:
    """Send expert outputs (N_recv, h) back to their tokens and sum them with their gates: -> y (T, h).

    y[t] = sum over kept j of gates[t, j] * (the row that came back for slot t*k + j); y[t] = 0 for a token
    whose every assignment was dropped (in a transformer the residual connection still carries it).
    expert_out and gates are left unchanged; y is a new tensor, sharing no memory with them.
    """
    ### BEGIN SOLUTION 14.dispatch
    T, k = gates.shape
    # The reverse all-to-all: the splits swap roles, and rows come back in my send order.
    back = expert_out.new_empty(len(plan.send_order), expert_out.shape[1])  # (N_send, h)
    dist.all_to_all_single(back, expert_out, plan.input_splits, plan.output_splits, group=group)
    weights = gates.reshape(-1)[plan.send_order].unsqueeze(1).to(back.dtype)  # (N_send, 1)
    y = back.new_zeros(T, back.shape[1])  # (T, h): dropped tokens stay 0
    y.index_add_(0, plan.send_order // k, back * weights)  # a token's k rows add up
    return y
    ### END SOLUTION


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
    x, router_weight, w1 and w2 are the caller's (its tokens and its experts): read them, never write to
    them or reorder them, so that the next call and the optimizer see them as they were.
    """
    ### BEGIN SOLUTION 14.moe_layer
    num_experts = router_weight.shape[1]
    capacity = expert_capacity(x.shape[0], num_experts, k, capacity_factor)
    experts, gates, keep = route(x @ router_weight, k, capacity)  # (T, k) each
    recv_x, plan = dispatch(x, experts, keep, num_experts, group=group)  # (N_recv, h)
    # Rows arrive grouped by source, then local expert: label each row with its expert, run each expert
    # on all of its rows at once.
    p, local = plan.recv_counts.shape
    expert_of_row = (
        torch.arange(local, device=x.device).repeat(p).repeat_interleave(plan.recv_counts.reshape(-1))
    )
    out = torch.empty_like(recv_x)  # (N_recv, h)
    for e in range(local):
        rows = expert_of_row == e
        out[rows] = expert_mlp(recv_x[rows], w1[e], w2[e])
    y = combine(out, plan, gates, group=group)  # (T, h)
    return y, plan.recv_counts.sum(dim=0)
    ### END SOLUTION
