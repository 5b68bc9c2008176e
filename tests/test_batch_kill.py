"""A 100-submission local batch, its grader killed with SIGKILL at random moments, then resumed until done.

The outcome must equal an uninterrupted run: one record per submission with the same verdicts, the same
rows in grades.csv and in the gradebook, and no grading process left behind.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from grader.core.course import Course

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"
COUNTS = {"ok": 60, "wrong": 20, "crash": 10, "corrupt": 5, "misnamed": 5}
KILLS = 6


def make_submission(folder: Path, student: str, kind: str, reference: Path, zipped: bool) -> None:
    if kind == "corrupt":
        (folder / f"{student}.zip").write_bytes(b"PK\x03\x04 cut short")
        return
    source = reference if kind in ("ok", "misnamed") else SUBMISSIONS / kind / "toy.py"
    name = "toy_v2.py" if kind == "misnamed" else "toy.py"
    if zipped:
        with zipfile.ZipFile(folder / f"{student}.zip", "w") as archive:
            archive.write(source, f"{student}/{name}")
    else:
        (folder / student).mkdir()
        shutil.copyfile(source, folder / student / name)


def batch_command(course: Course, subs: Path, out: Path) -> list[str]:
    command = [sys.executable, "-m", "grader.cli", "--course", str(course.root / "course.yml"), "batch"]
    return [*command, str(subs), "--exercise", "toy", "--workers", "2", "--device", "cpu", "--out", str(out)]


def verdicts(record_file: Path) -> list[tuple[str, str, float, str]]:
    """What a record says about each test, without what differs from run to run: timings, the student's
    name (and the folder named after them that a zip may hold its files in), and the rank's log tail quoted
    after a crash (its lines carry timestamps)."""
    result = json.loads(record_file.read_text())["result"]
    student = result["graded"]
    return [
        (
            t["name"],
            t["status"],
            t["score"],
            t["output"].split("\nlast output of")[0].replace(f"{student}/", "").replace(student, "<s>"),
        )
        for t in result["tests"]
    ]


def graders_running(out: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and "grader" in cmdline and str(out) in cmdline.replace("\0", " "):
            found.append(int(entry.name))
    return found


def test_sigkill_at_random_moments_changes_nothing(edited_course, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    reference = course.solution_dir(course.find("toy")) / "toy.py"
    subs, out, control_subs, control_out = (tmp_path / n for n in ("subs", "out", "control", "control-out"))
    subs.mkdir()
    control_subs.mkdir()
    kind_of = {}
    for kind, count in COUNTS.items():
        make_submission(control_subs, f"control_{kind}", kind, reference, zipped=False)
        for i in range(count):
            student = f"{kind}{i:03d}"
            kind_of[student] = kind
            make_submission(subs, student, kind, reference, zipped=i % 2 == 1)

    # The uninterrupted run: one submission of each kind (folders and zips grade alike: see test_batch).
    control = subprocess.run(batch_command(course, control_subs, control_out), capture_output=True, text=True)
    assert control.returncode == 0, control.stdout + control.stderr
    expected = {kind: verdicts(control_out / "records" / f"control_{kind}.json") for kind in COUNTS}

    rng = random.Random(20261202)
    graded_per_run = []
    for _ in range(KILLS):
        run = subprocess.Popen(
            batch_command(course, subs, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        time.sleep(rng.uniform(2.0, 8.0))  # a grading takes about a second: kills land mid-batch
        assert run.poll() is None, "the batch finished before it was killed: too few kills"
        run.send_signal(signal.SIGKILL)
        run.wait()
        graded_per_run.append(len(list((out / "records").glob("*.json"))))
    final = subprocess.run(batch_command(course, subs, out), capture_output=True, text=True, timeout=3600)
    assert final.returncode == 0, final.stdout + final.stderr

    assert graded_per_run[-1] < len(kind_of), "every submission was graded before the last kill"
    records = sorted((out / "records").glob("*.json"))
    assert [r.stem for r in records] == sorted(kind_of)  # none lost, none twice
    assert not [p for p in (out / "records").iterdir() if p.name.startswith(".")]  # no half-written record
    for record in records:
        assert verdicts(record) == expected[kind_of[record.stem]], record.stem

    rows = list(csv.DictReader((out / "grades.csv").open()))
    control_scores = {
        r["student"].removeprefix("control_"): r["score"]
        for r in csv.DictReader((control_out / "grades.csv").open())
    }
    assert sorted(r["student"] for r in rows) == sorted(kind_of)
    assert all(r["score"] == control_scores[kind_of[r["student"]]] for r in rows)

    export = tmp_path / "gradebook.csv"
    command = [sys.executable, "-m", "grader.cli", "--course", str(course.root / "course.yml")]
    subprocess.run([*command, "export", "--csv", str(export)], check=True, capture_output=True)
    exported = [r for r in csv.DictReader(export.open()) if r["student_id"] in kind_of]
    assert sorted(r["student_id"] for r in exported) == sorted(kind_of)
    assert all(float(r["score"]) == float(control_scores[kind_of[r["student_id"]]]) for r in exported)
    assert graders_running(out) == []
