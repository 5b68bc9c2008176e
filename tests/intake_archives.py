"""Synthetic downloads in each platform's exact shape, for tests/test_intake.py and the batch tests.

Each builder writes what the platform writes, as the comment beside each name quotes from its source
(grader/classroom/intake/<platform>.py quotes the same lines in full).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

GOOD = b"def toy():\n    return 1\n"


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def canvas_members(good: bytes = GOOD) -> dict[str, bytes]:
    """canvas-lms lib/content_zipper.rb: "#{filename}_#{file.id}_#{display_name}", where
    filename = [users_name, submission.late? ? "LATE" : nil, id].compact.join("_")."""
    return {
        "smithjane_12345_678901_toy.py": good,  # users_name, user_id, attachment id, display name
        "doejohn_LATE_23456_678902_toy.py": good,  # submission.late? ? "LATE"
        "müllerjürgen_34567_678903_toy-1.py": good,  # [[:word:]] keeps ü; make_unique_filename: "-1"
        "anon_aB3dE_678904_toy.py": good,  # anonymize_students? ? "anon_#{submission.anonymous_id}"
        "LATE_anon_xY9zQ_678905_toy.py": good,  # no users_name when anonymous, LATE still written
        "oldcanvas_late_45678_678906_toy.py": good,  # older Canvas wrote "late"
        "leejin_56789_text.html": b"<p>my answer</p>\n",  # "#{called}_text.html": a text entry
        "smithjane_12345_678907_notes.txt": b"my notes\n",  # a second attachment of the same student
    }


def moodle_members(good: bytes = GOOD) -> dict[str, bytes]:
    """moodle mod/assign/classes/downloader.php: clean_filename($prefix . '_' . $subtype . '_' . $type)
    . $file->get_filepath() . $zipfilename, $prefix = str_replace('_', ' ', $fullname) . '_' . uniqueid."""
    return {
        "Jane Smith_101_assignsubmission_file/toy.py": good,  # in folders (the default)
        "Jane Smith_101_assignsubmission_onlinetext/onlinetext.html": b"<p>text</p>",  # another plugin
        "Jürgen Müller_102_assignsubmission_file/toy (1).py": good,  # unicode name, a browser's copy
        "Participant_103_assignsubmission_file/toy.py": good,  # blind marking: get_string('participant')
        "Old Name_104_assignsubmission_file_/toy.py": good,  # before 4.1: $type . '_' (locallib.php)
        "Team Rocket_7_assignsubmission_file/toy.py": good,  # teamsubmission: $groupname . '_' . group id
    }


def moodle_flat_members(good: bytes = GOOD) -> dict[str, bytes]:
    """downloader.php without folders: clean_filename($prefix . '_' . $subtype . '_' . $type . '_' .
    $zipfilename)."""
    return {
        "Jane Smith_101_assignsubmission_file_toy.py": good,
        "Ann Lee_106_assignsubmission_file_toy-2.py": good,
    }


GRADESCOPE_METADATA = """\
submission_111:
  :submitters:
  - :name: Jane Smith
    :sid: '12345'
    :email: jane@example.edu
  :created_at: 2026-03-01 23:59:58.123456000 -08:00
  :score: 0.0
submission_112:
  :submitters:
  - :name: Zoë Ångström
    :sid: '200'
    :email: zoe@example.edu
  - :name: Pat Noid
    :sid:
    :email: pat@example.edu
  :created_at: 2026-03-01 10:00:00.000000000 -08:00
submission_113:
  :submitters:
  - :name: Late Comer
    :sid: '300'
    :email: late@example.edu
  :created_at: 2026-03-02 09:30:00.000000000 -08:00
"""
"""As third-party readers of real exports parse it: submitters with :name:, :sid:, :email:, and
:created_at:; a group (112) lists every member, one of them without an sid."""


def gradescope_members(good: bytes = GOOD) -> dict[str, bytes]:
    root = "assignment_9100_export/"
    return {
        root + "submission_metadata.yml": GRADESCOPE_METADATA.encode(),
        root + "submission_111/toy.py": good,
        root + "submission_112/toy.py": good,
        root + "submission_113/toy-1.py": good,  # a renamed copy, and late against --due
    }


def classroom_tree(parent: Path, dirname: str, good: bytes = GOOD) -> Path:
    """gh-classroom student-repos.go: filepath.Join(directory, assignment.Slug+"-submissions"), then
    filepath.Join(fullPath, acceptAssignment.Repository.Name); Classroom's repository names are
    <assignment>-<login> (a team's slug for a group assignment)."""
    root = parent / "toy-assignment-submissions"
    for repo in ("toy-assignment-octocat", "toy-assignment-team-rocket"):
        folder = root / repo / "exercises" / dirname
        folder.mkdir(parents=True)
        (folder / "toy.py").write_bytes(good)
        (folder / "test_public.py").write_text("# given by the course\n")
        (root / repo / ".git").mkdir()
        (root / repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (root / repo / "README.md").write_text("starter\n")
    return root
