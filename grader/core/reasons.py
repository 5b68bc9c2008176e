"""What staging says about an upload: a ``Reason`` to decide from and a line of text to show.

No decision is ever taken from the text, so rewording a message changes no verdict and no key.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """Why a file, a member or a whole upload was not taken, or what was taken in its place: what code
    decides from (the text is for people).

    ``WHOLE`` codes condemn the whole upload; ``REFUSALS`` concern one file or member, and condemn the
    upload only when no file is left to grade; ``ABSENT``, ``RENAMED`` and ``LEFTOVER`` only inform.
    """

    MISSING = "missing"
    """The upload does not exist."""
    EMPTY = "empty"
    """An empty folder, file or archive."""
    NOT_AN_UPLOAD = "not-an-upload"
    """Neither a folder, a zip or tar archive, nor a file named like one of the exercise's files."""
    CORRUPT = "corrupt"
    """An archive that cannot be read."""
    ARCHIVE_TOO_LARGE = "archive-too-large"
    """An archive larger than ``upload.MAX_ARCHIVE_BYTES``, or a tar that unpacks to more than
    ``upload.MAX_UNPACKED_BYTES``."""
    TOO_MANY_MEMBERS = "too-many-members"
    TRAVERSAL = "traversal"
    """A member whose path escapes the submission: the whole archive is suspect."""
    NO_EXERCISE_FILE = "no-exercise-file"
    """None of the exercise's files is in it."""
    DUPLICATE = "duplicate"
    """Two uploads for one student (alice/ and alice.zip; two submissions of one id in a platform's
    archive): neither is graded until one is removed."""
    AMBIGUOUS = "ambiguous"
    """Two candidate copies of one of the exercise's files (in two folders, twice in one archive, or two
    renamed copies and no exact name): which one the student meant is theirs to say."""
    ABSENT = "absent"
    """One of the exercise's files is not in it (a valid upload may lack some)."""
    LINK = "link"
    NOT_REGULAR = "not-regular"
    FILE_TOO_LARGE = "file-too-large"
    MEMBER_REFUSED = "member-refused"
    """An archive member refused for its path (one that escapes the submission)."""
    RENAMED = "renamed"
    """A renamed copy (``memory (1).py``, ``memory-1.py``) was taken for the missing exact name."""
    LEFTOVER = "leftover"
    """Files in the upload that the exercise does not take (renamed copies beside the exact name too)."""


WHOLE = frozenset(
    {
        Reason.MISSING,
        Reason.EMPTY,
        Reason.NOT_AN_UPLOAD,
        Reason.CORRUPT,
        Reason.ARCHIVE_TOO_LARGE,
        Reason.TOO_MANY_MEMBERS,
        Reason.TRAVERSAL,
        Reason.NO_EXERCISE_FILE,
        Reason.DUPLICATE,
        Reason.AMBIGUOUS,
    }
)
"""Reasons that make an upload ``invalid`` by themselves."""
REFUSALS = frozenset({Reason.LINK, Reason.NOT_REGULAR, Reason.FILE_TOO_LARGE, Reason.MEMBER_REFUSED})
"""Reasons a file or member was refused: the upload is ``invalid`` when they leave nothing to grade."""


@dataclass(frozen=True)
class Note:
    """One thing staging tells the student: a code to decide from, and a line to show."""

    reason: Reason
    text: str
