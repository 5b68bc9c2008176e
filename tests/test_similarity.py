"""Similarity across a class, the comparison alone (no grading): a disguised copy scores as a copy, groups
that hand in one file are one cluster however large, a leak of the reference is marked as such, solutions
written independently and untouched stubs are not flagged; the tokens behind it.

The report, its pages and the commands are in tests/test_similarity_report.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

import pytest
from similarity_cases import (
    CAROL_RING,
    DAVE_RING,
    ERIN_DOUBLING,
    HEAP_TREE,
    INDEPENDENT,
    REFERENCE,
    disguise,
    fill,
    validity,
    write_class,
)

from grader.classroom.outputs.similarity import DEFAULT_THRESHOLD, Similarity, compare_class
from grader.classroom.outputs.similarity_pair import MIN_SHARED
from grader.classroom.outputs.similarity_sources import SourceKind, read_submissions
from grader.classroom.outputs.similarity_tokens import tokenize
from grader.core.course import Course

REFERENCE_LABEL = "solutions/02_ring_tree"


@pytest.fixture(scope="module")
def stub(course: Course) -> str:
    return (course.exercise_dir(course.find("02")) / "allreduce.py").read_text()


def compare(
    course: Course,
    folder: Path,
    files: dict[str, str],
    *,
    threshold: float = 0.5,
    common_min: int | None = None,
) -> Similarity:
    """The class of ``files`` (student: allreduce.py's text) compared, each read back as grading stages it."""
    exercise = course.find("02")
    texts = read_submissions(exercise, write_class(folder, files))
    return compare_class(course, exercise, texts, threshold=threshold, common_min=common_min)


def score(found: Similarity, a: str, b: str) -> float:
    return next((p.score for p in found.pairs if set(p.students) == {a, b}), 0.0)


def stored(source: str) -> set[str]:
    """The locals of the functions: the names assigned inside them that are not parameters."""
    found = set()
    for function in (n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)):
        names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        found |= names - {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    return found


def module(source: str) -> ModuleType:
    loaded = ModuleType("submission")
    exec(compile(source, "allreduce.py", "exec"), loaded.__dict__)
    return loaded


# ---------------------------------------------------------------------------------------------------------
# a disguised copy


@pytest.mark.parametrize("original", ["reference", INDEPENDENT[1]])
def test_a_disguised_copy_scores_as_a_copy_of_its_original(
    course: Course, stub: str, tmp_path: Path, original: str
) -> None:
    text = REFERENCE.read_text() if original == "reference" else validity(original)
    copy = disguise(text)
    # the disguise: locals renamed, functions in another order, no docstring or comment, ast.unparse's layout
    assert '"""' not in copy and "#" not in copy and copy == ast.unparse(ast.parse(copy)) + "\n"
    assert not stored(text) & stored(copy)
    order = [n.name for n in ast.parse(copy).body if isinstance(n, ast.FunctionDef)]
    assert order != [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    before, after = module(text), module(copy)  # the same behaviour where it runs without a world
    for p in (1, 2, 5, 8, 13):
        assert before.binary_tree(p) == after.binary_tree(p)
        assert before.lower_bounds(p + 1, 1e6, 1e-6, 1e-9) == after.lower_bounds(p + 1, 1e6, 1e-6, 1e-9)
        assert before.bound_ratios("ring", p + 1) == after.bound_ratios("ring", p + 1)

    found = compare(course, tmp_path, {"orig": text, "copy": copy, "fay": stub})
    assert score(found, "orig", "copy") >= 0.9
    [pair] = [p for p in found.flagged() if set(p.students) == {"orig", "copy"}]
    assert min(pair.shares) >= 0.9 and pair.shared > 3 * MIN_SHARED


def test_renaming_reordering_commuting_and_padding_leave_the_tokens_as_they_were() -> None:
    original = """
def f(tensor, group=None):
    p = size(group)
    r = rank(group)
    out = tensor * p + r
    return out

def g(x):
    return f(x) + 1
"""
    disguised = """
import torch.distributed as D

def g(value):
    '''Docstrings do not count.'''
    return f(value) + 1

def f(tensor, group=None):
    me = rank(group)  # commutes with the next line
    pass
    unused = 42
    n = size(group)
    result = tensor * n + me
    return result
"""
    first, second = tokenize(original, "a.py"), tokenize(disguised, "a.py")
    assert first.parsed and second.parsed
    functions = lambda t: sorted(u.tokens for u in t.units if u.tokens[0] == "FunctionDef")  # noqa: E731
    assert functions(first) == functions(second)
    [ring] = [u for u in tokenize("import torch.distributed as dist\ndist.send(x, 1)\n", "a.py").units]
    assert "torch.distributed.send" in ring.tokens  # an imported name is what it imports


def test_a_file_that_does_not_parse_is_compared_by_the_lexer_with_a_note(
    course: Course, stub: str, tmp_path: Path
) -> None:
    broken = REFERENCE.read_text().replace("def ring_allreduce(", "def ring_allreduce(:", 1)
    assert not tokenize(broken, "allreduce.py").parsed
    found = compare(course, tmp_path, {"alice": REFERENCE.read_text(), "bob": broken, "fay": stub})
    assert found.unparsed == ("bob/allreduce.py",)
    pair = next(p for p in found.pairs if p.students == ("alice", "bob"))
    assert pair.lexed and pair.score > 0.9 and pair in found.flagged()


# ---------------------------------------------------------------------------------------------------------
# groups: clusters, whatever their size


@pytest.mark.parametrize(("size", "copies"), [(5, 3), (7, 4)])
def test_identical_copies_are_one_cluster(
    course: Course, stub: str, tmp_path: Path, size: int, copies: int
) -> None:
    shared = validity(INDEPENDENT[1])
    others = [validity(INDEPENDENT[0]), fill(stub, "ring_allreduce", CAROL_RING), stub]
    files = {f"c{i}": shared for i in range(copies)} | {f"o{i}": others[i] for i in range(size - copies)}
    found = compare(course, tmp_path, files)
    [cluster] = found.clusters
    assert cluster.students == tuple(f"c{i}" for i in range(copies)) and cluster.sources == ()
    assert cluster.pairs == copies * (copies - 1) // 2 == len(found.flagged())
    assert cluster.together == pytest.approx(1.0) and cluster.strongest.score == pytest.approx(1.0)


def a_class_of_40(stub: str, leaked: str) -> dict[str, str]:
    """21 students hand in ``leaked``, each disguised their own way; the 19 others wrote their own (six
    of them) or handed in the stub."""
    own = [
        fill(stub, "ring_allreduce", CAROL_RING),
        fill(stub, "ring_allreduce", DAVE_RING),
        fill(stub, "recursive_doubling_allreduce", ERIN_DOUBLING),
        fill(stub, "binary_tree", HEAP_TREE),
        validity(INDEPENDENT[0]),
        validity(INDEPENDENT[1]),
    ]
    others = own + [stub] * 13
    return {f"copy{i:02d}": disguise(leaked, seed=i) for i in range(21)} | {
        f"other{i:02d}": text for i, text in enumerate(others)
    }


def test_a_leaked_reference_copied_by_21_of_40_is_flagged_for_all_21_as_the_reference(
    course: Course, stub: str, tmp_path: Path
) -> None:
    found = compare(course, tmp_path, a_class_of_40(stub, REFERENCE.read_text()))
    assert found.sources == {REFERENCE_LABEL: SourceKind.REFERENCE} and found.reference() == REFERENCE_LABEL
    with_reference = {p.students[0] for p in found.flagged() if p.students[1] == REFERENCE_LABEL}
    assert with_reference == {f"copy{i:02d}" for i in range(21)}
    [cluster] = found.clusters
    assert len(cluster.students) == 21 and cluster.sources == (REFERENCE_LABEL,)
    assert not any(s.startswith("other") for p in found.flagged() for s in p.students)


def test_a_leaked_solution_copied_by_21_of_40_is_one_cluster_of_21(
    course: Course, stub: str, tmp_path: Path
) -> None:
    found = compare(course, tmp_path, a_class_of_40(stub, validity("alt-inorder-tree")))
    [cluster] = found.clusters
    assert cluster.students == tuple(f"copy{i:02d}" for i in range(21)) and cluster.sources == ()
    assert cluster.pairs == 210 and cluster.together > 0.9
    assert found.common_min is None  # nothing was dropped for being popular


def test_common_min_drops_what_many_share_as_moss_does_but_never_the_reference(
    course: Course, stub: str, tmp_path: Path
) -> None:
    leak = {f"c{i}": disguise(validity(INDEPENDENT[1]), seed=i) for i in range(3)}
    found = compare(course, tmp_path / "a", leak | {"fay": stub}, common_min=2)
    assert found.flagged() == [] and found.clusters == () and found.common_min == 2
    copied = {f"c{i}": disguise(REFERENCE.read_text(), seed=i) for i in range(3)}
    found = compare(course, tmp_path / "b", copied | {"fay": stub}, common_min=2)
    assert {p.students[0] for p in found.flagged() if p.students[1] == REFERENCE_LABEL} == set(copied)
    with pytest.raises(ValueError, match="--common-min must be at least 1, got 0"):
        compare(course, tmp_path / "c", {}, common_min=0)


# ---------------------------------------------------------------------------------------------------------
# what must not be flagged


def test_independent_solutions_and_stubs_are_not_flagged(course: Course, stub: str, tmp_path: Path) -> None:
    files = {"ann": validity(INDEPENDENT[0]), "ben": validity(INDEPENDENT[1]), "fay": stub, "zoe": stub}
    files |= {
        "carol": fill(stub, "ring_allreduce", CAROL_RING),
        "dave": fill(stub, "ring_allreduce", DAVE_RING),
    }
    found = compare(course, tmp_path, files)
    assert found.flagged() == [] and found.clusters == ()
    for a, b in [("ann", "ben"), ("ann", REFERENCE_LABEL), ("ben", REFERENCE_LABEL), ("carol", "dave")]:
        assert score(found, a, b) < DEFAULT_THRESHOLD / 2, (a, b)
    assert not {"fay", "zoe"} & {s for p in found.pairs for s in p.students}  # the stub is all boilerplate


def test_code_everyone_writes_alike_flags_nobody(course: Course, stub: str, tmp_path: Path) -> None:
    tree = [HEAP_TREE, re.sub(r"\br\b", "rank", HEAP_TREE), "parents = [(i - 1) // 2 for i in range(p)]\n"]
    tree[2] += "parents[0] = -1\nreturn parents\n"
    everyone = {f"s{i}": fill(stub, "binary_tree", tree[i % 3]) for i in range(6)}
    found = compare(course, tmp_path / "all", everyone)
    assert found.flagged() == [] and len(found.students) == 6 and found.unparsed == ()

    # Two of them alone share it: too little code to be evidence, however alike.
    two = {"s0": everyone["s0"], "s3": everyone["s3"], "fay": stub, "zoe": stub}
    found = compare(course, tmp_path / "two", two)
    assert found.flagged() == []
    assert [(p.students, p.score) for p in found.pairs] == [(("s0", "s3"), pytest.approx(1.0))]
    assert found.pairs[0].shared < MIN_SHARED


def test_the_threshold_is_checked(course: Course, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--threshold must be in \(0, 1\], got 1.5"):
        compare(course, tmp_path, {}, threshold=1.5)
