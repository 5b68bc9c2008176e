"""Where rank workers run on a local machine: inside bubblewrap when it works here, else unsandboxed.

The sandbox holds the rank factory (``harness.zygote``) and every rank it forks, for one grading run:
- its own pid, network (loopback only, so ranks still rendezvous), IPC and UTS namespaces; it dies with the
  judge (``--die-with-parent``) and takes every process it holds with it (the pid namespace ends);
- a filesystem that lists what ranks may read: the Python runtime, the ``grader`` and ``coursekit`` packages,
  the exercise's rank programs, the staged submission (read-only), the run's scratch folder (read-write) and
  a size-capped tmpfs for ``/tmp`` and ``/dev/shm``. ``solutions/`` and the hidden suites are never mounted;
- a minimal environment for bwrap itself, so ``/proc/1/environ`` inside shows none of the judge's secrets;
- ``--new-session`` (no terminal injection), and no capabilities: unprivileged users get a user namespace
  with every capability dropped; as root the factory keeps root inside (to drop each rank) and every rank
  becomes the run's leased uid (``core.rank_uids``) before it touches student code, so the real uid on the
  host is unprivileged and its process limit is this grading's alone.

Resource limits (``RankLimits``) are rlimits each rank sets on itself before it imports the submission;
bubblewrap has none of its own. The wall clock stays with the judge.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.errors import UsageError

SANDBOX_ENV_VAR = "DISTGPU_SANDBOX"
"""``auto`` (default: bubblewrap when it works here), ``bwrap`` (required) or ``none``."""

_ETC_FILES = ("hosts", "nsswitch.conf", "passwd", "group", "ld.so.cache", "localtime", "resolv.conf")
_GPU_DEVICE_PREFIXES = ("nvidia", "dri")


@dataclass(frozen=True)
class RankLimits:
    """rlimits each rank sets on itself before it imports the submission."""

    world_memory_bytes: int | None = field(default_factory=lambda: default_world_memory())
    """Address space the ranks of one world may add on top of what torch maps, split evenly between them.
    CPU only: CUDA reserves huge address ranges. An RLIMIT_AS, so a memory bomb gets MemoryError."""
    file_size_bytes: int = 256 << 20
    open_files: int = 4096
    processes: int | None = None
    """Per real uid, host-wide, threads included; root ignores it. Set only for ranks that run as a leased
    uid: a user's own uid already runs their desktop, so no fixed figure fits it."""

    def for_rank(self, world_size: int) -> dict[str, int | None]:
        """The limits one rank of a ``world_size`` world applies (``worker._set_limits``)."""
        share = None if self.world_memory_bytes is None else self.world_memory_bytes // world_size
        return {
            "address_space_bytes": share,
            "file_size_bytes": self.file_size_bytes,
            "open_files": self.open_files,
            "processes": self.processes,
        }


def default_world_memory() -> int:
    """4 GiB, or a quarter of the machine's memory when that is less."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(4 << 30, physical // 4)


@dataclass(frozen=True)
class Sandbox:
    """One grading run's bwrap sandbox: what it mounts and how big its tmpfs may grow."""

    readable: tuple[Path, ...]
    writable: tuple[Path, ...]
    tmpfs_bytes: int = 1 << 30
    network: bool = False
    """Share the host's network and host name: ranks of a multi-node world must reach their peers."""

    def wrap(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """The bwrap command line that runs ``argv`` inside, with exactly ``env``."""
        cmd = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-cgroup-try", "--die-with-parent"]
        cmd += ["--new-session"]
        if not self.network:
            cmd += ["--unshare-net", "--unshare-uts", "--hostname", "distgpu-rank"]
        if os.geteuid() != 0:
            cmd += ["--unshare-user", "--cap-drop", "ALL"]
        cmd += ["--ro-bind", "/usr", "/usr"]
        for name in ("lib", "lib64", "bin", "sbin"):
            if Path(f"/{name}").is_symlink():
                cmd += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
            elif Path(f"/{name}").is_dir():
                cmd += ["--ro-bind", f"/{name}", f"/{name}"]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        for tmp in ("/tmp", "/dev/shm"):  # writable by every uid, as on the host
            cmd += ["--perms", "1777", "--size", str(self.tmpfs_bytes), "--tmpfs", tmp]
        for name in _ETC_FILES:
            if Path("/etc", name).exists():
                cmd += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for device in _gpu_devices():
            cmd += ["--dev-bind", str(device), str(device)]
        if Path("/sys").is_dir():
            cmd += ["--ro-bind", "/sys", "/sys"]  # CPU and GPU topology, read by torch and NCCL
        writable, readable = _outermost(self.writable), _outermost(self.readable)
        for parent in _parents_to_create([*writable, *readable]):
            cmd += ["--perms", "0755", "--dir", str(parent)]  # bwrap would make them 0700: shut to ranks
        for path in writable:
            cmd += ["--bind", str(path), str(path)]
        for path in readable:  # after the writable ones: the staged submission lies inside scratch
            cmd += ["--ro-bind", str(path), str(path)]
        cmd += ["--clearenv"]
        for key, value in sorted(env.items()):
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", "/tmp", "--", *argv]
        return cmd


def for_grading_run(impl_dir: Path, programs_dir: Path, scratch_dir: Path) -> Sandbox:
    """The sandbox of one grading run: the runtime and course code read-only, the run's scratch writable."""
    readable = [*_python_runtime(), *package_dirs("grader", "coursekit"), programs_dir, impl_dir]
    return Sandbox(readable=tuple(readable), writable=(scratch_dir,))


def for_node_agent(scratch_dir: Path) -> Sandbox:
    """The sandbox of a rank factory on another node (``harness.agent``): the runtime and course code
    read-only, its scratch (where it stages the submission) writable, and the network."""
    readable = [*_python_runtime(), *package_dirs("grader", "coursekit")]
    return Sandbox(readable=tuple(readable), writable=(scratch_dir,), network=True)


def minimal_env() -> dict[str, str]:
    """What ranks inherit: enough to run Python and torch, none of the judge's variables."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "USER": "distgpu-rank",  # a leased uid has no passwd entry: getpass.getuser() reads this instead
        "LOGNAME": "distgpu-rank",
        "OMP_NUM_THREADS": "1",
    }
    for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update({k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "GLOO_SOCKET_"))})
    return env


def requested_mode() -> str:
    """``auto``, ``bwrap`` or ``none`` from ``DISTGPU_SANDBOX``; ``UsageError`` for anything else."""
    mode = os.environ.get(SANDBOX_ENV_VAR, "auto")
    if mode not in ("auto", "bwrap", "none"):
        raise UsageError(f"{SANDBOX_ENV_VAR}={mode!r}: expected auto, bwrap or none")
    return mode


@functools.cache
def probe() -> str | None:
    """``None`` when bubblewrap runs a sandbox here; otherwise why not, in one line. Cached per process."""
    if sys.platform != "linux":
        return "bubblewrap needs Linux"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    probe_box = Sandbox(readable=tuple(_python_runtime()), writable=(), tmpfs_bytes=1 << 20)
    argv = probe_box.wrap([sys.executable, "-I", "-c", "pass"], minimal_env())
    try:
        done = subprocess.run(argv, env=minimal_env(), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bwrap cannot create namespaces here: {last}"
    return None


def _python_runtime() -> list[Path]:
    """The interpreter, its standard library and every site-packages folder on ``sys.path``."""
    places = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent}
    places |= {Path(p) for p in sys.path if p and "-packages" in p and Path(p).is_dir()}
    return sorted(p for p in places if p.is_dir() and p != Path("/usr"))


def package_dirs(*names: str) -> list[Path]:
    """Where the packages ``names`` are imported from here (ranks import them from the same places)."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found += [Path(p) for p in spec.submodule_search_locations]
    return found


def _gpu_devices() -> list[Path]:
    dev = Path("/dev")
    return sorted(p for p in dev.iterdir() if p.name.startswith(_GPU_DEVICE_PREFIXES))


def _parents_to_create(paths: list[Path]) -> list[Path]:
    """Ancestors of the bind targets that the sandbox lacks (its root holds only /usr, /tmp and the like)."""
    present = {Path("/"), Path("/usr"), Path("/tmp"), Path("/dev"), Path("/proc"), Path("/sys"), Path("/etc")}
    parents = {parent for path in paths for parent in path.parents} - present
    mounted = present - {Path("/"), Path("/tmp")}  # /tmp starts empty: folders under it must be made
    wanted = (p for p in parents if not any(p.is_relative_to(q) for q in mounted))
    return sorted(wanted, key=lambda p: len(p.parts))


def _outermost(paths: tuple[Path, ...]) -> list[Path]:
    """Each path once, skipping those inside another (a nested bind would hide nothing and cost a mount)."""
    resolved = sorted({p.resolve() for p in paths if p.exists()})
    kept: list[Path] = []
    for path in resolved:
        if not any(path.is_relative_to(parent) for parent in kept):
            kept.append(path)
    return kept
