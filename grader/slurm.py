"""`python -m grader.slurm MANIFEST INDEX`: one Slurm array task of a batch; the code is in
``grader.classroom.slurm.task``.

This name is an entry point that the batch's job scripts call; it stays.
"""

import os
import sys
from pathlib import Path

from grader.classroom.slurm.task import run_task

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run_task(Path(sys.argv[1]), int(sys.argv[2])))
