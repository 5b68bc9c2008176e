"""Before the first test: can the ranks read every file they will need, as the user they run as?

Ranks run as another uid (a leased one under the sandbox, ``nobody`` in a container or an autograder) and
read some files late: a rank program only when a test first runs it. A course folder only root may enter
then fails some tests and not others, and every student loses the same points in silence. So the judge
first reads every file of the rank programs, the staged submission and the ``grader`` and ``coursekit``
packages the way a rank will (the same uid, inside the same sandbox), and a grading that cannot stops with
one line naming the file and the fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grader.core.sandbox import Sandbox, minimal_env

PROBE = r"""
import json, os, sys
wanted = json.loads(sys.argv[1])
if wanted["uid"] is not None:
    os.setgroups([]); os.setgid(wanted["uid"]); os.setuid(wanted["uid"])
def fail(path, exc):
    print(json.dumps({"path": str(path), "why": exc.strerror or type(exc).__name__})); sys.exit(1)
def read(path):
    try:
        if os.path.isdir(path):
            for name in os.listdir(path):
                if name != "__pycache__":
                    read(os.path.join(path, name))
        else:
            with open(path, "rb") as f:
                f.read(1)
    except OSError as exc:
        fail(exc.filename or path, exc)
for top in wanted["paths"]:
    read(top)
"""


PROBE_TIMEOUT_S = 120
"""Reading the course's few hundred files takes well under a second; this is for a host under heavy load."""


class RanksCannotRead(RuntimeError):
    """One line: the first file ranks cannot read, why, and what to change."""


def check_ranks_can_read(paths: list[Path], uid: int | None, box: Sandbox | None) -> None:
    """Read every file under ``paths`` as ``uid`` (None: this user) inside ``box`` (None: on this host);
    ``RanksCannotRead`` names the first that fails."""
    argv = [sys.executable, "-I", "-c", PROBE, json.dumps({"uid": uid, "paths": [str(p) for p in paths]})]
    env = minimal_env()
    if box is not None:
        argv = box.wrap(argv, env)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RanksCannotRead(f"could not check that ranks can read the course's files: {exc}") from None
    if done.returncode == 0:
        return
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RanksCannotRead(
            f"could not check that ranks can read the course's files: {done.stderr.strip()[-500:]}"
        ) from None
    who = "ranks" if uid is None else f"ranks (uid {uid})"
    raise RanksCannotRead(
        f"{who} cannot read {found['path']} ({found['why']}), so tests that need it would fail for every "
        "student: make the course readable to other users (chmod -R o+rX on it, and o+x on each folder "
        "above it) or grade from a folder others may enter. Nothing was graded."
    )
