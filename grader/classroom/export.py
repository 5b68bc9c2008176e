"""``grade export``'s reading half: everything the files need, read from the gradebook before any is written.

The gradebook is refused, with one line, when it does not open or is corrupt (SQLite's check reads every
page first: damage in the middle of the file stops the export before it writes, not halfway through), and
when an exercise's last batch did not finish (``batch_marks``): its grades would be a mix of two batches,
or none, and a missing grade reads as a real zero in an LMS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.classroom.outputs.lms import Grades, read_grades
from grader.classroom.state.batch_marks import unfinished
from grader.classroom.state.gradebook import database_location, export_csv, open_gradebook
from grader.core.course import Course
from grader.core.errors import EnvironmentFailure, UsageError


@dataclass(frozen=True)
class GradebookContents:
    nbgrader_csv: str | None
    """The text of `nbgrader export`'s CSV, when asked for."""
    grades: Grades | None
    """The grades an LMS file is made of, when asked for."""


def read_gradebook(url: str, course: Course, *, nbgrader_csv: bool, grades: bool) -> GradebookContents:
    """What the export writes, read from the gradebook at ``url``; ``UsageError`` when there is none,
    ``EnvironmentFailure`` when it is corrupt or an exercise's last batch did not finish."""
    where = database_location(url)
    if url.startswith("sqlite:") and not Path(where).is_file():
        raise UsageError(f"{where}: no gradebook there; grade a batch first, or give --gradebook URL")
    with open_gradebook(url, course_id=course.title, check=True) as gradebook:
        stopped = unfinished(gradebook)
        if stopped:
            raise EnvironmentFailure(
                f"{where}: the last batch of {stopped[0]} has not finished (it stopped, or is still "
                "running); rerun that batch (it resumes: nothing graded is graded again), then export"
            )
        text = export_csv(gradebook) if nbgrader_csv else None
        return GradebookContents(text, read_grades(gradebook, course) if grades else None)
