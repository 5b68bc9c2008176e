"""A rank worker: the only process that runs submission code.

It joins the process group once, then serves tasks from the judge until told to stop. A task names a rank
program and its inputs; the reply carries plain data only (see ``wire``). Student output goes to a per-rank
log file, and SIGUSR1 dumps every thread's stack to a per-rank stack file (the judge sends it on a hang).
"""

from __future__ import annotations

import ctypes
import dataclasses
import faulthandler
import importlib.util
import os
import resource
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import torch
import torch.distributed as dist

from grader.harness import comm, wire


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a rank needs to start; sent from the trusted judge."""

    rank: int
    world_size: int
    backend: str
    device: str
    store_path: Path
    impl_dir: Path
    programs_dir: Path
    log_path: Path
    stack_path: Path
    pg_timeout_s: float
    run_as_uid: int | None = None
    """Drop to this uid (and gid) before touching student code; the judge stays root (Docker runner)."""
    limits: dict[str, int | None] | None = None
    """rlimits to set before touching student code: ``sandbox.RankLimits.for_rank`` (None: none)."""
    local_rank: int | None = None
    """Its index among the ranks on its node (which GPU it takes); None: same as ``rank``."""
    store_address: str | None = None
    """``host:port`` of the judge's TCPStore (multi-node worlds; ``store_path`` then only names the
    world's keys). None: rendezvous through the file at ``store_path``."""
    flight_path: Path | None = None
    """Where the rank times its calls for space-time diagrams (``flight``); None: it times nothing."""

    def to_fields(self) -> dict[str, object]:
        """Plain JSON fields, for the trip to the rank factory."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    # Any: the spec's own fields back from JSON (to_fields), each of its field's type, passed on by name
    def from_fields(cls, fields: dict[str, Any]) -> WorkerSpec:
        paths = {f.name for f in dataclasses.fields(cls) if f.type in ("Path", Path, "Path | None")}
        values: dict[str, Any] = {
            k: Path(v) if k in paths and v is not None else v for k, v in fields.items()
        }
        return cls(**values)


@dataclass
class RankContext:
    """What a rank program sees: its place in the world and the student's modules."""

    rank: int
    world_size: int
    device: torch.device
    impl_dir: Path

    def submission(self, module: str) -> ModuleType:
        """Import (once) the student's ``module`` from the directory being graded."""
        if module not in sys.modules:
            path = self.impl_dir / f"{module}.py"
            if not path.is_file():
                raise ModuleNotFoundError(f"the submission has no {module}.py")
            spec = importlib.util.spec_from_file_location(module, path)
            assert spec is not None and spec.loader is not None
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[module]
                raise
        return sys.modules[module]


# ---------------------------------------------------------------------------------------------------------
# start-up


def worker_main(spec: WorkerSpec, tasks: Connection, replies: Connection) -> None:
    """Process entry point: set up, join the group, serve tasks, exit without running atexit hooks."""
    os.setsid()  # own process group: the judge kills the rank and anything it started in one call
    _die_with_parent()
    _redirect_output(spec.log_path)
    stack_file = open(spec.stack_path, "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    if spec.flight_path is not None:
        flight = os.open(spec.flight_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        comm.FLIGHT.open(flight)  # mapped: the mapping keeps the file, the descriptor is not needed
        os.close(flight)
    _first_to_go_on_oom()
    _yield_cpu_to_the_judge()
    if spec.run_as_uid is not None:
        _drop_privileges(spec.run_as_uid)
    if spec.limits is not None:
        _set_limits(spec.limits)
    torch.set_num_threads(1)
    ctx = _join_world(spec)
    comm.install()
    sys.path.insert(0, str(spec.impl_dir))  # the student's modules may import each other
    replies.send_bytes(wire.encode({"ready": spec.rank}))
    _serve(ctx, spec, tasks, replies)
    sys.stdout.flush()
    os._exit(0)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this rank when its parent (the rank factory, which dies with the judge) goes."""
    if sys.platform == "linux":
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _first_to_go_on_oom() -> None:
    """Make this rank, and all it forks, the OOM killer's first choice: a submission that exhausts the memory
    it shares with the judge (a Docker container's limit, the host's) loses its ranks, never the judge that
    reports it. Raising one's own score needs no privilege; it must happen before the uid drop, which makes
    /proc/self root's."""
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:  # not Linux, or /proc not mounted
        pass


def _yield_cpu_to_the_judge() -> None:
    """Run at the lowest priority (nice 19), and so does all a rank forks: a fork bomb's hundreds of
    runnable processes then leave the judge beside them (same container, same cgroup) enough CPU to time
    the test out, collect stacks and report. Honest ranks lose nothing: the judge mostly waits."""
    os.nice(19 - os.nice(0))


def _drop_privileges(uid: int) -> None:
    """Become ``uid`` for good: no supplementary groups, no way back, and no gain from setuid programs."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if sys.platform == "linux":
        PR_SET_NO_NEW_PRIVS = 38
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _set_limits(limits: dict[str, int | None]) -> None:
    """Cap this rank: memory on top of what torch already maps, file size, open files, processes, no cores."""
    address_space = limits.get("address_space_bytes")
    if address_space:
        mapped = _mapped_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + address_space,) * 2)
    # never None: RankLimits.for_rank always sets these two
    resource.setrlimit(resource.RLIMIT_FSIZE, (cast(int, limits["file_size_bytes"]),) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cast(int, limits["open_files"]),) * 2)
    processes = limits.get("processes")
    if processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _mapped_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _redirect_output(log_path: Path) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def _join_world(spec: WorkerSpec) -> RankContext:
    device = torch.device("cpu")
    device_id: torch.device | None = None  # None, init_method and store: init_process_group's defaults
    init_method: str | None = None
    prefix_store: dist.Store | None = None
    if spec.device == "cuda":
        device = torch.device("cuda", spec.rank if spec.local_rank is None else spec.local_rank)
        torch.cuda.set_device(device)
        if spec.backend == "nccl":  # binds the communicator to this GPU; gloo worlds share GPUs instead
            device_id = device
    if spec.store_address is None:
        init_method = f"file://{spec.store_path}"
    else:
        # the stores where they are typed (torch.distributed re-exports them undeclared)
        import torch._C._distributed_c10d as c10d

        host, port = spec.store_address.rsplit(":", 1)
        timeout = timedelta(seconds=spec.pg_timeout_s)
        store = c10d.TCPStore(host, int(port), is_master=False, timeout=timeout)
        prefix_store = c10d.PrefixStore(str(spec.store_path), store)
    dist.init_process_group(
        spec.backend,
        rank=spec.rank,
        world_size=spec.world_size,
        timeout=timedelta(seconds=spec.pg_timeout_s),
        init_method=init_method,
        store=prefix_store,
        device_id=device_id,
    )
    return RankContext(spec.rank, spec.world_size, device, spec.impl_dir)


# ---------------------------------------------------------------------------------------------------------
# serving tasks


def _serve(ctx: RankContext, spec: WorkerSpec, tasks: Connection, replies: Connection) -> None:
    # Each task starts in the environment the rank joined its world with: what a submission wrote into
    # os.environ (GLOO_SOCKET_IFNAME, MASTER_ADDR, ...) must not steer the trusted code of the next task,
    # e.g. a rank program's dist.new_group, which reads gloo's variables when it builds the group.
    joined_with = dict(os.environ)
    while True:
        try:
            task = wire.decode(tasks.recv_bytes())
        except EOFError:
            return
        if task.get("stop"):
            return
        if os.environ != joined_with:
            os.environ.clear()
            os.environ.update(joined_with)
        replies.send_bytes(_run_task(ctx, spec, task))


# Any: a task as the judge wrote it (testing.World), its fields read by name
def _run_task(ctx: RankContext, spec: WorkerSpec, task: dict[str, Any]) -> bytes:
    comm.RECORDER.reset(frozenset(task.get("forbid", ())))
    started = time.perf_counter()
    try:
        value = _dispatch(ctx, spec, task)
        comm.RECORDER.finish()  # traffic that went around every wrapper fails a task that forbids collectives
        frame = wire.encode({"ok": True, "value": value} | _aftermath(started))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the student cannot end the rank
        frame = wire.encode({"ok": False, "error": _describe(exc, spec.impl_dir)} | _aftermath(started))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return frame


def _aftermath(started: float) -> dict[str, object]:
    """What every reply carries besides the outcome: the traffic, the time, and whether anything lingers."""
    return {"comm": comm.RECORDER.summary(), "seconds": _since(started), "lingering": _lingering()}


def _since(started: float) -> float:
    return time.perf_counter() - started


def _lingering() -> int:
    """How many Python threads and descendant processes the rank has running besides its main thread.

    Descendants, not children: a fork bomb's rank may have a dozen children when the pid limit stops it,
    and its children hundreds more."""
    count = threading.active_count() - 1
    pending = [os.getpid()]
    while pending:
        children = _children(pending.pop())
        count += len(children)
        pending += children
    return count


def _children(pid: int) -> list[int]:
    """``pid``'s child processes; none where /proc cannot say (not Linux, an old kernel, a pid just gone)."""
    tasks = f"/proc/{pid}/task"
    children = []
    try:
        for task in os.listdir(tasks):  # plain strings and files: this runs after every task
            with open(f"{tasks}/{task}/children", "rb") as listed:
                children += [int(c) for c in listed.read().split()]
    except OSError:
        return []
    return children


# Any: a task as the judge wrote it (testing.World), its fields read by name
def _dispatch(ctx: RankContext, spec: WorkerSpec, task: dict[str, Any]) -> object:
    if task["kind"] == "call":
        return call(ctx, task["module"], task["function"], task["args"], task["kwargs"])
    module_name, _, function_name = task["program"].partition(":")
    program = getattr(_load_program_module(spec.programs_dir, module_name), function_name)
    return program(ctx, **task["inputs"])


def call(
    ctx: RankContext, module: str, function: str, args: list[object], kwargs: dict[str, object]
) -> dict[str, object]:
    """The generic rank program: ``module.function(*args, **kwargs)`` on this rank's device.

    Returns the return value and the caller's own argument objects after the call, as torch.distributed's
    in-place contract sees them: a tensor written in place shows the write; a list slot the function rebound
    to a new tensor still shows the caller's original tensor.
    """
    args = [_to_device(a, ctx.device) for a in args]
    kwargs = {k: _to_device(v, ctx.device) for k, v in kwargs.items()}
    callers_view = _containers_copied(args)
    returned = getattr(ctx.submission(module), function)(*args, **kwargs)
    return {"returned": returned, "args": callers_view}


def _containers_copied(value: object) -> object:
    """Copy the lists around the tensors, not the tensors: what the caller holds, whatever the callee does."""
    if isinstance(value, list):
        return [_containers_copied(v) for v in value]
    return value


def _to_device(value: object, device: torch.device) -> object:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    return value


def _load_program_module(programs_dir: Path, name: str) -> ModuleType:
    key = f"distgpu_programs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, programs_dir / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


def _describe(exc: BaseException, impl_dir: Path) -> dict[str, object]:
    """The error as the student should see it: type, message, and the frames from their own files."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(str(impl_dir))]
    where = [f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames]
    message = str(exc) if not isinstance(exc, SystemExit) else f"called sys.exit({exc.code!r})"
    return {"type": type(exc).__name__, "message": message, "where": where}
