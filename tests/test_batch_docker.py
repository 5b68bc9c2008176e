"""A 30-submission batch in Docker, its grader killed with SIGKILL halfway, then resumed: one record each."""

from __future__ import annotations

import csv
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from docker_support import require_docker_image

from grader.core.course import Course
from grader.runners.docker import sweep_leftovers

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"
EXPECTED = {"ok": 5.0, "wrong": 2.0, "crash": 1.0, "hang": 1.0, "corrupt": 0.0, "misnamed": 0.0}
COUNTS = {"ok": 14, "wrong": 8, "crash": 3, "hang": 1, "corrupt": 2, "misnamed": 2}


def make_batch(folder: Path, course: Course) -> dict[str, float]:
    """30 submissions of six kinds; returns student -> expected score."""
    reference = course.solution_dir(course.find("toy")) / "toy.py"
    expected = {}
    for kind, count in COUNTS.items():
        for i in range(count):
            student = f"{kind}{i:02d}"
            expected[student] = EXPECTED[kind]
            if kind == "corrupt":
                (folder / f"{student}.zip").write_bytes(b"PK\x03\x04 cut short")
            elif kind == "ok" and i % 2:
                with zipfile.ZipFile(folder / f"{student}.zip", "w") as archive:
                    archive.write(reference, f"{student}/toy.py")
            else:
                (folder / student).mkdir(parents=True)
                source = reference if kind == "ok" else SUBMISSIONS / kind / "toy.py"
                name = "toy_v2.py" if kind == "misnamed" else "toy.py"
                shutil.copyfile(reference if kind == "misnamed" else source, folder / student / name)
    return expected


def test_sigkill_mid_batch_then_rerun_leaves_exactly_one_correct_record_each(
    edited_course, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    require_docker_image()
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    expected = make_batch(subs, course)
    command = [
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
        "docker",
        "--workers",
        "2",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]

    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    while len(list((out / "records").glob("*.json"))) < 6 and time.monotonic() < deadline:
        assert first.poll() is None, "the batch ended before it could be killed"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    recorded_before = len(list((out / "records").glob("*.json")))
    assert 6 <= recorded_before < 30

    second = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"graded {30 - recorded_before} of 30" in " ".join(second.stdout.split())

    records = sorted(p.stem for p in (out / "records").glob("*.json"))
    assert records == sorted(expected) and not list((out / "records").glob(".*"))
    rows = {r["student"]: float(r["score"]) for r in csv.DictReader((out / "grades.csv").open())}
    assert rows == expected

    export = tmp_path / "gradebook.csv"
    assert (
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grader.cli",
                "--course",
                str(course.root / "course.yml"),
                "export",
                "--csv",
                str(export),
            ],
            check=False,
        ).returncode
        == 0
    )
    exported = [(r["student_id"], float(r["score"])) for r in csv.DictReader(export.open())]
    assert sorted(exported) == sorted(expected.items())

    import docker

    # Nothing left behind by a grader that is gone (a grader running beside this test may own containers).
    assert sweep_leftovers(docker.from_env()) == []
