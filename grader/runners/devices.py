"""What ``--device`` means on the machine that grades: the one place ``auto`` is resolved, and the GPUs a
local batch's workers spread over."""

from __future__ import annotations

from grader.core.course import Exercise
from grader.core.errors import UsageError

DEVICES = ("auto", "cpu", "cuda")
"""What ``--device`` may be: ``auto`` is resolved by ``resolve_device``."""


def resolve_device(asked: str, *, gpus: int | None, exercise: Exercise | None = None) -> str:
    """The device a grading runs on (``cpu`` or ``cuda``) for ``--device asked``.

    ``gpus``: the GPUs the grading can use, 0 for none; None where they are counted elsewhere (a cluster's
    scheduler gives the job what it asks for). ``exercise``: given where GPUs are held for the whole grading
    (a container, a cluster job), so that ``auto`` picks ``cuda`` only for an exercise with a GPU part.
    ``auto`` is ``cuda`` when GPUs are there (and wanted), else ``cpu``; ``cuda`` where there are none is a
    ``UsageError``."""
    if asked not in DEVICES:
        raise UsageError(f"--device {asked}: expected one of {', '.join(DEVICES)}")
    if asked == "cpu":
        return "cpu"
    if asked == "auto":
        wanted = exercise is None or any(p.device == "gpu" for p in exercise.parts)
        return "cuda" if wanted and gpus != 0 else "cpu"
    if gpus == 0:
        raise UsageError("--device cuda: no GPU is visible here")
    return "cuda"


def gpu_count() -> int:
    """The CUDA devices torch sees here; 0 without CUDA."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_device(asked: str) -> tuple[str, int]:
    """``--device`` on this machine: the device to grade on and the GPUs there are to grade with; ``cpu``
    looks for none (torch is not even imported)."""
    gpus = gpu_count() if asked != "cpu" else 0
    return resolve_device(asked, gpus=gpus), gpus
