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
    raise NotImplementedError("TODO(14.routing): not implemented yet")


def route(logits: torch.Tensor, k: int, capacity: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-k routing, capacity per expert: logits (T, E) -> experts (T, k) int64, gates (T, k), keep (T, k).

    experts[t] are the k largest of softmax(logits[t]), largest first; gates[t] are those k probabilities
    divided by their sum (so they sum to 1 before any dropping). Dropping: expert e takes at most `capacity`
    assignments, filled in this priority order: every token's 1st choice in token order, then every token's
    2nd choice, and so on. keep[t, j] is False for an assignment that finds its expert full. A dropped
    assignment's gate is NOT redistributed to the token's other choices.
    """
    raise NotImplementedError("TODO(14.routing): not implemented yet")


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
    raise NotImplementedError("TODO(14.dispatch): not implemented yet")


def combine(expert_out: torch.Tensor, plan: DispatchPlan, gates: torch.Tensor, group=None) -> torch.Tensor:
    """Send expert outputs (N_recv, h) back to their tokens and sum them with their gates: -> y (T, h).

    y[t] = sum over kept j of gates[t, j] * (the row that came back for slot t*k + j); y[t] = 0 for a token
    whose every assignment was dropped (in a transformer the residual connection still carries it).
    expert_out and gates are left unchanged; y is a new tensor, sharing no memory with them.
    """
    raise NotImplementedError("TODO(14.dispatch): not implemented yet")


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
    raise NotImplementedError("TODO(14.moe_layer): not implemented yet")
