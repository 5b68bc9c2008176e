"""Building the grading images: stage wheels into a build context, then ``docker build`` from containers/."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from grader import SOURCE_ROOT
from grader.core.errors import EnvironmentFailure

CONTAINERS = SOURCE_ROOT / "containers"
TORCH = "torch==2.13.0"
REQUIREMENTS = ["pytest>=8.0", "pyyaml>=6.0", "rich>=13.0", "numpy"]
"""What the judge and the ranks import inside the image, besides torch (the grader itself is mounted)."""
LOCAL_BASE = "distgpu-base:bookworm"
"""What containers/make-local-base.sh builds where no registry is reachable."""
STOCK_BASE = "python:3.11-slim-bookworm"
BUILD_STAGE_LABEL = "distgpu.stage=build"
"""The Dockerfiles' build stage carries it, so its untagged image can be removed after the build."""
OFFLINE_ROUTE = (
    "no registry? build a local base with containers/make-local-base.sh, or pass --base with an image "
    "that is here (`docker images`)"
)


class ImageBuildError(EnvironmentFailure):
    """The image could not be built here (no registry, a failed download or build); the message is one line
    that says what to do."""


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    image_id: str
    base: str
    size_mb: float
    seconds: float


def image_tag(kind: str) -> str:
    """``distgpu-cpu:0.1.0`` or ``distgpu-cuda:0.1.0``: the version of the grader that defines the image."""
    return f"distgpu-{kind}:{version('distgpu')}"


def default_base(client: object) -> str:
    """The local Debian base if it exists (no registry here), else the stock Python image."""
    from docker.errors import ImageNotFound

    try:
        # attr-defined: the docker SDK ships no types, and the client is passed as an object
        client.images.get(LOCAL_BASE)  # type: ignore[attr-defined]
        return LOCAL_BASE
    except ImageNotFound:
        return STOCK_BASE


def docker_engine(timeout: int = 60) -> Any:
    """A client of this machine's Docker engine (``timeout`` seconds per call: docker's default is 60);
    ``EnvironmentFailure`` (one line) when none answers."""
    import docker

    try:
        return docker.from_env(timeout=timeout)
    except docker.errors.DockerException as exc:
        first = (str(exc).splitlines() or ["?"])[0]
        raise EnvironmentFailure(
            f"no Docker engine answers ({first}); start one: scripts/start-dockerd"
        ) from None


def build_image(*, kind: str, base: str | None = None) -> BuiltImage:
    """Build ``image_tag(kind)`` from containers/Dockerfile.<kind>; ``ImageBuildError`` (one line) when the
    base is neither here nor pullable, the wheels cannot be downloaded, or a build step fails. The build
    stage's untagged image is removed either way."""
    import docker

    client = docker_engine(timeout=600)  # removing a 1.3 GB build stage takes dockerd minutes when busy
    base = base or default_base(client)
    started = time.perf_counter()
    _ensure_base(client, base)
    try:
        with tempfile.TemporaryDirectory(prefix="distgpu-image-") as folder:
            context = Path(folder)
            (context / "Dockerfile").write_text((CONTAINERS / f"Dockerfile.{kind}").read_text())
            _stage_wheels(context / "wheels", with_torch=kind == "cpu")
            image, _ = client.images.build(
                path=str(context), tag=image_tag(kind), buildargs={"BASE": base}, rm=True, forcerm=True
            )
    except docker.errors.BuildError as exc:
        raise ImageBuildError(f"building {image_tag(kind)} on {base} failed: {_last_line(exc.msg)}") from None
    except docker.errors.APIError as exc:
        failed = f"the Docker engine failed to build {image_tag(kind)}: {_last_line(str(exc))}"
        raise ImageBuildError(failed) from None
    finally:
        remove_build_stages(client)
    size_mb = image.attrs["Size"] / 1e6
    return BuiltImage(
        image_tag(kind), image.id, base, round(size_mb), round(time.perf_counter() - started, 1)
    )


def _ensure_base(client: Any, base: str) -> None:
    """The base image is here, or is pulled now: else one line naming the offline route."""
    import docker

    try:
        client.images.get(base)
        return
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(base)
    except docker.errors.DockerException as exc:
        raise ImageBuildError(
            f"the base image {base} is not here and cannot be pulled "
            f"({_last_line(getattr(exc, 'explanation', None) or str(exc))}); " + OFFLINE_ROUTE
        ) from None


def remove_build_stages(client: Any) -> list[str]:
    """Remove the untagged images our Dockerfiles' build stages leave; return their ids."""
    import docker

    removed = []
    # ids only: images.list would inspect each one, and a build beside this one may remove it in between
    for image_id in client.api.images(filters={"dangling": True, "label": BUILD_STAGE_LABEL}, quiet=True):
        try:
            client.images.remove(image_id, noprune=False)
        except docker.errors.APIError:  # in use by a build running beside this one, or gone already
            continue
        removed.append(image_id)
    return removed


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else "no details"


def _stage_wheels(folder: Path, *, with_torch: bool) -> None:
    """Download Linux x86-64 CPython 3.11 wheels, so the build itself needs no network."""
    requirements = ([TORCH] if with_torch else []) + REQUIREMENTS
    folder.mkdir()
    (folder / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (folder / "requirements-nontorch.txt").write_text("\n".join(REQUIREMENTS) + "\n")
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any"]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--dest",
        str(folder),
        *[f"--platform={p}" for p in platforms],
        *requirements,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise ImageBuildError(f"downloading the wheels failed: {_last_line(done.stderr)}")
