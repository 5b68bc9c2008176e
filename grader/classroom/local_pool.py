"""``LocalPool``: a batch's gradings on this machine, ``plan.workers`` grading processes at a time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed

from grader.classroom.batch import BatchPlan, PendingGrade
from grader.classroom.grading_process import GradingProcess, grade_in_process
from grader.classroom.state.records import Record, RecordStore
from grader.core.results import ExerciseResult, Status


def grade_all(
    plan: BatchPlan,
    todo: list[PendingGrade],
    on_done: Callable[[PendingGrade, ExerciseResult], None],
) -> None:
    """Grade ``todo`` (each from its staged copy) on ``plan.workers`` slots; ``on_done`` runs in this
    thread, one result at a time."""
    slots = [GradingProcess(plan, gpus) for gpus in plan.gpu_slots or [None] * plan.workers]
    free = list(range(len(slots)))
    pending: dict[Future[ExerciseResult], tuple[PendingGrade, int]] = {}
    queue = list(todo)
    try:
        with ThreadPoolExecutor(max_workers=len(slots)) as pool:
            while queue or pending:
                while queue and free:
                    grade, slot = queue.pop(0), free.pop()
                    student = grade.submission.student
                    future = pool.submit(slots[slot].grade, grade.source, student, grade.notes)
                    pending[future] = (grade, slot)
                done = next(as_completed(pending))
                grade, slot = pending.pop(done)
                free.append(slot)
                on_done(grade, done.result())
    finally:
        for process in slots:
            process.close()


class LocalPool:
    """``plan.workers`` grading processes at a time on this machine."""

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        return grade_in_process(
            plan, None, "the reference solution", plan.gpu_slots[0] if plan.gpu_slots else None
        )

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        def finished(grade: PendingGrade, result: ExerciseResult) -> None:
            student = grade.submission.student
            if result.verdict is not Status.ERROR:  # a grader or course failure: the next run retries it
                store.put(Record(student, grade.key, result, grade.submitted, grade.files))
            on_result(student, result)

        grade_all(plan, todo, finished)
