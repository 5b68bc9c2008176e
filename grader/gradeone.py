"""`python -m grader.gradeone`: one grading in a process of its own (a batch slot, a Slurm task); the code
is in ``grader.classroom.gradeone``.

This name is an entry point that the batch and its Slurm tasks call; it stays.
"""

import sys

from grader.classroom.gradeone import main

if __name__ == "__main__":
    sys.exit(main())
