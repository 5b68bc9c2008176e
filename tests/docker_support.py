"""Getting a real Docker engine and the grading image for tests: start what is missing, or say why not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def require_docker_image() -> str:
    """Start dockerd and build the CPU image if needed; skip with the reason locally, fail in CI."""
    try:
        subprocess.run([REPO / "scripts" / "start-dockerd"], check=True, capture_output=True, timeout=300)
        import docker

        from grader.runners.images import LOCAL_BASE, build_image, image_tag

        client = docker.from_env()
        try:
            client.images.get(image_tag("cpu"))
        except docker.errors.ImageNotFound:
            subprocess.run([REPO / "containers" / "make-local-base.sh", LOCAL_BASE], check=True, timeout=900)
            build_image(kind="cpu")
        return image_tag("cpu")
    except Exception as exc:  # no engine, no root, no debootstrap: a reason to give, not a crash
        reason = f"no Docker engine or image here: {exc}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def require_docker_engine() -> None:
    """Start dockerd if needed (no image built); skip with the reason locally, fail in CI."""
    try:
        subprocess.run([REPO / "scripts" / "start-dockerd"], check=True, capture_output=True, timeout=300)
    except Exception as exc:
        reason = f"no Docker engine here: {exc}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
