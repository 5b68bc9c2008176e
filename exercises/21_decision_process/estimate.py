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
    raise NotImplementedError("TODO(21.memory): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 21.step_time


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one training step: {"compute_s", "bubble_s", "dp_s", "tp_s", "pp_s", "ep_s", "total_s"}.

    compute_s: the step's training flops (forward, backward, and any recomputed forward) for the global
    batch's tokens, on every GPU at MFU x cluster.peak_flops. bubble_s: the time the 1F1B pipeline idles
    (Narayanan et al. 2021, arXiv 2104.04473, §2.2.1). dp_s, tp_s, pp_s, ep_s: the communication of each
    strategy that compute does NOT hide, from coursekit.cluster's bandwidth-only collectives over the groups
    of the layout above (traffic per strategy: README, "The yardsticks"). total_s: the sum of the six."""
    raise NotImplementedError("TODO(21.step_time): not implemented yet")
