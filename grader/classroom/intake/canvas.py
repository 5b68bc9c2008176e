"""Canvas's "Download Submissions": one flat zip, a file per uploaded attachment.

How Canvas names each file (canvas-lms, ``lib/content_zipper.rb``, read at commit 05e9653c):

    full_filename = "#{filename}_#{file.id}_#{sanitize_attachment_filename(file.display_name)}"
    id = @assignment.anonymize_students? ? "anon_#{submission.anonymous_id}" : submission.user_id
    filename = [users_name, submission.late? ? "LATE" : nil, id].compact.join("_")
    users_name = get_user_name(students, submission) unless @assignment.anonymize_students?
    filename = "#{called}_text.html"          # a text entry (``_link.html`` for a URL)

So ``smithjane_LATE_12345_678901_allreduce.py``: the sortable name (lowercased, ``_<digits>_`` folded,
every non-word character removed: ``sanitize_user_name``, ``sanitize_file_name``), ``LATE`` when Canvas
counts it late (older Canvas wrote ``late``), the user id, the attachment id, the name the student uploaded.
Under anonymous grading there is no name and the id is ``anon_<anonymous_id>``. A second upload of one name
is renamed by ``Attachment.make_unique_filename`` (``app/models/attachment.rb``):

    until block.call((new_name = "#{dir}#{basename}-#{addition}#{extname}"))

which is a renamed copy for the staging rule (``allreduce-1.py``). Canvas reads these names back itself
(``app/models/assignment.rb``, when graded files are uploaded) by taking the first two all-digit tokens:

    user_id, attachment_id = split_filename.grep(/^\\d+$/).take(2)

A name may end in ``_<digits>``, which that rule would take for the user id; with a roster of known ids
the reading that names a known id wins, and without one Canvas's own rule decides.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from grader.classroom.intake.claims import Claim, Reading
from grader.core.upload import Member

PLATFORM = "canvas"
LATE = ("LATE", "late")
ONLINE = ("text.html", "link.html")
"""A text entry's and a URL's page: the student's, never graded, listed in their feedback."""
ANON = re.compile(r"anon_[A-Za-z0-9]+")


@dataclass(frozen=True)
class CanvasName:
    student: str
    name: str | None
    late: bool
    file: str
    """The name the student gave the file ('allreduce-1.py'), or 'text.html' / 'link.html'."""


def parse(filename: str, roster: Collection[str] = ()) -> CanvasName | None:
    """How Canvas named ``filename`` (a member's last part), or None when it is not one of its names."""
    readings = list(_readings(filename.split("_")))
    known = [r for r in readings if r.student in roster]
    return next(iter(known or readings), None)


def _readings(tokens: list[str]) -> list[CanvasName]:
    """Every way to split ``tokens`` into [name] [LATE] id attachment file, in Canvas's order."""
    found = []
    for i in range(len(tokens)):
        anonymous = tokens[i] == "anon" and i + 1 < len(tokens) and ANON.fullmatch(f"anon_{tokens[i + 1]}")
        student = f"anon_{tokens[i + 1]}" if anonymous else tokens[i] if tokens[i].isdigit() else None
        if student is None:
            continue
        rest = tokens[i + 2 :] if anonymous else tokens[i + 1 :]
        before = tokens[:i]
        late = bool(before) and before[-1] in LATE
        name = "_".join(before[:-1] if late else before) or None
        if anonymous and name is not None:
            continue  # an anonymous download writes no name (content_zipper.rb: users_name unless anonymize)
        if "_".join(rest) in ONLINE:
            found.append(CanvasName(student, name, late, "_".join(rest)))
        elif len(rest) > 1 and rest[0].isdigit():
            found.append(CanvasName(student, name, late, "_".join(rest[1:])))
    return found


def looks_like(members: list[Member]) -> float:
    """The share of the archive's files named as Canvas names them (detection)."""
    files = [m for m in members if len(m.parts) <= 2]
    return sum(parse(m.name) is not None for m in files) / max(1, len(members))


def read(members: list[Member], roster: Collection[str] = ()) -> Reading:
    """Every file Canvas named for a student is theirs, under the name they uploaded it with."""
    reading = Reading(PLATFORM)
    by_student: dict[str, list[tuple[Member, CanvasName]]] = {}
    for member in members:
        parsed = parse(member.name, roster) if len(member.parts) <= 2 else None
        if parsed is None:
            reading.leftovers.append((member.path, "not named as Canvas names a submission's file"))
        else:
            by_student.setdefault(parsed.student, []).append((member, parsed))
    for student, files in sorted(by_student.items()):
        late = any(parsed.late for _, parsed in files)
        name = next((parsed.name for _, parsed in files if parsed.name), None)
        owned = tuple((member.path, parsed.file) for member, parsed in files)
        said = ("Canvas marks this submission LATE",) if late else ()
        reading.claims.append(Claim(student, student, owned, name=name, late=late, notes=said))
    return reading
