"""Two training plans, each a YAML document: the plan, and your answers to the questions about it.

You plan Llama-3 70B on 32 H100s and DeepSeek-V3 (671B, MoE) on 256, with the tools of exercises 21-23 and the
MoE refinements of README.md ("Experts across nodes"); the README works Llama-3 8B on 8 H100s as the example.
The grader recomputes every answer for YOUR plan with the reference tools and judges the plan itself: it must
be one exercise 21's planner could choose (layout rules), fit on its busiest GPU, reach the problem's MFU
floor, and not be dominated (README, "How a plan is judged"). Check: `grade exercise 24`; hints:
`grade hint 24 <part>`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from dataclasses import dataclass
from typing import Any

from coursekit.cluster import Cluster
from coursekit.models import MODELS, ModelSpec

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

# What plan(problem)'s `answers:` must contain, for any problem (other keys may be there, ungraded).
PLAN_QUESTIONS = ("dominant_overhead", "crosses_network")


@dataclass(frozen=True)
class SpecCluster(Cluster):
    """A cluster described by its numbers instead of a catalogue name, for the problems `plan` is given:
    `nodes` nodes of `gpus` GPUs, NVLink domains of `domain` GPUs (1: no NVLink), `memory_gb` per GPU (GB =
    1e9 bytes), `tflops` dense bf16 per GPU, and per-GPU bandwidths per direction in GB/s: `nvlink`, `pcie`
    (its host link) and `nic` (its share of the node's NICs). Everything of coursekit.cluster works on it
    (levels, p2p_level, aligned, allreduce_s, ...), as on Cluster("dgx_h100", nodes)."""

    node: str = "generated"
    nodes: int = 1
    gpus: int = 8
    domain: int = 8
    memory_gb: float = 80.0
    tflops: float = 989.4
    nvlink: float = 450.0
    pcie: float = 31.5
    nic: float = 50.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus < 1 or self.domain < 1 or self.gpus % self.domain:
            raise ValueError(f"not a cluster: {self}")

    gpus_per_node = property(lambda self: self.gpus)
    domain_gpus = property(lambda self: self.domain)
    gpu = property(lambda self: self.node)
    memory_bytes = property(lambda self: self.memory_gb * 1e9)
    peak_flops = property(lambda self: self.tflops * 1e12)
    nvlink_gb_s = property(lambda self: self.nvlink if self.domain > 1 else 0.0)
    pcie_gb_s = property(lambda self: self.pcie)
    nic_gb_s = property(lambda self: self.nic)


def problem_objects(problem: dict) -> tuple[ModelSpec, Cluster]:
    """The model and the cluster of a problem: a named one of PROBLEMS (model and node names) or one given to
    `plan` (model: ModelSpec fields as a dict; cluster: SpecCluster fields as a dict)."""
    model = problem["model"]
    model = MODELS[model] if isinstance(model, str) else ModelSpec.from_dict(model)
    if "cluster" in problem:
        return model, SpecCluster(**problem["cluster"])
    return model, Cluster(problem["node"], problem["nodes"])


def llama3_70b() -> str:
    """Your plan for PROBLEMS["llama3_70b"]: a YAML document (a str; a dict is accepted too) with the keys
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_70b"] (numbers, except dominant_overhead, a word, and
    crosses_network, a list of words: README, "Questions"); and, if you like, justification: prose that is
    shown with your plan and not graded."""
    ### BEGIN SOLUTION 24.llama3_70b
    # 1.13 TB of model states: every GPU must hold a slice. TP 8 fills a node's NVLink domain (TP 16 would
    # cross InfiniBand); PP 2 over nodes halves the layers per GPU; ZeRO-1 over the 2 replicas shards the
    # optimizer. 256 micro-batches keep the bubble at 0.4%; the TP all-reduces are the price (21 s).
    return """
plan: {tp: 8, pp: 2, dp: 2, ep: 1, zero_stage: 1, recompute: selective, micro_batch_size: 1,
       num_microbatches: 256}
answers:  # for this plan
  memory_gb: 66.91        # 40 layers / 8 TP ranks: 44.1 GB states (ZeRO-1 over 2) + 22.8 GB activations
  step_s: 162.3           # 140.2 compute + 0.55 bubble + 21.4 TP + 0.17 PP
  mfu: 0.346
  tp_message_mb: 134.2    # 8192 x 1 x 8192 x 2 bytes
  tp_s: 21.38             # 4 all-reduces x 40 layers x 256 micro-batches x 0.522 ms
  bubble_fraction: 0.003906  # (2 - 1) / 256
  dominant_overhead: tp
  crosses_network: [dp, pp]  # TP stays in the node; DP pairs and the two stages are in different nodes
"""
    ### END SOLUTION


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_70b, answering QUESTIONS["deepseek_v3"]."""
    ### BEGIN SOLUTION 24.deepseek_v3
    # Compute counts only the 37.6B active parameters: 9.3 s of compute per step at 40% MFU. The all-to-alls
    # of EP 64 (8 nodes) hide behind the compute of another micro-batch, so experts can go across nodes; TP
    # would split every expert and all-gather its tokens, so TP 1; ZeRO-3 gathers each layer whole, which EP
    # keeps small (1/64 of the experts); at TP 1 only full recomputation fits the activations.
    return """
plan: {tp: 1, pp: 1, dp: 256, ep: 64, zero_stage: 3, recompute: full, micro_batch_size: 1,
       num_microbatches: 4}
answers:  # for this plan
  memory_gb: 46.43        # 41.9 GB ZeRO-3 states + 0.9 GB gathered layer + 3.6 GB activations
  step_s: 12.44           # 8 N T with N = 37.6B active, at 40% MFU; nothing exposed
  mfu: 0.300
  expert_replicas: 4      # dp 256 / ep 64
  dispatch_mb: 469.8      # 4096 tokens x top-8 x 7168 x 2 bytes
  ep_s: 0.0               # 6 all-to-alls of 8.2 ms per MoE layer hide behind its 51 ms of compute
  dominant_overhead: none
  crosses_network: [dp, ep]
"""
    ### END SOLUTION


def costs(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, Any]:
    """What `plan` costs on `cluster`, as the grader counts it (README, "The step time" and "Experts across
    nodes"): memory_bytes (the busiest GPU), fits (within coursekit.budget.USABLE_MEMORY_FRACTION of its
    memory), and the step time's terms in seconds, compute_s, bubble_s, dp_s, tp_s, pp_s, ep_s, with total_s
    their sum. Use it from `plan`; your exercise 21 `memory_per_gpu` and `step_time` are where to start."""
    ### BEGIN SOLUTION 24.llama3_70b
    import math

    from coursekit.budget import MFU, USABLE_MEMORY_FRACTION
    from coursekit.cluster import allgather_s, allreduce_s, alltoall_s, p2p_s

    tp, pp, dp, ep, m = plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    mbs, zero, rc = plan["micro_batch_size"], plan["zero_stage"], plan["recompute"]
    layers = math.ceil(model.n_layers / pp)
    share = layers / model.n_layers
    dense_w = model.dense_params * share / tp  # parameters of this GPU, replicated over dp
    expert_w = model.expert_params * share / (tp * ep)  # replicated over dp / ep

    def states(n: float, over: int) -> float:  # 2 + 2 + 12 bytes, ZeRO shards 12, then 2, then 2 over `over`
        return (
            12 * n / (over if zero >= 1 else 1)
            + 2 * n / (over if zero >= 2 else 1)
            + 2 * n / (over if zero >= 3 else 1)
        )

    memory = states(dense_w, dp) + states(expert_w, dp // ep)
    if zero == 3 and model.is_moe:  # one layer gathered whole: its dense TP share, its experts' TP x EP share
        layer = model.dense_params / model.n_layers / tp + model.expert_params / model.moe_layers / (tp * ep)
        memory += 2 * layer
    s, b, h = seq_len, mbs, model.dim
    if rc == "full":
        act = 2 * s * b * h
    else:
        scores = 5 * model.n_heads * s / (h * tp) if rc == "none" else 0.0  # kept only without recomputation
        act = s * b * h * ((10 / tp if tp > 1 else 10) + 24 / tp + scores)
    memory += act * layers * min(pp, m)

    tokens = dp * mbs * m * seq_len
    flops = (8 if rc == "full" else 6) * model.active_params * tokens
    compute = flops / (cluster.world * cluster.peak_flops * MFU)
    per_mb = compute / m
    grads = [(2 * dense_w, cluster.levels(dp, tp)), (2 * expert_w, cluster.levels(dp // ep, tp * ep))]
    if zero == 3:
        dp_s = m * max(0.0, sum(3 * allgather_s(x, lv) for x, lv in grads) - per_mb)
    else:
        backward = per_mb * (6 / 8 if rc == "full" else 4 / 6)  # the last micro-batch's backward
        dp_s = max(0.0, sum(allreduce_s(x, lv) for x, lv in grads) - backward)
    passes = 6 if rc == "full" else 4
    message = 2 * s * b * h
    tp_s = passes * allreduce_s(message, cluster.levels(tp, 1)) * layers * m
    pp_s = 2 * (m + pp - 2) * p2p_s(message / tp, cluster.p2p_level(tp * dp)) if pp > 1 else 0.0
    ep_s = 0.0
    if model.is_moe:
        moe = math.ceil(model.moe_layers / pp)
        routed = s * b * model.top_k * h * 2
        if ep > 1:
            a2a = passes * alltoall_s(s * b // tp * model.top_k * h * 2, cluster.levels(ep, tp))
            ep_s = m * moe * max(0.0, a2a - per_mb / layers)
        if tp > 1:
            tp_s += m * moe * passes * allgather_s(routed, cluster.levels(tp, 1))
    limit = USABLE_MEMORY_FRACTION * cluster.memory_bytes
    out: dict[str, Any] = {"memory_bytes": memory, "fits": memory <= limit}
    out |= {"compute_s": compute, "bubble_s": compute * (pp - 1) / m, "dp_s": dp_s, "tp_s": tp_s}
    out |= {"pp_s": pp_s, "ep_s": ep_s}
    out["total_s"] = sum(v for k, v in out.items() if k.endswith("_s"))
    return out
    ### END SOLUTION


def plan(problem: dict) -> dict | str:
    """Your planner, for any problem: `problem` has the keys of PROBLEMS' values, except that the grader gives
    the model as a dict of ModelSpec fields and the cluster as a dict of SpecCluster fields under "cluster"
    (`problem_objects` turns either form into objects). The grader calls it on models and clusters you have
    not seen: sizes, layer counts, widths, experts, node counts, GPUs per node, memory and link bandwidths of
    its own. Return a document as llama3_70b's: plan (exercise 21's plan keys), answers (at least every key
    of PLAN_QUESTIONS, for the plan you return) and, if you like, justification. It is judged as the named
    plans are (README, "How a plan is judged"); a run must take seconds, not minutes."""
    ### BEGIN SOLUTION 24.llama3_70b
    # Exercise 21's search with the grader's cost model: every layout of the planner's space, every ZeRO
    # stage and recomputation policy; keep the fastest plan that fits. Nothing can be 5% faster than it, so
    # it is not dominated, and it has the best MFU any fitting plan has.
    import itertools

    from coursekit.budget import RECOMPUTE

    model, cluster = problem_objects(problem)
    batch, seq_len = problem["global_batch"], problem["seq_len"]
    best = None
    for tp in (t for t in (1, 2, 4, 8, 16) if t <= cluster.domain_gpus):
        if cluster.domain_gpus % tp or model.n_heads % tp or model.n_kv_heads % tp:
            continue
        for pp in range(1, min(model.n_layers, cluster.world // tp) + 1):
            if (cluster.world // tp) % pp:
                continue
            dp = cluster.world // (tp * pp)
            if not cluster.aligned(tp * dp):
                continue
            eps = [e for e in range(1, dp + 1) if dp % e == 0 and model.n_experts % e == 0]
            eps = eps if model.is_moe else [1]
            for ep, mbs, zero, rc in itertools.product(eps, (1, 2, 4), range(4), RECOMPUTE):
                if batch % (dp * mbs) or (model.is_moe and not cluster.aligned(tp * ep)):
                    continue
                p = dict(tp=tp, pp=pp, dp=dp, ep=ep, zero_stage=zero, recompute=rc, micro_batch_size=mbs,
                         num_microbatches=batch // (dp * mbs))  # fmt: skip
                c = costs(model, cluster, p, seq_len)
                if c["fits"] and (best is None or c["total_s"] < best[0]["total_s"]):
                    best = (c, p)
    if best is None:
        raise ValueError("no plan of the planner's space fits this cluster")
    c, p = best
    terms = {k: c[f"{k}_s"] for k in ("bubble", "dp", "tp", "pp", "ep")}
    top = max(terms, key=terms.get)
    crosses = []
    if any(lv.kind == "network" for lv in cluster.levels(p["dp"], p["tp"])):
        crosses.append("dp")
    if p["ep"] > 1 and any(lv.kind == "network" for lv in cluster.levels(p["ep"], p["tp"])):
        crosses.append("ep")
    if p["pp"] > 1 and cluster.p2p_level(p["tp"] * p["dp"]).kind == "network":
        crosses.append("pp")
    if any(lv.kind == "network" for lv in cluster.levels(p["tp"], 1)):
        crosses.append("tp")
    return {
        "plan": p,
        "answers": {"dominant_overhead": top if terms[top] > 0 else "none", "crosses_network": crosses,
                    "memory_gb": c["memory_bytes"] / 1e9, "step_s": c["total_s"]},
    }  # fmt: skip
    ### END SOLUTION
