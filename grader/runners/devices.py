"""The device a local batch grades on, and the GPUs its workers spread over: what this machine has."""

from __future__ import annotations


def gpu_count() -> int:
    """The CUDA devices torch sees here; 0 without CUDA."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_device(asked: str) -> tuple[str, int]:
    """``--device`` (``auto``, ``cpu`` or ``cuda``) on this machine: the device to grade on and the GPUs
    there are to grade with. ``auto`` means ``cuda`` when there is a GPU; ``cpu`` looks for none (torch is
    not even imported)."""
    gpus = gpu_count() if asked != "cpu" else 0
    device = ("cuda" if gpus else "cpu") if asked == "auto" else asked
    return device, gpus
