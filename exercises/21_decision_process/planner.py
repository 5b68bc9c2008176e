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
    raise NotImplementedError("TODO(21.fit_check): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 21.layouts


def layouts(model: ModelSpec, cluster: Cluster, global_batch: int) -> list[dict[str, int]]:
    """Steps 2 and 3: every {"tp", "pp", "dp", "ep"} that uses all GPUs (tp x pp x dp = world) and
    - keeps TP inside an NVLink domain: tp divides the domain, and the query and KV heads;
    - gives each stage a layer: pp <= n_layers; splits the global batch: dp divides it;
    - crosses the same links in every group: cluster.aligned(tp x dp), and for an MoE also (tp x ep);
    - ep = 1 for a dense model; for an MoE, ep divides dp and the number of experts.
    Sorted by (tp, pp, dp, ep)."""
    raise NotImplementedError("TODO(21.layouts): not implemented yet")


def is_valid(model: ModelSpec, cluster: Cluster, global_batch: int, plan: dict) -> bool:
    """True if `plan` has one of the layouts, a ZeRO stage 0-3, a known recomputation, and positive integer
    micro_batch_size and num_microbatches with dp x micro_batch_size x num_microbatches = global_batch."""
    raise NotImplementedError("TODO(21.layouts): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 21.plan


def plan(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int) -> dict:
    """The fastest plan (step_time's total_s) whose busiest GPU fits (memory_per_gpu), as a dict of the plan
    keys plus "feasible": True and "reasons": {knob: one of REASONS[knob], for every knob in KNOBS}.
    If nothing fits: {"feasible": False, "reasons": {"fit": "memory"}}."""
    raise NotImplementedError("TODO(21.plan): not implemented yet")


def _binding(model: ModelSpec, cluster: Cluster, global_batch: int, seq_len: int, p: dict, knob: str) -> str:
    """The first claim of REASONS[knob] that is true of plan `p`."""
    raise NotImplementedError("TODO(21.plan): not implemented yet")
