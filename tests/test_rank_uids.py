"""Each grading run leases a rank uid no other run holds (grader.core.rank_uids)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.core import rank_uids


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> range:
    monkeypatch.setenv(rank_uids.POOL_ENV_VAR, "2000000500:3")
    return rank_uids.pool()


def test_concurrent_leases_get_different_uids_and_a_released_one_comes_back(
    small_pool: range, tmp_path: Path
) -> None:
    first = rank_uids.lease_rank_uid(tmp_path)
    second = rank_uids.lease_rank_uid(tmp_path)
    assert first.uid != second.uid and {first.uid, second.uid} <= set(small_pool)
    first.release()
    again = rank_uids.lease_rank_uid(tmp_path)
    assert again.uid == first.uid
    again.release()
    second.release()


def test_a_lease_held_by_another_process_is_respected_until_it_exits(
    small_pool: range, tmp_path: Path
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from grader.core import rank_uids; "
            f"lease = rank_uids.lease_rank_uid(Path({str(tmp_path)!r})); print(lease.uid, flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, rank_uids.POOL_ENV_VAR: f"{small_pool.start}:{len(small_pool)}"},
    )
    assert holder.stdout is not None and holder.stdin is not None
    held = int(holder.stdout.readline())
    mine = rank_uids.lease_rank_uid(tmp_path)
    assert mine.uid != held
    mine.release()
    holder.kill()  # killed, not released: the kernel drops the lock with the process
    holder.wait()
    leases = [rank_uids.lease_rank_uid(tmp_path) for _ in small_pool]
    assert held in {lease.uid for lease in leases}
    for lease in leases:
        lease.release()


def test_an_exhausted_pool_says_how_to_widen_it(small_pool: range, tmp_path: Path) -> None:
    leases = [rank_uids.lease_rank_uid(tmp_path) for _ in small_pool]
    with pytest.raises(rank_uids.NoRankUid, match=rank_uids.POOL_ENV_VAR):
        rank_uids.lease_rank_uid(tmp_path)
    for lease in leases:
        lease.release()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a process as another uid")
def test_a_uid_that_still_owns_a_process_is_skipped(small_pool: range, tmp_path: Path) -> None:
    lease = rank_uids.lease_rank_uid(tmp_path)
    straggler = subprocess.Popen(["sleep", "60"], user=lease.uid, group=lease.uid)
    try:
        lease.release()  # released while its last rank is still dying
        after = rank_uids.lease_rank_uid(tmp_path)
        assert after.uid != lease.uid
        after.release()
    finally:
        straggler.kill()
        straggler.wait()


@pytest.mark.parametrize("spec", ["12", "0:4", "2000000000:0", "a:b"])
def test_a_malformed_pool_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(rank_uids.POOL_ENV_VAR, spec)
    with pytest.raises(rank_uids.NoRankUid, match=r"START:COUNT|unprivileged"):
        rank_uids.pool()


def test_a_lock_folder_others_may_write_or_a_link_is_refused(small_pool: range, tmp_path: Path) -> None:
    """In a shared temp folder another user could make the folder first (and hold every lock, or plant
    links for root to follow): only a real folder of this user's, writable by no one else, serves."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(rank_uids.NoRankUid, match="remove it"):
        rank_uids.lease_rank_uid(shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with pytest.raises(rank_uids.NoRankUid, match="remove it"):
        rank_uids.lease_rank_uid(link)
