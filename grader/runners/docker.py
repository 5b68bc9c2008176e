"""The Docker runner: one container per submission, the judge inside it, JSON out.

Each container starts *warm*: its judge imports torch and starts the rank factory, then waits for the host to
write the submission into a folder bound read-only at /handoff and to create /handoff/go. With ``prewarm``,
the runner starts the next submission's container as soon as the current one has its files, so the start-up
of one hides behind the grading of the other; still one container per submission, nothing shared between
them. ``grade batch`` prewarms only where a core is free for it (``classroom.grading_process.prewarm_pays``).
An unused spare is removed by ``close()``, by the next sweep once its grader is gone, or ends by itself after
``grader.runners.container.IDLE_TIMEOUT_S``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from grader import SOURCE_ROOT
from grader.core.processes import alive
from grader.core.results import ExerciseResult, Status
from grader.core.submission import stage
from grader.runners.devices import resolve_device
from grader.runners.images import docker_engine, image_tag
from grader.runners.job import GradeJob, opened_envelope

HANDOFF_PREFIX = "distgpu-handoff-"
"""Host folders a container reads its submission from: ``<prefix><owner pid>-<random>`` in the temp dir."""
LABEL = "distgpu.grader"
"""Every container we start carries it (value: our pid), so leftovers of a killed grader can be swept."""
START_MARGIN_S = 60.0
"""Beyond the exercise's own budget: container start, torch import, the first world."""
MAX_LOG_BYTES = 4 << 20
MAX_FILE_BYTES = 256 << 20
"""No process in the container may write a larger file (RLIMIT_FSIZE), so no one file fills its /tmp."""


PIDS_LIMIT = 512
"""Processes and threads per container. Honest gradings use few: at most 68 rank threads (exercise 01's
reference, 17 ranks alive over its 2-, 3-, 4- and 8-rank worlds) besides the judge's. A fork bomb is the
reason for the cap: each child of a rank that imported torch costs ~3 MB (page tables, copied pages), so
at 4096 pids the container hit its 4 GiB before the pid cap and thrashed (every process, the judge's too,
stuck in reclaim) until its deadline; at 512 the bomb stops near 1.5 GiB and the rank's fork fails."""


@dataclass
class _Warm:
    """A started container waiting for its submission, and the host folder it will read it from."""

    key: tuple[str, str, str]
    container: Any
    handoff: Path
    token: str


class DockerRunner:
    """``memory`` and ``pids`` cap the whole container (judge and ranks); pids counts threads too.
    ``prewarm`` keeps the next submission's container started (for a runner that grades many)."""

    def __init__(
        self, *, memory: str = "4g", cpus: float | None = None, pids: int = PIDS_LIMIT, prewarm: bool = False
    ) -> None:
        self.client = docker_engine()
        self.memory, self.cpus, self.pids, self.prewarm = memory, cpus, pids, prewarm
        self._spare: _Warm | None = None
        self._removals: list[threading.Thread] = []
        self._lock = threading.Lock()
        sweep_leftovers(self.client)

    def run(self, job: GradeJob) -> ExerciseResult:
        started = time.perf_counter()
        warm = self._take_spare(job) or self._start(job)
        try:
            staged = stage(
                job.source,
                job.exercise.files,
                warm.handoff / "submission",
                job.course.given_files(job.exercise),
            )
            notes = list(job.staging_notes) if job.staging_notes is not None else staged.texts
            (warm.handoff / "submission").chmod(0o755)
            (warm.handoff / "go").touch()
            if self.prewarm:
                self._keep_spare(job)
            output, state = self._finish(warm, job)
        finally:
            if self.prewarm:  # grading one after another: the next need not wait for this removal
                self._discard_later(warm)
            else:
                _discard(warm)
        result = _parse(output, state, job)
        seconds = round(time.perf_counter() - started, 3)
        notes = list(dict.fromkeys((*notes, *result.notes)))  # the judge inside staged it again: same notes
        return replace(result, graded=job.label, notes=tuple(notes), execution_time=seconds)

    def close(self) -> None:
        """Remove the spare container, if any, and wait for the removals still under way."""
        with self._lock:
            spare, self._spare = self._spare, None
            removals, self._removals = self._removals, []
        if spare is not None:
            _discard(spare)
        for removal in removals:
            removal.join()

    def _discard_later(self, warm: _Warm) -> None:
        """Remove ``warm`` in the background (dockerd takes 0.2-0.5 s, more after a fork bomb); ``close``
        waits for it. One that fails is swept by the next runner (``sweep_leftovers``)."""
        removal = threading.Thread(target=_discard, args=(warm,), name="distgpu-remove")
        removal.start()
        with self._lock:
            self._removals = [r for r in self._removals if r.is_alive()] + [removal]

    def _take_spare(self, job: GradeJob) -> _Warm | None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.key != _key(job):
            _discard(spare)
            return None
        return spare

    def _keep_spare(self, job: GradeJob) -> None:
        spare = self._start(job)
        with self._lock:
            old, self._spare = self._spare, spare
        if old is not None:  # another thread kept one meanwhile
            _discard(old)

    def _start(self, job: GradeJob) -> _Warm:
        handoff = Path(tempfile.mkdtemp(prefix=f"{HANDOFF_PREFIX}{os.getpid()}-"))
        handoff.chmod(0o755)
        token = secrets.token_hex(16)
        try:
            container = self.client.containers.run(
                image_tag("cuda" if _device(job) == "cuda" else "cpu"),
                [
                    *("python", "-m", "grader.container", "--exercise", job.exercise.key),
                    *("--device", _device(job)),
                    *("--preload", ",".join(job.exercise.preload)),  # so the rank factory starts at once
                    *("--submission", "/handoff/submission", "--wait-for", "/handoff/go"),
                ],
                detach=True,
                environment={"DISTGPU_RESULT_TOKEN": token},
                mounts=_mounts(job, handoff),
                labels={LABEL: str(os.getpid())},
                **self._limits(job),
            )
        except BaseException as exc:
            shutil.rmtree(handoff, ignore_errors=True)
            refusal = gpu_refusal(exc)
            if refusal:
                raise RuntimeError(refusal) from exc
            raise
        return _Warm(_key(job), container, handoff, token)

    def _finish(self, warm: _Warm, job: GradeJob) -> tuple[str, dict[str, Any]]:
        """Wait for ``warm``'s judge, given its go, until the deadline: (stdout after the token, state)."""
        container = warm.container
        drained = _Drain(container)
        deadline = job.exercise.timeout + START_MARGIN_S
        try:
            container.wait(timeout=deadline)
        except Exception:  # requests' ReadTimeout or ConnectionError: the deadline passed
            _kill(container)
            return "", {"deadline": deadline}
        drained.join()
        container.reload()
        state = container.attrs["State"]
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        token = warm.token
        return stdout.replace(token, "\0", 1).split("\0", 1)[1] if token in stdout else "", state

    def _limits(self, job: GradeJob) -> dict[str, Any]:
        from docker.types import DeviceRequest, LogConfig, Ulimit

        limits: dict[str, Any] = dict(
            init=True,  # docker-init as pid 1 reaps what dies orphaned: zombies hold pids against the limit
            network_mode="none",
            hostname="localhost",
            mem_limit=self.memory,
            memswap_limit=self.memory,
            pids_limit=self.pids,
            read_only=True,
            tmpfs={"/tmp": "size=1g,mode=1777"},
            shm_size="1g",
            cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "KILL"],
            security_opt=["no-new-privileges"],
            log_config=LogConfig(type="json-file", config={"max-size": "20m"}),
            # Any one file, rank logs included: endless output or a disk bomb gets EFBIG, and cannot fill
            # the /tmp the judge and the next worlds of this grading still need.
            ulimits=[Ulimit(name="fsize", soft=MAX_FILE_BYTES, hard=MAX_FILE_BYTES)],
            working_dir="/tmp",
        )
        if self.cpus:
            limits["nano_cpus"] = int(self.cpus * 1e9)
        if _device(job) == "cuda":
            limits["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        return limits


def gpu_refusal(exc: BaseException) -> str | None:
    """What to tell an instructor whose Docker engine refused a GPU request, or None for another error."""
    if "could not select device driver" not in str(exc):
        return None
    return (
        "this Docker engine cannot give containers GPUs (no NVIDIA Container Toolkit runtime registered "
        "with it); install the toolkit and restart dockerd, or grade with --device cpu. Engine said: "
        f"{str(exc).strip()[:300]}"
    )


def _key(job: GradeJob) -> tuple[str, str, str]:
    """What a warm container is started for: a spare serves only a job with the same key."""
    return (str(job.course.root), job.exercise.key, _device(job))


def _discard(warm: _Warm) -> None:
    _remove(warm.container)
    shutil.rmtree(warm.handoff, ignore_errors=True)


def _kill(container: Any) -> None:
    """Kill a container that outlived its deadline. dockerd may give up on one whose processes are busy
    dying (thousands of them, after a fork bomb); the removal that follows ends it."""
    import docker

    try:
        container.kill()
    except docker.errors.APIError:
        pass


def _remove(container: Any, attempts: int = 5) -> None:
    """Remove a container, waiting a little between tries while dockerd is still reaping it."""
    import docker

    for attempt in range(1, attempts + 1):
        try:
            container.remove(force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError:
            if attempt == attempts:
                raise
            time.sleep(2.0 * attempt)


def graders_containers(client: Any) -> list[dict[str, Any]]:
    """The list summaries (``Id``, ``Labels``, ``Mounts``, ``State``) of every container a grader started.

    One list call and no per-container inspect: ``client.containers.list`` inspects each container it lists,
    and one that its grader removes in between (every grading of a batch removes its own) raises NotFound."""
    return [
        {**summary, "Labels": summary.get("Labels") or {}}
        for summary in client.api.containers(all=True, filters={"label": LABEL})
    ]


def sweep_leftovers(client: Any) -> list[str]:
    """Remove containers (and their handoff folders) a grader process that no longer exists left behind;
    return the containers' ids."""
    import docker

    removed = []
    for summary in graders_containers(client):
        if _gone(int(summary["Labels"].get(LABEL, "0") or 0)):
            try:
                client.api.remove_container(summary["Id"], force=True)
            except docker.errors.APIError:  # NotFound, or 409: another grader's sweep got there first
                continue
            removed.append(summary["Id"])
    for handoff in Path(tempfile.gettempdir()).glob(f"{HANDOFF_PREFIX}*-*"):
        owner = handoff.name.removeprefix(HANDOFF_PREFIX).split("-", 1)[0]
        if owner.isdigit() and _gone(int(owner)):
            shutil.rmtree(handoff, ignore_errors=True)
    return removed


def _gone(owner: int) -> bool:
    """Whether the grader process ``owner`` that started something no longer exists (and is not us)."""
    return owner != os.getpid() and not alive(owner)


def _device(job: GradeJob) -> str:
    """The container's device: the host's GPUs (``host_gpus``) say whether GPUs can be given to it; ``auto``
    gives them only to an exercise with a GPU part."""
    return resolve_device(job.device, gpus=host_gpus(), exercise=job.exercise)


def host_gpus() -> int:
    """1 where the host has an NVIDIA driver (its nvidia-smi) to give containers GPUs through, else 0."""
    return 1 if shutil.which("nvidia-smi") else 0


def _mounts(job: GradeJob, handoff: Path) -> list[Any]:
    from docker.types import Mount

    def ro(source: Path, target: str) -> Mount:
        return Mount(target=target, source=str(source.resolve()), type="bind", read_only=True)

    return [
        ro(job.course.root, "/srv/judge/course"),
        ro(job.course.root / "exercises", "/opt/distgpu/exercises"),
        ro(SOURCE_ROOT / "grader", "/opt/distgpu/grader"),
        ro(SOURCE_ROOT / "coursekit", "/opt/distgpu/coursekit"),
        ro(handoff, "/handoff"),
    ]


class _Drain(threading.Thread):
    """Read the container's output as it comes (an unread stream can wedge docker kill), keep the tail."""

    def __init__(self, container: Any) -> None:
        super().__init__(daemon=True)
        self.container, self.tail = container, b""
        self.start()

    def run(self) -> None:
        for chunk in self.container.logs(stream=True, follow=True, stdout=False, stderr=True):
            self.tail = (self.tail + chunk)[-MAX_LOG_BYTES:]


def _parse(output: str, state: dict[str, Any], job: GradeJob) -> ExerciseResult:
    """The judge's JSON, validated; or a result that gives every part the container's own verdict."""
    line = output.splitlines()[0] if output else ""
    try:
        payload = json.loads(line)
    except ValueError:
        payload = None
    result = opened_envelope(payload)  # SuiteError (a ValueError too) must not become the container's verdict
    if result is not None:
        return _mark_oom(result) if state.get("OOMKilled") else result
    if "deadline" in state:
        return _whole_exercise(
            job, Status.TIMEOUT, f"the container outlived its {state['deadline']:g} s deadline"
        )
    if state.get("OOMKilled"):
        return _whole_exercise(job, Status.OOM, "the container ran out of memory")
    return _whole_exercise(
        job, Status.ERROR, f"the judge ended without a result (exit code {state.get('ExitCode')})"
    )


def _mark_oom(result: ExerciseResult) -> ExerciseResult:
    """Ranks SIGKILLed while the container hit its memory limit were killed by the OOM killer: say so."""
    tests = tuple(
        replace(t, status=Status.OOM) if t.status is Status.CRASHED and "SIGKILL" in t.output else t
        for t in result.tests
    )
    return replace(result, tests=tests)


def _whole_exercise(job: GradeJob, status: Status, reason: str) -> ExerciseResult:
    return ExerciseResult.for_every_part(
        exercise=job.exercise, status=status, reason=reason, graded=job.label, device=_device(job)
    )
