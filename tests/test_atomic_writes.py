"""``grader.core.atomic``: a write leaves the old file or the new one, never half, on a disk that fills up
for real; the machine's refusal is one ``EnvironmentFailure`` naming the path; a sweep removes only what a
dead process left."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from faults import fill, free_bytes, tmpfs

from grader.core.atomic import atomic_path, sweep_temporaries, write_atomic
from grader.core.errors import EnvironmentFailure


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "grades.csv"
    target.write_text("old\n")
    write_atomic(target, "student,score\nalice,5\n")
    assert target.read_text() == "student,score\nalice,5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["grades.csv"]
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()  # as open() would have made it


def test_a_writer_that_fails_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "histogram.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half of a pi")
        raise RuntimeError("matplotlib died")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["histogram.png"]


def test_a_full_disk_keeps_the_old_file_and_names_the_path(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size="1m") as disk:
        target = disk / "s07.json"
        target.write_text('{"score": 1}')
        fill(disk, leave=4096)
        with pytest.raises(EnvironmentFailure) as failure:
            write_atomic(target, "x" * 65536)
        assert target.read_text() == '{"score": 1}'
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "s07.json"]
        assert str(failure.value).startswith(f"{target}: No space left on device; free some space")
        assert "\n" not in str(failure.value)
        assert free_bytes(disk) >= 4096  # the partial temporary file was removed


def test_a_read_only_folder_is_the_machines_failure(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", size="64k", read_only=True) as folder:
        with pytest.raises(EnvironmentFailure) as failure:
            write_atomic(folder / "grades.csv", "student\n")
        assert str(failure.value).startswith(f"{folder / 'grades.csv'}: Read-only file system; ")


def test_a_sweep_removes_only_what_dead_processes_of_this_host_left(tmp_path: Path) -> None:
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(dead.stdout)
    left = {
        "dead": tmp_path / f".s01.json~{host}~{dead_pid}~ab12.tmp",
        "live": tmp_path / f".s02.json~{host}~{os.getpid()}~cd34.tmp",
        "other host": tmp_path / f".s03.json~node-7~{dead_pid}~ef56.tmp",
        "not ours": tmp_path / ".notes.tmp",
    }
    for path in left.values():
        path.write_text("partial")
    assert sweep_temporaries(tmp_path) == [left["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for k, p in left.items() if k != "dead"
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
