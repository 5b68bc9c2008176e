"""`--watch`: a save is seen and reported once, and the loop ends when asked."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from grader.learner.watch import changes, watch


def test_a_save_is_reported_once(tmp_path: Path) -> None:
    watched, other = tmp_path / "a.py", tmp_path / "b.py"
    watched.write_text("x = 1\n")
    other.write_text("y = 1\n")
    seen: list[list[Path]] = []
    done = threading.Event()

    def grade(changed: list[Path]) -> None:
        seen.append(changed)
        done.set()

    thread = threading.Thread(
        target=watch, args=([watched, other], grade), kwargs={"interval": 0.05, "stop": done.is_set}
    )
    thread.start()
    time.sleep(0.2)
    watched.write_text("x = 2  # saved\n")
    assert done.wait(10), "the save was not seen within 10 s"
    thread.join(5)
    assert not thread.is_alive()
    assert seen == [[watched]]


def test_a_deleted_file_is_a_change_and_stop_ends_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    polls = iter(range(100))
    stream = changes([path], interval=0.01, stop=lambda: next(polls) >= 50)
    path.unlink()
    assert next(stream) == [path]
    assert list(stream) == []  # nothing else changed; the stop condition ends it
