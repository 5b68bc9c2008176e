"""A parallelism planner (alternative-correct case: among the plans within 0.5% of the fastest, the one
that needs the least memory; layouts built from divisor pairs; reasons checked most specific first).

A parallelism planner: "how do I train this model on that cluster, with this global batch?"

The decision process of the Ultra-Scale Playbook ("Finding the Best Training Configuration") and of the
scaling book's GPU chapter, in five steps: (1) fit check: can the cluster hold the model states at all?
(2) TP degree, inside one NVLink domain; (3) the DP/PP/EP split of the remaining GPUs; (4) communication
overhead: estimate_step's seconds; (5) memory verification: ZeRO stage, recomputation and micro-batch size
until the busiest GPU fits. The answer is a plan plus its reasons: for each choice, the constraint that bound
it, a claim the grader checks with its own estimators. Check: `grade exercise 21`.
"""

from __future__ import annotations

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
    usable = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    states = (2 + 2 + 4 + 4 + 4) * model.params  # bf16 weight, bf16 grad, fp32 master, m, v
    gpus = -(-states // usable)  # ceiling division on floats
    return {"state_bytes": states, "limit": usable, "min_gpus": int(gpus), "fits": gpus <= cluster.world}


# ------------------------------------------------------------------------------------------------------------
# 21.layouts


def layouts(model: ModelSpec, cluster: Cluster, global_batch: int) -> list[dict[str, int]]:
    """Steps 2 and 3: every {"tp", "pp", "dp", "ep"} that uses all GPUs (tp x pp x dp = world) and
    - keeps TP inside an NVLink domain: tp divides the domain, and the query and KV heads;
    - gives each stage a layer: pp <= n_layers; splits the global batch: dp divides it;
    - crosses the same links in every group: cluster.aligned(tp x dp), and for an MoE also (tp x ep);
    - ep = 1 for a dense model; for an MoE, ep divides dp and the number of experts.
    Sorted by (tp, pp, dp, ep)."""
    out = []
    world = cluster.world
    tps = [t for t in range(1, cluster.domain_gpus + 1) if cluster.domain_gpus % t == 0]
    for tp in (t for t in tps if model.n_heads % t == 0 and model.n_kv_heads % t == 0 and world % t == 0):
        for pp in (p for p in range(1, model.n_layers + 1) if (world // tp) % p == 0):
            dp = world // (tp * pp)
            if global_batch % dp != 0 or not cluster.aligned(tp * dp):
                continue
            if not model.is_moe:
                out.append({"tp": tp, "pp": pp, "dp": dp, "ep": 1})
                continue
            for ep in (e for e in range(1, dp + 1) if dp % e == 0 and model.n_experts % e == 0):
                if cluster.aligned(tp * ep):
                    out.append({"tp": tp, "pp": pp, "dp": dp, "ep": ep})
    return sorted(out, key=lambda x: (x["tp"], x["pp"], x["dp"], x["ep"]))


def is_valid(model: ModelSpec, cluster: Cluster, global_batch: int, plan: dict) -> bool:
    """True if `plan` has one of the layouts, a ZeRO stage 0-3, a known recomputation, and positive integer
    micro_batch_size and num_microbatches with dp x micro_batch_size x num_microbatches = global_batch."""
    try:
        layout = {k: plan[k] for k in ("tp", "pp", "dp", "ep")}
        mbs, m = plan["micro_batch_size"], plan["num_microbatches"]
    except KeyError:
        return False
    if not (type(mbs) is int and type(m) is int and mbs > 0 and m > 0):
        return False
    if plan.get("zero_stage") not in range(4) or plan.get("recompute") not in RECOMPUTE:
        return False
    return layout["dp"] * mbs * m == global_batch and layout in layouts(model, cluster, global_batch)


# ------------------------------------------------------------------------------------------------------------
# 21.plan


def plan(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int) -> dict:
    """The fastest plan (step_time's total_s) whose busiest GPU fits (memory_per_gpu), as a dict of the plan
    keys plus "feasible": True and "reasons": {knob: one of REASONS[knob], for every knob in KNOBS}.
    If nothing fits: {"feasible": False, "reasons": {"fit": "memory"}}."""
    if not fit_check(model, cluster)["fits"]:
        return {"feasible": False, "reasons": {"fit": "memory"}}
    scored = []  # (seconds, bytes, plan) of every plan that fits
    for layout in layouts(model, cluster, global_batch):
        rows = global_batch // layout["dp"]
        for mbs in (b for b in range(1, rows + 1) if rows % b == 0):
            for zero in range(4):
                for recompute in RECOMPUTE:
                    p = dict(layout, zero_stage=zero, recompute=recompute, micro_batch_size=mbs,
                             num_microbatches=rows // mbs)  # fmt: skip
                    mem = memory_per_gpu(model, cluster, p, seq_len)
                    if mem["fits"]:
                        scored.append((step_time(model, cluster, p, seq_len)["total_s"], mem["total"], p))
    if not scored:
        return {"feasible": False, "reasons": {"fit": "memory"}}
    fastest = min(t for t, _, _ in scored)
    # any plan within 0.5% of the fastest is as good by the README's yardsticks: take the leanest one
    _, _, best = min((x for x in scored if x[0] <= 1.005 * fastest), key=lambda x: (x[1], x[0]))
    reasons = {k: _binding(model, cluster, global_batch, seq_len, best, k) for k in KNOBS}
    return {**best, "feasible": True, "reasons": reasons}


def _binding(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int, p: dict, knob: str) -> str:
    """The first claim of REASONS[knob] that is true of plan `p`."""
    near = neighbours(p, knob, global_batch)
    valid = [q for q in near.values() if q is not None and is_valid(model, cluster, global_batch, q)]
    relaxed = near["relaxed"] if near["relaxed"] in valid else None
    if knob == "tp" and cluster.domain_gpus % (2 * p["tp"]):
        return "nvlink_domain"
    if knob == "tp" and (model.n_heads % (2 * p["tp"]) or model.n_kv_heads % (2 * p["tp"])):
        return "heads"
    if knob == "pp" and 2 * p["pp"] > model.n_layers:
        return "layers"
    if knob == "ep" and not model.is_moe:
        return "dense"
    if knob == "ep" and model.n_experts % (2 * p["ep"]):
        return "experts"
    if knob == "ep" and p["dp"] % (2 * p["ep"]):
        return "dp"
    if knob == "micro_batch_size" and (global_batch // p["dp"]) % (2 * p["micro_batch_size"]):
        return "batch"
    if relaxed is not None and not memory_per_gpu(model, cluster, relaxed, seq_len)["fits"]:
        return "memory"
    if not valid:
        return "forced"
    return "throughput"
