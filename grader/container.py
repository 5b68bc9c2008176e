"""`python -m grader.container`: the judge inside a grading container or an autograder platform's; the code
is in ``grader.runners.container``.

This name is an entry point that the Docker runner, the grading image and the exported bundles call; it stays.
"""

import os
import sys

from grader.runners.container import main

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's finalization: with torch loaded it takes up to a second or more on a loaded
    # machine, the container's last act, and there is nothing left to clean up (the result is written).
    os._exit(code)
