"""Two training plans, each a YAML document: the plan, and your answers to the questions about it.

You plan Llama-3 70B on 32 H100s and DeepSeek-V3 (671B, MoE) on 256, with the tools of exercises 21-23 and the
MoE refinements of README.md ("Experts across nodes"); the README works Llama-3 8B on 8 H100s as the example.
The grader recomputes every answer for YOUR plan with the reference tools and judges the plan itself: it must
be one exercise 21's planner could choose (layout rules), fit on its busiest GPU, reach the problem's MFU
floor, and not be dominated (README, "How a plan is judged"). Check: `grade exercise 24`; hints:
`grade hint 24 <part>`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from dataclasses import dataclass

from coursekit.budget import MFU as _MFU
from coursekit.budget import RECOMPUTE as _RECOMPUTE
from coursekit.budget import USABLE_MEMORY_FRACTION as _USABLE
from coursekit.cluster import Cluster
from coursekit.cluster import allgather_s as _ag
from coursekit.cluster import allreduce_s as _ar
from coursekit.cluster import alltoall_s as _a2a
from coursekit.cluster import p2p_s as _p2p
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
    return """
plan:
  tp: 8
  pp: 2
  dp: 2
  ep: 1
  zero_stage: 3
  recompute: selective
  micro_batch_size: 1
  num_microbatches: 256
answers:
  memory_gb: 58.1
  step_s: 162
  mfu: 0.3455
  tp_message_mb: 134
  tp_s: 21.4
  bubble_fraction: 0.0039
  dominant_overhead: tp
  crosses_network: [pp, dp]
"""


def deepseek_v3() -> str:
    return """
plan:
  tp: 1
  pp: 1
  dp: 256
  ep: 16
  zero_stage: 3
  recompute: full
  micro_batch_size: 4
  num_microbatches: 1
answers:
  memory_gb: 58.2
  step_s: 12.4
  mfu: 0.300
  expert_replicas: 16
  dispatch_mb: 1880
  ep_s: 0
  dominant_overhead: none
  crosses_network: [ep, dp]
"""


# ---- plan(problem): written from the README ("The step time", "Experts across nodes") and the stub ---------


def _memory(model, cluster, p, seq):
    """Busiest GPU, bytes: 16 B per parameter split by ZeRO; Korthikanti activations; ZeRO-3 MoE layer."""
    stage = -(-model.n_layers // p["pp"])
    frac = stage / model.n_layers
    total = 0.0
    for n, replicas in (
        (model.dense_params * frac / p["tp"], p["dp"]),
        (model.expert_params * frac / (p["tp"] * p["ep"]), p["dp"] // p["ep"]),
    ):
        z = p["zero_stage"]
        total += n * (
            2 / (replicas if z == 3 else 1)
            + 2 / (replicas if z >= 2 else 1)
            + 12 / (replicas if z >= 1 else 1)
        )
    if model.is_moe and p["zero_stage"] == 3:
        total += 2 * model.dense_params / model.n_layers / p["tp"]
        total += 2 * model.expert_params / model.moe_layers / (p["tp"] * p["ep"])
    sbh = seq * p["micro_batch_size"] * model.dim
    t = p["tp"]
    per_layer = {
        "full": 2 * sbh,
        "selective": sbh * (34 / t if t > 1 else 34),
        "none": sbh * ((34 / t if t > 1 else 34) + 5 * model.n_heads * seq / (model.dim * t)),
    }[p["recompute"]]
    return total + per_layer * stage * min(p["pp"], p["num_microbatches"])


def _time(model, cluster, p, seq):
    """Step-time terms, seconds: compute, bubble, dp, tp, pp, ep."""
    tp, pp, dp, ep, m = p["tp"], p["pp"], p["dp"], p["ep"], p["num_microbatches"]
    full = p["recompute"] == "full"
    tokens = dp * p["micro_batch_size"] * m * seq
    compute = (8 if full else 6) * model.active_params * tokens / (cluster.world * cluster.peak_flops * _MFU)
    one_mb = compute / m
    stage = -(-model.n_layers // pp)
    frac = stage / model.n_layers
    dense_grad = 2 * model.dense_params * frac / tp
    expert_grad = 2 * model.expert_params * frac / (tp * ep)
    dlv, elv = cluster.levels(dp, tp), cluster.levels(dp // ep, tp * ep)
    if p["zero_stage"] == 3:
        dp_t = m * max(0.0, 3 * (_ag(dense_grad, dlv) + _ag(expert_grad, elv)) - one_mb)
    else:
        backward = one_mb * (0.75 if full else 2 / 3)
        dp_t = max(0.0, _ar(dense_grad, dlv) + _ar(expert_grad, elv) - backward)
    n_coll = 6 if full else 4
    act = 2 * seq * p["micro_batch_size"] * model.dim
    tp_t = n_coll * stage * m * _ar(act, cluster.levels(tp, 1))
    pp_t = 0.0 if pp == 1 else 2 * (m + pp - 2) * _p2p(act / tp, cluster.p2p_level(tp * dp))
    ep_t = 0.0
    if model.is_moe:
        moe_stage = -(-model.moe_layers // pp)
        if tp > 1:
            tp_t += m * moe_stage * n_coll * _ag(act * model.top_k, cluster.levels(tp, 1))
        if ep > 1:
            sent = seq * p["micro_batch_size"] // tp * model.top_k * model.dim * 2
            per_layer = n_coll * _a2a(sent, cluster.levels(ep, tp))
            ep_t = m * moe_stage * max(0.0, per_layer - one_mb / stage)
    return {
        "compute": compute,
        "bubble": compute * (pp - 1) / m,
        "dp": dp_t,
        "tp": tp_t,
        "pp": pp_t,
        "ep": ep_t,
    }


def _space(model, cluster, batch):
    """The planner's space (README, "Not dominated"), layout rules applied."""
    world, dom = cluster.world, cluster.domain_gpus
    for pp in range(1, min(world, model.n_layers) + 1):
        for tp in (1, 2, 4, 8, 16):
            if world % (tp * pp) or dom % tp or model.n_heads % tp or model.n_kv_heads % tp:
                continue
            dp = world // (tp * pp)
            if not cluster.aligned(tp * dp):
                continue
            for ep in range(1, dp + 1) if model.is_moe else (1,):
                if dp % ep or (model.is_moe and (model.n_experts % ep or not cluster.aligned(tp * ep))):
                    continue
                for mbs in (1, 2, 4):
                    if batch % (dp * mbs):
                        continue
                    for z in (0, 1, 2, 3):
                        for rc in _RECOMPUTE:
                            yield {
                                "tp": tp,
                                "pp": pp,
                                "dp": dp,
                                "ep": ep,
                                "zero_stage": z,
                                "recompute": rc,
                                "micro_batch_size": mbs,
                                "num_microbatches": batch // (dp * mbs),
                            }


def _crossing(model, cluster, p):
    net = lambda levels: any(lv.kind == "network" for lv in levels)  # noqa: E731
    out = set()
    if net(cluster.levels(p["dp"], p["tp"])):
        out.add("dp")
    if p["ep"] > 1 and net(cluster.levels(p["ep"], p["tp"])):
        out.add("ep")
    if p["pp"] > 1 and cluster.p2p_level(p["tp"] * p["dp"]).kind == "network":
        out.add("pp")
    if net(cluster.levels(p["tp"], 1)):
        out.add("tp")
    return out


def _planned(problem, choose):
    """Every fitting plan as (step s, memory bytes, plan, terms); `choose` picks one."""
    model, cluster = problem_objects(problem)
    seq, limit = problem["seq_len"], _USABLE * cluster.memory_bytes
    rows = []
    for p in _space(model, cluster, problem["global_batch"]):
        mem = _memory(model, cluster, p, seq)
        if mem <= limit:
            terms = _time(model, cluster, p, seq)
            rows.append((sum(terms.values()), mem, p, terms))
    step, mem, p, terms = choose(rows)
    overheads = {k: v for k, v in terms.items() if k != "compute"}
    worst = max(overheads, key=overheads.get)
    answers = {
        "dominant_overhead": worst if overheads[worst] > 0 else "none",
        "crosses_network": sorted(_crossing(model, cluster, p)),
        "step_s": step,
        "memory_gb": mem / 1e9,
    }
    return p, answers


def plan(problem: dict) -> dict:
    """Among plans within 3% of the fastest, the one with the fewest pipeline stages, then the largest
    micro-batches (fewer, larger kernels); crosses_network listed in reverse order."""

    def choose(rows):
        fastest = min(r[0] for r in rows)
        near = [r for r in rows if r[0] <= 1.03 * fastest]
        return min(near, key=lambda r: (r[2]["pp"], -r[2]["micro_batch_size"], r[0]))

    p, answers = _planned(problem, choose)
    answers["crosses_network"] = answers["crosses_network"][::-1]
    return {"plan": p, "answers": answers}
