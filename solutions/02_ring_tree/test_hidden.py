"""What this catches: ring all-reduces that take too few or too many steps, send the wrong chunk, skip the
all-gather, overwrite where they should add (or add where they should overwrite), write into a copy instead
of the caller's tensor, or break when N is not a multiple of p or smaller than p; recursive doubling that
assumes p is a power of two or forgets to hand the sum back to the folded ranks; sums taken in another dtype;
and any built-in collective used as a shortcut.

Every expected value is computed here, in the judge, with plain torch on integer-valued tensors, and compared
exactly. The message checks follow the contract in the stub's docstrings:
  ring: chunk i = torch.tensor_split(flat, p)[i], of c_i = N // p + (i < N % p) elements; rank r sends only
        to r+1 and receives only from r-1, 2(p-1) messages each way, and moves
        sent(r) = 2N - c[(r+1) % p] - c[(r+2) % p] and received(r) = 2N - c[r] - c[(r+1) % p] elements
        (the reduce-scatter never sends chunk r+1, the one it finishes; the all-gather never sends r+2,
        the one it gets last).
  recursive doubling: q = 2^floor(log2 p); rank r < q swaps the whole tensor with r XOR 2^k for k < log2 q,
        ranks r >= q fold onto r - q; so log2 p messages each way per rank when p is a power of two.
"""

from functools import reduce as fold

import pytest
import torch

from grader.harness import COLLECTIVES, CheckFailure, World, assert_equal, chunk_of

# Every torch.distributed collective the harness knows. An all-reduce needs none of them, not even a barrier.
FORBID = list(COLLECTIVES)  # every collective the harness knows
DTYPES = [torch.int64, torch.int32, torch.float32]  # float32 holds small integers exactly: sums are exact


def rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Small random integers in `dtype`, distinct per seed, so a chunk from the wrong rank shows."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def total(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The elementwise sum in the tensors' own dtype, as dist.all_reduce computes it."""
    return fold(torch.add, tensors)


def allreduce(world: World, function: str, inputs: list[torch.Tensor], what: str = "") -> list:
    """Run `function` on every rank with built-in collectives forbidden; check every rank holds the sum."""
    results = world.call("allreduce", function, args=[(x.clone(),) for x in inputs], forbid=FORBID)
    expected = total(inputs)
    for res in results:
        try:
            # res.args[0] is the very tensor object the function got: a rebound local name leaves it unchanged
            assert_equal(
                res.args[0],
                expected,
                rank=res.rank,
                world_size=world.size,
                what=f"tensor after {function}{what}",
            )
        except CheckFailure as wrong:
            if function != "ring_allreduce":
                raise
            why = ring_diagnosis(results, expected.numel())
            raise CheckFailure(
                f"{wrong.message}\n  {why}", rank=wrong.rank, world_size=wrong.world_size
            ) from None
    return results


def ring_diagnosis(results: list, n: int) -> str:
    """The first step at which a ring left the documented schedule, read off the send/recv wrappers.

    At reduce-scatter step s rank r sends chunk (r - s) % p; at all-gather step s, chunk (r + 1 - s) % p.
    A message is chunk i when it is exactly chunk i of torch.tensor_split of the caller's tensor.
    """
    p = len(results)
    for s in range(2 * (p - 1)):
        phase, step = ("reduce-scatter", s) if s < p - 1 else ("all-gather", s - (p - 1))
        for res in results:
            r, out = res.rank, sends(res)
            if len(out) <= s:
                return (
                    f"rank {r} made only {len(out)} send(s); a ring all-reduce takes p-1 = {p - 1} "
                    f"reduce-scatter steps, then p-1 all-gather steps, one send each ({2 * (p - 1)} in all)"
                )
            want = (r - step) % p if phase == "reduce-scatter" else (r + 1 - step) % p
            got = chunk_of(out[s], n, p)
            rule = "(r - step) mod p" if phase == "reduce-scatter" else "(r + 1 - step) mod p"
            if got is None:
                return (
                    f"rank {r}'s send at {phase} step {step} is not one of the chunks "
                    f"torch.tensor_split(tensor.view(-1), p) makes (a copy or another split?); "
                    f"in a ring {phase}, rank r sends chunk {rule}, here chunk {want}"
                )
            if got != want:
                return (
                    f"rank {(r + 1) % p} received chunk {got} in {phase} step {step}; in a ring {phase}, "
                    f"rank r sends chunk {rule}, so rank {r} should have sent chunk {want}"
                )
    return (
        "every rank sent the right chunk to the right neighbour at every step, so the schedule is right: "
        "look at what you do with what arrives. Reduce-scatter ADDS the incoming partial sum into the chunk "
        "(of the caller's tensor, in place); all-gather COPIES the finished chunk over the stale one"
    )


def chunk_sizes(n: int, p: int) -> list[int]:
    """torch.tensor_split's sizes: the first n % p chunks get one extra element."""
    return [n // p + (i < n % p) for i in range(p)]


def peers(events: list) -> list[int]:
    """The peers of `events`, sorted; -1 stands for a peer the harness could not tell."""
    return sorted(-1 if e.peer is None else e.peer for e in events)


def sends(res) -> list:
    return [e for e in res.comm.events if e.op in ("send", "isend")]


def recvs(res) -> list:
    return [e for e in res.comm.events if e.op in ("recv", "irecv")]


# ---------------------------------------------------------------------------------------------------------
# ring


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept(
    "ring all-reduce = reduce-scatter then all-gather over p chunks of "
    "torch.tensor_split(tensor.view(-1), p); when N is not a multiple of p the first N % p chunks hold "
    "one extra element"
)
def test_ring_sum_uneven_length(world: World) -> None:
    p = world.size
    n = 4 * p + 3  # not a multiple of p: chunks of 5 and 4 elements
    allreduce(world, "ring_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept(
    "with N < p some chunks of torch.tensor_split are empty; the ring still takes 2(p-1) steps, and an "
    "empty chunk is an empty message, not a special case"
)
def test_ring_fewer_elements_than_ranks(world: World) -> None:
    # N = 1 and N = p - 1 leave some chunks empty; N = p + 1 gives one 2-element chunk and the rest 1.
    p = world.size
    for n in sorted({1, max(p - 1, 1), p + 1}):
        inputs = [rand((n,), torch.int32, seed=10 * n + r) for r in range(p)]
        allreduce(world, "ring_allreduce", inputs, what=f" (N={n}, p={p})")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
@pytest.mark.concept(
    "the ring works on the flat view of the caller's tensor (any shape, 0-d included) and sums in its own"
    " dtype; int64 beyond 2^53 is exact only in int64"
)
def test_ring_dtypes_and_shapes(world: World) -> None:
    p = world.size
    for i, dtype in enumerate(DTYPES):
        inputs = [rand((2, 7), dtype, seed=10 * i + r) for r in range(p)]  # 2-D, in place through a view
        allreduce(world, "ring_allreduce", inputs, what=f" ({dtype}, shape (2, 7))")
    inputs = [torch.tensor(r + 5) for r in range(p)]  # 0-d: one element
    allreduce(world, "ring_allreduce", inputs, what=" (0-d tensor)")
    # Beyond 2^53, int64 sums are exact only in int64: a detour through float64 rounds them.
    inputs = [torch.full((5,), 2**58 + 2 * r + 1, dtype=torch.int64) for r in range(p)]
    allreduce(world, "ring_allreduce", inputs, what=" (int64 beyond 2^53)")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.parametrize("world", [4], indirect=True)
@pytest.mark.concept(
    "a ring all-reduce is exact on integer-valued floats: every chunk gets each rank's contribution "
    "exactly once, in reduce-scatter, and is then copied around in all-gather"
)
def test_ring_larger_tensor(world: World) -> None:
    inputs = [rand((3001,), torch.float32, seed=r) for r in range(world.size)]
    allreduce(world, "ring_allreduce", inputs, what=" (3001 float32 elements)")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept(
    "in a ring rank r sends only to (r+1) mod p and receives only from (r-1) mod p, one chunk of at most "
    "ceil(N/p) elements per step, 2(p-1) steps in all"
)
def test_ring_message_pattern(world: World) -> None:
    p, n = world.size, 3 * world.size + 2
    results = allreduce(world, "ring_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])
    biggest = -(-n // p)  # ceil(N/p)
    for res in results:
        r = res.rank
        out, inc = sends(res), recvs(res)
        assert len(out) == 2 * (p - 1) and len(inc) == 2 * (p - 1), (
            f"rank {r}/{p} sent {len(out)} and received {len(inc)} messages; a ring all-reduce takes "
            f"2(p-1) = {2 * (p - 1)} steps (reduce-scatter, then all-gather), one send and one recv each"
        )
        assert {e.peer for e in out} == {(r + 1) % p} and {e.peer for e in inc} == {(r - 1) % p}, (
            f"rank {r}/{p} sent to {sorted(set(peers(out)))} and received from "
            f"{sorted(set(peers(inc)))}; in a ring rank r sends only to (r+1) % p = {(r + 1) % p} and "
            f"receives only from (r-1) % p = {(r - 1) % p}"
        )
        sizes = [e.numel for e in res.comm.events]
        assert max(sizes) <= biggest, (
            f"rank {r}/{p} sent or received a message of {max(sizes)} elements; with N={n} each step moves "
            f"one chunk of at most ceil(N/p) = {biggest}"
        )
        assert {e.dtype for e in res.comm.events} == {"int64"}, (
            f"rank {r}/{p} sent {sorted({e.dtype for e in res.comm.events})} messages for an int64 tensor; "
            "send the tensor's own chunks, without converting them"
        )


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept(
    "a ring moves 2(p-1)/p * N elements per rank, the bandwidth lower bound: reduce-scatter step s sends "
    "chunk (r - s) mod p and all-gather step s sends chunk (r + 1 - s) mod p"
)
def test_ring_bytes_per_rank(world: World) -> None:
    # Exact elements per rank under the tensor_split chunking (see the module docstring).
    p, n = world.size, 5 * world.size + 3
    c = chunk_sizes(n, p)
    results = allreduce(world, "ring_allreduce", [rand((n,), torch.int32, seed=r) for r in range(p)])
    for res in results:
        r = res.rank
        want_out = 2 * n - c[(r + 1) % p] - c[(r + 2) % p]
        want_in = 2 * n - c[r] - c[(r + 1) % p]
        got_out, got_in = sum(e.numel for e in sends(res)), sum(e.numel for e in recvs(res))
        assert (got_out, got_in) == (want_out, want_in), (
            f"rank {r}/{p} sent {got_out} and received {got_in} elements for N={n}; with chunks "
            f"torch.tensor_split(flat, p) (sizes {c}), sending chunk (r - s) % p at reduce-scatter step s "
            f"and (r + 1 - s) % p at all-gather step s, rank {r} sends {want_out} and receives {want_in}"
        )
    # Over all ranks: 2(p-1) N elements, i.e. nccl-tests' 2(p-1)/p * S for each of the p ranks
    sent = sum(res.comm.bytes_sent for res in results)
    assert sent == 2 * (p - 1) * n * 4, (
        f"the ranks sent {sent} bytes in all; a ring moves 2(p-1) * N * 4 = {2 * (p - 1) * n * 4} for N={n} "
        "int32 elements, i.e. 2(p-1)/p of the tensor per rank"
    )


# ---------------------------------------------------------------------------------------------------------
# recursive doubling


def tree_peers(p: int, r: int) -> list[int]:
    """Who rank r exchanges a whole tensor with (one send and one recv each), per the documented scheme."""
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    if r >= q:
        return [r - q]  # folded in, then handed the result
    partners = [r ^ (1 << k) for k in range(q.bit_length() - 1)]
    return partners + ([r + q] if r < p - q else [])


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept(
    "recursive doubling: in round k rank r swaps its whole tensor with r XOR 2^k and both add, so after "
    "log2 p rounds every rank holds the sum"
)
def test_tree_sum(world: World) -> None:
    p = world.size
    allreduce(world, "tree_allreduce", [rand((7,), torch.int64, seed=r) for r in range(p)])


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
@pytest.mark.concept(
    "recursive doubling sends the whole tensor every round and adds in its own dtype, for any shape"
)
def test_tree_dtypes_and_shapes(world: World) -> None:
    p = world.size
    for i, dtype in enumerate(DTYPES):
        inputs = [rand((3, 2), dtype, seed=10 * i + r) for r in range(p)]
        allreduce(world, "tree_allreduce", inputs, what=f" ({dtype}, shape (3, 2))")
    allreduce(world, "tree_allreduce", [torch.tensor(7 * r) for r in range(p)], what=" (0-d tensor)")
    allreduce(world, "tree_allreduce", [rand((1,), torch.int64, seed=r) for r in range(p)], what=" (N=1)")
    inputs = [torch.full((3,), 2**58 + 2 * r + 1, dtype=torch.int64) for r in range(p)]
    allreduce(world, "tree_allreduce", inputs, what=" (int64 beyond 2^53)")


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept(
    "recursive doubling on q = 2^floor(log2 p) ranks takes log2 q exchanges of the whole tensor; the p - "
    "q extra ranks fold in first and get the sum back at the end"
)
def test_tree_message_counts(world: World) -> None:
    p, n = world.size, 6
    results = allreduce(world, "tree_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])
    for res in results:
        want = len(tree_peers(p, res.rank))
        assert res.comm.sends == want and res.comm.recvs == want, (
            f"rank {res.rank}/{p} sent {res.comm.sends} and received {res.comm.recvs} messages; recursive "
            f"doubling gives it {want} of each (log2 p per rank when p is a power of two; with p={p}, ranks "
            f"below p - 2^floor(log2 p) add one for the fold, ranks at or above 2^floor(log2 p) have one)"
        )
        assert all(e.numel == n for e in res.comm.events), (
            f"rank {res.rank}/{p}: every message of recursive doubling carries the whole tensor ({n} "
            f"elements); got sizes {[e.numel for e in res.comm.events]}"
        )


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept(
    "recursive doubling pairs rank r with r XOR 2^k in round k; an extra rank r >= q folds onto r - q"
)
def test_tree_partners(world: World) -> None:
    p = world.size
    results = allreduce(world, "tree_allreduce", [rand((4,), torch.int32, seed=r) for r in range(p)])
    for res in results:
        want = sorted(tree_peers(p, res.rank))
        got_out, got_in = peers(sends(res)), peers(recvs(res))
        assert got_out == want and got_in == want, (
            f"rank {res.rank}/{p} sent to {got_out} and received from {got_in}; expected {want} both ways "
            f"(q = 2^floor(log2 p): partners r XOR 2^k among ranks below q; extra rank r folds onto r - q)"
        )
