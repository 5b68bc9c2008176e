"""The planner's two yardsticks: bytes per GPU, and seconds per training step, for one plan.

A plan is a dict: tp, pp, dp, ep, zero_stage (0-3), micro_batch_size, num_microbatches, recompute ("none",
"selective", "full"). Global batch = dp x micro_batch_size x num_microbatches sequences of seq_len tokens.
Ranks are laid out TP fastest, then DP, then PP (Megatron-LM's default order); EP groups are ep consecutive DP
ranks. The busiest pipeline stage holds ceil(L/pp) of the L layers and sets both memory and time.
Memory: ZeRO model states + Korthikanti activations (coursekit.budget, exercise 22). Time: compute at MFU, the
pipeline bubble, and each strategy's communication that nothing hides, bandwidth only (coursekit.cluster;
exercise 23 adds latency and buckets). Check: `grade exercise 21`.
"""

from __future__ import annotations

import math

from coursekit.budget import (
    MFU,
    USABLE_MEMORY_FRACTION,
    activation_bytes_per_layer,
    train_flops,
    training_state_bytes,
)
from coursekit.cluster import Cluster, allgather_s, allreduce_s, alltoall_s, p2p_s
from coursekit.models import ModelSpec

BF16 = 2  # bytes per weight, gradient and activation element


def stage_layers(model: ModelSpec, pp: int) -> int:
    """Layers on the busiest pipeline stage (Llama-3 405B over 16 stages: 8 of 126)."""
    return math.ceil(model.n_layers / pp)


# ------------------------------------------------------------------------------------------------------------
# 21.memory


def memory_per_gpu(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict:
    """Bytes on one GPU of the busiest stage: {"params", "grads", "optimizer", "activations", "total",
    "limit", "fits"}.

    Model states (training_state_bytes): the stage's share ceil(L/pp)/L of the dense parameters split by tp,
    ZeRO-sharded over the dp DP ranks; plus that share of the routed experts split by tp x ep, ZeRO-sharded
    over the dp/ep ranks that hold the same experts. Activations: activation_bytes_per_layer (sequence
    parallelism on whenever tp > 1) x the stage's layers x the micro-batches it holds at once, min(pp, m)
    under 1F1B (Korthikanti et al. 2022 §4.2.3: the first stage keeps p micro-batches in flight).
    limit = USABLE_MEMORY_FRACTION x the GPU's memory; fits: total <= limit."""
    raise NotImplementedError("TODO(21.memory): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 21.step_time


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one training step: {"compute_s", "bubble_s", "dp_s", "tp_s", "pp_s", "ep_s", "total_s"},
    the four communication terms being what is EXPOSED, bandwidth only, and total_s the sum of all six.

    compute: train_flops(active params, global batch tokens) / (world x peak x MFU).
    bubble: compute x (pp-1)/m (1F1B, as a ratio to the ideal time: Narayanan et al. 2021 §2.2.1).
    dp: bf16 grads of the stage's dense params / tp all-reduced over the DP group (dp ranks tp apart), plus
        those of its experts / (tp x ep) over the dp/ep ranks tp x ep apart. ZeRO 0-2: hidden behind the last
        micro-batch's backward, so max(0, all-reduces - that backward); backward = 4/6 of a micro-batch's
        compute, 6/8 with full recomputation. ZeRO-3: every micro-batch all-gathers the weights twice and
        reduce-scatters the grads (3 all-gathers' worth), hidden behind that micro-batch's compute.
    tp: per layer and micro-batch 4 all-reduces of the bf16 (seq, mbs, dim) activation over the tp
        consecutive ranks, 6 with full recomputation; nothing hides them.
    pp: 2 (m + pp - 2) sends of that activation / tp (SP's slice) between stages tp x dp ranks apart.
    ep: per MoE layer of the stage (ceil(moe_layers / pp)) and micro-batch 4 all-to-alls (6 with full
        recomputation) of seq x mbs / tp tokens x top_k x dim bf16 over the ep ranks tp apart."""
    raise NotImplementedError("TODO(21.step_time): not implemented yet")
