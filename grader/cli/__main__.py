"""`python -m grader.cli`: the same as the `grade` command."""

import sys

from grader.cli import main

sys.exit(main())
