"""The planner's two yardsticks: bytes per GPU, and seconds per training step, for one plan.

Alternative-correct case: written from the README and the stub only. Compute over the whole world.
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


def _stage_params(model: ModelSpec, plan: dict) -> tuple[float, float]:
    """(dense params on one GPU of the busiest stage, routed-expert params on it)."""
    share = stage_layers(model, plan["pp"]) / model.n_layers
    dense = model.dense_params * share / plan["tp"]
    experts = model.expert_params * share / (plan["tp"] * plan["ep"])
    return dense, experts


# which of (weights, grads, optimizer) ZeRO stage z shards over the data-parallel ranks (ZeRO §5)
_SHARDED = {0: (False, False, False), 1: (False, False, True), 2: (False, True, True), 3: (True, True, True)}
_BYTES = (2, 2, 12)  # bf16 weights, bf16 grads, fp32 master + m + v (ZeRO §3.1)


def training_state_bytes(psi: float, *, zero_stage: int, dp_degree: int) -> dict[str, float]:
    vals = [b * psi / (dp_degree if sh else 1) for b, sh in zip(_BYTES, _SHARDED[zero_stage], strict=True)]
    return dict(zip(("params", "grads", "optimizer"), vals, strict=True))


def activation_bytes_per_layer(
    *, seq_len: int, micro_batch: int, hidden: int, n_heads: int, tp_degree: int, sequence_parallel: bool,
    recompute: str,
) -> float:  # fmt: skip
    """Block by block (Korthikanti §4.1): attention 11sbh + 5as^2b, MLP 19sbh, two LayerNorms 4sbh."""
    s, b, h, a, t = seq_len, micro_batch, hidden, n_heads, tp_degree
    if recompute == "full":
        return 2.0 * s * b * h
    inside = 24 * s * b * h / t  # QKV/attention/MLP internals: sharded by TP
    outside = 10 * s * b * h / (t if sequence_parallel else 1)  # LayerNorm + dropout in/outputs
    scores = 0.0 if recompute == "selective" else 5 * a * s * s * b / t
    return inside + outside + scores


def memory_per_gpu(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict:
    """Bytes on one GPU of the busiest stage (see the stub's contract)."""
    dense, experts = _stage_params(model, plan)
    z, dp, ep = plan["zero_stage"], plan["dp"], plan["ep"]
    parts = [training_state_bytes(dense, zero_stage=z, dp_degree=dp)]
    if experts:
        parts.append(training_state_bytes(experts, zero_stage=z, dp_degree=dp // ep))
    out = {k: sum(p[k] for p in parts) for k in ("params", "grads", "optimizer")}
    in_flight = min(plan["pp"], plan["num_microbatches"])
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len, micro_batch=plan["micro_batch_size"], hidden=model.dim, n_heads=model.n_heads,
        tp_degree=plan["tp"], sequence_parallel=plan["tp"] > 1, recompute=plan["recompute"],
    )  # fmt: skip
    out["activations"] = per_layer * stage_layers(model, plan["pp"]) * in_flight
    out["total"] = out["params"] + out["grads"] + out["optimizer"] + out["activations"]
    out["limit"] = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out["fits"] = out["total"] <= out["limit"]
    return out


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one training step (see the stub's contract)."""
    tp, pp, dp, ep, m = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    mbs, full = plan["micro_batch_size"], plan["recompute"] == "full"
    tokens = seq_len * mbs * m * dp  # the global batch, in tokens
    per_token = 8 if full else 6  # 2 forward + 4 backward (+2 recomputed forward)
    compute = per_token * model.active_params * tokens / (cluster.world * cluster.peak_flops * MFU)
    bubble = compute * (pp - 1) / m
    one_mb = compute / m

    dense, experts = _stage_params(model, plan)
    dense_lv = cluster.levels(dp, tp)
    expert_lv = cluster.levels(dp // ep, tp * ep) if experts else ()
    if plan["zero_stage"] == 3:
        per_mb = 3 * (allgather_s(BF16 * dense, dense_lv) + allgather_s(BF16 * experts, expert_lv))
        dp_s = m * max(0.0, per_mb - one_mb)
    else:
        ar = allreduce_s(BF16 * dense, dense_lv) + allreduce_s(BF16 * experts, expert_lv)
        backward = one_mb * (6 / 8 if full else 4 / 6)
        dp_s = max(0.0, ar - backward)

    act = BF16 * seq_len * mbs * model.dim
    layers = stage_layers(model, pp)
    tp_s = layers * m * (6 if full else 4) * allreduce_s(act, cluster.levels(tp, 1))
    pp_s = 2 * (m + pp - 2) * p2p_s(act / tp, cluster.p2p_level(tp * dp)) if pp > 1 else 0.0
    ep_s = 0.0
    if model.is_moe and ep > 1:
        moe = math.ceil(model.moe_layers / pp)
        nbytes = seq_len * mbs / tp * model.top_k * model.dim * BF16
        ep_s = moe * m * (6 if full else 4) * alltoall_s(nbytes, cluster.levels(ep, tp))
    total = compute + bubble + dp_s + tp_s + pp_s + ep_s
    return {"compute_s": compute, "bubble_s": bubble, "dp_s": dp_s, "tp_s": tp_s, "pp_s": pp_s,
            "ep_s": ep_s, "total_s": total}  # fmt: skip
