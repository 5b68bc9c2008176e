"""``grade batch`` on 20 submissions: its wall time, and how often the batch's process stages each upload.

    .venv/bin/python benchmarks/bench_batch.py [--runs 3] [--workers N] [--keep DIR]

Builds a copy of the fixture course (``tests/fixtures/course``, exercise ``toy``) and a class of 20: 12
copies of the reference (4 of them zipped), 6 wrong submissions (``tests/fixtures/submissions/wrong``) and
2 invalid uploads (an empty folder, a README alone). Each run grades the class twice with ``grade batch``
(in this process, through ``grader.cli.main``):
1. cold: a fresh output folder and gradebook, so every submission is graded;
2. warm: the same command again, nothing changed, so nothing is graded (keys, records and outputs only);
   ``--warm N`` runs it N times (the batch's own overhead, imports already done).

Stagings are counted per upload in this process: every ``stage()``, whatever imported it, reads the upload
through ``grader.core.submission._from_folder`` or ``_from_zip``, which are wrapped here. The grading
processes stage what they are given once more (before issue 37 the upload itself, after it the batch's
staged copy); they are not counted. The script runs against the tree it is in, or another one:
``PYTHONPATH=/path/to/other/tree .venv/bin/python benchmarks/bench_batch.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def build_class(root: Path) -> tuple[Path, Path]:
    """A copy of the fixture course in ``root/course`` and 20 submissions in ``root/subs``."""
    course = root / "course"
    shutil.copytree(FIXTURES / "course", course)
    reference = (course / "solutions" / "01_toy" / "toy.py").read_text()
    subs = root / "subs"
    subs.mkdir()
    for i in range(12):
        if i < 4:
            with zipfile.ZipFile(subs / f"student{i:02d}.zip", "w") as archive:
                archive.writestr(f"student{i:02d}/toy.py", reference)
        else:
            (subs / f"student{i:02d}").mkdir()
            (subs / f"student{i:02d}" / "toy.py").write_text(reference + f"\n# student {i}\n")
    for i in range(12, 18):
        shutil.copytree(FIXTURES / "submissions" / "wrong", subs / f"student{i:02d}")
    (subs / "student18").mkdir()
    (subs / "student19").mkdir()
    (subs / "student19" / "README.md").write_text("my solution is in the cloud\n")
    return course, subs


@contextlib.contextmanager
def counting_stagings() -> Iterator[Counter[str]]:
    """Count, by upload, the stagings this process makes (``stage`` reads an upload through one of these)."""
    from grader.core import submission

    counts: Counter[str] = Counter()
    originals = {name: getattr(submission, name) for name in ("_from_folder", "_from_zip")}

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(source: Path, *args: Any) -> Any:
            counts[Path(source).name] += 1
            return original(source, *args)

        return wrapper

    for name, original in originals.items():
        setattr(submission, name, counted(original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(submission, name, original)


def grade_batch(course: Path, subs: Path, out: Path, workers: int | None) -> tuple[float, Counter[str], str]:
    """One ``grade batch``: (seconds, stagings by upload, what it printed)."""
    from grader import cli

    argv = ["--course", str(course / "course.yml"), "batch", str(subs), "--exercise", "toy"]
    argv += ["--device", "cpu", "--out", str(out), "--gradebook", f"sqlite:///{out.parent / 'gradebook.db'}"]
    argv += ["--workers", str(workers)] if workers else []
    printed = io.StringIO()
    with counting_stagings() as counts, contextlib.redirect_stdout(printed):
        started = time.perf_counter()
        status = cli.main(argv)
        seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"grade batch exited {status}:\n{printed.getvalue()}")
    return seconds, counts, printed.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, help="grading processes at once (default: the batch's own)")
    parser.add_argument("--keep", type=Path, help="build the class here and keep it")
    parser.add_argument("--warm", type=int, default=1, help="warm runs after each cold one (default 1)")
    args = parser.parse_args()
    import grader

    print(f"tree: {Path(grader.__file__).resolve().parent.parent}")
    cold, warm = [], []
    for run in range(args.runs):
        root = Path(tempfile.mkdtemp(prefix="distgpu-bench-batch-", dir=args.keep))
        course, subs = build_class(root)
        for phase, times in (("cold", cold), *(("warm", warm),) * args.warm):
            seconds, counts, printed = grade_batch(course, subs, root / "out", args.workers)
            times.append(seconds)
            per_upload = Counter(counts[p.name] for p in subs.iterdir())
            said = ", ".join(f"{n} uploads staged {k}x" for k, n in sorted(per_upload.items()))
            last = printed.strip().splitlines()[-3:]
            print(f"run {run + 1} {phase}: {seconds:.1f} s; {said}; " + " | ".join(last), flush=True)
        if args.keep is None:
            shutil.rmtree(root)
    print(f"cold: median {statistics.median(cold):.1f} s ({', '.join(f'{t:.1f}' for t in cold)})")
    print(f"warm: median {statistics.median(warm):.1f} s ({', '.join(f'{t:.1f}' for t in warm)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
