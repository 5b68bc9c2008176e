"""What one Slurm task of ``grade batch --backend slurm`` asks for, and the sbatch script that asks for it.

The resources come from the exercise (ranks, nodes, memory, time budget) and course.yml's ``slurm:``
section; the sbatch options given on the command line override the script's ``#SBATCH`` lines.
"""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.classroom.batch import BatchPlan
from grader.classroom.grading_process import PROCESS_MARGIN_S
from grader.core.course import Exercise, SlurmSettings


@dataclass(frozen=True)
class Request:
    nodes: int
    cpus_per_node: int
    """One per rank on the busiest node."""
    gpus_per_node: int
    memory_gb: float
    minutes: int


def request(exercise: Exercise, device: str, gradings: int) -> Request:
    """The allocation one task needs to grade ``gradings`` submissions of ``exercise`` in turn."""
    per_node = max((-(-size // p.nodes) for p in exercise.parts for size in p.world_sizes), default=1)
    return Request(
        nodes=max((p.nodes for p in exercise.parts), default=1),
        cpus_per_node=per_node,
        gpus_per_node=per_node if device == "cuda" else 0,
        memory_gb=exercise.memory_gb,
        minutes=math.ceil(gradings * (exercise.timeout + PROCESS_MARGIN_S) / 60),
    )


def render_script(
    plan: BatchPlan, settings: SlurmSettings, *, name: str, log: Path, gradings: int, command: list[str]
) -> str:
    """The sbatch script: resources from course.yml as ``#SBATCH`` lines, then ``command``."""
    need = request(plan.exercise, plan.device, gradings)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={need.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={need.cpus_per_node}",
        f"#SBATCH --mem={round(need.memory_gb * 1024)}M",
        f"#SBATCH --time={need.minutes}",
        f"#SBATCH --output={log}",
        "#SBATCH --open-mode=append",  # a requeued task appends to its log
        "#SBATCH --requeue",
    ]
    if need.gpus_per_node:
        gpus = "--gres=gpu:{}" if settings.gpus == "gres" else "--gpus-per-node={}"
        lines.append("#SBATCH " + gpus.format(need.gpus_per_node))
    for key in ("partition", "account", "qos"):
        value = getattr(settings, key)
        lines += [f"#SBATCH --{key}={value}"] if value else []
    lines += [f"#SBATCH {option}" for option in settings.sbatch]
    run = " ".join(word if word == ARRAY_INDEX else shlex.quote(word) for word in command)
    lines += ["set -euo pipefail", f"cd {shlex.quote(str(plan.course.root))}", "exec " + run]
    return "\n".join(lines) + "\n"


ARRAY_INDEX = '"$SLURM_ARRAY_TASK_ID"'
"""Left unquoted in the script's command line, so the shell expands it in each task."""


def task_command(manifest: Path) -> list[str]:
    return [sys.executable, "-m", "grader.slurm", str(manifest), ARRAY_INDEX]


def sbatch_line(script: Path, array: str | None, flags: list[str]) -> list[str]:
    return ["sbatch", "--parsable", *([f"--array={array}"] if array else []), *flags, str(script)]
