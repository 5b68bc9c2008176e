"""How long the similarity report takes for a large class of exercise 02.

    .venv/bin/python benchmarks/bench_similarity.py [--size 300] [--seed 0] [--pages]

Builds a synthetic class (``tests/similarity_cases.synthetic_class``): each student takes every function of
the stub from a solution drawn at random among the reference and the six alternative-correct cases of
tests/validity/02_ring_tree, leaves up to three debugging prints in each, renames its locals and reorders
its functions; every tenth student copies the one before. Seven solutions for 300 students make a class
where nearly every pair shares some code: the index finds almost every pair, the comparison's worst case.

Prints the class's size (files, lines, tokens); the wall and CPU seconds of reading the files as grading
stages them, then of ``compare_class`` (tokenize, fingerprint, index, compare, cluster) and, with
``--pages``, of writing the report's pages; and the load average before and after, since the machine is
shared. The target (issue 42): under 60 s for 300 submissions on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from similarity_cases import synthetic_class  # noqa: E402

from grader.classroom.outputs.similarity import compare_class  # noqa: E402
from grader.classroom.outputs.similarity_report import write_pages  # noqa: E402
from grader.classroom.outputs.similarity_sources import read_submissions  # noqa: E402
from grader.classroom.outputs.similarity_tokens import tokenize  # noqa: E402
from grader.core.course import load_course  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=300, help="students (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pages", action="store_true", help="also time writing the report's pages")
    args = parser.parse_args()
    course = load_course(REPO / "course.yml", check_stubs=False)
    with tempfile.TemporaryDirectory(prefix="bench-similarity-") as folder:
        subs = synthetic_class(Path(folder) / "subs", args.size, args.seed)
        texts = [(path / "allreduce.py").read_text() for path in subs.values()]
        lines = sum(len(text.splitlines()) for text in texts) / len(texts)
        tokens = sum(len(u.tokens) for text in texts for u in tokenize(text, "allreduce.py").units) / len(
            texts
        )
        print(f"{len(texts)} submissions, {lines:.0f} lines and {tokens:.0f} tokens each on average")
        print(f"cores: {os.cpu_count()}, load average before: {_load()}")
        exercise = course.find("02")
        wall, cpu = time.perf_counter(), time.process_time()
        staged = read_submissions(exercise, subs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"read_submissions: {wall:.1f} s wall, {cpu:.1f} s CPU")
        wall, cpu = time.perf_counter(), time.process_time()
        found = compare_class(course, exercise, staged)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"compare_class: {wall:.1f} s wall, {cpu:.1f} s CPU (one process)")
        clusters = sorted((len(c.members) for c in found.clusters), reverse=True)
        print(f"  {len(found.pairs)} pairs share a fingerprint, {len(found.flagged())} flagged")
        print(f"  clusters by size: {clusters}")
        if args.pages:
            wall, cpu = time.perf_counter(), time.process_time()
            write_pages(found, Path(folder) / "report", {s: s for s in [*found.students, *found.sources]})
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"write_pages: {wall:.1f} s wall, {cpu:.1f} s CPU ({len(found.flagged())} pair pages)")
        print(f"load average after: {_load()}")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
