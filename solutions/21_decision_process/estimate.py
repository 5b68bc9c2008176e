"""The planner's two yardsticks: bytes per GPU, and seconds per training step, for one plan.

A plan is a dict: tp, pp, dp, ep, zero_stage (0-3), micro_batch_size, num_microbatches, recompute ("none",
"selective", "full"). Global batch = dp x micro_batch_size x num_microbatches sequences of seq_len tokens.
Ranks are laid out TP fastest, then DP, then PP (Megatron-LM's default order); EP groups are ep consecutive DP
ranks. The busiest pipeline stage holds ceil(L/pp) of the L layers and sets both memory and time.
Memory: model states under ZeRO plus the activations kept for backward (the model of exercise 22's README).
Time: compute at the assumed MFU, the pipeline bubble, and each strategy's communication that nothing hides,
bandwidth only (coursekit.cluster; exercise 23 adds latency and buckets). Check: `grade exercise 21`.
"""

from __future__ import annotations

import math

from coursekit.budget import MFU, USABLE_MEMORY_FRACTION
from coursekit.cluster import Cluster, allgather_s, allreduce_s, alltoall_s, p2p_s
from coursekit.models import ModelSpec

BF16 = 2  # bytes per weight, gradient and activation element


def stage_layers(model: ModelSpec, pp: int) -> int:
    """Layers on the busiest pipeline stage (Llama-3 405B over 16 stages: 8 of 126)."""
    return math.ceil(model.n_layers / pp)


# ------------------------------------------------------------------------------------------------------------
# 21.memory


def memory_per_gpu(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict:
    """Bytes on one GPU of the busiest pipeline stage: {"params", "grads", "optimizer", "activations",
    "total", "limit", "fits"}.

    params, grads, optimizer: the model states (bf16 weights, bf16 gradients, fp32 Adam state) of the layers
    this GPU's stage holds, after tensor, pipeline and expert parallelism and the plan's ZeRO stage (ZeRO,
    arXiv 1910.02054, §3.1 and §5). Dense parameters are replicated over the whole DP group; a routed expert
    only over the DP ranks that hold that same expert. activations: what the stage keeps for backward at
    its busiest moment under 1F1B, sequence parallelism on whenever tp > 1 (Korthikanti et al. 2022, arXiv
    2205.05198, a GPT-style layer). limit: USABLE_MEMORY_FRACTION of cluster.memory_bytes. total: the sum of
    the four; fits: total <= limit."""
    ### BEGIN SOLUTION 21.memory
    tp, pp, dp, ep, zero = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["zero_stage"]
    layers = stage_layers(model, pp)
    share = layers / model.n_layers

    def states(psi: float, shards: int) -> dict[str, float]:
        # ZeRO §3.1: 2 bf16 weights + 2 bf16 grads + K = 12 fp32 (master, m, v) bytes per parameter; §5:
        # stage 1 shards the optimizer state over the DP ranks, stage 2 the grads too, stage 3 the weights too
        return {
            "params": 2 * psi / (shards if zero >= 3 else 1),
            "grads": 2 * psi / (shards if zero >= 2 else 1),
            "optimizer": 12 * psi / (shards if zero >= 1 else 1),
        }

    dense = states(model.dense_params * share / tp, dp)
    # each expert lives on dp/ep GPUs of the DP group (one per EP group): ZeRO shards it over those
    experts = states(model.expert_params * share / (tp * ep), dp // ep)
    out = {k: dense[k] + experts[k] for k in ("params", "grads", "optimizer")}

    # Korthikanti et al. 2022 Table 2, bytes per layer: sbh(34 + 5as/h) without parallelism; TP shards the
    # 24sbh inside its regions and the 5as^2b scores, SP the 10sbh of LayerNorm/dropout; selective
    # recomputation drops the scores term; full recomputation keeps the 2sbh layer input only
    s, b, h, a = seq_len, plan["micro_batch_size"], model.dim, model.n_heads
    if plan["recompute"] == "full":
        per_layer = 2 * s * b * h
    else:
        scores = 5 * a * s / (h * tp) if plan["recompute"] == "none" else 0.0
        per_layer = s * b * h * (34 / tp + scores)  # SP is on whenever tp > 1: all 34 sbh sharded
    in_flight = min(pp, plan["num_microbatches"])  # 1F1B warm-up: stage 0 runs p forwards before a backward
    out["activations"] = per_layer * layers * in_flight
    out["total"] = sum(out.values())
    out["limit"] = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out["fits"] = out["total"] <= out["limit"]
    return out
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 21.step_time


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one training step: {"compute_s", "bubble_s", "dp_s", "tp_s", "pp_s", "ep_s", "total_s"}.

    compute_s: the step's training flops (forward, backward, and any recomputed forward) for the global
    batch's tokens, on every GPU at MFU x cluster.peak_flops. bubble_s: the time the 1F1B pipeline idles
    (Narayanan et al. 2021, arXiv 2104.04473, §2.2.1). dp_s, tp_s, pp_s, ep_s: the communication of each
    strategy that compute does NOT hide, from coursekit.cluster's bandwidth-only collectives over the groups
    of the layout above (traffic per strategy: README, "The yardsticks"). total_s: the sum of the six."""
    ### BEGIN SOLUTION 21.step_time
    tp, pp, dp, ep, m = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    full = plan["recompute"] == "full"
    tokens = dp * plan["micro_batch_size"] * m * seq_len
    # Kaplan et al. 2020 §2.1: 2 flops per active parameter and token forward + 4 backward; full
    # recomputation runs the forward again: 8 (Narayanan et al. 2021 §5.1, "8TP/(nX)")
    flops = (8 if full else 6) * model.active_params * tokens
    compute = flops / (cluster.world * cluster.peak_flops * MFU)
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
