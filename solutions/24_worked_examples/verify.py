"""Exercise 24's yardsticks: the judge checks a student's plan with these, never with the student's code.

They restate the reference of exercise 21 (solutions/21_decision_process: `is_valid`, `memory_per_gpu`,
`step_time`), which is built on exercise 22's formulas (restated below) and on exercise 23's bandwidth terms
(coursekit.cluster: 23's `collective_s(..., latency=False)`). The judge may load reference modules of its own
exercise only, hence a copy; tests/test_worked_examples_tools.py keeps it equal to exercise 21's reference on
hundreds of plans, so a change there fails a test here.

One refinement over exercise 21, for mixture-of-experts models only (README, "Experts across nodes"): the
expert all-to-alls overlap the compute of another micro-batch (DeepSeek-V3's DualPipe, arXiv 2412.19437
§3.2.1), so only what a MoE layer's compute cannot hide is exposed; and experts split by TP need every routed
token on every TP rank, an all-gather before the expert and a reduce-scatter after, which nothing hides.
Dense models get exactly exercise 21's step time. Instructor-only: students never see this file.
"""

from __future__ import annotations

import functools
import itertools
import math

from coursekit.budget import MFU, RECOMPUTE, USABLE_MEMORY_FRACTION
from coursekit.cluster import Cluster, allgather_s, allreduce_s, alltoall_s, p2p_s
from coursekit.models import ModelSpec

BF16 = 2  # bytes per weight, gradient and activation element
GB = 1e9
PLAN_KEYS = ("tp", "pp", "dp", "ep", "zero_stage", "recompute", "micro_batch_size", "num_microbatches")


# ------------------------------------------------------------------------------------------------------------
# exercise 22's formulas, judge-side (coursekit ships none: issue 18). Equal to solutions/22_memory_budget's
# training_state_bytes and activation_bytes_per_layer; an export of exercise 24 carries no other solutions/.


def training_state_bytes(num_params: float, *, zero_stage: int, dp_degree: int) -> dict[str, float]:
    """Mixed-precision Adam's 2 + 2 + 12 bytes per parameter, ZeRO stage 1/2/3 sharding the optimizer, grads,
    weights over dp_degree (Rajbhandari et al. 2020, arXiv 1910.02054, §3.1 and §5)."""
    params, grads, optimizer = 2.0 * num_params, 2.0 * num_params, 12.0 * num_params
    optimizer /= dp_degree if zero_stage >= 1 else 1
    grads /= dp_degree if zero_stage >= 2 else 1
    params /= dp_degree if zero_stage >= 3 else 1
    return {"params": params, "grads": grads, "optimizer": optimizer, "total": params + grads + optimizer}


def activation_bytes_per_layer(
    *, seq_len: int, micro_batch: int, hidden: int, n_heads: int, tp_degree: int, sequence_parallel: bool,
    recompute: str,
) -> float:  # fmt: skip
    """Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, bytes per layer and GPU."""
    s, b, h, a, t = seq_len, micro_batch, hidden, n_heads, tp_degree
    if recompute == "full":
        return 2.0 * s * b * h
    outside = 10 / t if sequence_parallel else 10
    scores = 5 * a * s / (h * t) if recompute == "none" else 0.0
    return s * b * h * (outside + 24 / t + scores)


def train_flops(active_params: float, tokens: float, recompute: str) -> float:
    """6 flops per active parameter and token (Kaplan et al. 2020, §2.1), 8 with full recomputation
    (Narayanan et al. 2021, arXiv 2104.04473, §5.1)."""
    return (8 if recompute == "full" else 6) * active_params * tokens


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


def gathered_layer_bytes(model: ModelSpec, plan: dict) -> float:
    """ZeRO-3 keeps a 1/dp slice of every weight and gathers a layer's weights whole before computing it
    (Rajbhandari et al. 2020, arXiv 1910.02054, §5.3): at its peak a GPU also holds one layer's weights,
    its TP share of the dense part and its TP x EP share of the routed experts, in bf16. The refinement over
    exercise 21 that makes sharding experts with EP matter under ZeRO-3 (README, "Experts across nodes");
    counted for MoE models only, where it is gigabytes (for a dense layer it is a fraction of a percent)."""
    dense = model.dense_params / model.n_layers / plan["tp"]
    experts = model.expert_params / model.moe_layers / (plan["tp"] * plan["ep"]) if model.is_moe else 0.0
    return BF16 * (dense + experts)


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
    if plan["zero_stage"] == 3 and model.is_moe:  # the layer being computed is gathered whole, in bf16
        out["params"] += gathered_layer_bytes(model, plan)
    out["activations"] = per_layer * layers * min(pp, plan["num_microbatches"])
    out["total"] = sum(out.values())
    out["limit"] = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out["fits"] = out["total"] <= out["limit"]
    return out


def step_time(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, float]:
    """Seconds of one step: compute at MFU, the 1F1B bubble, and the exposed dp/tp/pp/ep communication
    (bandwidth only), as exercise 21 defines them, with the MoE refinement of the module docstring; total_s
    is their sum."""
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
    passes = 6 if full else 4  # collectives per layer and micro-batch: 2 forward, 2 backward, 2 recomputed
    message = seq_len * plan["micro_batch_size"] * model.dim * BF16
    tp_s = passes * allreduce_s(message, cluster.levels(tp, 1)) * layers * m
    # PP: (m + pp - 2) hops each way; under SP each TP rank sends only its s/tp slice of the activation
    pp_s = 2 * (m + pp - 2) * p2p_s(message / tp, cluster.p2p_level(tp * dp)) if pp > 1 else 0.0
    ep_s = 0.0
    if model.is_moe:
        moe = math.ceil(model.moe_layers / pp)
        if ep > 1:  # the all-to-alls of one micro-batch hide behind a MoE layer of another
            a2a = passes * alltoall_s(dispatch_bytes(model, plan, seq_len), cluster.levels(ep, tp))
            ep_s = m * moe * max(0.0, a2a - per_mb / layers)
        if tp > 1:  # split experts: all-gather the routed tokens over TP, reduce-scatter the outputs
            routed = seq_len * plan["micro_batch_size"] * model.top_k * model.dim * BF16
            tp_s += m * moe * passes * allgather_s(routed, cluster.levels(tp, 1))
    out = {"compute_s": compute, "bubble_s": compute * (pp - 1) / m, "dp_s": dp_s}
    out |= {"tp_s": tp_s, "pp_s": pp_s, "ep_s": ep_s}
    out["total_s"] = sum(out.values())
    return out


def crosses_network(model: ModelSpec, cluster: Cluster, plan: dict) -> list[str]:
    """The parallel groups whose traffic leaves a node (crosses the NICs), sorted: of "dp" (the DP group of
    the dense weights), "ep", "pp" (between adjacent stages), "tp"."""
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    out = []
    if any(lv.kind == "network" for lv in cluster.levels(dp, tp)):
        out.append("dp")
    if model.is_moe and ep > 1 and any(lv.kind == "network" for lv in cluster.levels(ep, tp)):
        out.append("ep")
    if pp > 1 and cluster.p2p_level(tp * dp).kind == "network":
        out.append("pp")
    if any(lv.kind == "network" for lv in cluster.levels(tp, 1)):
        out.append("tp")
    return sorted(out)


OVERHEADS = ("bubble", "dp", "tp", "pp", "ep")


def dominant_overheads(time: dict[str, float], rel: float = 0.01) -> set[str]:
    """The terms of the step time other than compute that are largest (within `rel` of the largest; a set
    for near ties), or {"none"} when nothing but compute costs time."""
    terms = {k: time[f"{k}_s"] for k in OVERHEADS}
    top = max(terms.values())
    if top <= 0:
        return {"none"}
    return {k for k, v in terms.items() if v >= top * (1 - rel)}


# ------------------------------------------------------------------------------------------------------------
# plan quality: the space of plans exercise 21's planner searches, and dominance


def candidate_plans(model: ModelSpec, cluster: Cluster, global_batch: int) -> list[dict]:
    """Every valid plan of the planner's space: tp a power of two within the NVLink domain, pp dividing the
    rest, ep dividing dp, ZeRO 0-3, the three recomputation policies, micro-batches of 1, 2 or 4."""
    out = []
    for tp in (t for t in (1, 2, 4, 8, 16) if t <= cluster.domain_gpus):
        for pp in range(1, cluster.world // tp + 1):
            if (cluster.world // tp) % pp or pp > model.n_layers:
                continue
            dp = cluster.world // (tp * pp)
            eps = [e for e in range(1, dp + 1) if dp % e == 0] if model.is_moe else [1]
            for ep, mbs in itertools.product(eps, (1, 2, 4)):
                if global_batch % (dp * mbs):
                    continue
                shape = dict(tp=tp, pp=pp, dp=dp, ep=ep, zero_stage=0, recompute="none", micro_batch_size=mbs,
                             num_microbatches=global_batch // (dp * mbs))  # fmt: skip
                if layout_errors(model, cluster, global_batch, shape):  # the rules ignore ZeRO and recompute
                    continue
                out += [shape | {"zero_stage": z, "recompute": rc} for z in range(4) for rc in RECOMPUTE]
    return out


@functools.lru_cache(maxsize=8)
def frontier(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int) -> tuple:
    """(step seconds, memory bytes, plan as sorted items) of every valid plan that fits, fastest first."""
    rows = []
    for plan in candidate_plans(model, cluster, global_batch):
        memory = memory_per_gpu(model, cluster, plan, seq_len)
        if memory["fits"]:
            rows.append((step_time(model, cluster, plan, seq_len)["total_s"], memory["total"],
                         tuple(sorted(plan.items()))))  # fmt: skip
    return tuple(sorted(rows))


def dominating_plan(
    model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int, plan: dict, margin: float
) -> tuple[float, float, dict] | None:
    """A fitting plan at least `margin` faster than `plan` (step time <= (1 - margin) x its) that needs no
    more memory on its busiest GPU, as (step s, memory bytes, plan); None if there is none."""
    step = step_time(model, cluster, plan, seq_len)["total_s"]
    memory = memory_per_gpu(model, cluster, plan, seq_len)["total"]
    for other_step, other_memory, items in frontier(model, cluster, global_batch, seq_len):
        if other_step > (1 - margin) * step:
            return None
        if other_memory <= memory:
            return other_step, other_memory, dict(items)
    return None


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
        "dominant_overhead": lambda: dominant_overheads(time),
        "crosses_network": lambda: crosses_network(model, cluster, plan),
    }  # fmt: skip
    return {k: every[k]() for k in keys}
