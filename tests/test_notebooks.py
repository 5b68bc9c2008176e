"""The self-check notebooks: valid nbformat with nbgrader's cell metadata, one per section, and every cell
runs headless (nbclient) against the reference solutions."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader import nbgraderformat

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_one_notebook_per_section() -> None:
    assert [p.name.split("_")[0] for p in PATHS] == [f"section{n}" for n in range(1, 6)]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_valid_nbgrader_notebook(path: Path) -> None:
    nb = nbgraderformat.reads(path.read_text(), as_version=4)  # nbformat's schema, then nbgrader's metadata
    graded = [c for c in nb.cells if c.metadata.nbgrader["grade"]]
    assert graded and all(c.cell_type == "code" and "assert" in c.source for c in graded)
    ids = [c.metadata.nbgrader["grade_id"] for c in nb.cells]
    assert len(ids) == len(set(ids)), ids
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks cleared"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_runs_against_the_references(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGPU_NOTEBOOK_IMPL", "solutions")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    pictures = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert pictures, "every section's notebook plots something"
    assert "checking the modules in solutions/" in "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
    )
