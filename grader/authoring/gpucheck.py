"""``scripts/gpu-check``: everything one GPU can verify of the course and its CUDA path, in one run.

    PYTHONPATH=. python3 -m grader.gpucheck [--out DIR]       # what scripts/gpu-check runs

Offline and without installing anything: it needs torch (with CUDA), pytest, pyyaml and rich, nothing else
(no nbgrader: the stubs it grades are the committed ones, which ``grade check`` proves in sync). In order:
  1. ``grade doctor``;
  2. per exercise, the reference graded with ``--device cuda`` (NCCL worlds of one rank; larger worlds are
     blocked on one GPU) while a second process grades it on CPU: every test that ran on the GPU must end as
     it did on CPU (the ``device: gpu`` parts aside, which the CPU reports blocked). An exercise with no
     world-size-1 test has nothing to compare on one GPU: said so, neither passed nor failed;
  3. per ``device: gpu`` part, right after its exercise's reference: the reference's tests all pass, the
     committed stub scores zero with NotImplementedError, and every bug of the part's concepts in
     tests/corpus/ is caught. One rank factory serves every grading of an exercise (torch imported once);
  4. ``benchmarks/bench_ring_vs_gloo.py --backend nccl --ranks 1``: NCCL on CUDA tensors, its bandwidth
     reported as a figure.
Each check is printed with its seconds as it ends; one summary table follows, also written to
``DIR/summary.md`` (and ``summary.json``). Without a GPU it says so and exits 0. Exit status 1 when a check
fails.
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
from rich.text import Text

from grader import SOURCE_ROOT
from grader.authoring.check import stub_problems
from grader.authoring.validate import bug_corpus, judge_bug, mutated
from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise, load_course
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob, Runner

REPO = SOURCE_ROOT
BENCH_TIMEOUT_S = 180
NOTHING_TO_COMPARE = "nothing to compare on one GPU"


@dataclass(frozen=True)
class Check:
    what: str
    exercise: str
    ok: bool
    detail: str
    seconds: float
    compared: bool = True
    """False when there was nothing to check here (an exercise without a world-size-1 test): not a failure."""

    @property
    def mark(self) -> str:
        return "yes" if self.ok and self.compared else "-" if self.ok else "NO"


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
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader.cli", "--course", str(args.course), "doctor"], check=False)
    gpus = _gpu_names()
    if not gpus:
        console.print("no GPU: nothing to verify here. scripts/gpu-check needs an NVIDIA GPU (docs/gpu.md).")
        return 0
    console.print(f"GPU: {', '.join(gpus)}")
    args.out.mkdir(parents=True, exist_ok=True)
    checks = run_checks(course, args.out, partial(_say, console))
    _report(checks, gpus, args.out, console, time.perf_counter() - started)
    return 0 if all(c.ok for c in checks) else 1


def run_checks(course: Course, out: Path, say: Callable[[Check], None]) -> list[Check]:
    """Every check, in the order the module docstring gives; ``say`` hears of each as it ends. The CPU
    gradings run in a second process meanwhile."""
    from grader.runners.local import LocalRunner

    cpu_file = out / "cpu-results.json"
    half = ["--course", str(course.root / "course.yml"), "--cpu-results", str(cpu_file)]
    cpu = subprocess.Popen([sys.executable, "-m", "grader.gpucheck", *half])
    runner = LocalRunner(keep_factory=True)  # one factory per exercise: the course's own code only
    graded = [e.usable() for e in course.exercises if e.parts]  # every reference, so every one whole
    on_gpu: dict[str, tuple[ExerciseResult, float]] = {}
    checks: list[Check] = []
    try:
        for e in graded:
            on_gpu[e.key] = _timed(partial(_grade, runner, course, e, course.solution_dir(e)))
            for part_id in (p.id for p in e.parts if p.device == "gpu"):
                for check in gpu_part_checks(runner, course, e, part_id, on_gpu[e.key]):
                    say(check)
                    checks.append(check)
    except BaseException:  # Ctrl-C or a crash here: the CPU half must not grade on alone
        cpu.kill()
        cpu.wait()
        raise
    finally:
        runner.close()
    checks.append(_bench())
    say(checks[-1])
    cpu.wait()
    on_cpu = {k: ExerciseResult.from_dict(v) for k, v in json.loads(cpu_file.read_text()).items()}
    parity = [_parity(e, on_gpu[e.key], on_cpu.get(e.key)) for e in graded]
    for check in parity:
        say(check)
    return parity + checks


# ---------------------------------------------------------------------------------------------------------
# the checks


def _parity(exercise: Exercise, on_gpu: tuple[ExerciseResult, float], on_cpu: ExerciseResult | None) -> Check:
    """Every test that ran on the GPU (not blocked there, not a GPU part) ended as it did on CPU. When none
    ran (every part needs more ranks than one GPU holds), there is nothing to compare: not a failure."""
    result, seconds = on_gpu
    if on_cpu is None:
        return Check("same as CPU", exercise.key, False, "the CPU grading did not finish", seconds)
    cpu_status = {t.name: t.status for t in on_cpu.tests}
    gpu_parts = {p.id for p in exercise.parts if p.device == "gpu"}
    ran = [t for t in result.tests if t.status is not Status.BLOCKED and t.part not in gpu_parts]
    blocked = sum(t.status is Status.BLOCKED for t in result.tests if t.part not in gpu_parts)
    if not ran:
        detail = f"{NOTHING_TO_COMPARE}: no world-size-1 test ({blocked} blocked: need more GPUs)"
        return Check("same as CPU", exercise.key, True, detail, seconds, compared=False)
    differ = [
        f"{t.name}: {t.status} on GPU, {cpu_status.get(t.name)} on CPU"
        for t in ran
        if cpu_status.get(t.name) != t.status
    ]
    detail = "; ".join(differ[:3]) or f"{len(ran)} tests as on CPU ({blocked} blocked: need more GPUs)"
    return Check("same as CPU", exercise.key, not differ, detail, seconds)


def gpu_part_checks(
    runner: Runner,
    course: Course,
    exercise: Exercise,
    part_id: str,
    reference: tuple[ExerciseResult, float],
) -> list[Check]:
    """A ``device: gpu`` part: the reference's tests all passed (``reference``, graded already), the
    committed stub scores zero, every bug of the part is caught."""
    part = next(p for p in exercise.parts if p.id == part_id)
    tests = [t for t in reference[0].tests if t.part == part.id]
    failed = [f"{t.name}: {t.status} {t.output[:200]}" for t in tests if t.status is not Status.PASSED]
    detail = "; ".join(failed[:2]) or f"{len(tests)} tests passed"
    full = Check(
        f"reference full: {part.name}", exercise.key, bool(tests) and not failed, detail, reference[1]
    )
    return [
        full,
        stub_check(runner, course, exercise, part.id, "cuda"),
        *bug_checks(runner, course, exercise, part.id, "cuda"),
    ]


def stub_check(runner: Runner, course: Course, exercise: Exercise, part_id: str, device: str) -> Check:
    """The part graded on the stubs committed in exercises/ (no nbgrader needed to render them): zero, every
    test a NotImplementedError."""
    grade = partial(_grade, runner, course, exercise, course.exercise_dir(exercise), (part_id,), device)
    stub, seconds = _timed(grade)
    problems = stub_problems(stub) or ([] if stub.score == 0 else [f"scores {stub.score:g}"])
    name = part_id.split(".", 1)[1]
    return Check(
        f"stub zero: {name}", exercise.key, not problems, "; ".join(problems[:2]) or "0 points", seconds
    )


def bug_checks(runner: Runner, course: Course, exercise: Exercise, part_id: str, device: str) -> list[Check]:
    """Each bug of the part's concepts in tests/corpus/: caught, as ``grade validate`` judges it. A bug
    whose tests were all blocked here (no GPU) is not caught: the check says ``blocked``."""
    part = next(p for p in exercise.parts if p.id == part_id)
    checks = []
    for bug in bug_corpus(REPO / "tests", exercise):
        if part.concept(bug["concept"]) is None:
            continue
        with mutated(course.solution_dir(exercise), bug) as folder:
            result, seconds = _timed(partial(_grade, runner, course, exercise, folder, (part.id,), device))
        outcome = judge_bug(exercise, bug, result)
        ok = outcome.problem is None and not outcome.blocked
        detail = outcome.problem or (
            "blocked" if outcome.blocked else f"lost {outcome.loss_share:.2f}x its concept"
        )
        checks.append(Check(f"bug caught: {bug['name']}", exercise.key, ok, detail, seconds))
    return checks


def _bench() -> Check:
    """NCCL on one rank with CUDA tensors: it must run; its bandwidth is a figure to read, not a verdict."""
    command = [sys.executable, str(REPO / "benchmarks" / "bench_ring_vs_gloo.py")]
    command += ["--backend", "nccl", "--ranks", "1", "--iters", "2", "--repeats", "1"]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Check("bench nccl, 1 rank", "-", False, f"no answer in {BENCH_TIMEOUT_S} s", BENCH_TIMEOUT_S)
    seconds = round(time.perf_counter() - started, 1)
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
        e.key: _grade(runner, course, e.usable(), course.solution_dir(e), device="cpu").to_dict()
        for e in course.exercises
        if e.parts
    }
    write_atomic(path, json.dumps(results))


def _gpu_names() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def _say(console: Console, check: Check) -> None:
    console.print(
        f"{check.seconds:7.1f} s  {check.mark:>3}  {check.exercise:>3} {check.what}: {check.detail}",
        markup=False,
    )


def _report(checks: list[Check], gpus: list[str], out: Path, console: Console, seconds: float) -> None:
    table = Table(title=f"gpu-check on {', '.join(gpus)}", title_justify="left")
    for column in ("check", "exercise", "ok", "seconds", "detail"):
        table.add_column(column)
    for c in checks:
        mark = "[red]NO[/]" if c.mark == "NO" else c.mark
        table.add_row(c.what, c.exercise, mark, f"{c.seconds:g}", Text(c.detail))
    console.print(table)
    console.print(_tally(checks) + f", in {seconds:.0f} s")
    rows = [f"| {c.what} | {c.exercise} | {c.mark} | {c.seconds:g} | {c.detail} |" for c in checks]
    head = f"# gpu-check, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on {', '.join(gpus)}\n\n"
    table_md = "| check | exercise | ok | s | detail |\n|---|---|---|---:|---|\n" + "\n".join(rows)
    write_atomic(out / "summary.md", f"{head}{table_md}\n\n{_tally(checks)}, in {seconds:.0f} s\n")
    summary = {"gpus": gpus, "seconds": round(seconds, 1), "checks": [asdict(c) for c in checks]}
    write_atomic(out / "summary.json", json.dumps(summary, indent=1))


def _tally(checks: list[Check]) -> str:
    """'59 of 60 checks passed (3 with nothing to compare)': the uncompared ones counted apart."""
    compared = [c for c in checks if c.compared]
    passed = sum(c.ok for c in compared)
    idle = len(checks) - len(compared)
    return f"{passed} of {len(compared)} checks passed" + (
        f" ({idle} with {NOTHING_TO_COMPARE})" if idle else ""
    )
