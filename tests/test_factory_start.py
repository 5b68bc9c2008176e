"""The rank factory starts before the judge imports torch (their imports overlap), preloads what the exercise
asks for, and ends by itself when closed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grader.core.course import CourseConfigError, load_course
from grader.harness.factory import PRELOAD, RankFactory

REPO = Path(__file__).resolve().parent.parent

GOOD = """\
course: Tiny
sections:
  - number: 1
    title: One
    exercises:
      - number: 1
        slug: toy
        title: Toy
        files: [toy.py]
        preload: [PRELOAD]
        parts:
          - {name: allreduce, points: 4, world_sizes: [2], timeout: 4}
"""


def _course(tmp_path: Path, preload: str) -> Path:
    (tmp_path / "exercises" / "01_toy").mkdir(parents=True)
    (tmp_path / "exercises" / "01_toy" / "toy.py").write_text("")
    path = tmp_path / "course.yml"
    path.write_text(GOOD.replace("PRELOAD", preload))
    return path


def test_the_container_entry_point_and_the_factory_import_no_torch() -> None:
    code = "import sys, grader.container, grader.harness.factory; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_preload_is_a_list_of_module_names(tmp_path: Path) -> None:
    course = load_course(_course(tmp_path / "good", "torch.fx.experimental.symbolic_shapes"))
    assert course.find("toy").preload == ("torch.fx.experimental.symbolic_shapes",)
    with pytest.raises(CourseConfigError, match=r"preload\[0\]: expected a dotted module name"):
        load_course(_course(tmp_path / "bad", "'torch; os'"))


def test_a_launched_factory_preloads_the_exercise_modules_and_ends_at_once(tmp_path: Path) -> None:
    factory = RankFactory(None, tmp_path / "factory.log", ("json", "torch"))
    assert factory.preload == (*PRELOAD, "json")
    factory.launch()  # returns at once: the factory imports torch in the background
    factory.start()  # waits for it to be ready
    assert factory.alive
    process = factory._process
    factory.close()
    assert process is not None and process.returncode == 0  # it left by itself when the judge hung up
