"""What this catches: pools that hand out overlapping or misaligned bytes, boundaries a peer can cross, and KV
caches that lose, misplace or over-ship tokens.

- allocator: no rounding or rounding one block too far, best-fit or back-of-block placement, an exact fit
  that leaves an empty entry, free without coalescing on either side, double frees accepted, the OOM error
  without the largest free block. Random scripts against invariants checked here (tiling, alignment, sorted
  and coalesced free list) and against the reference, step by step.
- access: bounds checked against the rounded block or the handle's claimed size, an off-by-one at the end,
  negative offsets, a READ grant that allows writes (any-bit instead of all-bits), grants that survive a
  revoke or pass to the next region at the same offset, ids reused after release, freed bytes readable by
  the next tenant, checks in the wrong order. Exact error classes and messages.
- one_sided: fences that lose, misorder or misattribute results, errors raised instead of returned, a
  target that checks with the wrong requester, data shipped twice or bytes for refused gets; at 2 and 4
  ranks, with empty and one-sided epochs. Expected results come from reference pools run here in the judge.
- page_table: home-first placement, most-free borrowing with ties to the lowest rank, all-or-nothing LRU
  eviction with exact victims, PoolExhausted before any change, partial last pages.
- paged_kv: float64 K/V copied exactly to every rank, pages holding the right tokens on their owners,
  float64 bytes on the wire equal to the tokens that live away from where they are needed.
- cuda_ipc (GPU only; blocked elsewhere): a copy lent instead of the pool (window-sized allocations, writes
  not seen across), offsets that forget the window (the handle maps the whole allocation), refusals and their
  messages, write() returning before its queued copy lands (also from a side stream that waits for nothing:
  the data is still being produced on the current stream), a read() that returns a view of the owner's memory
  instead of a copy, a window still usable after close(), and a borrower that keeps or loses its hold on
  the owner's memory. tests/test_gpu_15.py runs the rank program and these checks on CPU with a stand-in.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.harness import World, assert_equal

FORBID = [  # everything here moves by send/recv: the point is to see what each transfer costs
    "broadcast", "reduce", "all_reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
]  # fmt: skip


def ref_module(reference: Any, name: str) -> Any:
    """reference(name) with the solution directory importable, because pool.py imports arena.py."""
    folder = str(Path(reference("arena").__file__).parent)
    sys.path.insert(0, folder)
    try:
        return reference(name)
    finally:
        sys.path.remove(folder)


def err(cls: str, message: str) -> dict[str, str]:
    return {"error": cls, "message": message}


def b(values: list[int]) -> torch.Tensor:
    """int64 values as bytes (uint8)."""
    return torch.tensor(values, dtype=torch.int64).view(torch.uint8)


def same(got: Any, expected: Any, what: str) -> None:
    """Exact equality of plain data that may hold tensors (compared by dtype, shape and every element)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {got!r}"
        assert_equal(got, expected, rank=None, world_size=None, what=what)
    elif isinstance(expected, list | tuple):
        assert isinstance(got, list) and len(got) == len(expected), (
            f"{what}: got {got!r}, expected {expected!r}"
        )
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            same(g, e, f"{what}[{i}]")
    else:
        assert got == expected, f"{what}: got {got!r}, expected {expected!r}"


# ------------------------------------------------------------------------------------------------------------
# 15.allocator


@pytest.mark.part("15.allocator")
@pytest.mark.concept("alignment_rounding")
def test_round_up(world: World) -> None:
    cases = [
        (1, 256, 256),
        (256, 256, 256),
        (257, 256, 512),
        (0, 256, 0),
        (100, 64, 128),
        (7, 1, 7),
        (4097, 4096, 8192),
    ]
    for nbytes, alignment, expected in cases:
        [res] = world.call("arena", "round_up", args=[(nbytes, alignment)])
        assert res.returned == expected, (
            f"round_up({nbytes}, {alignment}) = {res.returned!r}, expected {expected}"
        )


def trace(world: World, capacity: int, alignment: int, ops: list[list[Any]]) -> list[dict[str, Any]]:
    [res] = world.run(
        "rank_programs:arena_trace", inputs={"capacity": capacity, "alignment": alignment, "ops": ops}
    )
    return res.value


@pytest.mark.part("15.allocator")
@pytest.mark.concept("first_fit_and_coalescing")
def test_coalescing_each_side(world: World) -> None:
    # 4 blocks of 256 in 1280 bytes; free 1 (no neighbour free), 3 (merges right with the tail), then 2 (both)
    ops = [
        ["alloc", 256],
        ["alloc", 200],
        ["alloc", 256],
        ["alloc", 1],
        ["free", 256],
        ["free", 768],
        ["free", 512],
    ]
    steps = trace(world, 1280, 256, ops)
    same([s["result"] for s in steps], [0, 256, 512, 768, 256, 256, 256], "results")
    same(steps[4]["free_list"], [[256, 256], [1024, 256]], "free list after freeing the block at 256")
    same(
        steps[5]["free_list"], [[256, 256], [768, 512]], "free list after freeing 768 (merges with the tail)"
    )
    same(steps[6]["free_list"], [[256, 1024]], "free list after freeing 512 (merges on both sides)")
    # exact fit: the 1024-byte hole is used up and leaves no (offset, 0) entry behind
    steps = trace(world, 1280, 256, [*ops, ["alloc", 1024]])
    same(steps[-1]["free_list"], [], "free list after an exact fit of the only free block")
    same(steps[-1]["result"], 256, "offset of the exact fit")


@pytest.mark.part("15.allocator")
@pytest.mark.concept("allocator_errors")
def test_errors(world: World) -> None:
    ops = [["alloc", 512], ["alloc", 512], ["alloc", 512], ["free", 512], ["alloc", 600], ["free", 512],
           ["free", 100], ["alloc", 0], ["alloc", 512]]  # fmt: skip
    steps = trace(world, 2048, 256, ops)
    got = [s["result"] for s in steps]
    expected = [0, 512, 1024, 512,
                err("OutOfMemory", "cannot allocate 600 bytes: the largest free block has 512 bytes"),
                err("InvalidFree", "offset 512 is not the start of an allocated block"),
                err("InvalidFree", "offset 100 is not the start of an allocated block"),
                err("ValueError", "cannot allocate 0 bytes"), 512]  # fmt: skip
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if isinstance(e, dict) and e["error"] == "ValueError":
            assert isinstance(g, dict) and g["error"] == "ValueError", (
                f"op {ops[i]}: got {g!r}, expected ValueError"
            )
        else:
            same(g, e, f"result of {ops[i]}")
    same(steps[-1]["free_list"], [[1536, 512]], "free list after the failed frees (they must change nothing)")


def check_invariants(step: dict[str, Any], capacity: int, alignment: int, what: str) -> None:
    free, used = step["free_list"], step["allocated"]
    assert all(size > 0 for _, size in free), f"{what}: an empty block in the free list {free}"
    assert free == sorted(free), f"{what}: free list not sorted by offset: {free}"
    for (o1, s1), (o2, _) in itertools.pairwise(free):
        assert o1 + s1 < o2, f"{what}: free blocks {o1}+{s1} and {o2} touch or overlap (not coalesced)"
    for offset, size in used:
        assert offset % alignment == 0 and size % alignment == 0, (
            f"{what}: block ({offset}, {size}) misaligned"
        )
    tiles = sorted(map(tuple, free + used))
    at = 0
    for offset, size in tiles:
        assert offset == at, f"{what}: blocks {tiles} do not tile [0, {capacity}): gap or overlap at {at}"
        at += size
    assert at == capacity, f"{what}: the blocks cover [0, {at}), not [0, {capacity})"


@pytest.mark.part("15.allocator")
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.concept("first_fit_and_coalescing")
def test_random_scripts(world: World, reference: Any, seed: int) -> None:
    rng = random.Random(seed)
    capacity, alignment = [(8192, 256), (1024, 64), (4096, 512)][seed - 1]
    ops: list[list[Any]] = []
    for _ in range(70):
        alloc = rng.random() < 0.55
        ops.append(["alloc", rng.randint(1, capacity // 5)] if alloc else ["free_live", rng.randrange(8)])
    ops.append(["free", 3 * alignment])  # a raw offset: a live block's start or not, as the reference says
    steps = trace(world, capacity, alignment, ops)
    arena = reference("arena").Arena(capacity, alignment)
    for i, (op, step) in enumerate(zip(ops, steps, strict=True)):
        check_invariants(step, capacity, alignment, f"after op {i} {op}")
        try:
            if op[0] == "alloc":
                expected = arena.alloc(op[1])
            elif op[0] == "free":
                expected = arena.free(op[1])
            else:
                live = sorted(arena.allocated)
                expected = arena.free(live[op[1] % len(live)]) if live else None
        except Exception as exc:
            expected = err(type(exc).__name__, str(exc))
        same(step["result"], expected, f"result of op {i} {op} (first fit, front of the block)")
        same(step["free_list"], [list(x) for x in arena.free_list], f"free list after op {i} {op}")


# ------------------------------------------------------------------------------------------------------------
# 15.access: one pool, owner rank 0, requesters 0, 1 and 2


REASONS = {
    "InvalidHandle": "no such region (never allocated, or released)",
    "PermissionDenied": "permission denied",
    "OutOfBounds": "out of bounds",
}


def no(cls: str, requester: int, verb: str, lo: int, hi: int, handle: str) -> dict[str, str]:
    """The refusal `cls` of `requester`'s read or write of bytes [lo, hi) of `handle` ("owner:id")."""
    return err(cls, f"rank {requester} {verb} of bytes [{lo}, {hi}) of handle {handle}: {REASONS[cls]}")


DATA = b(list(range(100, 112)))  # 96 bytes
ZEROS = torch.zeros(300, dtype=torch.uint8)
ACCESS_SCRIPT: list[tuple[list[Any], Any]] = [  # (step, expected result)
    (["allocate", 100], [0, 0, 100]),
    (["allocate", 256], [0, 1, 256]),
    (["write", 0, 0, DATA, 0], None),
    (["read", 0, 0, 96, 0], DATA),
    (["read", 0, 0, 8, 1], no("PermissionDenied", 1, "read", 0, 8, "0:0")),  # no grant yet
    (["grant", 0, 1, 1], None),  # READ for rank 1
    (["read", 0, 8, 16, 1], DATA[8:24]),
    (["write", 0, 0, b([7]), 1], no("PermissionDenied", 1, "write", 0, 8, "0:0")),  # READ only
    (["read", 0, 96, 8, 1], no("OutOfBounds", 1, "read", 96, 104, "0:0")),  # inside the block's padding
    (["read", 0, 92, 8, 1], torch.cat([DATA[92:], ZEROS[:4]])),  # ends exactly at byte 100
    (["read", 0, -8, 8, 1], no("OutOfBounds", 1, "read", -8, 0, "0:0")),
    (["check", 0, 100, 0, False, 1], 100),  # an empty access at the very end is in bounds
    (["read", [0, 0, 4096], 200, 8, 1], no("OutOfBounds", 1, "read", 200, 208, "0:0")),  # a forged size
    (["read", [0, 7, 100], 0, 8, 1], no("InvalidHandle", 1, "read", 0, 8, "0:7")),  # never allocated
    (["read", [1, 0, 100], 0, 8, 1], no("InvalidHandle", 1, "read", 0, 8, "1:0")),  # rank 1's, not ours
    (["grant", 1, 2, 3], None),  # READ_WRITE for rank 2 on region 1
    (["write", 1, 16, b([5, 6]), 2], None),
    (["read", 1, 16, 16, 2], b([5, 6])),
    (["check", 1, 0, 8, True, 2], 256),  # region 1 starts at 256 in the arena
    (["read", 1, 0, 8, 1], no("PermissionDenied", 1, "read", 0, 8, "0:1")),  # grants are per region
    (["grant", 1, 2, 0], None),  # revoke
    (["read", 1, 16, 8, 2], no("PermissionDenied", 2, "read", 16, 24, "0:1")),
    (["read", 1, 300, 8, 1], no("PermissionDenied", 1, "read", 300, 308, "0:1")),  # permission before bounds
    (["release", 0], None),
    (["read", 0, 0, 8, 0], no("InvalidHandle", 0, "read", 0, 8, "0:0")),  # stale, even for the owner
    (["allocate", 100], [0, 2, 100]),  # a new id, at the freed offset
    (["read", [0, 2, 100], 0, 96, 0], ZEROS[:96]),  # scrubbed
    (["read", [0, 2, 100], 0, 8, 1], no("PermissionDenied", 1, "read", 0, 8, "0:2")),  # id 0's grant is gone
    (["release", 0], no("InvalidHandle", 0, "write", 0, 0, "0:0")),  # double release
    (["grant", 0, 1, 1], no("InvalidHandle", 0, "write", 0, 0, "0:0")),
    (["write", 1, 0, ZEROS, 0], no("OutOfBounds", 0, "write", 0, 300, "0:1")),
    (
        ["allocate", 5000],
        err("OutOfMemory", "cannot allocate 5000 bytes: the largest free block has 3584 bytes"),
    ),
]


def run_pool(world: World, steps: list[list[Any]], rank: int = 0) -> list[Any]:
    inputs = {"rank": rank, "capacity": 4096, "alignment": 256, "steps": steps}
    [res] = world.run("rank_programs:pool_script", inputs=inputs)
    return res.value


@pytest.mark.part("15.access")
@pytest.mark.concept("owner_checks_every_access")
def test_read_returns_a_copy(world: World) -> None:
    # README: "`read` returns a copy". A view into the pool's memory would change under the caller when the
    # region is written (or scrubbed and handed to the next tenant).
    data = torch.arange(1, 17, dtype=torch.uint8)
    steps = [["allocate", 16], ["write", 0, 0, data, 0], ["read", 0, 0, 8, 0],
             ["write", 0, 0, torch.zeros(16, dtype=torch.uint8), 0], ["release", 0]]  # fmt: skip
    got = run_pool(world, steps)
    assert isinstance(got[2], torch.Tensor), f"read returned {got[2]!r}"
    assert got[2].tolist() == list(range(1, 9)), (
        f"a read of bytes 0..7 returned {got[2].tolist()} after a later write and release: read must return "
        "a copy, not a view into the pool's memory"
    )


def shown(step: list[Any]) -> list[Any]:
    return [f"<{s.numel()} bytes>" if isinstance(s, torch.Tensor) else s for s in step]


@pytest.mark.part("15.access")
@pytest.mark.concept("owner_checks_every_access")
def test_access_script(world: World) -> None:
    got = run_pool(world, [step for step, _ in ACCESS_SCRIPT])
    for i, ((step, expected), result) in enumerate(zip(ACCESS_SCRIPT, got, strict=True)):
        same(result, expected, f"result of step {i} {shown(step)}")


def random_pool_steps(rng: random.Random) -> list[list[Any]]:
    steps: list[list[Any]] = [["allocate", rng.randint(1, 300)] for _ in range(4)]
    for _ in range(60):
        h: Any = rng.randrange(5)
        h = h if h < 4 else [0, rng.randrange(6), rng.randint(1, 400)]  # an index, or a made-up handle
        r, offset, n = rng.randrange(3), rng.randint(-2, 320), rng.randint(0, 24)
        steps.append(
            rng.choice([
                ["read", h, offset, n, r],
                ["write", h, offset, torch.arange(n, dtype=torch.uint8), r],
                ["grant", h, rng.randrange(1, 3), rng.choice([0, 1, 3])],
                ["check", h, offset, n, rng.random() < 0.5, r],
                ["release", h],
                ["allocate", rng.randint(1, 600)],
            ])
        )  # fmt: skip
    return steps


def reference_pool_step(pool_ref: Any, pool: Any, handles: list[Any], step: list[Any]) -> Any:
    """What the reference pool answers to one step of pool_script (same conventions as rank_programs)."""
    op, *a = step
    if op == "allocate":
        handles.append(pool.allocate(a[0]))
        return [0, handles[-1].id, a[0]]
    h = handles[a[0]] if isinstance(a[0], int) else pool_ref.Handle(*a[0])
    if op == "release":
        return pool.release(h)
    if op == "grant":
        return pool.grant(h, a[1], a[2])
    if op == "read":
        return pool.read(h, a[1], a[2], a[3])
    if op == "write":
        return pool.write(h, a[1], a[2], a[3])
    return pool.check(h, a[4], a[1], a[2], a[3])


@pytest.mark.part("15.access")
@pytest.mark.concept("owner_checks_every_access")
def test_random_script_against_reference(world: World, reference: Any) -> None:
    pool_ref = ref_module(reference, "pool")
    steps = random_pool_steps(random.Random(15))
    got = run_pool(world, steps, rank=0)
    pool, handles = pool_ref.MemoryPool(0, 4096, 256), []
    for i, (step, result) in enumerate(zip(steps, got, strict=True)):
        try:
            expected = reference_pool_step(pool_ref, pool, handles, step)
        except Exception as exc:
            expected = err(type(exc).__name__, str(exc))
        same(result, expected, f"step {i} {shown(step)}")


# ------------------------------------------------------------------------------------------------------------
# 15.one_sided: every rank r has A (id 0, 40 bytes, readable by all), B (id 1, 24 bytes, read-write for r+1)
# and C (id 2, released before the first fence)


def a_values(r: int) -> list[int]:
    return [1000 * r + i for i in range(5)]


def window_setup(r: int, p: int) -> list[list[Any]]:
    peers = [q for q in range(p) if q != r]
    return [
        ["allocate", 40], ["write", 0, 0, b(a_values(r)), r], *[["grant", 0, q, 1] for q in peers],
        ["allocate", 24], ["grant", 1, (r + 1) % p, 3],
        ["allocate", 16], ["release", 2],
    ]  # fmt: skip


def window_epochs(r: int, p: int) -> list[list[list[Any]]]:
    nxt, prv = (r + 1) % p, (r - 1) % p
    epoch1 = [
        ["get", [nxt, 0, 40], 8, 16],
        ["put", [prv, 1, 24], 0, b([11 * r + 1, 11 * r + 2])],  # I hold READ_WRITE on my left neighbour's B
        ["get", [r, 0, 40], 0, 40],  # my own memory
        ["put", [nxt, 0, 40], 0, b([-1])],  # A is read-only for peers
        ["get", [nxt, 0, 40], 32, 16],  # past the end
        ["get", [nxt, 2, 16], 0, 8],  # released
        ["get", [nxt, 0, 999], 40, 8],  # forged size
        ["get", [prv, 0, 40], 0, 40],
    ]
    epoch2 = [["get", [r, 1, 24], 0, 24], ["get", [prv, 1, 24], 0, 16], ["get", [nxt, 1, 24], 0, 8],
              ["put", [r, 1, 24], 16, b([77])]]  # fmt: skip
    epoch4 = [["get", [q, 0, 40], 8 * q % 40, 8] for q in range(p)] if r == 0 else []  # only rank 0 asks
    return [epoch1, epoch2, [], epoch4]


def oracle(pool_ref: Any, p: int) -> tuple[list[Any], list[dict[str, int]]]:
    """Each rank's fence results, and each rank's uint8 bytes sent/received, from reference pools.

    No epoch has two origins touching the same bytes with a write, so applying the ops origin by origin,
    in queue order, gives the one right answer.
    """
    pools = [pool_ref.MemoryPool(r, 4096) for r in range(p)]
    for r in range(p):
        handles: list[Any] = []
        for op, *a in window_setup(r, p):
            if op == "allocate":
                handles.append(pools[r].allocate(a[0]))
            elif op == "write":
                pools[r].write(handles[a[0]], a[1], a[2], a[3])
            elif op == "grant":
                pools[r].grant(handles[a[0]], a[1], a[2])
            else:
                pools[r].release(handles[a[0]])
    results: list[list[Any]] = [[] for _ in range(p)]
    traffic = [{"sent": 0, "received": 0} for _ in range(p)]
    for e in range(4):
        epoch_results = []
        for r in range(p):
            mine = []
            for kind, spec, offset, arg in window_epochs(r, p)[e]:
                h = pool_ref.Handle(*spec)
                try:
                    if kind == "put":
                        mine.append(pools[h.owner].write(h, offset, arg, r))
                    else:
                        mine.append(pools[h.owner].read(h, offset, arg, r))
                except pool_ref.AccessError as exc:
                    mine.append(err(type(exc).__name__, str(exc)))
                remote = h.owner != r
                moved = arg.numel() if kind == "put" else (arg if not isinstance(mine[-1], dict) else 0)
                if remote:  # a put's bytes travel even when refused; a get's only when served
                    src, dst = (r, h.owner) if kind == "put" else (h.owner, r)
                    traffic[src]["sent"] += moved
                    traffic[dst]["received"] += moved
            epoch_results.append(mine)
        for r in range(p):
            results[r].append(epoch_results[r])
    return results, traffic


def run_window(world: World) -> list[Any]:
    p = world.size
    inputs = [
        {"capacity": 4096, "setup": window_setup(r, p), "epochs": window_epochs(r, p)} for r in range(p)
    ]
    results = world.run("rank_programs:window_epochs", inputs=inputs, forbid=FORBID)
    for res in results:
        what = f"rank {res.rank}: handles from allocate (ids 0, 1, 2 in allocation order: peers rely on it)"
        same(res.value["handles"], [[res.rank, 0, 40], [res.rank, 1, 24], [res.rank, 2, 16]], what)
    return results


@pytest.mark.part("15.one_sided")
@pytest.mark.concept("fence_completes_queued_ops")
def test_fence_results(world: World, reference: Any) -> None:
    expected, _ = oracle(ref_module(reference, "pool"), world.size)
    for res in run_window(world):
        for e, epoch in enumerate(res.value["epochs"]):
            assert epoch["left_in_queue"] == 0, f"rank {res.rank}: the queue is not empty after fence {e + 1}"
            same(
                epoch["results"],
                expected[res.rank][e],
                f"rank {res.rank}/{world.size}, fence {e + 1} results",
            )


@pytest.mark.part("15.one_sided")
@pytest.mark.concept("one_sided_bytes")
def test_fence_bytes(world: World, reference: Any) -> None:
    _, traffic = oracle(ref_module(reference, "pool"), world.size)
    for res in run_window(world):
        events = [e for e in res.comm.events if e.dtype == "uint8"]
        sent = sum(e.nbytes for e in events if e.op in ("send", "isend"))
        received = sum(e.nbytes for e in events if e.op in ("recv", "irecv"))
        expected = traffic[res.rank]
        assert (sent, received) == (expected["sent"], expected["received"]), (
            f"rank {res.rank}/{world.size}: moved {sent} data bytes out and {received} in (uint8 messages); "
            f"expected {expected['sent']} and {expected['received']}: each remote put's payload once (even "
            "if refused), each served remote get's bytes once, nothing for local ops or refused gets"
        )


@pytest.mark.part("15.one_sided")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("fence_completes_queued_ops")
def test_fence_on_3_ranks(world: World, reference: Any) -> None:
    # a world size that is not a power of two: the epochs' peers and refusals are drawn per rank
    expected, _ = oracle(ref_module(reference, "pool"), world.size)
    for res in run_window(world):
        for e, epoch in enumerate(res.value["epochs"]):
            same(epoch["results"], expected[res.rank][e], f"rank {res.rank}/3, fence {e + 1} results")


# ------------------------------------------------------------------------------------------------------------
# 15.page_table


def run_manager(world: World, world_size: int, pages: int, block: int, steps: list[list[Any]]) -> list[Any]:
    inputs = {"world_size": world_size, "pages_per_rank": pages, "block_size": block, "steps": steps}
    [res] = world.run("rank_programs:manager_script", inputs=inputs)
    return res.value


CAN_FREE = "but the pool can free only"
# (step, result, evicted so far) on 2 ranks x 2 pages of B = 2 tokens
LRU_SCRIPT: list[tuple[list[Any], Any, list[int]]] = [
    (["add", 0, 0], None, []), (["add", 1, 1], None, []), (["add", 2, 0], None, []),
    (["append", 0, 2], [[0, 0, 0], [0, 0, 1]], []),
    (["append", 1, 2], [[1, 0, 0], [1, 0, 1]], []),
    (["append", 2, 2], [[0, 1, 0], [0, 1, 1]], []),
    (["append", 0, 1], [[1, 1, 0]], []),  # home 0 is full: borrow rank 1's last page
    (["touch", 1], None, []),
    (["append", 2, 1], [[0, 0, 0]], [0]),  # full: seq 0 (used at 7) is older than seq 1 (touched at 8)
    (["append", 1, 3], [[1, 1, 0], [1, 1, 1], [0, 0, 0]], [0, 2]),  # 2 pages: home's free one, then evict 2
    (["append", 0, 1], "UnknownSequence", [0, 2]),  # evicted
    (["add", 3, 1], None, [0, 2]),
    (["append", 3, 3], [[0, 1, 0], [0, 1, 1], [1, 0, 0]], [0, 2, 1]),
    (["append", 3, 6], err("PoolExhausted", f"sequence 3 needs 3 more pages {CAN_FREE} 2"), [0, 2, 1]),
    (["free", 3], None, [0, 2, 1]),
    (["touch", 3], "UnknownSequence", [0, 2, 1]),  # freed
    (["add", 3, 0], None, [0, 2, 1]),
    (["add", 3, 0], "ValueError", [0, 2, 1]),  # exists
]  # fmt: skip


@pytest.mark.part("15.page_table")
@pytest.mark.concept("lru_eviction")
def test_lru_eviction_script(world: World) -> None:
    got = run_manager(world, 2, 2, 2, [s for s, _, _ in LRU_SCRIPT])
    for i, ((step, result, evicted), g) in enumerate(zip(LRU_SCRIPT, got, strict=True)):
        if isinstance(result, str):  # only the class is specified: any message will do
            assert isinstance(g["result"], dict) and g["result"]["error"] == result, (
                f"step {i} {step}: expected {result}, got {g['result']!r}"
            )
        else:
            same(g["result"], result, f"step {i} {step}")
        same(g["state"]["evicted"], evicted, f"evicted sequences after step {i} {step}")
    same(got[13]["state"], got[12]["state"], "state after PoolExhausted (nothing may change)")
    same(got[14]["state"]["free"], [[0, 1], [0, 1]], "free pages after freeing the last sequence")


@pytest.mark.part("15.page_table")
@pytest.mark.concept("placement_policy")
def test_borrow_from_most_free_lowest_rank(world: World) -> None:
    got = run_manager(world, 4, 2, 1, [["add", 0, 0], ["append", 0, 4], ["add", 1, 3], ["append", 1, 3]])
    same(
        got[1]["result"],
        [[0, 0, 0], [0, 1, 0], [1, 0, 0], [2, 0, 0]],
        "pages of 4 tokens homed on full rank 0",
    )
    same(
        got[3]["result"], [[3, 0, 0], [3, 1, 0], [1, 1, 0]], "seq 1 homed on rank 3, then the most free rank"
    )


@pytest.mark.part("15.page_table")
@pytest.mark.concept("block_table_pages")
def test_partial_pages(world: World) -> None:
    got = run_manager(world, 2, 3, 4, [["add", 5, 1], ["append", 5, 3], ["append", 5, 2], ["append", 5, 0]])
    same(got[1]["result"], [[1, 0, 0], [1, 0, 1], [1, 0, 2]], "first 3 tokens")
    same(got[2]["result"], [[1, 0, 3], [1, 1, 0]], "tokens 3 and 4: the last page fills up, then a new one")
    same(got[3]["result"], [], "appending 0 tokens")
    same(got[3]["state"]["tables"], {"5": [[1, 0], [1, 1]]}, "table")


def random_manager_steps(rng: random.Random, world_size: int, n: int) -> list[list[Any]]:
    steps: list[list[Any]] = [["add", s, s % world_size] for s in range(5)]
    for _ in range(n):
        s, kind = rng.randrange(6), rng.random()
        steps.append(["append", s, rng.randint(0, 5)] if kind < 0.6 else ["touch", s] if kind < 0.8
                     else ["free", s] if kind < 0.9 else ["add", s, rng.randrange(world_size)])  # fmt: skip
    return steps


@pytest.mark.part("15.page_table")
@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.concept("block_table_pages")
def test_random_scripts_against_reference(world: World, reference: Any, seed: int) -> None:
    bm = reference("block_manager")
    ws, pages, block = [(2, 3, 2), (3, 2, 3)][seed - 4]
    steps = random_manager_steps(random.Random(seed), ws, 60)
    got = run_manager(world, ws, pages, block, steps)
    m = bm.BlockManager(ws, pages, block)
    for i, (step, g) in enumerate(zip(steps, got, strict=True)):
        op, *a = step
        calls = {"add": m.add_sequence, "append": m.append_slots, "touch": m.touch, "free": m.free_sequence}
        try:
            out = calls[op](*a)
            expected: Any = [list(x) for x in out] if op == "append" else None
        except bm.PoolExhausted as exc:
            expected = err("PoolExhausted", str(exc))
        except (ValueError, KeyError) as exc:  # only the class is specified for these
            expected = type(exc).__name__
        if isinstance(expected, str):
            got_class = g["result"].get("error") if isinstance(g["result"], dict) else g["result"]
            assert got_class == expected, f"step {i} {step}: expected {expected}, got {g['result']!r}"
        else:
            same(g["result"], expected, f"step {i} {step}")
        tables = g["state"]["tables"]
        held = [tuple(pg) for t in tables.values() for pg in t]
        assert len(held) == len(set(held)), f"after step {i} {step}: a page is in two tables: {tables}"
        free = {(r, s) for r, slots in enumerate(g["state"]["free"]) for s in slots}
        assert free.isdisjoint(held) and len(free) + len(held) == ws * pages, (
            f"after step {i} {step}: free pages {sorted(free)} and held pages {sorted(held)} do not "
            "partition the pool"
        )
        for s, t in tables.items():
            n = g["state"]["lengths"][s]
            assert len(t) == -(-n // block), (
                f"after step {i}: seq {s} has {n} tokens in {len(t)} pages of {block}"
            )
        same(g["state"]["evicted"], list(m.evicted), f"evicted after step {i} {step}")


# ------------------------------------------------------------------------------------------------------------
# 15.paged_kv

H, D = 2, 3
TOKEN_BYTES = 2 * H * D * 8  # one token's K and V in float64


class KVScript:
    """Builds a kv_workload script while a reference BlockManager follows it, so the judge knows what each
    gather must return, and the float64 bytes and messages each rank may send and receive."""

    def __init__(self, bm: Any, p: int, pages: int, block: int, seed: int) -> None:
        self.m, self.p, self.block = bm.BlockManager(p, pages, block), p, block
        self.gen = torch.Generator().manual_seed(seed)
        self.steps: list[list[Any]] = []
        self.tokens: dict[int, list[torch.Tensor]] = {}  # seq -> [2, n, H, D] chunks appended
        self.expected: list[list[Any]] = [[] for _ in range(p)]  # per rank: per gather, per request
        self.bytes = [{"sent": 0, "received": 0} for _ in range(p)]
        self.max_msgs = [0] * p  # float64 messages a rank may receive at most

    def add(self, seq: int) -> None:
        self.steps.append(["add", seq, seq % self.p])
        self.m.add_sequence(seq, seq % self.p)

    def append(self, seq: int, n: int) -> None:
        kv = torch.randn(2, n, H, D, generator=self.gen, dtype=torch.float64)
        self.steps.append(["append", seq, kv[0], kv[1]])
        home, slots = self.m.homes[seq], self.m.append_slots(seq, n)
        self.tokens = {s: t for s, t in self.tokens.items() if s in self.m.tables}  # evicted: gone
        self.tokens[seq] = [*self.tokens.get(seq, []), kv]
        for owner in {r for r, _, _ in slots} - {home}:
            moved = sum(r == owner for r, _, _ in slots) * TOKEN_BYTES
            self.bytes[home]["sent"] += moved
            self.bytes[owner]["received"] += moved
            self.max_msgs[owner] += 1  # one message per owner per append

    def gather_all(self) -> None:
        requests = [[s, dst] for s in sorted(self.m.tables) for dst in range(self.p)]
        self.steps.append(["gather", requests])
        for r in range(self.p):
            self.expected[r].append([])
        for seq, dst in requests:
            self.m.touch(seq)
            kv = self.kv(seq)
            for r in range(self.p):
                self.expected[r][-1].append([kv[0], kv[1]] if r == dst else None)
            length = self.m.lengths[seq]
            for j, (owner, _) in enumerate(self.m.tables[seq]):
                if owner != dst:
                    moved = min(self.block, length - j * self.block) * TOKEN_BYTES
                    self.bytes[owner]["sent"] += moved
                    self.bytes[dst]["received"] += moved
                    self.max_msgs[dst] += 1  # one message per remote page

    def kv(self, seq: int) -> torch.Tensor:
        """[2, L, H, D]: every token of seq so far (L may be 0)."""
        return torch.cat([torch.empty(2, 0, H, D, dtype=torch.float64), *self.tokens.get(seq, [])], dim=1)

    def live(self) -> list[int]:
        return sorted(self.m.tables)


def spill_script(bm: Any, p: int) -> KVScript:
    """3 pages of 4 tokens per rank; p + 1 sequences, and seq p grows until it borrows pages elsewhere."""
    sc = KVScript(bm, p, pages=3, block=4, seed=p)
    for s in range(p + 1):
        sc.add(s)
    for s in range(p + 1):
        sc.append(s, s + 1)
    sc.gather_all()
    sc.append(p, 13)
    for s in range(p):
        sc.append(s, 2)
    sc.gather_all()
    assert not sc.m.evicted, "test bug: the spill scenario must not evict"
    return sc


def evict_script(bm: Any, p: int) -> KVScript:
    """2 pages of 2 tokens per rank and 2p sequences: appends evict, gathers steer the LRU order."""
    sc, rng = KVScript(bm, p, pages=2, block=2, seed=10 + p), random.Random(p)
    for s in range(2 * p):
        sc.add(s)
    for i in range(4 * p):
        sc.append(rng.choice(sc.live()), rng.randint(1, 3))
        if i % 3 == 2:
            sc.gather_all()
    sc.gather_all()
    assert sc.m.evicted, "test bug: the eviction scenario must evict"
    return sc


def run_kv(world: World, sc: KVScript) -> list[Any]:
    inputs = {"pages_per_rank": sc.m.pages_per_rank, "block_size": sc.block, "num_heads": H, "head_dim": D,
              "steps": sc.steps}  # fmt: skip
    return world.run("rank_programs:kv_workload", inputs=inputs, forbid=FORBID)


@pytest.mark.part("15.paged_kv")
@pytest.mark.parametrize("scenario", ["spill", "evict"])
@pytest.mark.concept("kv_gathered_exactly")
def test_kv_values_on_every_rank(world: World, reference: Any, scenario: str) -> None:
    bm = reference("block_manager")
    sc = (spill_script if scenario == "spill" else evict_script)(bm, world.size)
    for res in run_kv(world, sc):
        same(
            res.value["gathers"],
            sc.expected[res.rank],
            f"rank {res.rank}/{world.size}: gathered [K, V] ({scenario})",
        )
        same(res.value["evicted"], sc.m.evicted, f"rank {res.rank}: evicted sequences")
        same(res.value["tables"], {str(s): [list(x) for x in t] for s, t in sorted(sc.m.tables.items())},
             f"rank {res.rank}: page tables")  # fmt: skip


@pytest.mark.part("15.paged_kv")
@pytest.mark.concept("pages_on_owner")
def test_pages_live_on_their_owner(world: World, reference: Any) -> None:
    bm = reference("block_manager")
    sc = evict_script(bm, world.size)
    for res in run_kv(world, sc):
        pages = res.value["pages"]
        assert list(pages.shape) == [2, 2, 2, H, D], (
            f"rank {res.rank}: pages shape {list(pages.shape)}, expected [P, 2, B, H, D]"
        )
        for seq, table in sc.m.tables.items():
            kv = sc.kv(seq)  # [2, L, H, D]
            for j, (owner, slot) in enumerate(table):
                if owner == res.rank:
                    chunk = kv[:, j * 2 : j * 2 + 2]
                    what = f"pages[{slot}] (block {j} of seq {seq})"
                    got = pages[slot, :, : chunk.shape[1]]
                    assert_equal(got, chunk, rank=res.rank, world_size=world.size, what=what)


@pytest.mark.part("15.paged_kv")
@pytest.mark.parametrize("scenario", ["spill", "evict"])
@pytest.mark.concept("kv_bytes")
def test_kv_bytes_on_the_wire(world: World, reference: Any, scenario: str) -> None:
    bm = reference("block_manager")
    sc = (spill_script if scenario == "spill" else evict_script)(bm, world.size)
    for res in run_kv(world, sc):
        events = [e for e in res.comm.events if e.dtype == "float64"]
        sent = sum(e.nbytes for e in events if e.op in ("send", "isend"))
        received = [e for e in events if e.op in ("recv", "irecv")]
        expected = sc.bytes[res.rank]
        got = sum(e.nbytes for e in received)
        assert (sent, got) == (expected["sent"], expected["received"]), (
            f"rank {res.rank}/{world.size} ({scenario}): sent {sent} and received {got} bytes of K/V; "
            f"expected {expected['sent']} and {expected['received']}: exactly the tokens whose page is on "
            "another rank than the one that produces (append) or needs (gather) them, filled slots only"
        )
        assert len(received) <= sc.max_msgs[res.rank], (
            f"rank {res.rank}/{world.size} ({scenario}): received {len(received)} K/V messages, more than "
            f"{sc.max_msgs[res.rank]} (one per owner per append, one per remote page per gather)"
        )


@pytest.mark.part("15.paged_kv")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("kv_gathered_exactly")
def test_kv_values_on_3_ranks(world: World, reference: Any) -> None:
    sc = evict_script(reference("block_manager"), world.size)
    for res in run_kv(world, sc):
        same(res.value["gathers"], sc.expected[res.rank], f"rank {res.rank}/3: gathered [K, V] (evict)")


# ------------------------------------------------------------------------------------------------------------
# 15.cuda_ipc: two ranks on ONE GPU; rank 0 lends rank 1 a window of its pool through CUDA IPC.
# The judge sends the pool's bytes (random: every byte outside the window is a canary), the bytes the owner
# stores into its window after granting it, and the borrower's writes; it gets back what each side saw.

IPC_CAPACITY = 1 << 20  # one 1 MiB allocation on the owner's GPU (a multiple of 512: freed to the byte)
IPC_WINDOW = [196_613, 262_147]  # odd offset and length: nothing about the window is aligned
# ~0.5 s of GPU time at 2 GHz queued ahead of the borrower's writes: the owner reads a few ms after write()
# returns (a gloo message between two local processes), long before an unsynchronized copy could land.
LAG_CYCLES = 1 << 30


def ipc_case(seed: int, window: list[int], writes: list[tuple[int, int]], **extra: Any) -> dict[str, Any]:
    """Inputs for rank_programs:ipc_session; `writes` as (offset in the window, length) pairs."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.randint(0, 256, (IPC_CAPACITY,), dtype=torch.uint8, generator=g)
    window_bytes = torch.randint(0, 256, (window[1],), dtype=torch.uint8, generator=g)
    data = [[at, torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)] for at, n in writes]
    return {"pool": pool, "window": list(window), "window_bytes": window_bytes, "writes": data, **extra}


def ipc_expected_pool(case: dict[str, Any]) -> torch.Tensor:
    """The owner's pool after the session: its bytes, its own store into the window, then the writes."""
    pool = case["pool"].clone()
    offset, nbytes = case["window"]
    pool[offset : offset + nbytes] = case["window_bytes"]
    for at, data in case["writes"]:
        pool[offset + at : offset + at + data.numel()] = data
    return pool


def ipc_values(results: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(owner's report, borrower's report) from a world of 2."""
    owner, borrower = (res.value for res in results)
    assert isinstance(owner, dict) and isinstance(borrower, dict), (owner, borrower)
    return owner, borrower


def check_no_copy(owner: dict[str, Any], borrower: dict[str, Any], nbytes: int) -> None:
    """One allocation, the owner's: granting and opening allocate nothing the size of the window."""
    assert owner["pool_moved"] is False, "grant_window moved the owner's pool: lend the pool itself"
    assert owner["allocated_by_grant"] < nbytes, (
        f"grant_window allocated {owner['allocated_by_grant']} bytes on the owner's GPU for a {nbytes}-byte "
        "window: it lent a copy, and the borrower's writes go there instead of into the pool"
    )
    assert borrower["allocated_by_open"] < nbytes, (
        f"BorrowedWindow allocated {borrower['allocated_by_open']} bytes on the borrower's GPU for a "
        f"{nbytes}-byte window: it keeps a copy of the window instead of mapping the owner's memory"
    )


def check_reads(case: dict[str, Any], borrower: dict[str, Any]) -> None:
    """The borrower sees the owner's bytes as granted, and the owner's later store without a new grant."""
    offset, nbytes = case["window"]
    assert_equal(
        borrower["first_read"],
        case["pool"][offset : offset + nbytes],
        rank=1,
        world_size=2,
        what=f"the borrower's read of window [{offset}, {offset + nbytes}) right after opening it",
    )
    assert_equal(
        borrower["second_read"],
        case["window_bytes"],
        rank=1,
        world_size=2,
        what="the borrower's read after the owner stored new bytes into its own pool (a copy misses them)",
    )


def check_window_bytes(case: dict[str, Any], owner: dict[str, Any], what: str) -> None:
    """Inside the window, the owner's pool holds its own store overwritten by the borrower's writes."""
    offset, nbytes = case["window"]
    expected = ipc_expected_pool(case)[offset : offset + nbytes]
    got = owner["pool_after"][offset : offset + nbytes]
    assert_equal(got, expected, rank=0, world_size=2, what=what)


def outside_changes(got: torch.Tensor, pool: torch.Tensor, window: list[int]) -> list[int]:
    """Indices of the owner's pool outside the window whose byte changed (the first 8)."""
    offset, nbytes = window
    changed = got != pool
    changed[offset : offset + nbytes] = False
    return changed.nonzero().reshape(-1)[:8].tolist()


def check_canaries(case: dict[str, Any], owner: dict[str, Any]) -> None:
    offset, nbytes = case["window"]
    changed = outside_changes(owner["pool_after"], case["pool"], case["window"])
    assert not changed, (
        f"bytes of the owner's pool outside the window [{offset}, {offset + nbytes}) changed, first at "
        f"{changed}: the mapping reaches the whole allocation, so only your offsets keep writes inside"
    )


def check_view(borrower: dict[str, Any], nbytes: int) -> None:
    view = borrower["view"]
    assert view["numel"] == nbytes and view["dtype"] == "torch.uint8" and view["device"].startswith("cuda"), (
        f"BorrowedWindow.bytes is {view}: expected uint8 [{nbytes}] on the GPU, exactly the granted window"
    )


def run_ipc(world: World, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    owner, borrower = ipc_values(world.run("rank_programs:ipc_session", inputs=case))
    assert owner["grant"] == {"offset": case["window"][0], "nbytes": case["window"][1]}, owner["grant"]
    return owner, borrower


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("window_is_a_view")
def test_owner_and_borrower_touch_the_same_bytes(world: World) -> None:
    nbytes = IPC_WINDOW[1]
    case = ipc_case(11, IPC_WINDOW, [(0, 4096), (100_003, 65_536), (nbytes - 1, 1)])
    owner, borrower = run_ipc(world, case)
    check_no_copy(owner, borrower, nbytes)
    check_reads(case, borrower)
    assert borrower["view_moved"] is False, "BorrowedWindow.bytes moved between opening and writing"
    check_window_bytes(case, owner, "the owner's window after the borrower's writes (seen without a copy)")


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.parametrize(
    "window",
    [[0, 65_537], [IPC_CAPACITY - 131_075, 131_075], [4_097, 300_001], [0, IPC_CAPACITY]],
    ids=["at-start", "at-end", "odd", "whole-pool"],
)
@pytest.mark.concept("writes_stay_in_window")
def test_every_byte_outside_the_window_is_untouched(world: World, window: list[int]) -> None:
    nbytes = window[1]
    writes = [(0, 1), (0, 513), (nbytes - 4_099, 4_099), (nbytes // 2, nbytes - nbytes // 2), (nbytes - 1, 1)]
    case = ipc_case(12 + window[0] % 97, window, writes)
    owner, borrower = run_ipc(world, case)
    check_view(borrower, nbytes)
    assert_equal(
        borrower["first_read"],
        case["pool"][window[0] : window[0] + nbytes],
        rank=1,
        world_size=2,
        what=f"the borrower's read of window [{window[0]}, {window[0] + nbytes}) (the granted bytes?)",
    )
    check_canaries(case, owner)
    check_window_bytes(case, owner, "the window after writes at its first and last bytes")


IPC_REFUSED_WINDOWS = [[-1, 10], [0, 0], [5, -3], [IPC_CAPACITY - 100, 101], [IPC_CAPACITY, 1]]


def refused(offset: int, nbytes: int, limit: int) -> dict[str, str]:
    return err("WindowOutOfRange", f"bytes [{offset}, {offset + nbytes}) are not inside [0, {limit})")


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("range_refusals")
def test_out_of_range_windows_and_accesses_are_refused(world: World) -> None:
    window = [IPC_CAPACITY - 70_001, 70_001]  # ends exactly at the end of the pool: allowed
    n = window[1]
    one, four = torch.tensor([7], dtype=torch.uint8), torch.tensor([1, 2, 3, 4], dtype=torch.uint8)
    accesses = [["write", n - 3, four], ["read", n - 3, 4], ["read", -1, 2], ["write", -2, four],
                ["read", n, 1], ["write", n, one], ["read", n, 0], ["read", 0, n]]  # fmt: skip
    case = ipc_case(13, window, [(n - 4, 4)], refused_windows=IPC_REFUSED_WINDOWS, refused_accesses=accesses)
    owner, borrower = run_ipc(world, case)
    expected_windows = [refused(o, k, IPC_CAPACITY) for o, k in IPC_REFUSED_WINDOWS]
    same(owner["refused"], expected_windows, "grant_window's answers to windows outside the pool")
    expected_accesses = [refused(n - 3, 4, n), refused(n - 3, 4, n), refused(-1, 2, n), refused(-2, 4, n),
                         refused(n, 1, n), refused(n, 1, n), None, None]  # fmt: skip
    same(borrower["refused_accesses"], expected_accesses, "the borrower's answers to accesses at the edges")
    # a refused write changes no byte: not the 3 of a 4-byte write that would have fit
    check_window_bytes(case, owner, "the window after refused writes (a refused write changes nothing)")


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("synchronize_before_signal")
def test_writes_have_landed_when_write_returns(world: World) -> None:
    nbytes = IPC_WINDOW[1]
    case = ipc_case(14, IPC_WINDOW, [(0, nbytes), (1_000, 7)], lag_cycles=LAG_CYCLES)
    owner, _ = run_ipc(world, case)
    check_window_bytes(
        case,
        owner,
        "the owner's window read as soon as the borrower's write() returned, its GPU busy before the "
        "writes and the data produced on its current stream behind that (a copy still queued has not "
        "happened yet; a copy on a stream that did not wait for the current one read the data too early)",
    )


def check_read_is_a_copy(case: dict[str, Any], borrower: dict[str, Any]) -> None:
    """The tensor read() returned right after opening keeps those bytes through the owner's store and the
    borrower's close(): it is a copy, in memory of the borrower's own."""
    offset, nbytes = case["window"]
    assert borrower["read_shares_memory"] is False, (
        "read() returned a view of the window: it shares the owner's memory, so it changes under the owner's "
        "writes and keeps the allocation mapped after close(); the contract promises a copy"
    )
    for key, when in [("first_read_after_store", "the owner's store"), ("first_read_after_close", "close()")]:
        assert_equal(
            borrower[key],
            case["pool"][offset : offset + nbytes],
            rank=1,
            world_size=2,
            what=f"the tensor read() returned right after opening, read again after {when} (a copy keeps it)",
        )


def check_closed_window_refuses(borrower: dict[str, Any]) -> None:
    read, write = borrower["after_close"]
    assert read is not None and write is not None, (
        f"after close(), read(0, 1) {'raised ' + read if read else 'went through'} and write(0, ...) "
        f"{'raised ' + write if write else 'went through'}: using a closed window is an error, and each "
        "must raise (the memory may already be the owner's again)"
    )


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("read_returns_a_copy")
def test_a_read_is_a_copy_of_the_window(world: World) -> None:
    case = ipc_case(16, IPC_WINDOW, [(0, 4096), (IPC_WINDOW[1] - 1, 1)])
    _, borrower = run_ipc(world, case)
    check_read_is_a_copy(case, borrower)


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("borrower_lets_go")
def test_a_closed_window_refuses_every_use(world: World) -> None:
    _, borrower = run_ipc(world, ipc_case(17, IPC_WINDOW, [(0, 7)]))
    check_closed_window_refuses(borrower)


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("borrower_lets_go")
def test_the_pool_outlives_the_loan_and_no_longer(world: World) -> None:
    case = ipc_case(15, IPC_WINDOW, [], drop_early=True)
    owner, borrower = run_ipc(world, case)
    check_lifetime(case, owner, borrower)


def check_lifetime(case: dict[str, Any], owner: dict[str, Any], borrower: dict[str, Any]) -> None:
    offset, nbytes = case["window"]
    assert owner["freed_while_lent"] < IPC_CAPACITY, (
        f"the owner dropped its pool while the borrower held the window, and got {owner['freed_while_lent']} "
        "bytes back at once: the borrower's hold was lost (torch counts one per grant sent; opening the "
        "same grant twice gives it back early), or the borrower never mapped the pool"
    )
    assert_equal(
        borrower["read_while_lent"],
        case["pool"][offset : offset + nbytes],
        rank=1,
        world_size=2,
        what="the borrower's read of the window after the owner dropped its own reference",
    )
    assert owner["freed_after_close"] >= IPC_CAPACITY, (
        f"after the borrower's close() the owner got {owner['freed_after_close']} of its {IPC_CAPACITY} "
        "bytes back: close() must drop every reference this process holds on the owner's memory"
    )
