"""A parallelism plan for people: a rich table with per-GPU memory and step time, and a memory chart.

    from coursekit.plan_report import plan_table, save_memory_chart
X
    save_memory_chart(memory, Path("plan.png"), title="Llama-3 70B on 4 x DGX H100")

Used by exercise 21's show_plan.py and exercise 24. Memory in bytes, time in seconds, as the estimators give.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

KNOBS = ("tp", "pp", "dp", "ep", "zero_stage", "recompute", "micro_batch_size", "num_microbatches")
MEMORY_PARTS = ("params", "grads", "optimizer", "activations")
TIME_PARTS = ("compute_s", "bubble_s", "dp_s", "tp_s", "pp_s", "ep_s")
GB = 1e9


def plan_table(plan: dict, memory: dict | None = None, time: dict | None = None, title: str = "") -> Table:
    """One table: each knob with its value and reason, then GB per GPU by part, then seconds per step."""
    table = Table(title=title or "plan", title_justify="left")
    for column in ("", "value", "why / share"):
        table.add_column(column)
    if not plan.get("feasible", True):
        table.add_row("feasible", "no", str(plan.get("reasons", {})))
        return table
    reasons = plan.get("reasons", {})
    for knob in KNOBS:
        if knob in plan:
            table.add_row(knob, str(plan[knob]), str(reasons.get(knob, "")))
    if memory:
        table.add_section()
        total = memory["total"]
        for part in MEMORY_PARTS:
            table.add_row(f"{part} (GB/GPU)", f"{memory[part] / GB:.2f}", f"{memory[part] / total:.0%}")
        verdict = "fits" if memory["total"] <= memory["limit"] else "DOES NOT FIT"
        table.add_row("total (GB/GPU)", f"{total / GB:.2f}", f"{verdict} in {memory['limit'] / GB:.1f}")
    if time:
        table.add_section()
        for part in TIME_PARTS:
            table.add_row(part, f"{time[part]:.3f}", f"{time[part] / time['total_s']:.1%}")
        table.add_row("total_s", f"{time['total_s']:.3f}", "per step")
    return table


def save_memory_chart(memory: dict, path: Path, title: str = "") -> Path | None:
    """A stacked bar of the per-GPU memory parts against the usable limit, as PNG at `path`; None (and no
    file) when matplotlib is not installed (it comes with the `instructor` and `dev` extras)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(5, 4))
    bottom = 0.0
    for part, color in zip(MEMORY_PARTS, ("#4C72B0", "#55A868", "#C44E52", "#8172B2"), strict=True):
        axes.bar(["per GPU"], [memory[part] / GB], bottom=bottom, label=part, color=color)
        bottom += memory[part] / GB
    axes.axhline(memory["limit"] / GB, color="black", linestyle="--", label="usable limit")
    axes.set_ylim(0, 1.35 * max(bottom, memory["limit"] / GB))  # room for the legend above the bar
    axes.set_ylabel("GB (1e9 bytes)")
    axes.set_title(title or "memory per GPU")
    axes.legend(loc="upper right", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
