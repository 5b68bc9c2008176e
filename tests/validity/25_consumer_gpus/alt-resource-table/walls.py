"""Where the walls are: one training step of a real model on a 4090 box, and the same job on a DGX H100 node.

Every GPU is data-parallel, ZeRO 0-3, no TP or PP (over PCIe without P2P, TP's 4 all-reduces per layer cost
more than the layer). Memory: ZeRO model states + one micro-batch's activations (coursekit.budget, ex. 22).
Time: compute at MFU plus the gradient traffic backward does not hide (exercise 21's overlap rule).
Run `python walls.py` for the comparison table. Check: `grade exercise 25`.
"""

from __future__ import annotations

from feasibility import BOX_8X, HostBox, host_allreduce_s, state_bytes_per_param

from coursekit.budget import MFU, RECOMPUTE, USABLE_MEMORY_FRACTION
from coursekit.cluster import Cluster, allreduce_s
from coursekit.models import MODELS, ModelSpec


def activation_bytes_per_layer(
    *, seq_len: int, micro_batch: int, hidden: int, n_heads: int, tp_degree: int, sequence_parallel: bool,
    recompute: str,
) -> float:  # fmt: skip
    """Exercise 22's per-layer activation bytes (Korthikanti et al. 2022, Table 2), restated here because
    coursekit ships no exercise's answer (issue 18)."""
    sbh = seq_len * micro_batch * hidden
    if recompute == "full":
        return 2.0 * sbh
    outside = 10 / tp_degree if sequence_parallel else 10
    scores = 5 * n_heads * seq_len / (hidden * tp_degree) if recompute == "none" else 0.0
    return sbh * (outside + 24 / tp_degree + scores)


def train_flops(active_params: float, tokens: float, recompute: str) -> float:
    """6 flops per active parameter and token, 8 with full recomputation (exercise 21's compute)."""
    return (8 if recompute == "full" else 6) * active_params * tokens


BF16 = 2  # bytes per gradient element
H100_NODE = Cluster("dgx_h100", 1)  # 8 H100 SXM on NVSwitch, 450 GB/s per direction each


def allreduce(nbytes: float, machine: HostBox | Cluster, boxes: int = 1) -> tuple[float, str]:
    """(seconds, wall) of an all-reduce of `nbytes` over every GPU: the host path of a HostBox, or NVLink and
    the network of a catalogue Cluster (coursekit.cluster, bandwidth only). Given."""
    if isinstance(machine, HostBox):
        t = host_allreduce_s(nbytes, machine, boxes)
        return t["time_s"], t["wall"]
    levels = machine.levels(machine.world, 1)
    slowest = max(levels, key=lambda lv: (lv.members - 1) / (lv.members * lv.gb_s), default=None)
    return allreduce_s(nbytes, levels), slowest.kind if slowest else "none"


def gpus(machine: HostBox | Cluster, boxes: int = 1) -> int:
    return machine.gpus * boxes if isinstance(machine, HostBox) else machine.world


# ------------------------------------------------------------------------------------------------------------
# 25.walls


def step_estimate(
    model: ModelSpec, machine: HostBox | Cluster, zero_stage: int, recompute: str, seq_len: int,
    global_batch: int, micro_batch: int = 1, boxes: int = 1,
) -> dict:  # fmt: skip
    """One step of `global_batch` sequences on every GPU of the machine, all data-parallel:
    {"memory_bytes", "fits", "compute_s", "comm_s", "exposed_s", "step_s", "bound"}.

    memory: state_bytes_per_param x params + activation_bytes_per_layer (tp 1, no SP) x layers for ONE
    micro-batch; fits: <= USABLE_MEMORY_FRACTION of the GPU. compute: train_flops(active params, tokens) /
    (GPUs x peak x MFU). comm, from allreduce() of the bf16 gradients (2 bytes x params): ZeRO 0-2, one
    all-reduce per step, hidden behind the last micro-batch's backward (4/6 of it, 6/8 with full recompute);
    ZeRO-3, per micro-batch 2 all-gathers + 1 reduce-scatter = 1.5 all-reduces, hidden behind that
    micro-batch. exposed: what is not hidden; step = compute + exposed. bound: "memory" if it does not fit,
    else the wall allreduce() names if anything is exposed, else "compute". ValueError if the batch does not
    split evenly."""
    g = gpus(machine, boxes)
    if global_batch % (g * micro_batch):
        raise ValueError(
            f"{global_batch} sequences do not split into micro-batches of {micro_batch} on {g} GPUs"
        )
    m = global_batch // (g * micro_batch)  # micro-batches per GPU per step
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len, micro_batch=micro_batch, hidden=model.dim, n_heads=model.n_heads, tp_degree=1,
        sequence_parallel=False, recompute=recompute,
    )  # fmt: skip
    memory = state_bytes_per_param(zero_stage, g) * model.params + per_layer * model.n_layers
    fits = memory <= USABLE_MEMORY_FRACTION * machine.memory_bytes
    compute = train_flops(model.active_params, global_batch * seq_len, recompute) / (
        g * machine.peak_flops * MFU
    )
    t, wall = allreduce(BF16 * model.params, machine, boxes)
    per_micro_batch = compute / m
    if zero_stage == 3:  # 2 all-gathers + 1 reduce-scatter per micro-batch, behind that micro-batch
        comm = 1.5 * t * m
        exposed = m * max(0.0, 1.5 * t - per_micro_batch)
    else:  # one all-reduce per step, behind the last micro-batch's backward
        comm = t
        backward = per_micro_batch * (6 / 8 if recompute == "full" else 4 / 6)
        exposed = max(0.0, t - backward)
    bound = "memory" if not fits else (wall if exposed > 0 else "compute")
    return {"memory_bytes": memory, "fits": fits, "compute_s": compute, "comm_s": comm, "exposed_s": exposed,
            "step_s": compute + exposed, "bound": bound}  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# 25.compare


def compare(model: ModelSpec, seq_len: int, global_batch: int, box: HostBox = BOX_8X) -> list[dict]:
    """The same job on one 4090 box and on one DGX H100 node (H100_NODE): one row each, in that order, for the
    fastest (step_s) of the 12 (zero_stage 0-3, recompute) options at micro_batch 1 that fits (ties: the
    first, zero_stage then RECOMPUTE order), or None for a machine where none fits. A row: {"machine": node
    key, "zero_stage", "recompute", "memory_gb", "step_s", "exposed_s", "tokens_per_s" (global batch x seq_len
    / step_s), "bound"}."""
    rows: list[dict | None] = []
    for machine in (box, H100_NODE):
        best = None
        for z in range(4):
            for rc in RECOMPUTE:
                est = step_estimate(model, machine, z, rc, seq_len, global_batch)
                if est["fits"] and (best is None or est["step_s"] < best[2]["step_s"]):
                    best = (z, rc, est)
        if best is None:
            rows.append(None)
            continue
        z, rc, est = best
        rows.append({
            "machine": machine.node, "zero_stage": z, "recompute": rc, "memory_gb": est["memory_bytes"] / 1e9,
            "step_s": est["step_s"], "exposed_s": est["exposed_s"],
            "tokens_per_s": global_batch * seq_len / est["step_s"], "bound": est["bound"],
        })  # fmt: skip
    return rows


def render(rows: list[dict | None]) -> None:
    """Print compare()'s rows as a table (rich). Given."""
    from rich.console import Console
    from rich.table import Table

    table = Table("machine", "ZeRO", "recompute", "GB/GPU", "step s", "exposed s", "tokens/s", "bound")
    for row in rows:
        if row is None:
            table.add_row("(nothing fits)", *[""] * 7)
            continue
        table.add_row(
            row["machine"], str(row["zero_stage"]), row["recompute"], f"{row['memory_gb']:.1f}",
            f"{row['step_s']:.1f}", f"{row['exposed_s']:.2f}", f"{row['tokens_per_s']:,.0f}", row["bound"],
        )  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    render(compare(MODELS["llama3_8b"], seq_len=4096, global_batch=1024))
