"""One Slurm array task of a batch: what ``python -m grader.slurm MANIFEST INDEX`` runs on a node.

The driver and its tasks share files on a folder every node sees: the driver writes the round's manifest
(``write_manifest``); a task grades its slice, files each grade as a record, and writes a grading that
ended in ERROR (no grade) to the round's ``errors/`` folder, which the driver reads (``read_error``).
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.classroom.batch import BatchPlan, PendingGrade
from grader.classroom.grading_process import grade_in_process
from grader.classroom.state.records import Record, RecordStore
from grader.core.atomic import write_atomic
from grader.core.course import load_course
from grader.core.results import ExerciseResult, Status


def write_manifest(folder: Path, plan: BatchPlan, records: Path, slices: list[list[PendingGrade]]) -> Path:
    """What every task of the array needs, in one JSON file on the shared folder."""
    tasks = [
        [
            {
                "student": g.submission.student,
                "path": str(g.source.resolve()),
                "notes": list(g.notes),
                "key": g.key,
                "submitted": g.submitted,
                "files": g.files,
            }
            for g in part
        ]
        for part in slices
    ]
    spec = {
        "course": str(plan.course.root / "course.yml"),
        "exercise": plan.exercise.key,
        "runner": plan.backend,
        "device": plan.device,
        "records": str(records.resolve()),
        "errors": str((folder / "errors").resolve()),
        "tasks": tasks,
    }
    path = folder / "manifest.json"
    write_atomic(path, json.dumps(spec, indent=1))
    return path


def read_error(path: Path) -> ExerciseResult | None:
    try:
        return ExerciseResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def run_task(manifest: Path, index: int) -> int:
    """Grade slice ``index`` of ``manifest``, one process per submission, filing each grade as it ends."""
    spec = json.loads(manifest.read_text())
    course = load_course(Path(spec["course"]))
    plan = BatchPlan(
        course=course,
        exercise=course.find(spec["exercise"]),
        backend=spec["runner"],
        device=spec["device"],
        workers=1,
        gpu_slots=[None],
    )
    store = RecordStore(Path(spec["records"]), sweep=False)  # other tasks may be mid-write
    for item in spec["tasks"][index]:
        record = store.get(item["student"])
        if record is not None and record.key == item["key"]:
            print(f"{item['student']}: graded before this task was requeued", flush=True)
            continue
        notes = tuple(item["notes"])  # "path" is the batch's staged copy of the upload: what staging said
        result = grade_in_process(plan, Path(item["path"]), item["student"], None, notes)
        print(f"{item['student']}: {result.verdict} {result.score:g}/{result.max_score:g}", flush=True)
        if result.verdict is Status.ERROR:  # no grade: the driver reports it, the next run retries it
            error = Path(spec["errors"]) / f"{item['student']}.json"
            write_atomic(error, json.dumps(result.to_dict()))
        else:
            store.put(Record(item["student"], item["key"], result, item["submitted"], item.get("files", {})))
    return 0
