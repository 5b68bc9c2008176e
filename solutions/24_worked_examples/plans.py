"""Three training plans, each a YAML document: the plan, your answers to the questions about it, and why.

You plan Llama-3 8B on 8 H100s, Llama-3 70B on 32, and DeepSeek-V3 (671B, MoE) on 256, with the tools of
exercises 21-23. The grader recomputes every answer for YOUR plan with the reference tools, checks that the
plan is one the planner of exercise 21 could choose (layout rules), that its busiest GPU fits, and that its
model flops utilisation reaches the problem's floor. README.md walks through the first plan in full.
Check: `grade exercise 24`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from __future__ import annotations

# The problems: which model (coursekit.models.MODELS), which cluster (coursekit.cluster.Cluster(node, nodes)),
# and the batch: global_batch sequences of seq_len tokens per step (4,194,304 tokens, ground-truth.md §12).
# mfu_floor: the least model flops utilisation a plan must reach (README, "Throughput floor").
PROBLEMS = {
    "llama3_8b": {"model": "llama3_8b", "node": "dgx_h100", "nodes": 1,
                  "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.35},
    "llama3_70b": {"model": "llama3_70b", "node": "dgx_h100", "nodes": 4,
                   "global_batch": 512, "seq_len": 8192, "mfu_floor": 0.32},
    "deepseek_v3": {"model": "deepseek_v3", "node": "dgx_h100", "nodes": 32,
                    "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.25},
}  # fmt: skip

# What each plan's `answers:` must contain: the README says how to compute each one.
QUESTIONS = {
    "llama3_8b": ("memory_gb", "step_s", "mfu", "zero0_memory_gb", "dp_allreduce_s"),
    "llama3_70b": ("memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction"),
    "deepseek_v3": ("memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s"),
}


def llama3_8b() -> str:
    """Your plan for PROBLEMS["llama3_8b"]: a YAML document (a str; a dict is accepted too) with three keys.
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_8b"], a number each; justification: 10-150 words on why."""
    ### BEGIN SOLUTION 24.llama3_8b
    return """
plan: {tp: 1, pp: 1, dp: 8, ep: 1, zero_stage: 1, recompute: selective, micro_batch_size: 1,
       num_microbatches: 128}
answers:
  memory_gb: 62.42        # 44.17 GB ZeRO-1 states + 18.25 GB activations (32 layers x 34sbh)
  step_s: 63.83           # 6 x 8.03e9 x 4,194,304 / (8 x 989.4e12 x 0.40); nothing exposed
  mfu: 0.400
  zero0_memory_gb: 146.7  # plain DDP: 128.5 GB of states alone
  dp_allreduce_s: 0.06246 # 16.06 GB of bf16 grads, 2 x 7/8 x 16.06 / 450 GB/s
justification: >-
  8B fits one GPU's compute but not its memory under DDP (146.7 GB), so shard the optimizer state with
  ZeRO-1 over the 8 GPUs of the node. Selective recomputation keeps activations at 18 GB; full recomputation
  would cost a third more compute. The gradient all-reduce over NVLink takes 62 ms and hides behind the last
  micro-batch's backward, so no TP or PP is needed and the step runs at the assumed 40% MFU.
"""
    ### END SOLUTION


def llama3_70b() -> str:
    """Your plan for PROBLEMS["llama3_70b"], as for llama3_8b, answering QUESTIONS["llama3_70b"]."""
    ### BEGIN SOLUTION 24.llama3_70b
    return """
plan: {tp: 8, pp: 2, dp: 2, ep: 1, zero_stage: 1, recompute: selective, micro_batch_size: 1,
       num_microbatches: 256}
answers:
  memory_gb: 66.91        # 40 layers / 8 TP ranks: 44.1 GB states (ZeRO-1 over 2) + 22.8 GB activations
  step_s: 162.3           # 140.2 compute + 0.55 bubble + 21.4 TP + 0.17 PP
  mfu: 0.346
  tp_message_mb: 134.2    # 8192 x 1 x 8192 x 2 bytes
  tp_s: 21.38             # 4 all-reduces x 40 layers x 256 micro-batches x 0.522 ms
  bubble_fraction: 0.003906  # (2 - 1) / 256
justification: >-
  70B needs 1.13 TB of model states, so every GPU must hold a slice: TP 8 fills the NVLink domain of a node
  (TP 16 would cross InfiniBand), and PP 2 over nodes halves the layers per GPU. With 256 micro-batches the
  bubble is 0.4%. Selective recomputation fits 67 GB under the 72 GB limit; TP's 21 s of exposed all-reduces
  are the price, still above the 0.32 floor.
"""
    ### END SOLUTION


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_8b, answering QUESTIONS["deepseek_v3"]."""
    ### BEGIN SOLUTION 24.deepseek_v3
    return """
plan: {tp: 4, pp: 16, dp: 4, ep: 2, zero_stage: 2, recompute: selective, micro_batch_size: 1,
       num_microbatches: 256}
answers:
  memory_gb: 65.75        # 4 of 61 layers, split 4 ways, experts 8 ways: 50 GB states + 16 GB activations
  step_s: 11.56           # 9.33 compute (37.6B active) + bubble 0.55 + dp 0.20 + tp 0.80 + pp 0.16 + ep 0.53
  mfu: 0.323
  expert_replicas: 2      # dp 4 / ep 2
  dispatch_mb: 117.4      # 4096 / 4 tokens x top-8 x 7168 x 2 bytes
  ep_s: 0.5345
justification: >-
  671B parameters need 10.7 TB of states, so even ZeRO-1 over all 256 GPUs cannot hold them; PP 16 gives
  each stage 4 layers and TP 4 stays inside a node. EP 2 splits the routed experts, which are 97% of the
  weights, and ZeRO-2 shards grads and optimizer state over the remaining replicas. Compute counts only the
  37.6B active parameters, and the plan keeps 32% MFU.
"""
    ### END SOLUTION
