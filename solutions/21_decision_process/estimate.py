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
    ### BEGIN SOLUTION 21.memory
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    layers = stage_layers(model, pp)
    share = layers / model.n_layers
    dense = training_state_bytes(model.dense_params * share / tp, zero_stage=plan["zero_stage"], dp_degree=dp)
    # each expert lives on dp/ep GPUs of the DP group (one per EP group): ZeRO shards it over those
    experts = training_state_bytes(
        model.expert_params * share / (tp * ep), zero_stage=plan["zero_stage"], dp_degree=dp // ep
    )
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len, micro_batch=plan["micro_batch_size"], hidden=model.dim, n_heads=model.n_heads,
        tp_degree=tp, sequence_parallel=tp > 1, recompute=plan["recompute"],
    )  # fmt: skip
    in_flight = min(pp, plan["num_microbatches"])  # 1F1B warm-up: stage 0 runs p forwards before a backward
    out = {k: dense[k] + experts[k] for k in ("params", "grads", "optimizer")}
    out["activations"] = per_layer * layers * in_flight
    out["total"] = sum(out.values())
    out["limit"] = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out["fits"] = out["total"] <= out["limit"]
    return out
    ### END SOLUTION


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
    ### BEGIN SOLUTION 21.step_time
    tp, pp, dp, ep, m = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    full = plan["recompute"] == "full"
    tokens = dp * plan["micro_batch_size"] * m * seq_len
    compute = train_flops(model.active_params, tokens, plan["recompute"]) / (
        cluster.world * cluster.peak_flops * MFU
    )
    per_mb = compute / m
    layers = stage_layers(model, pp)
    share = layers / model.n_layers

    # DP: gradients of the dense part over the DP group, of the experts over their replicas
    dp_groups = [
        (BF16 * model.dense_params * share / tp, cluster.levels(dp, tp)),
        (BF16 * model.expert_params * share / (tp * ep), cluster.levels(dp // ep, tp * ep)),
    ]
    if plan["zero_stage"] == 3:  # AG for forward, AG for backward, RS of grads: every micro-batch
        comm = sum(3 * allgather_s(nbytes, lv) for nbytes, lv in dp_groups)
        dp_s = m * max(0.0, comm - per_mb)
    else:  # one all-reduce (or RS + AG, same bytes) behind the last backward
        comm = sum(allreduce_s(nbytes, lv) for nbytes, lv in dp_groups)
        dp_s = max(0.0, comm - per_mb * (6 / 8 if full else 4 / 6))

    # TP: Megatron's f and g on the (s, b, h) activation; the recomputed forward repeats its two
    message = seq_len * plan["micro_batch_size"] * model.dim * BF16
    tp_s = (6 if full else 4) * allreduce_s(message, cluster.levels(tp, 1)) * layers * m

    # PP: (m + p - 2) hops each way on the critical path (jax-ml/scaling-book gpus.md). With SP each TP rank
    # holds and sends only its s/tp slice of the activation (Megatron-LM's p2p shape under SP)
    pp_s = 2 * (m + pp - 2) * p2p_s(message / tp, cluster.p2p_level(tp * dp)) if pp > 1 else 0.0

    # EP: dispatch + combine, forward and backward
    ep_s = 0.0
    if model.is_moe and ep > 1:
        buffer = seq_len * plan["micro_batch_size"] // tp * model.top_k * model.dim * BF16
        moe = math.ceil(model.moe_layers / pp)
        ep_s = (6 if full else 4) * alltoall_s(buffer, cluster.levels(ep, tp)) * moe * m

    out = {"compute_s": compute, "bubble_s": compute * (pp - 1) / m, "dp_s": dp_s}
    out |= {"tp_s": tp_s, "pp_s": pp_s, "ep_s": ep_s}
    out["total_s"] = sum(out.values())
    return out
    ### END SOLUTION
