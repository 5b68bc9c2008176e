"""The Docker runner against a real engine: same scores as local, locked down, nothing left behind."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from docker_support import require_docker_image

from grader.core.course import Course
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob
from grader.runners import docker as docker_module
from grader.runners.docker import LABEL, DockerRunner, gpu_refusal, sweep_leftovers
from grader.runners.images import image_tag
from grader.runners.local import LocalRunner

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


@pytest.fixture(scope="module")
def docker_runner() -> DockerRunner:
    require_docker_image()
    return DockerRunner(memory="2g")


def grade(runner: object, course: Course, name: str | None) -> ExerciseResult:
    exercise = course.find("toy")
    source = course.solution_dir(exercise) if name is None else SUBMISSIONS / name
    return runner.run(
        GradeJob(course=course, exercise=exercise, source=source, label=str(name), device="cpu")
    )  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", [None, "wrong", "crash", "raise_at_import"])
def test_same_scores_as_the_local_runner(
    docker_runner: DockerRunner, runner: LocalRunner, toy_course: Course, name: str | None
) -> None:
    in_docker, local = grade(docker_runner, toy_course, name), grade(runner, toy_course, name)
    assert [(t.name, t.status, t.score) for t in in_docker.tests] == [
        (t.name, t.status, t.score) for t in local.tests
    ]


def test_ranks_cannot_read_the_hidden_suite_or_the_reference(
    docker_runner: DockerRunner, toy_course: Course
) -> None:
    result = grade(docker_runner, toy_course, "leak")
    outputs = "\n".join(t.output for t in result.tests)
    assert (
        "PermissionError: [Errno 13] Permission denied: '/srv/judge/course/solutions/01_toy/test_hidden.py'"
        in outputs
    )
    assert "BEGIN SOLUTION" not in outputs and "What this catches" not in outputs


def test_a_memory_hog_is_an_oom_verdict(edited_course: Callable[[str, str], Course]) -> None:
    """The hog's rank runs at nice 19: on a loaded machine it may not fill the container's 1 GiB within the
    toy part's 4 s (CI saw that once), and a timeout is then the verdict, at the same 0 points. A 30 s part
    timeout leaves the kernel's OOM killer as the only way this test can end."""
    require_docker_image()
    slow_course = edited_course(
        "{name: square, points: 1, world_sizes: [1], timeout: 4}",
        "{name: square, points: 1, world_sizes: [1], timeout: 30}",
    )
    assert slow_course.find("toy").parts[1].timeout == 30
    result = grade(DockerRunner(memory="1g"), slow_course, "memory_hog")
    assert {t.status for t in result.tests if t.part == "01.square"} == {Status.OOM}


def test_no_container_is_left_and_leftovers_are_swept(
    docker_runner: DockerRunner, toy_course: Course
) -> None:
    client = docker_runner.client
    orphan = client.containers.run(image_tag("cpu"), ["sleep", "300"], detach=True, labels={LABEL: "999999"})
    grade(DockerRunner(), toy_course, "wrong")  # a new runner sweeps what a dead grader (pid 999999) left
    ours = client.containers.list(all=True, filters={"label": f"{LABEL}={os.getpid()}"})
    assert ours == [], "the runner removes its own containers"
    assert orphan.id not in [c["Id"] for c in client.api.containers(all=True)]  # ids only: others come and go


def test_a_sweep_beside_gradings_that_remove_their_own_containers_does_not_fail(
    docker_runner: DockerRunner,
) -> None:
    """Every grading of a batch removes its own containers while the others sweep for leftovers: a container
    that goes between the sweep's list and its look at it is not an error (a batch died of that once)."""
    client = docker_runner.client
    live_owner = {LABEL: str(os.getpid())}  # alive, so the sweep itself removes none of them
    created = [client.api.create_container(image_tag("cpu"), ["true"], labels=live_owner) for _ in range(40)]
    remover = threading.Thread(
        target=lambda: [client.api.remove_container(c["Id"], force=True) for c in created]
    )
    remover.start()
    try:
        while remover.is_alive():
            assert sweep_leftovers(client) == []
    finally:
        remover.join()


def test_a_prewarmed_runner_grades_each_submission_in_a_fresh_container(
    runner: LocalRunner, toy_course: Course
) -> None:
    require_docker_image()
    warm = DockerRunner(memory="2g", prewarm=True)
    mine = {"label": f"{LABEL}={os.getpid()}"}
    try:
        wrong = grade(warm, toy_course, "wrong")
        (spare,) = warm.client.containers.list(filters=mine)  # started while "wrong" was graded
        right = grade(warm, toy_course, None)
        (next_spare,) = warm.client.containers.list(filters=mine)
        assert next_spare.id != spare.id, "the spare graded the second submission and was removed"
    finally:
        warm.close()
    assert warm.client.containers.list(all=True, filters=mine) == []
    assert [(t.name, t.status) for t in wrong.tests] == [
        (t.name, t.status) for t in grade(runner, toy_course, "wrong").tests
    ]
    assert right.full_marks and not wrong.full_marks


def test_a_course_exercise_scores_the_same_in_docker(
    docker_runner: DockerRunner, runner: LocalRunner, course: Course
) -> None:
    exercise = course.find("04")
    job = GradeJob(
        course=course, exercise=exercise, source=course.solution_dir(exercise), label="ref", device="cpu"
    )
    in_docker, local = docker_runner.run(job), runner.run(job)
    assert in_docker.full_marks and local.full_marks
    assert [(t.name, t.status, t.score) for t in in_docker.tests] == [
        (t.name, t.status, t.score) for t in local.tests
    ]


def test_a_cuda_grading_asks_the_engine_for_every_gpu_and_a_large_shm(
    toy_course: Course, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request the engine stores for a --device cuda container (created on the real engine, never
    started), and the clear error an engine without the NVIDIA runtime gives when one is started. The host
    is said to have a driver (CI's has none, and --device cuda is then refused before any container)."""
    import docker

    image = require_docker_image()
    monkeypatch.setattr(docker_module, "host_gpus", lambda: 1)
    runner = DockerRunner(memory="1g")
    job = GradeJob(
        course=toy_course, exercise=toy_course.find("toy"), source=Path("."), label="gpu", device="cuda"
    )
    container = runner.client.containers.create(
        image, ["true"], labels={LABEL: str(os.getpid())}, **runner._limits(job)
    )
    try:
        host = container.attrs["HostConfig"]
        assert [(r["Count"], r["Capabilities"]) for r in host["DeviceRequests"]] == [(-1, [["gpu"]])]
        assert host["ShmSize"] == 1 << 30  # NCCL's shared-memory transport between ranks of one container
        if "nvidia" in runner.client.info().get("Runtimes", {}):
            return  # this engine can start it: the refusal below is for engines without GPUs
        with pytest.raises(docker.errors.APIError) as refused:
            container.start()
        assert gpu_refusal(refused.value).startswith("this Docker engine cannot give containers GPUs")
    finally:
        container.remove(force=True)
