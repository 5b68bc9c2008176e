"""`python -m grader.gpucheck`: the GPU check (scripts/gpu-check); the code is in
``grader.authoring.gpucheck``.

This name is an entry point that scripts/gpu-check and docs/gpu.md call; it stays.
"""

import sys

from grader.authoring.gpucheck import main

if __name__ == "__main__":
    sys.exit(main())
