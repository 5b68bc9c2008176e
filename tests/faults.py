"""Faults injected for real: a small filesystem that fills up, a read-only one, a disk filled to the brim.

A tmpfs needs ``mount`` (root, or a container allowed to mount); where it is not permitted, the test is
skipped with the reason ``mount`` gave.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(folder: Path, *, size: str = "2m", read_only: bool = False) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size`` (read-only with ``read_only``) for the block; skip the test where
    this machine does not let it mount one."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path, *, leave: int) -> Path:
    """Fill ``folder``'s filesystem until the machine refuses a write, then give back ``leave`` bytes; the
    filler file (remove it to free the disk)."""
    filler = folder / "filler"
    block = b"\0" * 65536
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler


def free_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize
