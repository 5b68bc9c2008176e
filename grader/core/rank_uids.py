"""Which uid the ranks of one grading run become: a uid of its own, leased from a small host-wide pool.

Limits that Linux counts per user (RLIMIT_NPROC: processes and threads) are shared by every process of a
uid on the host. Were the ranks of every grading one uid, a fork bomb in one submission would use up the
processes of the submission graded beside it, and that student would lose points for someone else's code.
So each grading run leases a uid that no other run holds and that owns no process, for as long as it runs:
- the pool is ``RANK_UID_POOL`` (a range far above real and systemd accounts; ``DISTGPU_RANK_UIDS``
  moves it), one uid per concurrent grading on the host, whatever started it (a batch's worker slots,
  two instructors' batches, a test run's workers);
- a lease is an exclusive ``flock`` on the uid's lock file in a root-only folder, so the kernel ends it
  when the holder exits, even killed;
- a uid some process still runs as (the last holder's ranks dying) is skipped.
Only root can make ranks another uid; files of the course are read by ranks through their "other" permission
bits, which is what ``nobody`` had.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RANK_UID_POOL = range(2_000_000_000, 2_000_000_064)
"""Above the uids Debian and systemd hand out (systemd's container ranges end at 1879048191)."""

POOL_ENV_VAR = "DISTGPU_RANK_UIDS"
"""``START:COUNT``: another pool, e.g. where the uids above are mapped to something else."""


class NoRankUid(RuntimeError):
    """No uid can be leased: every one is held or still owns processes, or the pool or its folder is unfit."""


@dataclass
class RankUidLease:
    """One held uid; ``release`` (or the holder's exit) returns it to the pool."""

    uid: int
    _lock_fd: int | None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the file drops the flock
            self._lock_fd = None


def lease_rank_uid(lock_dir: Path | None = None) -> RankUidLease:
    """A uid of the pool that no other grading run holds and no process runs as; ``NoRankUid`` if none (or
    if the lock folder is not this user's alone, or the pool's spec is malformed)."""
    folder = _own_folder(lock_dir or default_lock_dir())
    for uid in pool():
        fd = os.open(folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if uid in _process_uids():  # looked at under the lock: nobody can start one now
            os.close(fd)
            continue
        return RankUidLease(uid, fd)
    raise NoRankUid(
        f"all {len(pool())} rank uids ({pool().start}-{pool().stop - 1}) are in use by other grading runs; "
        f"run fewer at once, or widen the pool with {POOL_ENV_VAR}=START:COUNT"
    )


def _own_folder(folder: Path) -> Path:
    """``folder``, made if missing; refused unless it is a real folder of this user that no one else may
    write (in a shared temp folder another user could have made it first, to hold every lock)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise NoRankUid(
            f"{folder} is not a folder of this user's that only it may write; remove it and grade again"
        )
    return folder


def pool() -> range:
    """The uids ranks may be given: ``DISTGPU_RANK_UIDS`` or ``RANK_UID_POOL``."""
    spec = os.environ.get(POOL_ENV_VAR)
    if not spec:
        return RANK_UID_POOL
    try:
        start, count = (int(x) for x in spec.split(":"))
    except ValueError:
        raise NoRankUid(f"{POOL_ENV_VAR}={spec!r}: expected START:COUNT, e.g. 2000000000:64") from None
    if start < 1000 or count < 1:
        raise NoRankUid(f"{POOL_ENV_VAR}={spec!r}: START must be an unprivileged uid (>= 1000), COUNT >= 1")
    return range(start, start + count)


def default_lock_dir() -> Path:
    """Root's own folder for the leases: /run when it exists (cleared at boot), else the temp folder."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    return base / "distgpu-rank-uids"


def _process_uids() -> Iterator[int]:
    """The real uids of the host's processes now (a uid whose ranks are still dying is not free yet)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:  # the process ended while we looked
            continue
        for line in text.splitlines():
            if line.startswith("Uid:"):
                yield int(line.split()[1])
                break
