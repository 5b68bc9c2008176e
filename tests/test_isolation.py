"""Gradings graded side by side do not reach each other (issue 29): in a ``--workers 2`` batch that holds the
fork bomb, the thread bomb and the memory bomb of the adversarial corpus, every well-behaved submission gets
the grade it gets alone. Locally, each grading's ranks run as a uid of their own (``grader.core.rank_uids``),
so the process limit one bomb exhausts is never its neighbour's; in Docker, each container has its own pids
and memory caps (the ranks' uid is nobody in every container, and no rlimit counts per uid there).

This file runs in the normal parallel test run, beside other gradings on the other xdist worker.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from docker_support import require_docker_image
from test_adversarial import ITEMS, build_item, local_sandbox

from grader.authoring.validate import mutated
from grader.classroom.batch import make_plan
from grader.classroom.grade import batch_grade
from grader.core.course import load_course
from grader.core.results import ExerciseResult

pytestmark = pytest.mark.slow

REPO = Path(__file__).parent.parent
EXERCISE = "02"
BOMBS = ("bomb_fork", "bomb_thread", "bomb_memory")
BUGS = ("ring_chunk_index_r_plus_s",)
"""Well-behaved but wrong: a grade below full marks must also come out the same beside the bombs."""


@pytest.fixture
def class_folder() -> Iterator[Path]:
    # Outside pytest's root-only temporary folder: ranks (as their leased uid) read the submissions.
    folder = Path(tempfile.mkdtemp(prefix="distgpu-isolation-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _well_behaved(subs: Path) -> list[str]:
    reference = REPO / "solutions" / "02_ring_tree"
    (subs / "reference").mkdir(parents=True)
    shutil.copyfile(reference / "allreduce.py", subs / "reference" / "allreduce.py")
    bugs = yaml.safe_load((REPO / "tests" / "corpus" / "02_ring_tree.yml").read_text())
    corpus = {bug["name"]: bug for bug in bugs}
    for name in BUGS:
        with mutated(reference, corpus[name]) as folder:
            (subs / name).mkdir()
            shutil.copyfile(folder / "allreduce.py", subs / name / "allreduce.py")
    return ["reference", *BUGS]


def _grade(subs: Path, out: Path, workers: int, backend: str) -> dict[str, ExerciseResult]:
    course = load_course(REPO / "course.yml")
    plan = make_plan(
        course=course, exercise=course.find(EXERCISE), backend=backend, device="cpu", workers=workers, gpus=0
    )
    results: dict[str, ExerciseResult] = {}
    batch_grade(
        plan=plan,
        submissions=subs,
        out=out,
        regrade=[],
        gradebook_url=f"sqlite:///{out.parent / (out.name + '.db')}",
        late=False,
        on_start=lambda _n: None,
        on_result=lambda student, result: results.__setitem__(student, result),
    )
    return results


def _grades(result: ExerciseResult) -> dict[str, tuple[str, float]]:
    return {t.name: (t.status.value, t.score) for t in result.tests}


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_bombs_in_a_two_worker_batch_leave_their_neighbours_solo_grades(
    class_folder: Path, backend: str
) -> None:
    if backend == "docker":
        require_docker_image()
    elif why := local_sandbox():
        pytest.fail(f"the bombs need the local sandbox, which does not work here: {why}")
    solo_subs, batch_subs = class_folder / "solo", class_folder / "batch"
    students = _well_behaved(solo_subs)
    solo = _grade(solo_subs, class_folder / "solo-out", workers=1, backend=backend)
    shutil.copytree(solo_subs, batch_subs)
    reference = (REPO / "solutions" / "02_ring_tree" / "allreduce.py").read_text()
    for bomb in BOMBS:
        build_item(ITEMS[bomb], batch_subs / bomb, reference, REPO, canary="")
    beside = _grade(batch_subs, class_folder / "batch-out", workers=2, backend=backend)
    assert set(beside) == {*students, *BOMBS}
    assert solo["reference"].score == solo["reference"].max_score  # the yardstick itself is sound
    for student in students:
        assert _grades(beside[student]) == _grades(solo[student]), student
