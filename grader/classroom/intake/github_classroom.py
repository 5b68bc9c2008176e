"""GitHub Classroom: the students' repositories as ``gh classroom clone student-repos`` clones them.

Where the clone puts them (github/gh-classroom, ``cmd/gh-classroom/clone/student-repos/student-repos.go``,
read at commit 21eabfc):

    fullPath, err := filepath.Abs(filepath.Join(directory, assignment.Slug+"-submissions"))
    clonePath := filepath.Join(fullPath, acceptAssignment.Repository.Name)

and Classroom names a student's repository ``<assignment slug>-<GitHub login>`` (a group assignment's,
``<assignment slug>-<team slug>``): so ``ex02-submissions/ex02-octocat/``, and the login is the gradebook's
id. A repository made from ``grade classroom`` holds the whole starter (``grader/``, the course trimmed to
the exercise): the student's work is in ``exercises/NN_slug/``, where only the exercise's files and any file
the starter did not have are the student's; the rest is the course's own and is named as left over.
"""

from __future__ import annotations

from pathlib import Path

from grader.classroom.intake.claims import Claim, Reading
from grader.core.upload import Member

PLATFORM = "classroom"
SUFFIX = "-submissions"


def root_of(source: Path) -> Path | None:
    """The ``<slug>-submissions`` folder at or just under ``source``; None when there is none."""
    if not source.is_dir():
        return None
    if source.name.endswith(SUFFIX):
        return source
    inner = [p for p in source.iterdir() if p.is_dir() and p.name.endswith(SUFFIX)]
    return inner[0] if len(inner) == 1 else None


def looks_like(source: Path) -> float:
    """The share of the folders in ``<slug>-submissions`` that are git clones named ``<slug>-<login>``."""
    root = root_of(source)
    if root is None:
        return 0.0
    slug = root.name.removesuffix(SUFFIX)
    repos = [p for p in root.iterdir() if not p.name.startswith(".")]
    clones = [p for p in repos if p.name.startswith(f"{slug}-") and (p / ".git").exists()]
    return len(clones) / max(1, len(repos))


def read(source: Path, members: list[Member], exercise_dir: str, given: frozenset[str]) -> Reading:
    """Each repository is its student's; of it, what the student wrote in ``exercises/<exercise_dir>/``."""
    root = root_of(source)
    assert root is not None, "read only what looks_like accepted"
    prefix = root.relative_to(source).parts if root != source else ()
    slug = root.name.removesuffix(SUFFIX)
    reading = Reading(PLATFORM)
    repos: dict[str, list[Member]] = {}
    for member in members:
        inner = member.parts[len(prefix) :]
        if member.parts[: len(prefix)] != prefix or len(inner) < 2:
            reading.leftovers.append((member.path, f"not in a repository of {root.name}"))
        else:
            repos.setdefault(inner[0], []).append(member)
    for repo, files in sorted(repos.items()):
        login = repo.removeprefix(f"{slug}-") if repo.startswith(f"{slug}-") else repo
        owned = _owned(files, len(prefix) + 1, ("exercises", exercise_dir), given, reading)
        reading.claims.append(Claim(login, repo, owned))
    return reading


def _owned(
    files: list[Member], depth: int, folder: tuple[str, str], given: frozenset[str], reading: Reading
) -> tuple[tuple[str, str], ...]:
    """The student's files of one repository: those in ``folder`` the starter did not give (all of the
    repository when it has no such folder); the others go to ``reading.leftovers``."""
    has_folder = any(m.parts[depth : depth + 2] == folder for m in files)
    owned = []
    for member in files:
        inner = member.parts[depth:]
        if not has_folder:
            owned.append((member.path, "/".join(inner)))
        elif inner[:2] != folder:
            reading.leftovers.append((member.path, f"the starter's own file, outside {'/'.join(folder)}/"))
        elif len(inner) == 3 and inner[2] in given:
            reading.leftovers.append((member.path, "given by the course in the starter"))
        else:
            owned.append((member.path, "/".join(inner[2:])))
    return tuple(owned)
