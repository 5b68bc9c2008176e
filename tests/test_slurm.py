"""`grade batch --backend slurm` against real daemons (scripts/start-slurm): munged, slurmctld and slurmd.

Each batch ends with exactly one correct record per submission, after a task requeued by hand, the node
drained mid-batch and then returned, an `scancel` of the array and a Ctrl-C, each followed by a resume.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_batch_docker import make_batch

from grader import cli
from grader.core.course import Course

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

REPO = Path(__file__).resolve().parent.parent
PER_TASK = "slurm: {per_task: 3}\ncourse: Fixture course"
"""The fixture course with three submissions per array task: fewer tasks, less scheduling overhead."""


@pytest.fixture(scope="module")
def slurm() -> Iterator[dict[str, str]]:
    """A one-node cluster: started here (and stopped after) unless one already answers."""
    state = os.environ.get("DISTGPU_SLURM", "/var/tmp/distgpu-slurm")
    env = {**os.environ, "SLURM_CONF": f"{state}/slurm.conf"}
    running = subprocess.run(["sinfo", "-h"], env=env, capture_output=True, check=False).returncode == 0
    started = subprocess.run(
        [REPO / "scripts" / "start-slurm"], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if started.returncode:
        reason = f"no Slurm cluster here: scripts/start-slurm said {started.stderr.strip()[-300:]}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]  # for the drivers this module starts
    yield env
    if not running:
        subprocess.run([REPO / "scripts" / "stop-slurm"], env=env, check=False)


def driver(course: Course, subs: Path, out: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "grader.cli",
        "--course",
        str(course.root / "course.yml"),
        "batch",
        str(subs),
        "--exercise",
        "toy",
        "--backend",
        "slurm",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--gradebook",
        f"sqlite:///{out.parent / 'gradebook.db'}",
        # the toy's 3-rank world asks for 3 CPUs; this node has 2: an admin's override, as on any cluster
        "--sbatch-arg=--cpus-per-task=1",
        *flags,
    ]


def wait_for(
    what: str, check: Callable[[], bool], process: subprocess.Popen[bytes], limit: float = 300
) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert process.poll() is None, f"the batch ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def records(out: Path) -> list[str]:
    return sorted(p.stem for p in (out / "records").glob("*.json"))


def array_job(out: Path) -> str | None:
    """The Slurm job of the batch's latest array (round 002 onwards; 001 is the reference)."""
    jobs = sorted((out / "slurm").glob("[0-9][0-9][0-9]/job"))
    return jobs[-1].read_text().strip() if len(jobs) > 1 else None


def queued_array(out: Path, other_than: str) -> bool:
    """Whether the batch's latest array is a job other than ``other_than``, and on the cluster's queue."""
    job = array_job(out)
    return job not in (None, other_than) and bool(queue(str(job)))


def queue(job: str) -> list[tuple[str, str, str]]:
    done = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%K %T %r"], capture_output=True, text=True)
    return [tuple(line.split(maxsplit=2)) for line in done.stdout.splitlines()]  # type: ignore[misc]


def node_state() -> str:
    return subprocess.run(
        ["sinfo", "-h", "-n", "n0", "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True)


def assert_one_correct_record_each(course: Course, out: Path, expected: dict[str, float], tmp: Path) -> None:
    assert records(out) == sorted(expected) and not list((out / "records").glob(".*"))
    rows = {r["student"]: float(r["score"]) for r in csv.DictReader((out / "grades.csv").open())}
    assert rows == expected
    export = tmp / "gradebook.csv"
    gradebook = f"sqlite:///{out.parent / 'gradebook.db'}"
    assert (
        cli.main(
            [
                "--course",
                str(course.root / "course.yml"),
                "export",
                "--csv",
                str(export),
                "--gradebook",
                gradebook,
            ]
        )
        == 0
    )
    exported = [(r["student_id"], float(r["score"])) for r in csv.DictReader(export.open())]
    assert sorted(exported) == sorted(expected.items())


def test_30_submissions_through_a_job_array_with_a_requeued_task_and_a_drained_node(
    slurm: dict[str, str], edited_course, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("course: Fixture course", PER_TASK)
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    expected = make_batch(subs, course)
    batch = subprocess.Popen(driver(course, subs, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for("the array", lambda: array_job(out) is not None, batch)
        job = str(array_job(out))
        wait_for("a running task", lambda: any(s == "RUNNING" for _, s, _ in queue(job)), batch)
        running = next(i for i, s, _ in queue(job) if s == "RUNNING")
        manifest = json.loads((out / "slurm" / "002" / "manifest.json").read_text())
        slice_ = {item["student"] for item in manifest["tasks"][int(running)]}
        wait_for("a record from the running task", lambda: bool(slice_ & set(records(out))), batch)
        scontrol("requeue", f"{job}_{running}")
        scontrol("update", f"JobId={job}_{running}", "StartTime=now")  # skip Slurm's 2-minute requeue delay

        scontrol("update", "NodeName=n0", "State=DRAIN", "Reason=distgpu-test")
        wait_for("the node drained", lambda: node_state() == "drained", batch)
        held = len(records(out))
        time.sleep(3)
        assert len(records(out)) == held < 30, "a drained node ran a task"
        assert all(s == "PENDING" for _, s, _ in queue(job))
        scontrol("update", "NodeName=n0", "State=RESUME")

        output, _ = batch.communicate(timeout=900)
    finally:
        if node_state() != "idle":
            scontrol("update", "NodeName=n0", "State=RESUME")
        batch.kill()
    text = " ".join(output.decode().split())
    assert batch.returncode == 0, text
    assert "graded 26 of 30, 4 invalid (not graded)" in text  # corrupt and misnamed uploads: set aside
    log = (out / "slurm" / "002" / "logs" / f"{running}.out").read_text()
    assert "graded before this task was requeued" in log  # the requeued task skipped what it had filed
    assert_one_correct_record_each(course, out, expected, tmp_path)


def test_scancel_and_ctrl_c_mid_batch_then_the_same_command_resumes(
    slurm: dict[str, str], edited_course, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("course: Fixture course", "slurm: {per_task: 1}\ncourse: Fixture course")
    every, subs, out = tmp_path / "every", tmp_path / "subs", tmp_path / "out"
    every.mkdir(), subs.mkdir()
    expected = {s: v for s, v in make_batch(every, course).items() if s[-2:] in ("00", "01")}
    for entry in every.iterdir():  # two of each kind (one hang): 11 submissions
        if entry.name.removesuffix(".zip") in expected:
            entry.rename(subs / entry.name)

    invalid = sum(s.startswith(("corrupt", "misnamed")) for s in expected)  # filed before the array starts
    first = subprocess.Popen(driver(course, subs, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_for("the array", lambda: array_job(out) is not None, first)
    wait_for("two graded records", lambda: len(records(out)) >= invalid + 2, first)
    job = array_job(out)
    subprocess.run(["scancel", str(job)], check=True)
    output = " ".join(first.communicate(timeout=120)[0].decode().split())
    assert first.returncode == 3 and f"error: array {job} was cancelled" in output, output  # environment
    after_scancel = len(records(out))
    assert invalid + 2 <= after_scancel < 11

    cancelled = job
    second = subprocess.Popen(driver(course, subs, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Ctrl-C as soon as the new array is on the cluster: waiting for a record of it raced the array's end
    # (once the last of the 1-5 submissions left is filed, there is no batch left to interrupt)
    wait_for("the second array in the queue", lambda: queued_array(out, cancelled), second)
    job = array_job(out)
    second.send_signal(signal.SIGINT)
    output = " ".join(second.communicate(timeout=120)[0].decode().split())
    assert second.returncode == 3 and f"error: interrupted: cancelled Slurm job {job}" in output, output
    deadline = time.monotonic() + 30
    while queue(str(job)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert queue(str(job)) == []  # Ctrl-C leaves nothing running on the cluster
    before = len(records(out))

    third = subprocess.run(driver(course, subs, out), capture_output=True, text=True, timeout=900)
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"graded {11 - before} of 11" in " ".join(third.stdout.split())
    assert_one_correct_record_each(course, out, expected, tmp_path)


# ---------------------------------------------------------------------------------------------------------
# what a cluster is asked for: course.yml's slurm: section and per-part nodes, as a --dry-run shows it

SLURM_COURSE = """\
slurm:
  partition: gpu
  account: cs-dist
  qos: normal
  sbatch: ["--constraint=a100"]
  gpus: gpus
  per_task: 2
"""


def test_course_yml_slurm_section_is_strict(tmp_path: Path) -> None:
    from test_course_yml import GOOD, error_of, write

    from grader.core.course import load_course

    course = load_course(write(tmp_path, SLURM_COURSE + GOOD))
    assert (course.slurm.partition, course.slurm.sbatch, course.slurm.per_task) == (
        "gpu",
        ("--constraint=a100",),
        2,
    )
    assert error_of(tmp_path / "a", "slurm: {partiton: gpu}\n" + GOOD) == (
        "course.yml:1: slurm.partiton: unknown key; did you mean 'partition'?"
    )
    assert error_of(tmp_path / "b", "slurm: {sbatch: [constraint=a100]}\n" + GOOD) == (
        "course.yml:1: slurm.sbatch[0]: expected an sbatch option (--name=value), got 'constraint=a100'"
    )
    assert error_of(tmp_path / "c", GOOD.replace("timeout: 4}", "timeout: 4, nodes: 2}")) == (
        "course.yml:11: sections[0].exercises[0].parts[0].nodes: world size 3 does not split over 2 nodes"
    )


def test_dry_run_prints_what_would_be_submitted_and_submits_nothing(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("timeout: 60", "timeout: 60\n        memory_gb: 16")
    path = course.root / "course.yml"
    gpu_part = "world_sizes: [2, 4], timeout: 4, nodes: 2, device: gpu}"
    path.write_text(SLURM_COURSE + path.read_text().replace("world_sizes: [2, 3], timeout: 8}", gpu_part))
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    make_batch(subs, course)
    argv = ["--course", str(course.root / "course.yml"), "batch", str(subs), "--exercise", "toy"]
    argv += ["--backend", "slurm", "--out", str(out), "--partition", "debug", "--sbatch-arg=--exclusive"]
    assert cli.main([*argv, "--dry-run", "--workers", "4"]) == 0
    text = capsys.readouterr().out
    assert "sbatch --parsable --array=0-14%4 --exclusive " in text  # 30 submissions, 2 per task
    for line in (
        "#SBATCH --nodes=2",  # the part's ranks over 2 nodes: 2 per node, one GPU each
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --gpus-per-node=2",
        "#SBATCH --mem=16384M",
        "#SBATCH --time=6",  # two gradings of (60 s budget + 120 s margin)
        "#SBATCH --partition=debug",  # the flag wins over course.yml
        "#SBATCH --account=cs-dist",
        "#SBATCH --constraint=a100",
    ):
        assert line in text
    assert text.count("-m grader.gradeone") == 31 and f"--submission {subs / 'wrong07'}" in text
    assert not out.exists() or not list(out.rglob("*.sbatch"))  # nothing written, nothing submitted


def test_a_multi_node_part_runs_its_ranks_on_every_node_of_the_allocation(
    slurm: dict[str, str], edited_course, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Partition `multi` has two nodes (two slurmd on this host): the 4-rank world gets 2 ranks on each,
    each node's rank factory started by `srun --overlap` inside the job."""
    course = edited_course("world_sizes: [2, 3], timeout: 8}", "world_sizes: [2, 4], timeout: 4, nodes: 2}")
    subs, out = tmp_path / "subs", tmp_path / "out"
    reference = course.solution_dir(course.find("toy")) / "toy.py"
    for student, source in {
        "ok": reference,
        "wrong": REPO / "tests/fixtures/submissions/wrong/toy.py",
        "hang": REPO / "tests/fixtures/submissions/hang/toy.py",
    }.items():
        (subs / student).mkdir(parents=True)
        (subs / student / "toy.py").write_bytes(source.read_bytes())
    command = [*driver(course, subs, out, "--partition", "multi")]
    command.remove("--sbatch-arg=--cpus-per-task=1")  # 2 ranks per node: the 2 CPUs each node has
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "#SBATCH --nodes=2" in (out / "slurm" / "002" / "grade.sbatch").read_text()
    scores = {r["student"]: float(r["score"]) for r in csv.DictReader((out / "grades.csv").open())}
    assert scores == {"ok": 5.0, "wrong": 2.0, "hang": 1.0}
    for student in scores:
        result = json.loads((out / "records" / f"{student}.json").read_text())["result"]
        assert "multi-node parts ran their ranks on n1, n2" in result["notes"]
    hang = json.loads((out / "records" / "hang.json").read_text())["result"]
    four = next(t for t in hang["tests"] if t["name"] == "test_sum[4ranks]")
    assert "ranks 0, 1, 2, 3 (of 4) blocked in dist.send at toy.py:9" in four["output"]
