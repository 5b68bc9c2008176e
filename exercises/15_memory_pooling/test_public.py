"""What this catches: the first things to get right in each part, on 1, 2 and 4 ranks.

Run them with `grade exercise 15`. The hidden suite checks more: random allocator and pool scripts step by
step, every boundary error and its exact message, fences with refused and one-sided epochs, exact LRU
victims, KV caches under eviction, and the bytes each rank sends and receives. The cuda_ipc checks need a
GPU (two ranks share it); without one they are reported blocked.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from grader.harness import World, assert_equal

FORBID = ["broadcast", "all_reduce", "all_gather", "all_to_all", "all_to_all_single", "scatter", "gather"]


def error(cls: str, message: str) -> dict[str, str]:
    return {"error": cls, "message": message}


def as_bytes(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64).view(torch.uint8)


# ---------------------------------------------------------------------------------------------------------
# 15.allocator


@pytest.mark.part("15.allocator")
@pytest.mark.concept("first_fit_and_coalescing")
def test_first_fit_and_coalescing(world: World) -> None:
    ops = [["alloc", 100], ["alloc", 300], ["alloc", 256], ["free", 256], ["alloc", 200], ["free", 0],
           ["free", 256], ["free", 768]]  # fmt: skip
    inputs = {"capacity": 2048, "alignment": 256, "ops": ops}
    [res] = world.run("rank_programs:arena_trace", inputs=inputs)
    steps = res.value
    # 100 -> 256 bytes at 0; 300 -> 512 bytes at 256; 256 -> 256 bytes at 768
    assert [s["result"] for s in steps[:3]] == [0, 256, 768], [s["result"] for s in steps[:3]]
    assert steps[3]["free_list"] == [[256, 512], [1024, 1024]], steps[3]["free_list"]
    assert steps[4]["result"] == 256, "first fit takes the front of the lowest free block that fits"
    assert steps[-1]["free_list"] == [[0, 2048]], f"after freeing everything: {steps[-1]['free_list']}"


@pytest.mark.part("15.allocator")
@pytest.mark.concept("allocator_errors")
def test_fragmented_out_of_memory(world: World) -> None:
    ops = [["alloc", 512], ["alloc", 512], ["alloc", 512], ["alloc", 512], ["free", 0], ["free", 1024],
           ["alloc", 600]]  # fmt: skip
    [res] = world.run("rank_programs:arena_trace", inputs={"capacity": 2048, "alignment": 256, "ops": ops})
    # 1024 bytes are free, but in two blocks of 512: no 768-byte block fits
    expected = error("OutOfMemory", "cannot allocate 600 bytes: the largest free block has 512 bytes")
    assert res.value[-1]["result"] == expected, res.value[-1]["result"]


# ---------------------------------------------------------------------------------------------------------
# 15.access


def run_pool(world: World, steps: list[list[Any]]) -> list[Any]:
    inputs = {"rank": 0, "capacity": 4096, "alignment": 256, "steps": steps}
    [res] = world.run("rank_programs:pool_script", inputs=inputs)
    return res.value


@pytest.mark.part("15.access")
@pytest.mark.concept("owner_checks_every_access")
def test_handles_grants_and_bounds(world: World) -> None:
    data = as_bytes([10, 11, 12, 13, 14])  # 40 bytes
    steps = [["allocate", 40], ["write", 0, 0, data, 0], ["read", 0, 8, 8, 1], ["grant", 0, 1, 1],
             ["read", 0, 8, 8, 1], ["read", 0, 36, 8, 1], ["release", 0], ["read", 0, 0, 8, 0]]  # fmt: skip
    got = run_pool(world, steps)
    assert got[0] == [0, 0, 40], f"allocate(40) on rank 0: got handle {got[0]}, expected [owner 0, id 0, 40]"
    assert got[2] == error(
        "PermissionDenied", "rank 1 read of bytes [8, 16) of handle 0:0: permission denied"
    )
    assert_equal(got[4], data[8:16], what="bytes rank 1 read after a READ grant")
    assert got[5] == error("OutOfBounds", "rank 1 read of bytes [36, 44) of handle 0:0: out of bounds")
    assert got[7] == error(
        "InvalidHandle",
        "rank 0 read of bytes [0, 8) of handle 0:0: no such region (never allocated, or released)",
    ), got[7]


# ---------------------------------------------------------------------------------------------------------
# 15.one_sided


@pytest.mark.part("15.one_sided")
@pytest.mark.concept("fence_completes_queued_ops")
def test_get_and_put_on_neighbours(world: World) -> None:
    p = world.size
    inputs = []
    for r in range(p):
        nxt, prv = (r + 1) % p, (r - 1) % p
        setup = [["allocate", 16], ["write", 0, 0, as_bytes([r, 10 * r]), r], ["grant", 0, nxt, 3]]
        epochs = [
            [["get", [prv, 0, 16], 0, 16]],  # my left neighbour granted me READ_WRITE on its region
            [["put", [prv, 0, 16], 8, as_bytes([-r])]],
            [["get", [r, 0, 16], 0, 16], ["get", [nxt, 0, 16], 0, 8]],  # mine; and nxt never granted me
        ]
        inputs.append({"capacity": 1024, "setup": setup, "epochs": epochs})
    for res in world.run("rank_programs:window_epochs", inputs=inputs, forbid=FORBID):
        r, prv, nxt = res.rank, (res.rank - 1) % p, (res.rank + 1) % p
        first, second, third = (e["results"] for e in res.value["epochs"])
        assert_equal(first[0], as_bytes([prv, 10 * prv]), rank=r, world_size=p, what="get of prv's region")
        assert second == [None], f"rank {r}: a put's result is None, got {second}"
        assert_equal(third[0], as_bytes([r, -nxt]), rank=r, world_size=p, what="my region after nxt's put")
        if p > 2:  # with 2 ranks, nxt == prv, which did grant me access
            expected = error(
                "PermissionDenied", f"rank {r} read of bytes [0, 8) of handle {nxt}:0: permission denied"
            )
            assert third[1] == expected, f"rank {r}: got {third[1]}"


# ---------------------------------------------------------------------------------------------------------
# 15.page_table


@pytest.mark.part("15.page_table")
@pytest.mark.concept("placement_policy")
def test_home_first_then_borrow_then_evict(world: World) -> None:
    steps = [["add", 0, 0], ["add", 1, 1], ["append", 0, 2], ["append", 1, 2], ["append", 0, 3],
             ["append", 1, 1]]  # fmt: skip
    inputs = {"world_size": 2, "pages_per_rank": 2, "block_size": 2, "steps": steps}
    [res] = world.run("rank_programs:manager_script", inputs=inputs)
    got = [s["result"] for s in res.value]
    assert got[2] == [[0, 0, 0], [0, 0, 1]], f"seq 0's first 2 tokens: {got[2]}"
    # seq 0 fills its home page 1, then borrows rank 1's free page
    assert got[4] == [[0, 1, 0], [0, 1, 1], [1, 1, 0]], f"seq 0's next 3 tokens: {got[4]}"
    # seq 1 needs a page; none is free; seq 0 is the other sequence, so it is evicted whole
    assert got[5] == [[1, 1, 0]], f"seq 1's 3rd token: {got[5]}"
    assert res.value[5]["state"]["evicted"] == [0], res.value[5]["state"]["evicted"]


# ---------------------------------------------------------------------------------------------------------
# 15.paged_kv


@pytest.mark.part("15.paged_kv")
@pytest.mark.concept("kv_gathered_exactly")
def test_every_rank_gathers_every_sequence(world: World) -> None:
    p, g = world.size, torch.Generator().manual_seed(0)
    steps: list[list[Any]] = [["add", s, s % p] for s in range(p)]
    tokens = {}
    for s in range(p):  # 5 tokens each: 2 pages of 4, the second one partly filled
        k, v = (torch.randn(5, 2, 3, generator=g, dtype=torch.float64) for _ in range(2))
        steps.append(["append", s, k, v])
        tokens[s] = (k, v)
    steps.append(["gather", [[s, dst] for s in range(p) for dst in range(p)]])
    inputs = {"pages_per_rank": 3, "block_size": 4, "num_heads": 2, "head_dim": 3, "steps": steps}
    for res in world.run("rank_programs:kv_workload", inputs=inputs, forbid=FORBID):
        [gathered] = res.value["gathers"]
        for i, got in enumerate(gathered):
            s, dst = divmod(i, p)
            if dst != res.rank:
                assert got is None, f"rank {res.rank}: request ({s}, {dst}) is for rank {dst}, got {got}"
                continue
            for name, have, want in zip("KV", got, tokens[s], strict=True):
                assert_equal(have, want, rank=res.rank, world_size=p, what=f"{name} of sequence {s}")


# ---------------------------------------------------------------------------------------------------------
# 15.cuda_ipc (needs a GPU: rank 0 lends rank 1 a window of a pool on the GPU both ranks share)


def ipc_inputs(window: list[int], writes: list[tuple[int, int]]) -> dict[str, Any]:
    """A 1 MiB pool of random bytes (each one outside the window a canary), the owner's new window bytes,
    and the borrower's writes as [offset in the window, bytes]."""
    g = torch.Generator().manual_seed(1)
    pool = torch.randint(0, 256, (1 << 20,), dtype=torch.uint8, generator=g)
    window_bytes = torch.randint(0, 256, (window[1],), dtype=torch.uint8, generator=g)
    data = [[at, torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)] for at, n in writes]
    return {"pool": pool, "window": window, "window_bytes": window_bytes, "writes": data}


def pool_after(inputs: dict[str, Any]) -> torch.Tensor:
    pool = inputs["pool"].clone()
    offset, nbytes = inputs["window"]
    pool[offset : offset + nbytes] = inputs["window_bytes"]
    for at, data in inputs["writes"]:
        pool[offset + at : offset + at + data.numel()] = data
    return pool


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("window_is_a_view")
def test_borrower_and_owner_share_one_allocation(world: World) -> None:
    inputs = ipc_inputs([65_536, 131_072], [(0, 4_096), (131_071, 1)])
    owner, borrower = (res.value for res in world.run("rank_programs:ipc_session", inputs=inputs))
    assert owner["allocated_by_grant"] < 131_072, "grant_window allocated a window-sized copy"
    assert borrower["allocated_by_open"] < 131_072, "BorrowedWindow allocated a window-sized copy"
    assert_equal(borrower["first_read"], inputs["pool"][65_536:196_608], what="the window as first read")
    assert_equal(borrower["second_read"], inputs["window_bytes"], what="the window after the owner's store")
    expected = pool_after(inputs)[65_536:196_608]
    assert_equal(owner["pool_after"][65_536:196_608], expected, what="the owner's window after the writes")


@pytest.mark.part("15.cuda_ipc")
@pytest.mark.concept("writes_stay_in_window")
def test_bytes_around_the_window_are_untouched(world: World) -> None:
    inputs = ipc_inputs([300_000, 50_000], [(0, 1), (49_000, 1_000)])
    owner, borrower = (res.value for res in world.run("rank_programs:ipc_session", inputs=inputs))
    assert borrower["view"]["numel"] == 50_000, f"BorrowedWindow.bytes: {borrower['view']}"
    # every byte of the owner's pool, the canaries around the window included
    assert_equal(owner["pool_after"], pool_after(inputs), what="the owner's whole pool after the writes")
