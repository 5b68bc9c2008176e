"""What the self-check notebooks share: find your exercise modules, run a small gloo world on this machine.

The notebooks import YOUR modules from exercises/NN_slug/ (set DISTGPU_NOTEBOOK_IMPL=solutions to run them
against the references instead, as the course's own tests do). Nothing here is graded by `grade`: the
notebooks are for looking at what your code does, and their test cells follow nbgrader's format.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMPL_ENV = "DISTGPU_NOTEBOOK_IMPL"


def impl_dir(exercise: str) -> Path:
    """exercises/<exercise> (your work), or solutions/<exercise> when DISTGPU_NOTEBOOK_IMPL=solutions.

    ``impl_dir("")`` is the tree itself (exercises/ or solutions/)."""
    tree = os.environ.get(IMPL_ENV, "exercises")
    if tree not in ("exercises", "solutions"):
        raise ValueError(f"{IMPL_ENV}={tree!r}: expected exercises or solutions")
    return ROOT / tree / exercise


def load(exercise: str, module: str, *, trusted: bool = False) -> ModuleType:
    """Import ``module`` from your exercise folder (``trusted``: from exercises/, e.g. plot helpers)."""
    folder = ROOT / "exercises" / exercise if trusted else impl_dir(exercise)
    name = f"selfcheck_{folder.parent.name}_{exercise}_{module}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, folder / f"{module}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


# ---------------------------------------------------------------------------------------------------------
# section 1: one gloo world checks and times your collectives


def section1_world(world_size: int, sizes: list[int], iters: int = 5) -> dict[str, Any]:
    """Run ``world_size`` CPU ranks (gloo): check your broadcast, ring and tree all-reduce against the
    built-in collectives, time your ring against ``dist.all_reduce`` for each float32 size in bytes, and
    measure with your ``measure_allreduce``. Returns rank 0's findings."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="distgpu-notebook-") as folder:
        out = Path(folder) / "rank0.json"
        store = Path(folder) / "store"
        environ = {IMPL_ENV: os.environ.get(IMPL_ENV, "exercises")}
        mp.spawn(
            _section1_rank, args=(world_size, str(store), sizes, iters, str(out), environ), nprocs=world_size
        )
        return json.loads(out.read_text())


def _section1_rank(
    rank: int, world_size: int, store: str, sizes: list[int], iters: int, out: str, environ: dict[str, str]
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(environ)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        collectives = load("01_comm_primitives", "collectives")
        allreduce = load("02_ring_tree", "allreduce")
        measure = load("03_cost_analysis", "measure")
        x = torch.arange(2 * world_size + 3) + 100 * rank  # N not a multiple of p
        expected = x.clone()
        dist.all_reduce(expected)
        correct = {}
        for name, fn in (
            ("ring_allreduce", allreduce.ring_allreduce),
            ("tree_allreduce", allreduce.tree_allreduce),
        ):
            y = x.clone()
            fn(y)
            correct[name] = bool(torch.equal(y, expected))
        y, root = x.clone(), x.clone()
        collectives.broadcast(y, 1)
        dist.broadcast(root, 1)
        correct["broadcast"] = bool(torch.equal(y, root))
        ring_s = [_seconds(allreduce.ring_allreduce, n, iters) for n in sizes]
        builtin_s = [_seconds(dist.all_reduce, n, iters) for n in sizes]
        measured = measure.measure_allreduce(sizes, iters=iters, warmup=1)
        if rank == 0:
            found = {
                "correct": correct,
                "sizes": sizes,
                "ring_s": ring_s,
                "builtin_s": builtin_s,
                "measured_s": measured,
            }
            Path(out).write_text(json.dumps(found))
    finally:
        dist.destroy_process_group()


def _seconds(fn: Any, nbytes: int, iters: int) -> float:
    """Median seconds of ``fn(tensor)`` on ``nbytes`` of float32, each call after a barrier."""
    import torch
    import torch.distributed as dist

    tensor = torch.ones(nbytes // 4)
    times = []
    for _ in range(iters + 1):
        dist.barrier()
        start = time.perf_counter()
        fn(tensor)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])  # the first call warms up
