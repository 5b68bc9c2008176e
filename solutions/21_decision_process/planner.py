"""A parallelism planner: "how do I train this model on that cluster, with this global batch?"

The decision process of the Ultra-Scale Playbook ("Finding the Best Training Configuration") and of the
scaling book's GPU chapter, in five steps: (1) fit check: can the cluster hold the model states at all?
(2) TP degree, inside one NVLink domain; (3) the DP/PP/EP split of the remaining GPUs; (4) communication
overhead: estimate_step's seconds; (5) memory verification: ZeRO stage, recomputation and micro-batch size
until the busiest GPU fits. The answer is a plan plus its reasons: for each choice, the constraint that bound
it, a claim the grader checks with its own estimators. Check: `grade exercise 21`.
"""

from __future__ import annotations

import itertools
import math

from estimate import memory_per_gpu, step_time

from coursekit.budget import RECOMPUTE, USABLE_MEMORY_FRACTION
from coursekit.cluster import Cluster
from coursekit.models import ModelSpec

KNOBS = ("tp", "pp", "ep", "zero_stage", "recompute", "micro_batch_size")
# What may bind each choice (README, "Reasons"); the grader checks that the claim you make is true.
REASONS = {
    "tp": ("nvlink_domain", "heads", "memory", "forced", "throughput"),
    "pp": ("layers", "memory", "forced", "throughput"),
    "ep": ("dense", "experts", "dp", "memory", "forced", "throughput"),
    "zero_stage": ("memory", "forced", "throughput"),
    "recompute": ("memory", "forced", "throughput"),
    "micro_batch_size": ("batch", "memory", "forced", "throughput"),
}
THROUGHPUT_TOLERANCE = 0.01  # "throughput": no valid neighbour that fits is more than 1% faster


def neighbours(plan: dict, knob: str, global_batch: int) -> dict[str, dict | None]:
    """The plans one step away along `knob`: "relaxed" needs more memory per GPU (less sharding, lighter
    recomputation, bigger micro-batches), "tightened" less. dp absorbs a change of tp or pp, and the number
    of micro-batches follows from the global batch. None where the step leaves the integers or 0-3."""
    p = dict(plan)
    steps = {
        "tp": [{"tp": p["tp"] / 2, "dp": p["dp"] * 2}, {"tp": p["tp"] * 2, "dp": p["dp"] / 2}],
        "pp": [{"pp": p["pp"] / 2, "dp": p["dp"] * 2}, {"pp": p["pp"] * 2, "dp": p["dp"] / 2}],
        "ep": [{"ep": p["ep"] / 2}, {"ep": p["ep"] * 2}],
        "zero_stage": [{"zero_stage": p["zero_stage"] - 1}, {"zero_stage": p["zero_stage"] + 1}],
        "micro_batch_size": [{"micro_batch_size": p["micro_batch_size"] * k} for k in (2, 0.5)],
    }
    if knob == "recompute":
        i = RECOMPUTE.index(p["recompute"])
        steps[knob] = [{"recompute": RECOMPUTE[j]} if 0 <= j < 3 else None for j in (i - 1, i + 1)]
    out = {}
    for name, change in zip(("relaxed", "tightened"), steps[knob], strict=True):
        if change is None or any(isinstance(v, float) and not v.is_integer() for v in change.values()):
            out[name] = None
            continue
        q = p | {k: int(v) if isinstance(v, float) else v for k, v in change.items()}
        q["num_microbatches"] = global_batch / (q["dp"] * q["micro_batch_size"])
        ok = q["num_microbatches"].is_integer() and 0 <= q["zero_stage"] <= 3 and min(q["tp"], q["pp"]) >= 1
        out[name] = q | {"num_microbatches": int(q["num_microbatches"])} if ok else None
    return out


# ------------------------------------------------------------------------------------------------------------
# 21.fit_check


def fit_check(model: ModelSpec, cluster: Cluster) -> dict:
    """Step 1: can the cluster hold the model states at all, fully sharded? {"state_bytes": the bytes of
    mixed-precision Adam's model states for every parameter (ZeRO §3.1), "limit": the usable bytes of one GPU,
    "min_gpus": the fewest GPUs whose usable memory holds them, "fits": whether the cluster has that many}.
    Activations come later."""
    ### BEGIN SOLUTION 21.fit_check
    state = 16 * model.params  # 2 bf16 weights + 2 bf16 grads + 12 fp32 master/m/v (ZeRO §3.1)
    limit = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    min_gpus = math.ceil(state / limit)
    return {"state_bytes": state, "limit": limit, "min_gpus": min_gpus, "fits": min_gpus <= cluster.world}
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 21.layouts


def layouts(model: ModelSpec, cluster: Cluster, global_batch: int) -> list[dict[str, int]]:
    """Steps 2 and 3: every {"tp", "pp", "dp", "ep"} that uses all GPUs (tp x pp x dp = world) and
    - keeps TP inside an NVLink domain: tp divides the domain, and the query and KV heads;
    - gives each stage a layer: pp <= n_layers; splits the global batch: dp divides it;
    - crosses the same links in every group: cluster.aligned(tp x dp), and for an MoE also (tp x ep);
    - ep = 1 for a dense model; for an MoE, ep divides dp and the number of experts.
    Sorted by (tp, pp, dp, ep)."""
    ### BEGIN SOLUTION 21.layouts
    out = []
    for tp in range(1, cluster.world + 1):
        if cluster.domain_gpus % tp or model.n_heads % tp or model.n_kv_heads % tp:
            continue  # a TP group would straddle NVLink domains (RTX 4090: a domain of 1), or split a head
        for pp in range(1, min(model.n_layers, cluster.world // tp) + 1):
            if cluster.world % (tp * pp):
                continue
            dp = cluster.world // (tp * pp)
            if global_batch % dp or not cluster.aligned(tp * dp):
                continue
            for ep in range(1, dp + 1) if model.is_moe else [1]:
                if dp % ep == 0 and (
                    not model.is_moe or (model.n_experts % ep == 0 and cluster.aligned(tp * ep))
                ):
                    out.append({"tp": tp, "pp": pp, "dp": dp, "ep": ep})
    return out
    ### END SOLUTION


def is_valid(model: ModelSpec, cluster: Cluster, global_batch: int, plan: dict) -> bool:
    """True if `plan` has one of the layouts, a ZeRO stage 0-3, a known recomputation, and positive integer
    micro_batch_size and num_microbatches with dp x micro_batch_size x num_microbatches = global_batch."""
    ### BEGIN SOLUTION 21.layouts
    layout = {k: plan.get(k) for k in ("tp", "pp", "dp", "ep")}
    mbs, m = plan.get("micro_batch_size"), plan.get("num_microbatches")
    return (
        layout in layouts(model, cluster, global_batch)
        and plan.get("zero_stage") in (0, 1, 2, 3)
        and plan.get("recompute") in RECOMPUTE
        and all(type(x) is int and x >= 1 for x in (mbs, m))
        and plan["dp"] * mbs * m == global_batch
    )
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 21.plan


def plan(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int) -> dict:
    """The fastest plan (step_time's total_s) whose busiest GPU fits (memory_per_gpu), as a dict of the plan
    keys plus "feasible": True and "reasons": {knob: one of REASONS[knob], for every knob in KNOBS}.
    If nothing fits: {"feasible": False, "reasons": {"fit": "memory"}}."""
    ### BEGIN SOLUTION 21.plan
    infeasible = {"feasible": False, "reasons": {"fit": "memory"}}
    if not fit_check(model, cluster)["fits"]:
        return infeasible  # step 1: not even the fully sharded model states fit
    best, best_key = None, None
    for layout in layouts(model, cluster, global_batch):  # steps 2 and 3
        per_replica = global_batch // layout["dp"]
        sizes = [b for b in range(1, per_replica + 1) if per_replica % b == 0]
        for zero, recompute, mbs in itertools.product(range(4), RECOMPUTE, sizes):
            p = layout | {"zero_stage": zero, "recompute": recompute, "micro_batch_size": mbs}
            p["num_microbatches"] = per_replica // mbs
            memory = memory_per_gpu(model, cluster, p, seq_len)  # step 5: verify memory
            if not memory["fits"]:
                continue
            key = (step_time(model, cluster, p, seq_len)["total_s"], memory["total"])  # step 4
            if best_key is None or key < best_key:
                best, best_key = p, key
    if best is None:
        return infeasible  # the states fit, but never with the activations
    reasons = {k: _binding(model, cluster, global_batch, seq_len, best, k) for k in KNOBS}
    return best | {"feasible": True, "reasons": reasons}
    ### END SOLUTION


def _binding(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int, p: dict, knob: str) -> str:
    """The first claim of REASONS[knob] that is true of plan `p`."""
    ### BEGIN SOLUTION 21.plan
    steps = neighbours(p, knob, global_batch)
    valid = {k: q for k, q in steps.items() if q is not None and is_valid(model, cluster, global_batch, q)}
    relaxed = valid.get("relaxed")
    t, e = 2 * p["tp"], 2 * p["ep"]
    claims = {
        "nvlink_domain": cluster.domain_gpus % t != 0,  # twice the TP would leave the NVLink domain
        "heads": model.n_heads % t != 0 or model.n_kv_heads % t != 0,
        "layers": 2 * p["pp"] > model.n_layers,
        "dense": not model.is_moe,
        "experts": model.is_moe and model.n_experts % e != 0,
        "dp": model.is_moe and p["dp"] % e != 0,
        "batch": (global_batch // p["dp"]) % (2 * p["micro_batch_size"]) != 0,
        "memory": relaxed is not None and not memory_per_gpu(model, cluster, relaxed, seq_len)["fits"],
        "forced": not valid,  # no valid plan one step away: the layout rules left no choice
    }
    for reason in REASONS[knob]:
        if reason != "throughput" and claims[reason]:
            return reason
    return "throughput"  # the search found nothing faster, so no neighbour that fits is
    ### END SOLUTION
