"""15.cuda_ipc on a machine without a GPU: everything of the part that does not need CUDA.

The part itself runs only on a GPU (it is `blocked` here). What CPU can still show:
- the reference's range checks and messages (they run before any CUDA call), and that a Grant pickles;
- the trusted rank program's protocol: two gloo processes run `rank_programs:ipc_session` against a stand-in
  `ipc` module that shares a memory-mapped file instead of GPU memory. The two ranks meet at every step,
  finish, and stop together when the submission raises on either side (no peer left waiting);
- the hidden suite's checks: they pass on what a correct stand-in returns and fail on a copy, on a window
  that reaches past its end, and on missing refusals; the allocation and lifetime checks on synthetic numbers.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

# the hidden suite is imported for its check functions; its part and concept marks mean nothing here
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "15_memory_pooling"
EXERCISE = ROOT / "exercises" / "15_memory_pooling"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look classes up by their module's name
    spec.loader.exec_module(module)
    return module


ALT = ROOT / "tests" / "validity" / "15_memory_pooling" / "alt-whole-pool-handle"


@pytest.fixture(scope="module", params=[SOLUTION, ALT], ids=["reference", "alt-whole-pool-handle"])
def ref(request: pytest.FixtureRequest) -> ModuleType:
    """The reference's ipc.py, and the alt-correct case's (both must refuse the same way)."""
    return load(request.param / "ipc.py", f"distgpu_test_gpu_15_ipc_{request.param.name}")


@pytest.fixture(scope="module")
def hidden() -> ModuleType:
    return load(SOLUTION / "test_hidden.py", "distgpu_test_gpu_15_hidden")


# ---------------------------------------------------------------------------------------------------------
# the reference (and the alt-correct case), where they need no GPU


def test_reference_refuses_windows_outside_the_pool(ref: ModuleType, hidden: ModuleType) -> None:
    pool = torch.zeros(hidden.IPC_CAPACITY, dtype=torch.uint8)  # refusals come before any CUDA call
    for offset, nbytes in hidden.IPC_REFUSED_WINDOWS:
        with pytest.raises(ref.WindowOutOfRange) as caught:
            ref.grant_window(pool, offset, nbytes)
        assert {"error": "WindowOutOfRange", "message": str(caught.value)} == hidden.refused(
            offset, nbytes, hidden.IPC_CAPACITY
        )
        assert isinstance(caught.value, ValueError)


def test_reference_refuses_accesses_outside_the_window(ref: ModuleType) -> None:
    win = object.__new__(ref.BorrowedWindow)  # a window over CPU bytes: only the checks run
    win.grant = ref.Grant(offset=100, nbytes=10, ipc=None)
    win.bytes = torch.arange(10, dtype=torch.uint8)
    for offset, nbytes in [(7, 4), (-1, 2), (10, 1), (0, 11), (3, -1)]:
        with pytest.raises(ref.WindowOutOfRange, match=rf"^bytes \[{offset}, {offset + nbytes}\) are not"):
            win.read(offset, nbytes)
        if nbytes > 0:
            with pytest.raises(ref.WindowOutOfRange):
                win.write(offset, torch.full((nbytes,), 99, dtype=torch.uint8))
    assert torch.equal(win.bytes, torch.arange(10, dtype=torch.uint8)), "a refused write changed bytes"
    assert torch.equal(win.read(10, 0), torch.empty(0, dtype=torch.uint8))  # zero bytes at the end: fine
    assert torch.equal(win.read(8, 2), torch.tensor([8, 9], dtype=torch.uint8))


def test_a_grant_is_plain_picklable_data(ref: ModuleType) -> None:
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    # the shape of what reduce_tensor returns for a CUDA uint8 view (made up handles: nothing is opened)
    args = (torch.Tensor, torch.Size([5]), (1,), 3, torch.storage.TypedStorage, torch.uint8, 0,
            b"\x01" * 64, 512, 0, False, b"/torch_1_2", 0, b"\x02" * 64, True)  # fmt: skip
    grant = ref.Grant(offset=3, nbytes=5, ipc=(rebuild_cuda_tensor, args))
    back = pickle.loads(pickle.dumps(grant))
    assert back == grant and back.ipc[0] is rebuild_cuda_tensor


# ---------------------------------------------------------------------------------------------------------
# the judge's checks on synthetic figures


def test_allocation_checks_catch_a_copy_on_either_side(hidden: ModuleType) -> None:
    nbytes = 262_147
    fine = ({"pool_moved": False, "allocated_by_grant": 0}, {"allocated_by_open": 0})
    hidden.check_no_copy(*fine, nbytes)
    hidden.check_no_copy({"pool_moved": False, "allocated_by_grant": 512}, {"allocated_by_open": 0}, nbytes)
    copy = 262_656  # a clone of the window, rounded up to the caching allocator's 512 bytes
    for owner, borrower in [
        ({"pool_moved": False, "allocated_by_grant": copy}, {"allocated_by_open": 0}),
        ({"pool_moved": False, "allocated_by_grant": 0}, {"allocated_by_open": copy}),
        ({"pool_moved": True, "allocated_by_grant": 0}, {"allocated_by_open": 0}),
    ]:
        with pytest.raises(AssertionError):
            hidden.check_no_copy(owner, borrower, nbytes)


def test_lifetime_checks(hidden: ModuleType) -> None:
    case = hidden.ipc_case(15, hidden.IPC_WINDOW, [], drop_early=True)
    offset, nbytes = case["window"]
    read = case["pool"][offset : offset + nbytes].clone()
    cap = hidden.IPC_CAPACITY
    hidden.check_lifetime(case, {"freed_while_lent": 0, "freed_after_close": cap}, {"read_while_lent": read})
    for freed_early, freed_late in [(cap, cap), (0, 0)]:  # hold lost too early; close that keeps the hold
        with pytest.raises(AssertionError):
            owner = {"freed_while_lent": freed_early, "freed_after_close": freed_late}
            hidden.check_lifetime(case, owner, {"read_while_lent": read})


def test_read_copy_checks(hidden: ModuleType) -> None:
    """On synthetic reports: a copy keeps the window's first bytes; a view follows the owner's store."""
    case = hidden.ipc_case(16, hidden.IPC_WINDOW, [(0, 4096)])
    offset, nbytes = case["window"]
    first = case["pool"][offset : offset + nbytes].clone()
    copy = {"read_shares_memory": False, "first_read_after_store": first, "first_read_after_close": first}
    hidden.check_read_is_a_copy(case, copy)
    with pytest.raises(AssertionError, match="view of the window"):
        hidden.check_read_is_a_copy(case, {**copy, "read_shares_memory": True})
    # a view through a second mapping (another address, the same memory): its bytes give it away
    with pytest.raises(AssertionError, match="after the owner's store"):
        hidden.check_read_is_a_copy(case, {**copy, "first_read_after_store": case["window_bytes"]})
    with pytest.raises(AssertionError, match="after close"):
        hidden.check_read_is_a_copy(case, {**copy, "first_read_after_close": case["window_bytes"]})


def test_closed_window_check(hidden: ModuleType) -> None:
    hidden.check_closed_window_refuses({"after_close": ["AttributeError: bytes", "TypeError: None"]})
    for went_through in (["AttributeError: bytes", None], [None, "RuntimeError: size"], [None, None]):
        with pytest.raises(AssertionError, match="went through"):
            hidden.check_closed_window_refuses({"after_close": went_through})


def test_lagged_write_check_catches_data_read_too_early_and_copies_not_landed(hidden: ModuleType) -> None:
    """What a write leaves in the owner's window when the owner reads at once: a copy on a side stream that
    did not wait for the current one copied the caller's data before it was produced (zeros here); a copy
    still queued behind the lag has not changed the owner's own bytes yet."""
    nbytes = hidden.IPC_WINDOW[1]
    case = hidden.ipc_case(14, hidden.IPC_WINDOW, [(0, nbytes), (1_000, 7)], lag_cycles=hidden.LAG_CYCLES)
    offset = case["window"][0]
    landed = hidden.ipc_expected_pool(case)
    hidden.check_window_bytes(case, {"pool_after": landed}, "window")
    too_early = landed.clone()
    too_early[offset : offset + nbytes] = 0
    not_landed = case["pool"].clone()
    not_landed[offset : offset + nbytes] = case["window_bytes"]
    for pool in (too_early, not_landed):
        with pytest.raises(AssertionError):
            hidden.check_window_bytes(case, {"pool_after": pool}, "window")


def test_canary_check_names_the_first_changed_bytes(hidden: ModuleType) -> None:
    pool = torch.zeros(100, dtype=torch.uint8)
    got = pool.clone()
    got[10:20] = 1  # inside the window [10, 20): not a canary
    assert hidden.outside_changes(got, pool, [10, 20]) == []
    got[20] = 1
    got[3] = 7
    assert hidden.outside_changes(got, pool, [10, 10]) == [3, 20]


# ---------------------------------------------------------------------------------------------------------
# the rank program, on two CPU processes with a stand-in for CUDA IPC

STAND_IN = '''
"""A stand-in for ipc.py on CPU: the pool is a memory-mapped file, which the borrower maps too."""
from dataclasses import dataclass
from typing import Any

import torch

VARIANT = "correct"
FILES: dict[int, str] = {}


class WindowOutOfRange(ValueError):
    def __init__(self, offset: int, nbytes: int, limit: int) -> None:
        super().__init__(f"bytes [{offset}, {offset + nbytes}) are not inside [0, {limit})")


@dataclass(frozen=True)
class Grant:
    offset: int
    nbytes: int
    ipc: Any


def grant_window(pool, offset, nbytes):
    if VARIANT == "stub_owner":
        raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")
    if VARIANT != "no_refusal" and (offset < 0 or nbytes < 1 or offset + nbytes > pool.numel()):
        raise WindowOutOfRange(offset, nbytes, pool.numel())
    return Grant(offset, nbytes, (FILES[pool.data_ptr()], pool.numel()))


class BorrowedWindow:
    def __init__(self, grant):
        if VARIANT == "stub_borrower":
            raise NotImplementedError("TODO(15.cuda_ipc): not implemented yet")
        self.grant = grant
        path, capacity = grant.ipc
        whole = torch.from_file(path, shared=True, size=capacity, dtype=torch.uint8)
        o, n = grant.offset, grant.nbytes
        self.bytes = whole[o:] if VARIANT == "spill" else whole[o : o + n]
        if VARIANT == "copy":
            self.bytes = self.bytes.clone()

    def _check(self, offset, nbytes):
        limit = self.bytes.numel() if VARIANT == "spill" else self.grant.nbytes
        if offset < 0 or nbytes < 0 or offset + nbytes > limit:
            raise WindowOutOfRange(offset, nbytes, limit)

    def read(self, offset, nbytes):
        self._check(offset, nbytes)
        piece = self.bytes[offset : offset + nbytes]
        return piece if VARIANT == "view_read" else piece.clone()

    def write(self, offset, data):
        self._check(offset, data.numel())
        self.bytes[offset : offset + data.numel()].copy_(data)

    def close(self):
        if VARIANT == "empty_after_close":  # lets go of the mapping, but the window still answers
            self.bytes = torch.empty(0, dtype=torch.uint8)
        else:
            del self.bytes
'''

CHILD = """
import importlib.util, sys, tempfile, torch, torch.distributed as dist
rank, init, stand_in, programs, cases, out = int(sys.argv[1]), *sys.argv[2:]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

ipc, rp = load(stand_in, "ipc"), load(programs, "rank_programs")
folder = tempfile.mkdtemp()

def new_pool(ctx, data):  # a file both processes map, in place of one GPU allocation
    path = f"{folder}/pool{len(ipc.FILES)}.bin"
    data.numpy().tofile(path)
    pool = torch.from_file(path, shared=True, size=data.numel(), dtype=torch.uint8)
    ipc.FILES[pool.data_ptr()] = path
    return pool

class Ctx:
    world_size, device = 2, torch.device("cpu")
    def __init__(self, rank):
        self.rank = rank
    def submission(self, name):
        return sys.modules[name]

rp._new_pool = new_pool
torch.cuda._sleep = lambda cycles: None  # no GPU to keep busy here: only the steps around it are tried
replies = []
for variant, case in torch.load(cases, weights_only=False):
    ipc.VARIANT = variant
    try:
        replies.append({"ok": True, "value": rp.ipc_session(Ctx(rank), **case)})
    except BaseException as exc:
        replies.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
torch.save(replies, out)
dist.destroy_process_group()
"""


def run_sessions(tmp_path: Path, sessions: list[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Run each (variant, inputs) on two gloo processes, in order; [[rank 0 reply, rank 1 reply], ...]."""
    (tmp_path / "stand_in.py").write_text(textwrap.dedent(STAND_IN))
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    torch.save(sessions, tmp_path / "cases.pt")
    init = f"file://{tmp_path / 'rendezvous'}"
    args = [str(tmp_path / "stand_in.py"), str(EXERCISE / "rank_programs.py"), str(tmp_path / "cases.pt")]
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "child.py"), str(r), init, *args, str(tmp_path / f"out{r}.pt")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    logs = []
    for proc in procs:
        try:
            logs.append(proc.communicate(timeout=120)[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail("the two ranks did not finish: the program's steps do not match on both sides")
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    replies = [torch.load(tmp_path / f"out{r}.pt", weights_only=False) for r in range(2)]
    return [list(pair) for pair in zip(*replies, strict=True)]


def refusal_case(hidden: ModuleType, offset: int | None = None) -> dict[str, Any]:
    """The hidden suite's refusal case (its window ends where the pool does, unless `offset` is given):
    refused windows, refused accesses and a write at the window's end."""
    n = 70_001
    one, four = torch.tensor([7], dtype=torch.uint8), torch.tensor([1, 2, 3, 4], dtype=torch.uint8)
    accesses = [["write", n - 3, four], ["read", n - 3, 4], ["read", -1, 2], ["write", -2, four],
                ["read", n, 1], ["write", n, one], ["read", n, 0], ["read", 0, n]]  # fmt: skip
    window = [hidden.IPC_CAPACITY - n if offset is None else offset, n]
    return hidden.ipc_case(
        13, window, [(n - 4, 4)], refused_windows=hidden.IPC_REFUSED_WINDOWS, refused_accesses=accesses
    )


def expected_accesses(hidden: ModuleType, n: int) -> list[Any]:
    r = hidden.refused
    return [r(n - 3, 4, n), r(n - 3, 4, n), r(-1, 2, n), r(-2, 4, n), r(n, 1, n), r(n, 1, n), None, None]


def values(pair: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    assert all(reply["ok"] for reply in pair), pair
    return pair[0]["value"], pair[1]["value"]


@pytest.mark.slow  # two rank processes end to end: skipped by the fast tier
def test_rank_program_on_cpu_processes(tmp_path: Path, hidden: ModuleType) -> None:
    view_case = hidden.ipc_case(11, hidden.IPC_WINDOW, [(0, 4096), (100_003, 65_536), (262_146, 1)])
    edge_case = hidden.ipc_case(12, [0, hidden.IPC_CAPACITY], [(0, 1), (hidden.IPC_CAPACITY - 1, 1)])
    refusals = refusal_case(hidden)
    lifetime = hidden.ipc_case(15, hidden.IPC_WINDOW, [], drop_early=True)
    lagged = hidden.ipc_case(14, hidden.IPC_WINDOW, [(0, hidden.IPC_WINDOW[1])], lag_cycles=hidden.LAG_CYCLES)
    sessions = [
        ("correct", view_case), ("correct", edge_case), ("correct", refusals), ("correct", lifetime),
        ("copy", view_case), ("spill", refusal_case(hidden, 500_000)), ("no_refusal", refusals),
        ("stub_owner", view_case), ("stub_borrower", view_case), ("correct", view_case),
        ("correct", lagged), ("view_read", view_case), ("empty_after_close", view_case),
    ]  # fmt: skip
    got = run_sessions(tmp_path, sessions)

    # a correct stand-in passes every check that does not need a GPU
    for case, pair in zip([view_case, edge_case, refusals], got[:3], strict=True):
        owner, borrower = values(pair)
        assert owner["grant"] == {"offset": case["window"][0], "nbytes": case["window"][1]}
        hidden.check_reads(case, borrower)
        hidden.check_canaries(case, owner)
        hidden.check_window_bytes(case, owner, "window")
        hidden.check_read_is_a_copy(case, borrower)
        hidden.check_closed_window_refuses(borrower)
        assert borrower["view"]["numel"] == case["window"][1] and borrower["view_moved"] is False
    owner, borrower = values(got[2])
    hidden.same(owner["refused"], [hidden.refused(o, k, hidden.IPC_CAPACITY) for o, k in
                                   hidden.IPC_REFUSED_WINDOWS], "refused windows")  # fmt: skip
    hidden.same(borrower["refused_accesses"], expected_accesses(hidden, 70_001), "refused accesses")
    owner, borrower = values(got[3])
    assert set(owner) >= {"freed_while_lent", "freed_after_close"}, owner
    offset, nbytes = hidden.IPC_WINDOW
    assert torch.equal(borrower["read_while_lent"], lifetime["pool"][offset : offset + nbytes])

    # a copy: the borrower misses the owner's store, the owner misses the borrower's writes
    owner, borrower = values(got[4])
    with pytest.raises(AssertionError, match="after the owner stored"):
        hidden.check_reads(view_case, borrower)
    with pytest.raises(AssertionError):
        hidden.check_window_bytes(view_case, owner, "window")
    # a mapping that runs past the window: a refused write goes through and a canary changes
    owner, borrower = values(got[5])
    assert borrower["view"]["numel"] > 70_001
    with pytest.raises(AssertionError):
        hidden.same(borrower["refused_accesses"], expected_accesses(hidden, 70_001), "refused accesses")
    with pytest.raises(AssertionError, match="outside the window"):
        hidden.check_canaries(refusal_case(hidden, 500_000), owner)
    # no range checks in grant_window: the bad windows come back granted
    owner, _ = values(got[6])
    assert owner["refused"] == [None] * len(hidden.IPC_REFUSED_WINDOWS)

    # the submission raises on one rank: that rank reports it, the other stops at the same step
    for pair, failing in [(got[7], 0), (got[8], 1)]:
        assert not pair[failing]["ok"] and "NotImplementedError" in pair[failing]["error"], pair
        assert pair[1 - failing] == {"ok": True, "value": {"peer_failed": True}}, pair
    values(got[9])  # and the two ranks are still in step for the next session
    owner, _ = values(got[10])  # the lagged script's steps (the lag itself needs a GPU)
    hidden.check_window_bytes(lagged, owner, "window after lagged writes")

    # issue 31: a read that returns a view of the window; a close that leaves the window usable
    _, borrower = values(got[11])
    assert borrower["read_shares_memory"] is True
    with pytest.raises(AssertionError, match="view of the window"):
        hidden.check_read_is_a_copy(view_case, borrower)
    hidden.check_reads(view_case, borrower)  # what the suite saw before: each read copied to the host at once
    _, borrower = values(got[12])
    assert borrower["after_close"] == [None, None], borrower  # (one byte broadcasts into zero bytes)
    with pytest.raises(AssertionError, match="read\\(0, 1\\) went through"):
        hidden.check_closed_window_refuses(borrower)
