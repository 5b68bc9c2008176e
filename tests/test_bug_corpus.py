"""`grade validate` on the whole course, in two judge processes sharing the exercises, as CI runs it.

Per exercise: the reference scores full marks three times, the fresh stubs score zero and are in sync, every
alternative-correct case (tests/validity/NN_slug/alt-*/) earns full marks, and every bug of the corpus
(tests/corpus/NN_slug.yml, see docs/authoring.md) fails a test of the concept it names, so loses at least
that concept's share, and loses or keeps exactly the parts it says. A mutation whose ``replace`` no longer
matches the reference exactly once fails loudly, so the corpus cannot rot silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.authoring.stubs import stale_stubs
from grader.core.course import Exercise, load_course
from grader.core.results import ExerciseResult, Status

REPO = Path(__file__).parent.parent
CORPUS = Path(__file__).parent / "corpus"
COURSE = load_course(REPO / "course.yml")
GRADED = [e for e in COURSE.exercises if e.parts]
JUDGES = 2
"""`grade validate` processes at once, sharing the exercises (CI has 2 cores)."""


def _bugs(exercise: Exercise) -> list[dict[str, Any]]:
    path = CORPUS / f"{exercise.dirname}.yml"
    return yaml.safe_load(path.read_text()) if path.is_file() else []


def _longest_first(exercises: list[Exercise]) -> list[Exercise]:
    """``exercises`` by estimated grading time (gradings x rank processes), longest first: the judges take
    them in this order, each the next one not taken, so neither is left with a long one at the end."""

    def cost(e: Exercise) -> float:
        ranks = sum({size for part in e.parts for size in part.world_sizes})
        return (len(_bugs(e)) + 6) * (1 + 0.1 * ranks)

    return sorted(exercises, key=cost, reverse=True)


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], Path]:
    """`grade validate` over the whole course: the validity rows by exercise key, and the results folder."""
    out = tmp_path_factory.mktemp("validate")
    keys = [e.key for e in _longest_first(GRADED)]
    grade = [sys.executable, "-m", "grader.cli", "--course", str(REPO / "course.yml")]
    options = ["--device", "cpu", "--share", str(out / "claims"), "--results", str(out / "results")]
    commands = [
        [*grade, "validate", *keys, *options, "--json", str(out / f"table-{i}.json")] for i in range(JUDGES)
    ]
    env = os.environ | {"NO_COLOR": "1", "COLUMNS": "200"}
    judges = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) for c in commands
    ]
    logs = [j.communicate(timeout=3600)[0].decode(errors="replace") for j in judges]
    rows = {}
    for i, log in enumerate(logs):
        table = out / f"table-{i}.json"
        assert table.is_file(), f"grade validate wrote no table:\n{log[-3000:]}"
        rows |= {row["exercise"]: row for row in json.loads(table.read_text())}
    return rows, out / "results"


def _on_gpu_part(exercise: Exercise, bug: dict[str, Any]) -> bool:
    """The bug's concept belongs to a ``device: gpu`` part: a CPU run reports its tests blocked."""
    part = next((p for p in exercise.parts if p.concept(bug["concept"])), None)
    return part is not None and part.device == "gpu"


def _mutations(*, gpu: bool) -> list[Any]:
    """The bugs of CPU parts (``gpu=False``), which this run must catch, or those of GPU parts."""
    return [
        pytest.param(e, bug["name"], id=f"{e.key}-{bug['name']}", marks=pytest.mark.slow)
        for e in GRADED
        for bug in _bugs(e)
        if _on_gpu_part(e, bug) == gpu
    ]


@pytest.mark.slow
@pytest.mark.parametrize("exercise", GRADED, ids=lambda e: e.dirname)
def test_reference_stable_stubs_zero_alt_correct_full(validated, exercise: Exercise) -> None:  # type: ignore[no-untyped-def]
    row = validated[0][exercise.key]
    assert "reference_stable" in row, row["problems"]  # the corpus could not be applied
    stale = [str(p.relative_to(COURSE.root)) for p in stale_stubs(COURSE, exercise)]
    assert not stale, f"stale stubs (run `grade stubs`): {stale}"
    assert row["reference_stable"] == "3/3" and row["stub_zero"], row["problems"]
    assert len(row["alts"]) >= 2, f"{exercise.dirname}: write at least two alternative-correct cases"
    problems = [p for p in row["problems"] if not p.startswith("bug ")]
    assert not problems, problems


@pytest.mark.parametrize(("exercise", "name"), _mutations(gpu=False))
def test_bug_loses_its_concept_and_its_parts(validated, exercise: Exercise, name: str) -> None:  # type: ignore[no-untyped-def]
    rows, results = validated
    (found,) = [b for b in rows[exercise.key].get("bugs", []) if b["name"] == name] or [rows[exercise.key]]
    assert found.get("caught"), [p for p in rows[exercise.key]["problems"] if name in p or "corpus:" in p]
    result = ExerciseResult.from_dict(json.loads((results / exercise.dirname / f"{name}.json").read_text()))
    (bug,) = [b for b in _bugs(exercise) if b["name"] == name]
    check_parts(bug, result)


@pytest.mark.parametrize(("exercise", "name"), _mutations(gpu=True))
def test_gpu_bug_is_reported_blocked_not_caught(validated, exercise: Exercise, name: str) -> None:  # type: ignore[no-untyped-def]
    """On CPU a GPU part's bug cannot be judged: `grade validate` must say so, not count it as caught.
    scripts/gpu-check validates these exercises with --device cuda, where they must be caught."""
    rows, _ = validated
    (found,) = [b for b in rows[exercise.key].get("bugs", []) if b["name"] == name] or [rows[exercise.key]]
    assert found.get("blocked") and not found.get("caught"), found


def check_parts(bug: dict[str, Any], result: ExerciseResult) -> None:
    """The corpus entry's ``loses``, ``keeps``, ``verdict`` and ``message``; failures show their concept."""
    by_part: dict[str, list] = {}
    for test in result.tests:
        by_part.setdefault(test.part, []).append(test)
    for part in bug["loses"]:
        lost = [t for t in by_part[part] if t.status is not Status.PASSED]
        assert lost, f"{bug['name']} should lose points in {part} but scored full marks there"
        if "verdict" in bug:
            assert {str(t.status) for t in lost} == {bug["verdict"]}, [t.output for t in lost]
    for part in bug.get("keeps", []):
        kept = by_part[part]
        assert all(t.status is Status.PASSED for t in kept), [
            t.output for t in kept if t.status is not Status.PASSED
        ]
    if "message" in bug:
        assert any(bug["message"] in t.output for t in result.tests), [t.output for t in result.tests]
    untaught = [
        t.output for t in result.tests if t.status is Status.FAILED and "\n  concept: " not in t.output
    ]
    assert not untaught, f"{bug['name']}: failures that do not name their concept: {untaught}"


def test_corpus_covers_every_graded_exercise() -> None:
    assert {e.dirname for e in GRADED} == {p.stem for p in CORPUS.glob("*.yml")}
