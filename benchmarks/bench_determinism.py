"""Does a student get the same grade whatever was graded beside it, the machine's load and the batch's order?

    .venv/bin/python benchmarks/bench_determinism.py [--exercises 02,08,04,18,22,24] [--workers N]
                                                      [--seed S] [--keep DIR] [--plan]

Builds a class from the course's corpora (``tests/determinism.py``): per exercise the reference, the stubs,
the reference with one file a stub, every alternative-correct case and every bug of the bug corpus (those
that hang as well), and for exercise 02 every item of the adversarial corpus. Each exercise's class is
graded twice with ``grade batch``, one run after the other:
1. ``--workers 1``, in name order, with nothing of its own loading the machine;
2. ``--workers N`` (default: the cores), in an order shuffled by ``--seed`` (``grade batch --shuffle``),
   with a CPU burner spinning on every core (``benchmarks/burner.py``);
then every difference is printed per student (score, verdict) and per test (status, score), for the
exercise as soon as both its runs are done, and for the whole class at the end. The goal is zero; the exit
status is 1 when a well-behaved (non-adversarial) submission's grade differs.

The default exercises make a class of 225: about 45 minutes by the estimate printed first, for an idle
2-core machine (``--plan`` prints it and stops); a machine loaded by others takes several times longer.
The class lives in /var/tmp (ranks read it as a uid of their own); ``--keep DIR`` builds it there and keeps
it, with both runs' batch outputs.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from burner import cpu_burner  # noqa: E402
from determinism import (  # noqa: E402
    ITEMS,
    Difference,
    Member,
    adversarial_ids,
    build_class,
    describe,
    differences,
    grade_class,
    kill_leftovers,
)

from grader.core.course import load_course  # noqa: E402

EXERCISES = ("02", "08", "04", "18", "22", "24")
"""02 for its multi-rank worlds, hangs and the adversarial corpus; 08 for its short (6 s) part timeouts and
hangs; four world-size-1 exercises with large bug corpora, which grade quickly."""
ADVERSARIAL_EXERCISE = "02"

SECONDS_PER_GRADING = 4.0
"""One grading, serial, on the reference 2-core machine (torch imported twice, a world per world size)."""
SECONDS_PER_HANG = 20.0
"""What a member that hangs adds: its hung tests run to their part timeouts (10 s, 6 s in 08)."""
SECONDS_PER_BATCH = 15.0
"""A batch's own cost: the CLI's start, the reference's grading, the gradebook and the reports."""
LOADED_SLOWDOWN = 2.0
"""With a spinner on every core, a grading gets about half a core."""


def expected_seconds(members: list[Member], batches: int, workers: int) -> tuple[float, float]:
    """The two runs' expected wall times on the reference 2-core machine: serial, then loaded parallel."""
    hangs = sum(m.kind == "hang" or _adversarial_hang(m) for m in members)
    serial = len(members) * SECONDS_PER_GRADING + hangs * SECONDS_PER_HANG + batches * SECONDS_PER_BATCH
    slots = min(workers, os.cpu_count() or 1)
    return serial, serial * LOADED_SLOWDOWN / slots + batches * SECONDS_PER_BATCH


def _adversarial_hang(member: Member) -> bool:
    item = ITEMS.get(member.student.removeprefix("adv-")) if member.adversarial else None
    return item is not None and "timeout" in str(item["expect"]["verdict"])


def grade_twice(
    exercise: str, subs: Path, out: Path, members: list[Member], *, workers: int, seed: int
) -> list[Difference]:
    """One exercise's class graded serially, then loaded, shuffled and in parallel; what differs."""
    runs = []
    for name, slots, shuffle in (("serial", 1, None), ("loaded", workers, seed)):
        with cpu_burner() if shuffle is not None else nullcontext(0) as spinners:
            started, load = time.monotonic(), os.getloadavg()[0]
            found = grade_class(subs, exercise, out / name / exercise, workers=slots, shuffle=shuffle)
            print(
                f"  {exercise} {name}: --workers {slots}, shuffle {shuffle}, {spinners} spinners: "
                f"{len(found)} graded in {time.monotonic() - started:.0f} s (load average {load:.1f} "
                "at the start)",
                flush=True,
            )
        for left in kill_leftovers():
            print(f"  left running after {exercise}'s {name} batch, killed: {left}", flush=True)
        runs.append({f"{exercise}/{student}": result for student, result in found.items()})
    own = [m for m in members if m.exercise == exercise]
    found = differences(*runs, own)
    print("\n".join(describe(own, found)), flush=True)
    return found


@contextmanager
def class_root(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True)
        keep.chmod(0o755)
        yield keep
        return
    root = Path(tempfile.mkdtemp(prefix="distgpu-determinism-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def build(root: Path, exercises: list[str]) -> tuple[dict[str, Path], list[Member]]:
    course = load_course(REPO / "course.yml")
    classes, members = {}, []
    for key in exercises:
        exercise = course.find(key)
        adversarial = adversarial_ids() if exercise.key == ADVERSARIAL_EXERCISE else []
        classes[exercise.key] = root / "class" / exercise.dirname
        built, left_out = build_class(classes[exercise.key], course, exercise, adversarial=adversarial)
        members += built
        kinds = Counter(m.kind.partition(":")[0] for m in built)
        print(f"{exercise.key}: {len(built)} submissions ({', '.join(f'{n} {k}' for k, n in kinds.items())})")
        for line in left_out:
            print(f"  left out: {line}")
    return classes, members


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exercises", default=",".join(EXERCISES), help="comma-separated exercise numbers")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="the loaded run's workers")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 16), help="the loaded run's order")
    parser.add_argument("--keep", type=Path, help="build the class in this new folder and keep it")
    parser.add_argument("--plan", action="store_true", help="build the class, print the estimate, stop")
    args = parser.parse_args()
    with class_root(args.keep) as root:
        classes, members = build(root, args.exercises.split(","))
        serial, loaded = expected_seconds(members, len(classes), args.workers)
        print(
            f"{len(members)} submissions in {len(classes)} classes; expected on the reference 2-core "
            f"machine: {serial / 60:.0f} min serial, {loaded / 60:.0f} min loaded with {args.workers} workers"
        )
        if args.plan:
            return 0
        found = []
        for exercise, subs in classes.items():
            found += grade_twice(exercise, subs, root, members, workers=args.workers, seed=args.seed)
    print(f"all {len(classes)} exercises, --seed {args.seed}:")
    print("\n".join(describe(members, found)))
    adversarial = {m.key for m in members if m.adversarial}
    return 1 if any(d.student not in adversarial for d in found) else 0


if __name__ == "__main__":
    sys.exit(main())
