"""Show your three plans as tables, with memory and time from YOUR exercise 21 tools, and save memory charts.

    python exercises/24_worked_examples/show_plans.py            # all three
    python exercises/24_worked_examples/show_plans.py llama3_70b

Reads plans.py in this folder and estimate.py in ../21_decision_process (your own: if it is not written yet,
only your plan and answers are shown). Charts go to plan_24_<problem>.png in the current directory (needs
matplotlib). The grader checks with the reference tools, not these: see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from coursekit.cluster import Cluster
from coursekit.models import MODELS
from coursekit.plan_report import plan_table, save_memory_chart

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "21_decision_process")]

import estimate  # noqa: E402  (your exercise 21)
import plans  # noqa: E402  (your plans)


def show(name: str, console: Console) -> None:
    p = plans.PROBLEMS[name]
    model, cluster = MODELS[p["model"]], Cluster(p["node"], p["nodes"])
    try:
        document = getattr(plans, name)()
    except NotImplementedError:
        console.print(f"[yellow]plans.{name}() is not written yet[/]\n")
        return
    document = yaml.safe_load(document) if isinstance(document, str) else document
    plan, answers = document["plan"], document.get("answers", {})
    title = f"{name}: {model.name} on {p['nodes']} x {p['node']}, {p['global_batch']} x {p['seq_len']} tokens"
    try:
        memory = estimate.memory_per_gpu(model, cluster, plan, p["seq_len"])
        time = estimate.step_time(model, cluster, plan, p["seq_len"])
    except NotImplementedError:
        memory = time = None
        console.print("[yellow]exercise 21's estimate.py is not written yet: no memory or time breakdown[/]")
    console.print(plan_table(plan | {"reasons": {}}, memory, time, title=title))
    table = Table("question", "your answer", title="answers", title_justify="left")
    for key in plans.QUESTIONS[name]:
        table.add_row(key, str(answers.get(key, "(missing)")))
    console.print(table)
    console.print(document.get("justification", "(no justification)"), "\n")
    if memory:
        chart = f"{model.name}, {cluster.world} GPUs"
        saved = save_memory_chart(memory, Path(f"plan_24_{name}.png"), title=chart)
        console.print(f"memory chart: {saved}" if saved else "memory chart: install matplotlib to get one")


def main() -> int:
    names = sys.argv[1:] or list(plans.PROBLEMS)
    console = Console()
    for name in names:
        show(name, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
