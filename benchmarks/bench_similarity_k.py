"""What k (tokens per run) and the window trade in the similarity report: robustness against disguise
against false matches between solutions written independently.

    .venv/bin/python benchmarks/bench_similarity_k.py [--choices 12:8,17:12,23:17,30:20]

One class of exercise 02, compared once per (k, window):
- the reference, and copies of it: disguised (``tests/similarity_cases.disguise``: locals renamed,
  functions reordered, docstrings and comments gone, ``ast.unparse``), the same with an unused assignment
  after every fourth statement of each function, and with a ``print`` call after every fourth or every
  second one;
- the six alternative-correct solutions of tests/validity/02_ring_tree, and four partial solutions written
  from the README (two rings, a recursive doubling, a heap tree: ``tests/similarity_cases``).
Prints, per choice, each copy's score against the reference, the highest score between independent
solutions (``alt-nccl-btree`` with the three cases that share no function with it), and the highest score
of an independent solution against the reference. docs/instructors.md has the table and the choice.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import similarity_cases as cases  # noqa: E402

from grader.classroom.outputs import similarity_index  # noqa: E402
from grader.classroom.outputs.similarity import Similarity, compare_class  # noqa: E402
from grader.classroom.outputs.similarity_sources import read_submissions  # noqa: E402
from grader.core.course import load_course  # noqa: E402

REFERENCE_LABEL = "solutions/02_ring_tree"
COPIES = ("disguised", "unused every 4", "print every 4", "print every 2")
INDEPENDENT = [
    ("alt-nccl-btree", other) for other in ("alt-desc-mask-tree", "alt-inorder-tree", "alt-mpich-fold")
]


def padded(source: str, every: int, line: str) -> str:
    """The disguised copy of ``source`` with ``line`` after every ``every``-th statement of each function."""
    tree = ast.parse(cases.disguise(source))
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        body: list[ast.stmt] = []
        for number, statement in enumerate(function.body, start=1):
            body.append(statement)
            if number % every == 0:
                body += ast.parse(line.format(number=number)).body
        function.body = body
    return ast.unparse(tree) + "\n"


def the_class() -> dict[str, str]:
    reference, stub = cases.REFERENCE.read_text(), cases.STUB.read_text()
    files = {
        "disguised": cases.disguise(reference),
        "unused every 4": padded(reference, 4, "unused_{number} = {number}"),
        "print every 4": padded(reference, 4, "print({number})"),
        "print every 2": padded(reference, 2, "print({number})"),
        "carol": cases.fill(stub, "ring_allreduce", cases.CAROL_RING),
        "dave": cases.fill(stub, "ring_allreduce", cases.DAVE_RING),
        "erin": cases.fill(stub, "recursive_doubling_allreduce", cases.ERIN_DOUBLING),
        "gus": cases.fill(stub, "binary_tree", cases.HEAP_TREE),
    }
    return files | {
        case.name: (case / "allreduce.py").read_text() for case in sorted(cases.VALIDITY.iterdir())
    }


def score(found: Similarity, a: str, b: str) -> float:
    return next((p.score for p in found.pairs if set(p.students) == {a, b}), 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--choices", default="12:8,17:12,23:17,30:20", help="k:window,... to compare")
    args = parser.parse_args()
    course = load_course(REPO / "course.yml", check_stubs=False)
    exercise = course.find("02")
    files = the_class()
    with tempfile.TemporaryDirectory(prefix="bench-similarity-k-") as folder:
        texts = read_submissions(exercise, cases.write_class(Path(folder), files))
    independent = [s for s in files if s not in COPIES]
    print(
        "| k, window | "
        + " | ".join(COPIES)
        + " | independent pairs (most alike) | reference vs independent |"
    )
    for choice in args.choices.split(","):
        similarity_index.K, similarity_index.WINDOW = (int(n) for n in choice.split(":"))
        found = compare_class(course, exercise, texts)
        copies = [f"{score(found, copy, REFERENCE_LABEL):.2f}" for copy in COPIES]
        pairs = max(score(found, a, b) for a, b in INDEPENDENT)
        reference = max(score(found, s, REFERENCE_LABEL) for s in independent)
        print(
            f"| {choice.replace(':', ', ')} | " + " | ".join(copies) + f" | {pairs:.2f} | {reference:.2f} |"
        )


if __name__ == "__main__":
    main()
