"""Where the walls are: one training step of a real model on a 4090 box, and the same job on a DGX H100 node.

Every GPU is data-parallel, ZeRO 0-3, no TP or PP (over PCIe without P2P, TP's 4 all-reduces per layer cost
more than the layer). Memory: ZeRO model states + one micro-batch's activations (exercise 22's model).
Time: compute at MFU plus the gradient traffic backward does not hide (exercise 21's overlap rule).
Run `python walls.py` for the comparison table. Check: `grade exercise 25`.
"""

from __future__ import annotations

from feasibility import BOX_8X, HostBox, host_allreduce_s, state_bytes_per_param

from coursekit.budget import MFU, RECOMPUTE, USABLE_MEMORY_FRACTION
from coursekit.cluster import Cluster, allreduce_s
from coursekit.models import MODELS, ModelSpec

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
    """One training step of `global_batch` sequences of `seq_len` tokens on every GPU of the machine (a
    HostBox x `boxes`, or a catalogue Cluster), every GPU data-parallel at ZeRO stage `zero_stage`, no TP or
    PP, micro-batches of `micro_batch` sequences, recomputation `recompute` (coursekit.budget.RECOMPUTE):
    {"memory_bytes", "fits", "compute_s", "comm_s", "exposed_s", "step_s", "bound"}.

    memory_bytes: what one GPU holds at its peak (model states as ZeRO leaves them, activations as exercise 22
    counts them for one layer, tp 1 and no SP); fits: within USABLE_MEMORY_FRACTION of the GPU's memory.
    compute_s: the step's training flops at the course's MFU (exercises 21 and 24). comm_s: all the gradient
    and weight traffic of the step, priced with allreduce() (given); exposed_s: the part of it compute does
    not hide, by exercise 21's overlap rule; step_s = compute_s + exposed_s. bound: "memory" when the plan
    does not fit, else the wall allreduce() names when anything is exposed, else "compute". ValueError when
    the batch does not split into the same whole number of micro-batches on every GPU."""
    raise NotImplementedError("TODO(25.walls): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 25.compare


def compare(model: ModelSpec, seq_len: int, global_batch: int, box: HostBox = BOX_8X) -> list[dict]:
    """The same job on one 4090 box and on one DGX H100 node (H100_NODE): one row each, in that order, for the
    fastest (step_s) of the 12 (zero_stage 0-3, recompute) options at micro_batch 1 that fits (ties: the
    first, zero_stage then RECOMPUTE order), or None for a machine where none fits. A row: {"machine": node
    key, "zero_stage", "recompute", "memory_gb", "step_s", "exposed_s", "tokens_per_s" (global batch x seq_len
    / step_s), "bound"}."""
    raise NotImplementedError("TODO(25.compare): not implemented yet")


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
