"""What this catches: ring all-reduces that take too few or too many steps, send the wrong chunk, skip the
all-gather, overwrite where they should add (or add where they should overwrite), write into a copy instead
of the caller's tensor, or break when N is not a multiple of p or smaller than p; recursive doubling that
assumes p is a power of two or forgets to hand the sum back to the folded ranks; sums taken in another dtype;
and any built-in collective used as a shortcut.

Every expected value is computed here, in the judge, with plain torch on integer-valued tensors, and compared
exactly. The message checks grade the contract's properties, not one schedule:
  ring: chunk i = torch.tensor_split(flat, p)[i], of c_i = N // p + (i < N % p) elements; every rank sends
        only to one neighbour and receives only from the other, all ranks in the same direction (either
        one), 2(p-1) messages each way, and moves every chunk but two: sent(r) = 2N - c[a] - c[b] for the
        chunk it finishes and the one it gets last, whichever rotation of the schedule it runs. Summed over
        ranks that is 2(p-1) N.
  recursive doubling: q = 2^floor(log2 p); the p - q extra ranks each fold onto a distinct partner and get
        the sum back (one message each way), and the q others swap the whole tensor in log2 q rounds, each
        round a perfect matching. Which ranks fold onto which (r - q here, even onto odd in MPICH) is free.
"""

from collections import Counter
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


def traffic(world: World, function: str, inputs: list[torch.Tensor]) -> list:
    """Run `function` on every rank with built-in collectives forbidden; the sum is NOT checked here.

    The message tests use it, so that a wrong sum costs the concepts about sums and not, on top of them, the
    ones about messages when the messages were right.
    """
    return world.call("allreduce", function, args=[(x.clone(),) for x in inputs], forbid=FORBID)


def allreduce(world: World, function: str, inputs: list[torch.Tensor], what: str = "") -> list:
    """Run `function` on every rank with built-in collectives forbidden; check every rank holds the sum."""
    results = traffic(world, function, inputs)
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


def ring_orientation(results: list, n: int) -> tuple[int, int]:
    """(d, k) read off rank 0's first send: data flows to r + d (d = +1 or -1), and at reduce-scatter step s
    rank r sends chunk (r + k - d*s) % p. Any d and k make a correct ring; (1, 0) when rank 0 sent nothing."""
    p = len(results)
    out = sends(results[0])
    if not out:
        return 1, 0
    d = -1 if p > 2 and out[0].peer == p - 1 else 1
    first = chunk_of(out[0], n, p)
    return d, (0 if first is None else first)


def rule(offset: int, d: int, p: int) -> str:
    """'(r - step + 1) mod p' and the like: the chunk a ring of direction d sends at a step."""
    off = offset % p
    text = "r - step" if d == 1 else "r + step"
    if off:
        text += f" + {off}" if off <= p // 2 else f" - {p - off}"
    return f"({text}) mod p"


def ring_diagnosis(results: list, n: int) -> str:
    """The first step at which a ring left its own schedule, read off the send/recv wrappers.

    The direction and rotation are the ones rank 0 started with (ring_orientation): at reduce-scatter step s
    rank r sends chunk (r + k - d*s) % p, at all-gather step s chunk (r + k + d - d*s) % p. A message is chunk
    i when it is exactly chunk i of torch.tensor_split of the caller's tensor.
    """
    p = len(results)
    d, k = ring_orientation(results, n)
    for s in range(2 * (p - 1)):
        phase, step = ("reduce-scatter", s) if s < p - 1 else ("all-gather", s - (p - 1))
        offset = k if phase == "reduce-scatter" else k + d
        for res in results:
            r, out = res.rank, sends(res)
            if len(out) <= s:
                return (
                    f"rank {r} made only {len(out)} send(s); a ring all-reduce takes p-1 = {p - 1} "
                    f"reduce-scatter steps, then p-1 all-gather steps, one send each ({2 * (p - 1)} in all)"
                )
            want = (r + offset - d * step) % p
            got = chunk_of(out[s], n, p)
            if got is None:
                return (
                    f"rank {r}'s send at {phase} step {step} is not one of the chunks "
                    f"torch.tensor_split(tensor.view(-1), p) makes (a copy or another split?); "
                    f"in the ring rank 0 started, rank r sends chunk {rule(offset, d, p)} here, chunk {want}"
                )
            if got != want:
                return (
                    f"rank {(r + d) % p} received chunk {got} in {phase} step {step}; in a ring {phase}, "
                    f"rank r sends chunk {rule(offset, d, p)} (the rotation rank 0 started with), so "
                    f"rank {r} should have sent chunk {want}"
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
@pytest.mark.concept("ring_sum")
def test_ring_sum_uneven_length(world: World) -> None:
    p = world.size
    n = 4 * p + 3  # not a multiple of p: chunks of 5 and 4 elements
    allreduce(world, "ring_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_empty_chunks")
def test_ring_fewer_elements_than_ranks(world: World) -> None:
    # N = 1 and N = p - 1 leave some chunks empty; N = p + 1 gives one 2-element chunk and the rest 1.
    p = world.size
    for n in sorted({1, max(p - 1, 1), p + 1}):
        inputs = [rand((n,), torch.int32, seed=10 * n + r) for r in range(p)]
        allreduce(world, "ring_allreduce", inputs, what=f" (N={n}, p={p})")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
@pytest.mark.concept("ring_dtype_shape")
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
@pytest.mark.concept("ring_sum")
def test_ring_larger_tensor(world: World) -> None:
    inputs = [rand((3001,), torch.float32, seed=r) for r in range(world.size)]
    allreduce(world, "ring_allreduce", inputs, what=" (3001 float32 elements)")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_steps")
def test_ring_message_pattern(world: World) -> None:
    p, n = world.size, 3 * world.size + 2
    results = traffic(world, "ring_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])
    biggest = -(-n // p)  # ceil(N/p)
    direction: dict[str, int] = {}  # the direction rank 0 chose; every other rank must agree
    for res in results:
        r = res.rank
        out, inc = sends(res), recvs(res)
        assert len(out) == 2 * (p - 1) and len(inc) == 2 * (p - 1), (
            f"rank {r}/{p} sent {len(out)} and received {len(inc)} messages; a ring all-reduce takes "
            f"2(p-1) = {2 * (p - 1)} steps (reduce-scatter, then all-gather), one send and one recv each"
        )
        # Either direction is a ring, as long as every rank uses the same one.
        d = 1 if not out or out[0].peer == (r + 1) % p else -1
        assert (
            {e.peer for e in out} == {(r + d) % p}
            and {e.peer for e in inc} == {(r - d) % p}
            and d == direction.setdefault("d", d)
        ), (
            f"rank {r}/{p} sent to {sorted(set(peers(out)))} and received from "
            f"{sorted(set(peers(inc)))}; in a ring every rank sends only to one neighbour and receives only "
            f"from the other, all in the same direction: to (r+1) % p = {(r + 1) % p} and from (r-1) % p = "
            f"{(r - 1) % p}, or the mirror image"
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
@pytest.mark.concept("ring_bandwidth")
def test_ring_bytes_per_rank(world: World) -> None:
    # Whatever its rotation or direction, a ring sends every chunk but one in each phase: the chunk it
    # finishes (reduce-scatter) and the one it receives last (all-gather). So each rank's message sizes are
    # two copies of the tensor_split sizes less two entries, and the entries left out, over all ranks, are
    # again two copies of the sizes (each chunk is finished by one rank and received last by one rank).
    p, n = world.size, 5 * world.size + 3
    c = chunk_sizes(n, p)
    twice = Counter(c + c)
    results = traffic(world, "ring_allreduce", [rand((n,), torch.int32, seed=r) for r in range(p)])
    for verb, events_of in (("sent", sends), ("received", recvs)):
        left_out: Counter = Counter()
        for res in results:
            sizes = Counter(e.numel for e in events_of(res))
            missing = twice - sizes
            assert not sizes - twice and sum(missing.values()) == 2, (
                f"rank {res.rank}/{p} {verb} messages of {sorted(sizes.elements())} elements (total "
                f"{sum(sizes.elements())}) for N={n}; with chunks torch.tensor_split(flat, p) of sizes {c}, "
                f"a ring {verb} every chunk but one in the reduce-scatter and every chunk but one in the "
                f"all-gather: 2N minus two chunk sizes, about 2(p-1)/p * N"
            )
            left_out += missing
        assert left_out == twice, (
            f"over all ranks, the chunks not {verb} had sizes {sorted(left_out.elements())}; each chunk is "
            f"finished by exactly one rank and received last by exactly one rank, so they should be two "
            f"copies of {c}"
        )
    # Over all ranks: 2(p-1) N elements, i.e. nccl-tests' 2(p-1)/p * S for each of the p ranks
    sent = sum(res.comm.bytes_sent for res in results)
    assert sent == 2 * (p - 1) * n * 4, (
        f"the ranks sent {sent} bytes in all; a ring moves 2(p-1) * N * 4 = {2 * (p - 1) * n * 4} for N={n} "
        "int32 elements, i.e. 2(p-1)/p of the tensor per rank"
    )


# ---------------------------------------------------------------------------------------------------------
# recursive doubling


def tree_counts(p: int) -> list[int]:
    """Messages each way per rank, sorted: log2 q on q - e ranks, log2 q + 1 on the e ranks that take a fold
    in, one on the e extra ranks (q = 2^floor(log2 p), e = p - q). Which ranks play which role is free."""
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    rounds, e = q.bit_length() - 1, p - q
    return sorted([rounds] * (q - e) + [rounds + 1] * e + [1] * e)


def peer_list(events: list) -> list[int]:
    """The peers of `events`, in call order; -1 stands for a peer the harness could not tell."""
    return [-1 if e.peer is None else e.peer for e in events]


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_sum")
def test_tree_sum(world: World) -> None:
    p = world.size
    allreduce(world, "tree_allreduce", [rand((7,), torch.int64, seed=r) for r in range(p)])


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
@pytest.mark.concept("tree_dtype_shape")
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
@pytest.mark.concept("tree_rounds")
def test_tree_message_counts(world: World) -> None:
    p, n = world.size, 6
    results = traffic(world, "tree_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])
    for res in results:
        assert res.comm.sends == res.comm.recvs, (
            f"rank {res.rank}/{p} sent {res.comm.sends} and received {res.comm.recvs} messages; in recursive "
            "doubling every message is half of a swap (or of a fold and its hand-back), so the two match"
        )
        assert all(e.numel == n for e in res.comm.events), (
            f"rank {res.rank}/{p}: every message of recursive doubling carries the whole tensor ({n} "
            f"elements); got sizes {[e.numel for e in res.comm.events]}"
        )
    got = sorted(res.comm.sends for res in results)
    want = tree_counts(p)
    assert got == want, (
        f"messages sent per rank, sorted: {got}; recursive doubling gives {want} (log2 p per rank when p is "
        f"a power of two; with p={p}, the p - 2^floor(log2 p) extra ranks send one and get the sum back, "
        "their partners add one for the fold, and every other rank sends log2 of that power of two)"
    )


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_fold")
def test_tree_partners(world: World) -> None:
    p = world.size
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    rounds = q.bit_length() - 1
    results = traffic(world, "tree_allreduce", [rand((4,), torch.int32, seed=r) for r in range(p)])
    out = {res.rank: peer_list(sends(res)) for res in results}
    inc = {res.rank: peer_list(recvs(res)) for res in results}
    # A rank that takes a fold in receives it first and hands the sum back last; the extra rank that folded
    # into it sends and receives that one message only. Which ranks pair up this way is free.
    holders = [r for r in range(p) if p > q and len(out[r]) == rounds + 1 and inc[r]]
    extra = [inc[h][0] for h in holders]
    for h, x in zip(holders, extra, strict=True):
        assert out[h][-1] == x and out.get(x) == inc.get(x) == [h], (
            f"rank {h}/{p} took a fold in from rank {x} (its first receive) but then sent to {out[h]}, and "
            f"rank {x} sent to {out.get(x)} and received from {inc.get(x)}; an extra rank hands its tensor "
            "to one partner and gets the sum back from that partner, last of all"
        )
    assert len(set(extra)) == len(extra) == p - q, (
        f"with p={p} and q={q}, {p - q} extra rank(s) should each fold into a different partner; ranks "
        f"{holders} took folds from {extra}"
    )
    swaps = {r: out[r][:-1] if r in holders else out[r] for r in range(p) if r not in extra}
    for r, partners in swaps.items():
        got_in = inc[r][1:] if r in holders else inc[r]
        assert partners == got_in and len(partners) == rounds, (
            f"rank {r}/{p} sent to {out[r]} and received from {inc[r]}; each of the {q} ranks that run the "
            f"doubling swaps its whole tensor with one partner per round, log2 {q} = {rounds} rounds"
        )
    for k in range(rounds):
        for r in swaps:
            partner = swaps[r][k]
            assert partner in swaps and swaps[partner][k] == r, (
                f"in round {k} rank {r}/{p} swapped with {partner}, but {partner} swapped with "
                f"{swaps[partner][k] if partner in swaps else 'nobody'}; in each round of recursive doubling "
                "the ranks pair off, each pair swapping with each other"
            )
