"""distgpu's grader: the course catalog, the multi-rank harness, runners, and what each audience runs.

The layers, and what each may import, are in docs/architecture.md.
"""

from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds the ``grader`` and ``coursekit`` packages (the repository, in a checkout): found
through the package itself, so that a module may move to any depth without its path changing."""
