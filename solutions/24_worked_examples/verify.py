"""Exercise 24's yardsticks: the judge checks a student's plan with these, never with the student's code.

They restate the reference of exercise 21 (solutions/21_decision_process: `is_valid`, `memory_per_gpu`,
`step_time`), which is built on exercise 22's formulas (coursekit.budget) and on exercise 23's bandwidth terms
(coursekit.cluster: 23's `collective_s(..., latency=False)`). The judge may load reference modules of its own
exercise only, hence a copy; tests/test_worked_examples_tools.py keeps it equal to exercise 21's reference on
hundreds of plans, so a change there fails a test here. Instructor-only: students never see this file.
"""

from __future__ import annotations

import math

from coursekit.budget import (
    MFU,
    RECOMPUTE,
    USABLE_MEMORY_FRACTION,
    activation_bytes_per_layer,
    train_flops,
    training_state_bytes,
)
from coursekit.cluster import Cluster, allgather_s, allreduce_s, alltoall_s, p2p_s
from coursekit.models import ModelSpec

BF16 = 2  # bytes per weight, gradient and activation element
GB = 1e9
PLAN_KEYS = ("tp", "pp", "dp", "ep", "zero_stage", "recompute", "micro_batch_size", "num_microbatches")


# ------------------------------------------------------------------------------------------------------------
# is the plan one exercise 21's planner could have chosen? (21's layouts + is_valid, with reasons)


def layout_errors(model: ModelSpec, cluster: Cluster, global_batch: int, plan: dict) -> list[str]:
    """Every rule of exercise 21's `layouts`/`is_valid` that `plan` breaks, in words; [] if it is valid."""
    ints = [k for k in PLAN_KEYS if k != "recompute"]
    bad = [k for k in ints if type(plan.get(k)) is not int or plan[k] < (0 if k == "zero_stage" else 1)]
    if bad:
        return [f"{k} must be a positive integer (zero_stage: 0-3), got {plan.get(k)!r}" for k in bad]
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    mbs, m = plan["micro_batch_size"], plan["num_microbatches"]
    world, domain = cluster.world, cluster.domain_gpus
    rules = [
        (tp * pp * dp == world, f"tp x pp x dp = {tp * pp * dp}, not the cluster's {world} GPUs"),
        (domain % tp == 0, f"tp {tp} does not divide the NVLink domain ({domain} GPUs)"),
        (model.n_heads % tp == 0 and model.n_kv_heads % tp == 0, f"tp {tp} splits an attention head"),
        (pp <= model.n_layers, f"pp {pp} leaves a stage without a layer ({model.n_layers} layers)"),
        (cluster.aligned(tp * dp), "TP x DP blocks straddle nodes unevenly"),
        (model.is_moe or ep == 1, "ep must be 1 for a dense model"),
        (dp % ep == 0, f"ep {ep} does not divide dp {dp}"),
        (not model.is_moe or model.n_experts % ep == 0, f"ep {ep} does not divide the experts"),
        (not model.is_moe or cluster.aligned(tp * ep), "TP x EP blocks straddle nodes unevenly"),
        (plan["zero_stage"] in (0, 1, 2, 3), f"zero_stage must be 0-3, got {plan['zero_stage']}"),
        (plan.get("recompute") in RECOMPUTE, f"recompute must be one of {RECOMPUTE}"),
        (dp * mbs * m == global_batch, f"dp x micro_batch_size x num_microbatches = {dp * mbs * m}, "
         f"not the global batch of {global_batch}"),
    ]  # fmt: skip
    return [message for ok, message in rules if not ok]


# ------------------------------------------------------------------------------------------------------------
# memory and time of one plan: exercise 21's estimate.py


def stage_layers(model: ModelSpec, pp: int) -> int:
    return math.ceil(model.n_layers / pp)


def memory_per_gpu(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict:
    """Bytes on one GPU of the busiest stage: params, grads, optimizer (ZeRO over dp, experts over dp/ep),
    activations (Korthikanti, SP whenever tp > 1, min(pp, m) micro-batches in flight), total, limit, fits."""
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    layers = stage_layers(model, pp)
    share = layers / model.n_layers
    dense = training_state_bytes(model.dense_params * share / tp, zero_stage=plan["zero_stage"], dp_degree=dp)
    experts = training_state_bytes(
        model.expert_params * share / (tp * ep), zero_stage=plan["zero_stage"], dp_degree=dp // ep
    )
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len, micro_batch=plan["micro_batch_size"], hidden=model.dim, n_heads=model.n_heads,
        tp_degree=tp, sequence_parallel=tp > 1, recompute=plan["recompute"],
    )  # fmt: skip
    out = {k: dense[k] + experts[k] for k in ("params", "grads", "optimizer")}
    out["activations"] = per_layer * layers * min(pp, plan["num_microbatches"])
    out["total"] = sum(out.values())
    out["limit"] = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out["fits"] = out["total"] <= out["limit"]
    return out


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one step: compute at MFU, the 1F1B bubble, and the exposed dp/tp/pp/ep communication
    (bandwidth only), as exercise 21 defines them; total_s is their sum."""
    tp, pp, dp, ep, m = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    full = plan["recompute"] == "full"
    tokens = dp * plan["micro_batch_size"] * m * seq_len
    compute = train_flops(model.active_params, tokens, plan["recompute"]) / (
        cluster.world * cluster.peak_flops * MFU
    )
    per_mb = compute / m
    layers = stage_layers(model, pp)
    share = layers / model.n_layers
    groups = [
        (BF16 * model.dense_params * share / tp, cluster.levels(dp, tp)),
        (BF16 * model.expert_params * share / (tp * ep), cluster.levels(dp // ep, tp * ep)),
    ]
    if plan["zero_stage"] == 3:  # 2 all-gathers + 1 reduce-scatter per micro-batch, hidden behind it
        dp_s = m * max(0.0, sum(3 * allgather_s(nbytes, lv) for nbytes, lv in groups) - per_mb)
    else:  # one all-reduce, hidden behind the last micro-batch's backward
        dp_s = max(
            0.0, sum(allreduce_s(nbytes, lv) for nbytes, lv in groups) - per_mb * (6 / 8 if full else 4 / 6)
        )
    message = seq_len * plan["micro_batch_size"] * model.dim * BF16
    tp_s = (6 if full else 4) * allreduce_s(message, cluster.levels(tp, 1)) * layers * m
    # PP: (m + pp - 2) hops each way; under SP each TP rank sends only its s/tp slice of the activation
    pp_s = 2 * (m + pp - 2) * p2p_s(message / tp, cluster.p2p_level(tp * dp)) if pp > 1 else 0.0
    ep_s = 0.0
    if model.is_moe and ep > 1:
        moe = math.ceil(model.moe_layers / pp)
        ep_s = (
            (6 if full else 4)
            * alltoall_s(dispatch_bytes(model, plan, seq_len), cluster.levels(ep, tp))
            * moe
            * m
        )
    out = {"compute_s": compute, "bubble_s": compute * (pp - 1) / m, "dp_s": dp_s}
    out |= {"tp_s": tp_s, "pp_s": pp_s, "ep_s": ep_s}
    out["total_s"] = sum(out.values())
    return out


# ------------------------------------------------------------------------------------------------------------
# the answers a plan's YAML must give (exercises/24_worked_examples/README.md, "Questions")


def dispatch_bytes(model: ModelSpec, plan: dict, seq_len: int) -> float:
    """What one GPU sends in one dispatch all-to-all (one MoE layer, one micro-batch), bf16, before any
    de-duplication: its seq_len x mbs / tp tokens (SP splits them over TP) x top_k copies x dim (DeepEP
    README; ground-truth.md §10.5: 8192 tokens -> 939.5 MB)."""
    return seq_len * plan["micro_batch_size"] // plan["tp"] * model.top_k * model.dim * BF16


def mfu(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> float:
    """Model flops utilisation: 6 x active params x tokens per step / (GPUs x peak x step time). Recomputed
    forwards do not count (Chowdhery et al. 2022, PaLM, arXiv 2204.02311, Appendix B)."""
    tokens = plan["dp"] * plan["micro_batch_size"] * plan["num_microbatches"] * seq_len
    useful = train_flops(model.active_params, tokens, "none")  # 6 N T
    return useful / (cluster.world * cluster.peak_flops * step_time(model, cluster, plan, seq_len)["total_s"])


def answers(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, keys: tuple[str, ...]) -> dict:
    """The right answer to each question in `keys` about `plan` (units in the names: GB 1e9 B, MB 1e6 B)."""
    memory = memory_per_gpu(model, cluster, plan, seq_len)
    time = step_time(model, cluster, plan, seq_len)
    tp, pp, dp = plan["tp"], plan["pp"], plan["dp"]
    ddp = plan | {"zero_stage": 0}  # the same plan without ZeRO
    grads = BF16 * model.dense_params * stage_layers(model, pp) / model.n_layers / tp
    every = {
        "memory_gb": lambda: memory["total"] / GB,
        "step_s": lambda: time["total_s"],
        "mfu": lambda: mfu(model, cluster, plan, seq_len),
        "zero0_memory_gb": lambda: memory_per_gpu(model, cluster, ddp, seq_len)["total"] / GB,
        "dp_allreduce_s": lambda: allreduce_s(grads, cluster.levels(dp, tp)),
        "tp_message_mb": lambda: seq_len * plan["micro_batch_size"] * model.dim * BF16 / 1e6,
        "tp_s": lambda: time["tp_s"],
        "bubble_fraction": lambda: (pp - 1) / plan["num_microbatches"],
        "expert_replicas": lambda: dp // plan["ep"],
        "dispatch_mb": lambda: dispatch_bytes(model, plan, seq_len) / 1e6,
        "ep_s": lambda: time["ep_s"],
    }  # fmt: skip
    return {k: every[k]() for k in keys}
