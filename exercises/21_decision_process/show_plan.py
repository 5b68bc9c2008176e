"""Show the plan YOUR planner picks, as a table with its memory and time breakdown, and save a memory chart.

    python exercises/21_decision_process/show_plan.py llama3_70b dgx_h100 4 --batch 1024 --seq 4096

Models: coursekit.models.MODELS; nodes: coursekit/hardware.yml `nodes`. The chart goes to
plan_<model>_<node>x<nodes>.png in the current directory (needs matplotlib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from coursekit.cluster import Cluster
from coursekit.models import MODELS
from coursekit.plan_report import plan_table, save_memory_chart

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this folder's estimate.py and planner.py

import estimate
import planner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("node", help="a node of coursekit/hardware.yml, e.g. dgx_h100")
    parser.add_argument("nodes", type=int)
    parser.add_argument("--batch", type=int, default=1024, help="global batch, in sequences")
    parser.add_argument("--seq", type=int, default=4096, help="tokens per sequence")
    args = parser.parse_args()
    model, cluster = MODELS[args.model], Cluster(args.node, args.nodes)
    plan = planner.plan(model, cluster, args.batch, args.seq)
    title = f"{model.name} on {args.nodes} x {args.node}, {args.batch} x {args.seq} tokens"
    console = Console()
    if not plan.get("feasible"):
        console.print(plan_table(plan, title=title))
        return 1
    knobs = {k: v for k, v in plan.items() if k not in ("feasible", "reasons")}
    memory = estimate.memory_per_gpu(model, cluster, knobs, args.seq)
    time = estimate.step_time(model, cluster, knobs, args.seq)
    console.print(plan_table(plan, memory, time, title=title))
    png = Path(f"plan_{args.model}_{args.node}x{args.nodes}.png")
    saved = save_memory_chart(memory, png, title=title)
    console.print(f"memory chart: {saved}" if saved else "memory chart: install matplotlib to get one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
