"""The CUDA path's placement, checked without a GPU: which GPU and backend each rank of a world is given.

A rank's spec is what the factory would fork it with; ``Recorder`` stands in for the factory only to read the
specs (nothing is forked). scripts/gpu-check runs the real thing on a GPU.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.authoring.gpucheck import Check, _parity, _tally
from grader.core.course import Exercise, Part
from grader.core.results import ExerciseResult, Status, TestResult
from grader.harness.worker import WorkerSpec
from grader.harness.world import LiveRanks, WorldConfig

REPO = Path(__file__).parent.parent


class Recorder:
    """Takes the place of a rank factory: keeps each spec ``LiveRanks`` would fork, forks nothing."""

    def __init__(self) -> None:
        self.specs: list[WorkerSpec] = []

    def place(self, spec: WorkerSpec) -> WorkerSpec:
        return spec

    def fork(self, spec: WorkerSpec) -> tuple[None, None, None]:
        self.specs.append(spec)
        return None, None, None


def placed(tmp_path: Path, size: int, shared_gpus: int | None) -> list[tuple[str, int | None]]:
    config = WorldConfig(
        backend="nccl",
        device="cuda",
        impl_dir=tmp_path,
        programs_dir=tmp_path,
        scratch_dir=tmp_path,
        pg_timeout_s=10,
    )
    recorder = Recorder()
    pool = LiveRanks(size, config, [recorder], shared_gpus)  # type: ignore[list-item]
    for rank in range(size):
        pool._start_rank(rank, tmp_path)
    return [(s.backend, s.local_rank) for s in recorder.specs]


def test_one_gpu_per_rank_talks_nccl(tmp_path: Path) -> None:
    assert placed(tmp_path, 3, None) == [("nccl", 0), ("nccl", 1), ("nccl", 2)]


def test_ranks_sharing_one_gpu_talk_gloo_on_gpu_0(tmp_path: Path) -> None:
    """NCCL refuses two ranks on one GPU, so a world that shares GPUs uses gloo between its ranks."""
    assert placed(tmp_path, 2, 1) == [("gloo", 0), ("gloo", 0)]


def test_ranks_sharing_two_gpus_alternate(tmp_path: Path) -> None:
    assert placed(tmp_path, 4, 2) == [("gloo", 0), ("gloo", 1), ("gloo", 0), ("gloo", 1)]


def result(*tests: tuple[str, str, Status]) -> ExerciseResult:
    return ExerciseResult(
        exercise="01",
        title="",
        graded="",
        device="",
        tests=tuple(
            TestResult(name=n, number="1.1", part=p, score=0, max_score=1, status=s) for n, p, s in tests
        ),
    )


def test_parity_compares_what_ran_on_the_gpu_and_leaves_gpu_parts_to_their_own_checks() -> None:
    exercise = Exercise(
        number=1,
        slug="toy",
        title="Toy",
        section=1,
        parts=(
            Part(id="01.a", points=1, world_sizes=(1, 2)),
            Part(id="01.b", points=1, world_sizes=(1,), device="gpu"),
        ),
    )
    cpu = result(
        ("t[1]", "01.a", Status.PASSED), ("t[2]", "01.a", Status.PASSED), ("g", "01.b", Status.BLOCKED)
    )
    same = result(
        ("t[1]", "01.a", Status.PASSED), ("t[2]", "01.a", Status.BLOCKED), ("g", "01.b", Status.FAILED)
    )
    assert _parity(exercise, (same, 1.0), cpu).ok
    assert "1 tests as on CPU (1 blocked" in _parity(exercise, (same, 1.0), cpu).detail
    differ = result(("t[1]", "01.a", Status.FAILED), ("t[2]", "01.a", Status.BLOCKED))
    check = _parity(exercise, (differ, 1.0), cpu)
    assert not check.ok and check.detail == "t[1]: failed on GPU, passed on CPU"
    assert not _parity(exercise, (same, 1.0), None).ok


def test_parity_of_an_exercise_without_a_world_size_1_test_has_nothing_to_compare() -> None:
    """Issue 31: 01, 10 and 11 run nothing on one GPU: not a failure, and not counted as a pass either."""
    exercise = Exercise(
        number=1, slug="toy", title="Toy", section=1, parts=(Part(id="01.a", points=1, world_sizes=(2, 4)),)
    )
    cpu = result(("t[2]", "01.a", Status.PASSED), ("t[4]", "01.a", Status.PASSED))
    gpu = result(("t[2]", "01.a", Status.BLOCKED), ("t[4]", "01.a", Status.BLOCKED))
    check = _parity(exercise, (gpu, 1.0), cpu)
    assert check.ok and not check.compared and check.mark == "-"
    assert check.detail == "nothing to compare on one GPU: no world-size-1 test (2 blocked: need more GPUs)"
    ran = _parity(exercise, (cpu, 1.0), cpu)
    assert ran.compared and ran.mark == "yes"
    failed = Check("x", "01", False, "", 0.0)
    assert _tally([check, ran, failed]) == "1 of 2 checks passed (1 with nothing to compare on one GPU)"


def test_the_nccl_benchmark_reduces_its_timing_on_the_tensors_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: NCCL has no CPU tensors, so the per-rank time it reduces lives where the data does."""
    import torch.distributed as dist

    spec = importlib.util.spec_from_file_location("bench_ring", REPO / "benchmarks" / "bench_ring_vs_gloo.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    made: list[torch.device] = []

    def tensor(data: list[float], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        made.append(device)  # where the bench puts the figure it reduces; it is then read on the host
        return torch.tensor(data, dtype=dtype)

    monkeypatch.setattr(
        bench, "torch", SimpleNamespace(tensor=tensor, float64=torch.float64, cuda=torch.cuda)
    )
    monkeypatch.setattr(dist, "barrier", lambda: None)
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, op=None: None)
    data = torch.empty(4, device="meta")  # a device other than the CPU (a CUDA tensor under NCCL)
    assert bench.best_seconds(lambda t: None, data, iters=1, repeats=2) > 0
    assert made == [torch.device("meta")] * 2


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="this machine has a GPU: scripts/gpu-check runs for real"
)
def test_gpu_check_without_a_gpu_says_so_and_exits_0() -> None:
    done = subprocess.run(
        [str(REPO / "scripts" / "gpu-check")], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "no GPU: nothing to verify here" in done.stdout
