"""``grade doctor``: what this machine offers the grader, and what each part enables or rules out.

Every check is quick (at most a few seconds) and never raises: a missing piece is a finding, not an error.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str
    """What was found (a version, a count, or why not)."""
    meaning: str
    """What that enables, or what runs differently without it."""


def examine() -> list[Finding]:
    return [_torch(), _sandbox(), _docker(), _gpus(), _nccl(), _slurm()]


def _torch() -> Finding:
    import torch
    import torch.distributed as dist

    ok = dist.is_available() and dist.is_gloo_available()
    return Finding(
        "torch",
        ok,
        f"torch {torch.__version__}, gloo {'available' if ok else 'missing'}",
        "CPU worlds over gloo: every exercise's CPU parts" if ok else "no CPU worlds: nothing can be graded",
    )


def _sandbox() -> Finding:
    from grader.core import sandbox

    why_not = sandbox.probe()
    if why_not is None:
        return Finding(
            "sandbox",
            True,
            "bubblewrap works",
            "local grading runs ranks in a sandbox: no network, no view of solutions/, "
            "limits on memory and files",
        )
    return Finding(
        "sandbox",
        False,
        why_not,
        "local grading runs ranks unsandboxed, as you: fine for your own code; to grade others' code, "
        "install bubblewrap or use --backend docker",
    )


def _docker() -> Finding:
    try:
        import docker
    except ImportError:
        return Finding(
            "docker",
            False,
            "the docker package is not installed (the instructor extra has it)",
            "no --backend docker; local grading does not need it",
        )
    try:
        from grader.runners.images import image_tag

        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # the SDK raises many kinds: missing socket, permission, timeout
        return Finding(
            "docker", False, f"no Docker engine answers ({type(exc).__name__})", "no --backend docker"
        )
    tag = image_tag("cpu")
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return Finding("docker", False, f"engine up, image {tag} missing", "run `grade image build` first")
    return Finding(
        "docker", True, f"engine up, image {tag} present", "--backend docker: one container per submission"
    )


def _gpus() -> Finding:
    import torch

    if not torch.cuda.is_available():
        return Finding(
            "GPUs", False, "no CUDA device visible", "GPU parts are reported as blocked, not skipped"
        )
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return Finding("GPUs", True, f"{len(names)}: {', '.join(names)}", "--device cuda: one GPU per rank")


def _nccl() -> Finding:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_nccl_available() and torch.cuda.is_available()):
        return Finding(
            "NCCL", False, "not available in this torch build or without GPUs", "GPU worlds cannot start"
        )
    version = ".".join(map(str, torch.cuda.nccl.version()))
    return Finding("NCCL", True, f"NCCL {version}", "GPU worlds over NCCL")


def _slurm() -> Finding:
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        return Finding("Slurm", False, "sbatch/squeue not on PATH", "no --backend slurm")
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%P %a %D %T"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(
            "Slurm", False, f"sinfo failed: {exc}", "no --backend slurm until the controller answers"
        )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return Finding("Slurm", False, f"sinfo: {last}", "no --backend slurm until the controller answers")
    partitions = ", ".join(line.split()[0] for line in done.stdout.splitlines() if line.strip()) or "none"
    return Finding("Slurm", True, f"controller answers; partitions: {partitions}", "--backend slurm")
