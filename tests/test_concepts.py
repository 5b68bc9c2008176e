"""Feedback that teaches: every test of every exercise scores for a declared concept; traces read right."""

from __future__ import annotations

import importlib.util
import inspect
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from grader.authoring.contracts import weight_problems
from grader.core.catalogue import CORE_SHARE_FLOOR
from grader.core.course import CONCEPTS_FILE, CourseConfigError, Exercise, load_course
from grader.core.results import ExerciseResult, Status, TestResult
from grader.harness import CommEvent, CommLog, RankResult, chunk_of, comm_trace
from grader.learner.views import to_terminal

REPO = Path(__file__).parent.parent
COURSE = load_course(REPO / "course.yml")
GRADED = [e for e in COURSE.exercises if e.parts]
FIXTURE = Path(__file__).parent / "fixtures" / "concepts"
IDEA = "x" * 50


def collect_tests(path: Path) -> list[tuple[str, object]]:
    spec = importlib.util.spec_from_file_location(f"concepts_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = []
    for name, value in vars(module).items():
        if name.startswith("test_") and inspect.isfunction(value):
            found += with_param_marks(name, getattr(value, "pytestmark", []))
        elif name.startswith("Test") and inspect.isclass(value):
            marks = getattr(value, "pytestmark", [])
            for n, f in vars(value).items():
                if n.startswith("test_"):
                    found += with_param_marks(f"{name}.{n}", marks + getattr(f, "pytestmark", []))
    return found


def with_param_marks(name: str, marks: list) -> list[tuple[str, list]]:
    """One entry per ``pytest.param`` with marks of its own (a part or a concept per case), else one."""
    params = [p for m in marks if m.name == "parametrize" for p in m.args[1] if getattr(p, "marks", ())]
    own = [m for m in marks if m.name != "parametrize"]
    if not params:
        return [(name, own)]
    return [(f"{name}[{p.id or i}]", own + list(p.marks)) for i, p in enumerate(params)]


def marked(marks: list, kind: str) -> list[str]:
    return [m.args[0] for m in marks if m.name == kind and m.args]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the grader registers the marks
@pytest.mark.parametrize("exercise", GRADED, ids=lambda e: e.dirname)
def test_every_test_scores_for_a_declared_concept_and_every_concept_has_tests(exercise) -> None:  # type: ignore[no-untyped-def]
    assert (COURSE.exercise_dir(exercise) / CONCEPTS_FILE).is_file(), (
        f"{exercise.dirname} has no concepts.yml"
    )
    parts = {p.id: p for p in exercise.parts}
    used: set[tuple[str, str]] = set()
    problems = []
    for suite in (
        COURSE.exercise_dir(exercise) / "test_public.py",
        COURSE.solution_dir(exercise) / "test_hidden.py",
    ):
        for name, marks in collect_tests(suite):
            part_ids, concepts = marked(marks, "part"), marked(marks, "concept")
            part = parts.get(part_ids[0]) if len(part_ids) == 1 else None
            if part is None or len(concepts) != 1 or part.concept(concepts[0]) is None:
                problems.append(f"{suite.name}::{name} part={part_ids} concept={concepts}")
            else:
                used.add((part.id, concepts[0]))
    unused = [f"{p.id}: {c.name}" for p in exercise.parts for c in p.concepts if (p.id, c.name) not in used]
    assert not problems, f"tests without exactly one declared concept of their part: {problems}"
    assert not unused, f"concepts no test grades: {unused}"


@pytest.mark.parametrize("exercise", GRADED, ids=lambda e: e.dirname)
def test_every_concept_says_why_it_weighs_what_it_does(exercise: Exercise) -> None:
    """A core concept says why it is core (`why:`); any other says why it is minor (`minor:`)."""
    silent = [f"{p.name}.{c.name}" for p in exercise.parts for c in p.concepts if not (c.why or c.minor)]
    assert not silent, (
        f"{exercise.dirname}/concepts.yml: concepts without a `why:` or `minor:` line: {silent}"
    )


@pytest.mark.parametrize("exercise", GRADED, ids=lambda e: e.dirname)
def test_every_core_concept_is_worth_the_floor_on_its_own(exercise: Exercise) -> None:
    """Issue 41: what a TA calls "did not understand the exercise" costs at least 10 % of it, each core
    concept on its own (a bug that breaks only one of them loses only its share), and every other concept
    is marked minor with its reason."""
    assert weight_problems(exercise) == [], exercise.core_shares()


def fixture_course(tmp_path: Path, concepts_yml: str) -> Exercise:
    """The concepts fixture course (reduce: 4 points, square: 1) with ``concepts_yml``; its exercise."""
    shutil.copytree(FIXTURE, tmp_path / "course", ignore=shutil.ignore_patterns("submissions"))
    (tmp_path / "course" / "exercises" / "01_pair" / CONCEPTS_FILE).write_text(concepts_yml)
    return load_course(tmp_path / "course" / "course.yml").find("01")


def test_each_core_concept_counts_on_its_own(tmp_path: Path) -> None:
    exercise = fixture_course(
        tmp_path,
        f"reduce:\n  sum: {{weight: 3, idea: {IDEA}, core: ranks, why: the part exists to teach the sum}}\n"
        f"  max: {{weight: 1, idea: {IDEA}, minor: an operation other than the sum is a side check}}\n"
        f"square:\n  sq: {{weight: 1, idea: {IDEA}, core: ranks}}\n",
    )
    reduce, square = exercise.parts
    assert [c.core for c in reduce.concepts] == ["ranks", None] and reduce.concepts[1].minor.startswith(
        "an op"
    )
    assert square.concepts[0].why == ""  # optional while the course is filled in
    assert exercise.share(reduce, reduce.concepts[0]) == pytest.approx(3 / 5)
    assert exercise.core_shares() == {
        ("01.reduce", "sum"): pytest.approx(3 / 5),
        ("01.square", "sq"): pytest.approx(1 / 5),
    }
    assert weight_problems(exercise) == []


def test_validate_flags_a_core_concept_under_the_floor_an_unmarked_one_and_an_exercise_without_core(
    tmp_path: Path,
) -> None:
    """Two core concepts of one misconception at 2 % each are two problems: their sum no longer counts."""
    small = fixture_course(
        tmp_path / "small",
        f"reduce:\n  sum: {{weight: 40, idea: {IDEA}, minor: the sum is checked elsewhere in this test}}\n"
        f"  max: {{weight: 1, idea: {IDEA}, core: op}}\n  min: {{weight: 1, idea: {IDEA}, core: op}}\n"
        f"square:\n  sq: {{weight: 1, idea: {IDEA}}}\n",
    )
    under, under_too, unmarked = weight_problems(small)
    assert "01.reduce: max" in under and "1.9%" in under and f"{CORE_SHARE_FLOOR:.0%}" in under
    assert "01.reduce: min" in under_too
    assert "01.square: sq is neither core" in unmarked
    none = fixture_course(
        tmp_path / "none",
        f"reduce:\n  sum: {{weight: 3, idea: {IDEA}, minor: no concept of this exercise is core at all}}\n"
        f"square:\n  sq: {{weight: 1, idea: {IDEA}, minor: no concept of this exercise is core at all}}\n",
    )
    assert weight_problems(none) == [
        "weights: no concept marks a core misconception (`core:` in concepts.yml)"
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("why: short", "expected one line saying why"),
        ('why: "a first line long enough\\nand a second"', "expected one line saying why"),
        ("core: Group Ranks", "lower_snake_case"),
        ("cores: ranks", "did you mean 'core'"),
        ("core: ranks, minor: an edge case of the sum only", "takes no `core:` and no `why:`"),
        ("why: the sum is the part's idea, minor: an edge case of the sum only", "takes no `core:`"),
        ("minor: short", "expected one line saying why it is minor"),
    ],
)
def test_why_and_core_are_read_strictly(tmp_path: Path, entry: str, message: str) -> None:
    text = (
        f"reduce:\n  sum: {{weight: 3, idea: {IDEA}, {entry}}}\nsquare:\n  sq: {{weight: 1, idea: {IDEA}}}\n"
    )
    with pytest.raises(CourseConfigError, match=message):
        fixture_course(tmp_path, text)


def ring_results(p: int, n: int) -> list[RankResult]:
    """What the send/recv wrappers record for a correct ring on p ranks over an n-element tensor."""
    starts = [sum(n // p + (j < n % p) for j in range(i)) for i in range(p + 1)]

    def event(op: str, peer: int, chunk: int, scratch: bool) -> CommEvent:
        size = starts[chunk + 1] - starts[chunk]
        where = (0, starts[1]) if scratch else (starts[chunk], n)
        return CommEvent(op, peer, size, size * 8, "int64", offset=where[0], storage_numel=where[1])

    results = []
    for r in range(p):
        events = []
        for s in range(p - 1):  # reduce-scatter: receive into a scratch buffer
            events += [
                event("isend", (r + 1) % p, (r - s) % p, False),
                event("recv", (r - 1) % p, (r - s - 1) % p, True),
            ]
        for s in range(p - 1):  # all-gather: receive straight into the chunk
            events += [
                event("isend", (r + 1) % p, (r + 1 - s) % p, False),
                event("recv", (r - 1) % p, (r - s) % p, False),
            ]
        results.append(RankResult(r, None, CommLog(tuple(events), ()), 0.0))
    return results


def test_trace_labels_scratch_receives_by_what_was_sent() -> None:
    trace = comm_trace(ring_results(3, 7)).splitlines()
    assert trace[1].split() == ["step", "rank", "0", "rank", "1", "rank", "2"]
    assert trace[2].split() == [
        "0",
        "->1",
        "c0",
        "<-2",
        "c2",
        "->2",
        "c1",
        "<-0",
        "c0",
        "->0",
        "c2",
        "<-1",
        "c1",
    ]
    assert trace[5].split()[:5] == ["3", "->1", "c0", "<-2", "c2"]  # all-gather step 1 of rank 0
    assert len(trace) == 2 + 4


def test_trace_caps_its_rows() -> None:
    trace = comm_trace(ring_results(8, 16), max_steps=3).splitlines()
    assert len(trace) == 2 + 3 + 1 and trace[-1].strip() == "... 11 more step(s)"


def test_chunk_of_needs_the_exact_chunk_of_the_callers_tensor() -> None:
    chunk1 = CommEvent("send", 1, 2, 16, "int64", offset=3, storage_numel=7)  # 7 over 3: [0:3] [3:5] [5:7]
    assert chunk_of(chunk1, 7, 3) == 1
    assert chunk_of(CommEvent("send", 1, 2, 16, "int64", offset=0, storage_numel=3), 7, 3) is None  # scratch
    assert chunk_of(CommEvent("send", 1, 2, 16, "int64"), 7, 3) is None  # an older worker recorded no offset


def test_no_colour_codes_with_no_color(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    test = TestResult(
        name="t",
        number="1.1",
        part="02.ring_allreduce",
        score=0,
        max_score=1,
        status=Status.FAILED,
        output="[02.ring_allreduce] wrong\n  concept: a ring",
    )
    result = ExerciseResult(exercise="02", title="Ring", graded="x", device="cpu", tests=(test,))
    path = tmp_path / "out.txt"
    with path.open("w") as sink:
        to_terminal(result, Console(file=sink, force_terminal=True, width=100))
    text = path.read_text()
    assert "concept: a ring" in text and "failed" in text
    colours = [code for code in ("\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[91m") if code in text]
    assert not colours, repr(text[:300])


LISTED_CONTRACTS = {  # issue 41: contracts that may not be minor, each graded on inputs drawn in the judge
    "01_comm_primitives": ["reduce_inputs_untouched", "rs_inputs_untouched", "gather_slots", "a2a_transpose"],
    "02_ring_tree": ["tree_subgroup", "tree_pipeline"],
    "03_cost_analysis": ["algbw_bytes", "bench_message_size"],
    "06_rdma_concepts": ["gid_choice", "out_of_band_exchange"],
    "07_custom_collectives": ["fused_subgroup"],
    "09_data_parallel": ["identical_start"],
    "11_sequence_parallel": ["dropout_mask_from_arguments"],
    "12_context_parallel": ["stable_merge"],
    "13_pipeline_parallel": ["pipeline_group_ranks"],
    "14_expert_parallel": ["caller_tensors_untouched", "layer_inputs_untouched"],
}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")
@pytest.mark.parametrize("dirname", sorted(LISTED_CONTRACTS))
def test_listed_contracts_are_core_and_graded_on_generated_inputs(dirname: str) -> None:
    """The caller's data, group ranks, the pipelined tree, bytes, GID and MTU units, buffers, dropout masks
    and the merge's max shift: core, worth the floor on their own, and some hidden test marked generated
    grades each (06's MTU units are quiz answers, core but not drawn: see mtu_units)."""
    exercise = next(e for e in GRADED if e.dirname == dirname)
    concepts = {(c.name): (p, c) for p in exercise.parts for c in p.concepts}
    hidden = collect_tests(COURSE.solution_dir(exercise) / "test_hidden.py")
    drawn = {
        marked(marks, "concept")[0]
        for _, marks in hidden
        if marked(marks, "concept") and has_generated(marks)
    }
    for name in LISTED_CONTRACTS[dirname]:
        part, concept = concepts[name]
        assert concept.core and exercise.share(part, concept) >= CORE_SHARE_FLOOR - 1e-9, (dirname, name)
        assert name in drawn, f"{dirname}: no hidden test marked generated grades {name}"


def has_generated(marks: list) -> bool:
    return any(m.name == "generated" for m in marks)
