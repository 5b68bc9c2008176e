"""Two training plans, each a YAML document: the plan, and your answers to the questions about it.

You plan Llama-3 70B on 32 H100s and DeepSeek-V3 (671B, MoE) on 256, with the tools of exercises 21-23 and the
MoE refinements of README.md ("Experts across nodes"); the README works Llama-3 8B on 8 H100s as the example.
The grader recomputes every answer for YOUR plan with the reference tools and judges the plan itself: it must
be one exercise 21's planner could choose (layout rules), fit on its busiest GPU, reach the problem's MFU
floor, and not be dominated (README, "How a plan is judged"). Check: `grade exercise 24`; hints:
`grade hint 24 <part>`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from __future__ import annotations

# The problems: which model (coursekit.models.MODELS), which cluster (coursekit.cluster.Cluster(node, nodes)),
# and the batch: global_batch sequences of seq_len tokens per step (4,194,304 tokens, ground-truth.md §12).
# mfu_floor: the least model flops utilisation a plan must reach (README, "How a plan is judged").
PROBLEMS = {
    "llama3_70b": {"model": "llama3_70b", "node": "dgx_h100", "nodes": 4,
                   "global_batch": 512, "seq_len": 8192, "mfu_floor": 0.32},
    "deepseek_v3": {"model": "deepseek_v3", "node": "dgx_h100", "nodes": 32,
                    "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.27},
}  # fmt: skip

# What each plan's `answers:` must contain: the README says what each one is. EP_ONLY: asked only of a plan
# whose ep is above 1 (leave them out, or null, when ep is 1).
QUESTIONS = {
    "llama3_70b": ("memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction",
                   "dominant_overhead", "crosses_network"),
    "deepseek_v3": ("memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s",
                    "dominant_overhead", "crosses_network"),
}  # fmt: skip
EP_ONLY = ("dispatch_mb", "ep_s")


GB, MB, PEAK, MFU = 1e9, 1e6, 989.4e12, 0.40


def llama3_70b() -> dict:
    n, tokens, gpus = 70_553_706_496, 512 * 8192, 32
    compute = 6 * n * tokens / (gpus * PEAK * MFU)
    message = 8192 * 1 * 8192 * 2  # bf16 (s, b, h)
    tp_s = 4 * 2 * (7 / 8) * message / 450e9 * 80 * 128  # 4 ring all-reduces per layer, 80 layers, 128 mbs
    step = compute + tp_s
    return {
        "plan": {"tp": 8, "pp": 1, "dp": 4, "ep": 1, "zero_stage": 3, "recompute": "selective",
                 "micro_batch_size": 1, "num_microbatches": 128},
        "answers": {"memory_gb": 58.10, "step_s": step, "mfu": 6 * n * tokens / (gpus * PEAK * step),
                    "tp_message_mb": message / MB, "tp_s": tp_s, "bubble_fraction": 0,
                    "dominant_overhead": "tp", "crosses_network": ["dp"]},
        "justification": "Pure DP over nodes under ZeRO-3, TP 8 inside each node.",
    }  # fmt: skip


def deepseek_v3() -> dict:
    active, tokens, gpus = 37_552_297_472, 1024 * 4096, 256
    step = 8 * active * tokens / (gpus * PEAK * MFU)  # full recomputation, nothing exposed
    return {
        "plan": {"tp": 1, "pp": 1, "dp": 256, "ep": 32, "zero_stage": 3, "recompute": "full",
                 "micro_batch_size": 2, "num_microbatches": 2},
        "answers": {"memory_gb": 50.37, "step_s": step, "mfu": 6 * active * tokens / (gpus * PEAK * step),
                    "expert_replicas": 256 // 32, "dispatch_mb": 4096 * 2 * 8 * 7168 * 2 / MB, "ep_s": 0,
                    "dominant_overhead": "none", "crosses_network": ["ep", "dp"]},
    }  # fmt: skip
