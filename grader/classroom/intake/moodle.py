"""Moodle's "Download all submissions": a zip, a folder per student (the default) or flat.

How Moodle names each file (moodle, ``mod/assign/classes/downloader.php``, 4.1 and later, read at commit
da545523):

    $prefix = str_replace('_', ' ', $fullname);
    $prefix = clean_filename($prefix . '_' . $manager->get_uniqueid_for_user($student->id));
    $prefixedfilename = clean_filename($prefix . '_' . $subtype . '_' . $type);          // in folders
    $pathfilename = $prefixedfilename . $file->get_filepath() . $zipfilename;
    $prefixedfilename = clean_filename($prefix . '_' . $subtype . '_' . $type . '_' . $zipfilename);  // flat

So ``Jane Smith_123_assignsubmission_file/allreduce.py`` with "download submissions in folders" (the
default), ``Jane Smith_123_assignsubmission_file_allreduce.py`` without. The name's underscores became
spaces, so the first ``_`` ends it; the number after it is the participant id
(``get_uniqueid_for_user``), the number of the grading worksheet's "Participant 123". Under blind marking
the name is ``get_string('participant', 'mod_assign')``: "Participant". Before 4.1
(``mod/assign/locallib.php``) the folder had a trailing ``_``:

    $prefixedfilename = clean_filename($prefix . '_' . $subtype . '_' . $type . '_');

A team submission's prefix is the group's name and id (``$groupinfo = '_' . $submissiongroup->id``): the id
recorded is then the group's. Other submission plugins (``assignsubmission_onlinetext``) are the
student's too: their files go into the student's upload and are listed in their feedback.
"""

from __future__ import annotations

import re

from grader.classroom.intake.claims import Claim, Reading
from grader.core.upload import Member

PLATFORM = "moodle"
FOLDER = re.compile(r"(?P<prefix>[^/_]+_\d+)_(?P<plugin>assignsubmission_[a-z]+)_?")
"""A student's folder, 4.1 and later or (with the trailing ``_``) before."""
FLAT = re.compile(r"(?P<prefix>[^/_]+_\d+)_(?P<plugin>assignsubmission_[a-z]+)_(?P<file>.+)")
BLIND = "Participant"


def _owner(member: Member) -> tuple[str, str] | None:
    """(the student's prefix 'Jane Smith_123', the path in their upload), or None for another name."""
    top = member.parts[0] if member.parts else ""
    folder = FOLDER.fullmatch(top)
    if folder and len(member.parts) > 1:
        return folder["prefix"], "/".join(member.parts[1:])
    flat = FLAT.fullmatch(top) if len(member.parts) == 1 else None
    return (flat["prefix"], flat["file"]) if flat else None


def looks_like(members: list[Member]) -> float:
    """The share of the archive's files named as Moodle names them (detection)."""
    return sum(_owner(m) is not None for m in members) / max(1, len(members))


def read(members: list[Member]) -> Reading:
    """Every file under a student's prefix is theirs; one prefix is one submission."""
    reading = Reading(PLATFORM)
    by_prefix: dict[str, list[tuple[str, str]]] = {}
    for member in members:
        owner = _owner(member)
        if owner is None:
            reading.leftovers.append((member.path, "not named as Moodle names a submission's file"))
        else:
            by_prefix.setdefault(owner[0], []).append((member.path, owner[1]))
    for prefix, owned in sorted(by_prefix.items()):
        name, participant = prefix.split("_", 1)
        shown = None if name == BLIND else name
        reading.claims.append(Claim(participant, prefix, tuple(owned), name=shown))
    return reading
