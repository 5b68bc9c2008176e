"""``scripts/gpu-check``: everything one GPU can verify of the course and its CUDA path, in one run.

    PYTHONPATH=. python3 -m grader.gpucheck [--out DIR]       # what scripts/gpu-check runs

Offline and without installing anything: it needs torch (with CUDA), pytest, pyyaml and rich. In order:
  1. ``grade doctor``;
  2. per exercise, the reference graded with ``--device cuda`` (NCCL worlds of one rank; larger worlds are
     blocked on one GPU) while a second process grades it on CPU: every test that ran on the GPU must end as
     it did on CPU (the ``device: gpu`` parts aside, which the CPU reports blocked);
  3. per ``device: gpu`` part: the reference's tests all pass, the fresh stub scores zero with
     NotImplementedError, and every bug of the part's concepts in tests/corpus/ is caught;
  4. ``benchmarks/bench_ring_vs_gloo.py --backend nccl --ranks 1`` as a smoke test of NCCL.
One summary table is printed and written to ``DIR/summary.md`` (and ``summary.json``). Without a GPU it says
so and exits 0. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from grader import SOURCE_ROOT
from grader.authoring.check import stub_problems
from grader.authoring.stubs import fresh_stubs
from grader.authoring.validate import bug_corpus, judge_bug, mutated
from grader.core.course import Course, Exercise, load_course
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob, Runner

REPO = SOURCE_ROOT
BENCH_TIMEOUT_S = 180


@dataclass(frozen=True)
class Check:
    what: str
    exercise: str
    ok: bool
    detail: str
    seconds: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=REPO / ".grade" / "gpu-check", help="where the summary goes"
    )
    parser.add_argument("--course", type=Path, default=REPO / "course.yml")
    parser.add_argument("--cpu-results", type=Path, help=argparse.SUPPRESS)  # the CPU half, run by main
    args = parser.parse_args(argv)
    course = load_course(args.course)
    if args.cpu_results:
        _write_cpu_results(course, args.cpu_results)
        return 0
    console = Console()
    subprocess.run([sys.executable, "-m", "grader.cli", "--course", str(args.course), "doctor"], check=False)
    gpus = _gpu_names()
    if not gpus:
        console.print("no GPU: nothing to verify here. scripts/gpu-check needs an NVIDIA GPU (docs/gpu.md).")
        return 0
    console.print(f"GPU: {', '.join(gpus)}")
    args.out.mkdir(parents=True, exist_ok=True)
    checks = run_checks(course, args.out)
    _report(checks, gpus, args.out, console)
    return 0 if all(c.ok for c in checks) else 1


def run_checks(course: Course, out: Path) -> list[Check]:
    """Every check, the CPU gradings running in a second process meanwhile."""
    from grader.runners.local import LocalRunner

    cpu_file = out / "cpu-results.json"
    cpu = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grader.gpucheck",
            "--course",
            str(course.root / "course.yml"),
            "--cpu-results",
            str(cpu_file),
        ]
    )
    runner = LocalRunner()
    graded = [e for e in course.exercises if e.parts]
    on_gpu = {e.key: _timed(partial(_grade, runner, course, e, course.solution_dir(e))) for e in graded}
    checks = [
        c
        for e in graded
        if any(p.device == "gpu" for p in e.parts)
        for c in _gpu_parts(runner, course, e, on_gpu[e.key])
    ]
    checks.append(_bench())
    cpu.wait()
    on_cpu = {k: ExerciseResult.from_dict(v) for k, v in json.loads(cpu_file.read_text()).items()}
    checks[:0] = [_parity(e, on_gpu[e.key], on_cpu.get(e.key)) for e in graded]
    return checks


# ---------------------------------------------------------------------------------------------------------
# the checks


def _parity(exercise: Exercise, on_gpu: tuple[ExerciseResult, float], on_cpu: ExerciseResult | None) -> Check:
    """Every test that ran on the GPU (not blocked there, not a GPU part) ended as it did on CPU."""
    result, seconds = on_gpu
    if on_cpu is None:
        return Check("same as CPU", exercise.key, False, "the CPU grading did not finish", seconds)
    cpu_status = {t.name: t.status for t in on_cpu.tests}
    gpu_parts = {p.id for p in exercise.parts if p.device == "gpu"}
    ran = [t for t in result.tests if t.status is not Status.BLOCKED and t.part not in gpu_parts]
    differ = [
        f"{t.name}: {t.status} on GPU, {cpu_status.get(t.name)} on CPU"
        for t in ran
        if cpu_status.get(t.name) != t.status
    ]
    blocked = sum(t.status is Status.BLOCKED for t in result.tests if t.part not in gpu_parts)
    detail = "; ".join(differ[:3]) or f"{len(ran)} tests as on CPU ({blocked} blocked: need more GPUs)"
    return Check("same as CPU", exercise.key, not differ and bool(ran), detail, seconds)


def _gpu_parts(
    runner: Runner, course: Course, exercise: Exercise, reference: tuple[ExerciseResult, float]
) -> list[Check]:
    checks = []
    for part in (p for p in exercise.parts if p.device == "gpu"):
        tests = [t for t in reference[0].tests if t.part == part.id]
        failed = [f"{t.name}: {t.status} {t.output[:200]}" for t in tests if t.status is not Status.PASSED]
        detail = "; ".join(failed[:2]) or f"{len(tests)} tests passed"
        checks.append(
            Check(
                f"reference full: {part.name}", exercise.key, bool(tests) and not failed, detail, reference[1]
            )
        )
        with fresh_stubs(course, exercise) as folder:
            stub, seconds = _timed(partial(_grade, runner, course, exercise, folder, (part.id,)))
        problems = stub_problems(stub) or ([] if stub.score == 0 else [f"scores {stub.score:g}"])
        checks.append(
            Check(
                f"stub zero: {part.name}",
                exercise.key,
                not problems,
                "; ".join(problems[:2]) or "0 points",
                seconds,
            )
        )
        checks += _bugs(runner, course, exercise, part.id)
    return checks


def _bugs(runner: Runner, course: Course, exercise: Exercise, part_id: str) -> list[Check]:
    part = next(p for p in exercise.parts if p.id == part_id)
    checks = []
    for bug in bug_corpus(REPO / "tests", exercise):
        if part.concept(bug["concept"]) is None:
            continue
        with mutated(course.solution_dir(exercise), bug) as folder:
            result, seconds = _timed(partial(_grade, runner, course, exercise, folder, (part.id,)))
        outcome = judge_bug(exercise, bug, result)
        ok = outcome.problem is None and not outcome.blocked
        detail = outcome.problem or (
            "blocked" if outcome.blocked else f"lost {outcome.loss_share:.2f}x its concept"
        )
        checks.append(Check(f"bug caught: {bug['name']}", exercise.key, ok, detail, seconds))
    return checks


def _bench() -> Check:
    command = [sys.executable, str(REPO / "benchmarks" / "bench_ring_vs_gloo.py")]
    command += ["--backend", "nccl", "--ranks", "1", "--iters", "2", "--repeats", "1"]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Check("bench nccl, 1 rank", "-", False, f"no answer in {BENCH_TIMEOUT_S} s", BENCH_TIMEOUT_S)
    seconds = time.perf_counter() - started
    lines = (done.stdout + done.stderr).strip().splitlines() or ["no output"]
    return Check("bench nccl, 1 rank", "-", done.returncode == 0, lines[-1].strip(), seconds)


# ---------------------------------------------------------------------------------------------------------
# helpers


def _grade(
    runner: Runner,
    course: Course,
    exercise: Exercise,
    source: Path,
    parts: tuple[str, ...] = (),
    device: str = "cuda",
) -> ExerciseResult:
    job = GradeJob(
        course=course, exercise=exercise, source=source, label=str(source), device=device, parts=parts
    )
    return runner.run(job)


def _timed(grade: Callable[[], ExerciseResult]) -> tuple[ExerciseResult, float]:
    started = time.perf_counter()
    result = grade()
    return result, round(time.perf_counter() - started, 1)


def _write_cpu_results(course: Course, path: Path) -> None:
    from grader.runners.local import LocalRunner

    runner = LocalRunner()
    results = {
        e.key: _grade(runner, course, e, course.solution_dir(e), device="cpu").to_dict()
        for e in course.exercises
        if e.parts
    }
    path.write_text(json.dumps(results))


def _gpu_names() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def _report(checks: list[Check], gpus: list[str], out: Path, console: Console) -> None:
    table = Table(title=f"gpu-check on {', '.join(gpus)}", title_justify="left")
    for column in ("check", "exercise", "ok", "seconds", "detail"):
        table.add_column(column)
    for c in checks:
        table.add_row(c.what, c.exercise, "yes" if c.ok else "[red]NO[/]", f"{c.seconds:g}", c.detail)
    console.print(table)
    failed = sum(not c.ok for c in checks)
    console.print(f"{len(checks) - failed} of {len(checks)} checks passed")
    rows = [
        f"| {c.what} | {c.exercise} | {'yes' if c.ok else 'NO'} | {c.seconds:g} | {c.detail} |"
        for c in checks
    ]
    head = f"# gpu-check, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on {', '.join(gpus)}\n\n"
    table_md = "| check | exercise | ok | s | detail |\n|---|---|---|---:|---|\n" + "\n".join(rows)
    (out / "summary.md").write_text(head + table_md + f"\n\n{len(checks) - failed} of {len(checks)} passed\n")
    (out / "summary.json").write_text(
        json.dumps({"gpus": gpus, "checks": [asdict(c) for c in checks]}, indent=1)
    )
