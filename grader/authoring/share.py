"""``grade validate --share DIR``: processes started with the same DIR split the exercises between them.

Each exercise is claimed by creating ``DIR/<key>`` exclusively: the first process to create it validates the
exercise, every other one skips it. A claim is never released, so a rerun needs a fresh DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.core.course import Exercise


def claim(share: Path, exercise: Exercise) -> bool:
    """Whether this process takes ``exercise``: the first to create its claim in ``share`` does."""
    share.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(share / exercise.key, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True
