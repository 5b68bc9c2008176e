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
  binary tree: any parents list that is one tree, at most two children per rank, at most ceil(log2 p) deep.
  tree all-reduce: the tree is read off the trace (a rank's parent is the peer it first talks to by
        sending), so any binary tree and any root pass; each edge carries num_chunks pieces each way that
        sum to N; pipelining is checked on the order of calls (piece 0 passed on before the last piece's
        receive is posted); float results must be bitwise equal on every rank.
  lower bounds: the numbers are checked against the bounds and alpha-beta costs of
        ../shared/reference/ground-truth.md (sections 1 and 2), with the fold counted for recursive doubling.
"""

import math
from collections import Counter
from functools import reduce as fold

import pytest
import torch

from grader.harness import COLLECTIVES, CheckFailure, World, assert_equal, chunk_of, patterns

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
    expect(world, function, world.size)
    return world.call("allreduce", function, args=[(x.clone(),) for x in inputs], forbid=FORBID)


def expect(world: World, function: str, p: int) -> None:
    """State the messages the README demands (for a failure's space-time diagram): a ring for the ring;
    recursive doubling's swaps with one partner per bit when p is a power of two; nothing for the tree."""
    if function == "ring_allreduce":
        world.expect(patterns.ring(messages=lambda p: 2 * (p - 1)))
    elif function == "recursive_doubling_allreduce" and p & (p - 1) == 0:
        rounds = p.bit_length() - 1
        swaps = patterns.peers(
            "recursive doubling", lambda r, q: {r ^ (1 << k) for k in range(rounds)}, each_once=True
        )
        world.expect(swaps)


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
@pytest.mark.parametrize("world", [3, 6], indirect=True)
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
@pytest.mark.parametrize("world", [6], indirect=True)
@pytest.mark.concept("ring_sum")
def test_ring_larger_tensor(world: World) -> None:
    inputs = [rand((3001,), torch.float32, seed=r) for r in range(world.size)]
    allreduce(world, "ring_allreduce", inputs, what=" (3001 float32 elements)")


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_steps")
def test_ring_message_pattern(world: World) -> None:
    # The pattern of steps only: how many bytes each message carries is ring_bandwidth's to grade.
    p, n = world.size, 3 * world.size + 2
    results = traffic(world, "ring_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)])
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
    for res in results:
        biggest = max((e.numel for e in res.comm.events), default=0)
        assert biggest <= -(-n // p), (
            f"rank {res.rank}/{p} sent or received a message of {biggest} elements; with N={n} each step "
            f"moves one chunk of at most ceil(N/p) = {-(-n // p)}"
        )
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


def rd_counts(p: int) -> list[int]:
    """Messages each way per rank, sorted: log2 q on q - e ranks, log2 q + 1 on the e ranks that take a fold
    in, one on the e extra ranks (q = 2^floor(log2 p), e = p - q). Which ranks play which role is free."""
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    rounds, e = q.bit_length() - 1, p - q
    return sorted([rounds] * (q - e) + [rounds + 1] * e + [1] * e)


def peer_list(events: list) -> list[int]:
    """The peers of `events`, in call order; -1 stands for a peer the harness could not tell."""
    return [-1 if e.peer is None else e.peer for e in events]


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.concept("rd_sum")
def test_rd_sum(world: World) -> None:
    p = world.size
    allreduce(world, "recursive_doubling_allreduce", [rand((7,), torch.int64, seed=r) for r in range(p)])


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.parametrize("world", [3, 6], indirect=True)
@pytest.mark.concept("rd_dtype_shape")
def test_rd_dtypes_and_shapes(world: World) -> None:
    p = world.size
    for i, dtype in enumerate(DTYPES):
        inputs = [rand((3, 2), dtype, seed=10 * i + r) for r in range(p)]
        allreduce(world, "recursive_doubling_allreduce", inputs, what=f" ({dtype}, shape (3, 2))")
    allreduce(
        world, "recursive_doubling_allreduce", [torch.tensor(7 * r) for r in range(p)], what=" (0-d tensor)"
    )
    allreduce(
        world,
        "recursive_doubling_allreduce",
        [rand((1,), torch.int64, seed=r) for r in range(p)],
        what=" (N=1)",
    )
    inputs = [torch.full((3,), 2**58 + 2 * r + 1, dtype=torch.int64) for r in range(p)]
    allreduce(world, "recursive_doubling_allreduce", inputs, what=" (int64 beyond 2^53)")


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.concept("rd_rounds")
def test_rd_message_counts(world: World) -> None:
    p, n = world.size, 6
    results = traffic(
        world, "recursive_doubling_allreduce", [rand((n,), torch.int64, seed=r) for r in range(p)]
    )
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
    want = rd_counts(p)
    assert got == want, (
        f"messages sent per rank, sorted: {got}; recursive doubling gives {want} (log2 p per rank when p is "
        f"a power of two; with p={p}, the p - 2^floor(log2 p) extra ranks send one and get the sum back, "
        "their partners add one for the fold, and every other rank sends log2 of that power of two)"
    )


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.concept("rd_fold")
def test_rd_partners(world: World) -> None:
    p = world.size
    q = 1 << (p.bit_length() - 1)  # largest power of two <= p
    rounds = q.bit_length() - 1
    results = traffic(
        world, "recursive_doubling_allreduce", [rand((4,), torch.int32, seed=r) for r in range(p)]
    )
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


# ---------------------------------------------------------------------------------------------------------
# binary tree: any tree passes that is binary, spans every rank and is logarithmically deep


def tree_problem(parents: object, p: int) -> str:
    """What is wrong with `parents` as binary_tree(p)'s answer, or '' (judge side)."""
    if not isinstance(parents, list) or len(parents) != p or not all(isinstance(x, int) for x in parents):
        return f"binary_tree({p}) returned {parents!r}; expected a list of {p} ints"
    roots = [r for r in range(p) if parents[r] == -1]
    if len(roots) != 1:
        return f"binary_tree({p}) = {parents}: {len(roots)} ranks have parent -1; a tree has exactly one root"
    if any(not 0 <= x < p for x in parents if x != -1):
        return f"binary_tree({p}) = {parents}: a parent outside 0..{p - 1}"
    for r in range(p):
        children = [c for c in range(p) if parents[c] == r]
        if len(children) > 2:
            return f"binary_tree({p}) = {parents}: rank {r} is the parent of {children}; at most two"
    deepest = max(depths(parents, p), default=0)
    if deepest < 0:
        return f"binary_tree({p}) = {parents}: following parents from some rank runs in a cycle"
    limit = math.ceil(math.log2(p)) if p > 1 else 0
    if deepest > limit:
        return (
            f"binary_tree({p}) = {parents}: a rank {deepest} hops from the root; a binary tree over p ranks "
            f"can keep every rank within ceil(log2 p) = {limit} hops, and a deeper tree costs latency"
        )
    return ""


def depths(parents: list[int], p: int) -> list[int]:
    """Hops from each rank to the root following `parents`; -1 for a rank caught in a cycle."""
    out = []
    for r in range(p):
        hops, x = 0, r
        while parents[x] != -1 and hops <= p:
            x, hops = parents[x], hops + 1
        out.append(hops if hops <= p else -1)
    return out


def tree_sizes(seed: int) -> list[int]:
    """World sizes for binary_tree: the small ones, every shape of the last level, and seeded larger ones."""
    g = torch.Generator().manual_seed(seed)
    return sorted({*range(1, 10), 15, 16, 17, *torch.randint(18, 200, (6,), generator=g).tolist()})


@pytest.mark.part("02.binary_tree")
@pytest.mark.concept("bt_tree")
def test_binary_tree_is_a_spanning_tree(world: World) -> None:
    for p in tree_sizes(seed=2):
        [res] = world.call("allreduce", "binary_tree", args=[(p,)])
        parents = res.returned
        problem = tree_problem(parents, p)
        if problem and "hops from the root" not in problem:
            raise AssertionError(problem)


@pytest.mark.part("02.binary_tree")
@pytest.mark.concept("bt_depth")
def test_binary_tree_is_shallow(world: World) -> None:
    for p in tree_sizes(seed=3):
        [res] = world.call("allreduce", "binary_tree", args=[(p,)])
        problem = tree_problem(res.returned, p)
        assert not problem, problem


# ---------------------------------------------------------------------------------------------------------
# tree all-reduce: sums, one tree, pieces, pipelining. Any binary tree and any root pass.


def tree_allreduce(world: World, inputs: list[torch.Tensor], k: int, what: str = "") -> list:
    """Run tree_allreduce(x, num_chunks=k) on every rank; check every rank holds the exact sum."""
    results = world.call(
        "allreduce",
        "tree_allreduce",
        args=[(x.clone(),) for x in inputs],
        kwargs={"num_chunks": k},
        forbid=FORBID,
    )
    expected = total(inputs)
    for res in results:
        assert_equal(
            res.args[0],
            expected,
            rank=res.rank,
            world_size=world.size,
            what=f"tensor after tree_allreduce(num_chunks={k}){what}",
        )
    return results


def tree_of(results: list) -> tuple[dict[int, int], dict[int, list[int]], str]:
    """(parent, children, problem) read off the trace: r's parent is the peer r first talks to by sending.

    A rank sends to its parent before it hears from it (the reduce goes up first), and it hears from a
    child before it sends to it, so the first event with each peer tells which is which, for any tree.
    """
    p = len(results)
    parent: dict[int, int] = {}
    children: dict[int, list[int]] = {r: [] for r in range(p)}
    for res in results:
        first: dict[int, str] = {}
        for e in res.comm.events:
            first.setdefault(-1 if e.peer is None else e.peer, e.op)
        ups = [q for q, op in first.items() if op in ("send", "isend")]
        if len(ups) > 1:
            return (
                parent,
                children,
                (
                    f"rank {res.rank}/{p} sent to {sorted(ups)} before receiving anything from them; in a "
                    "tree all-reduce a rank sends first only to its one parent (the reduce goes up before "
                    "the sum comes down), and hears from each child before sending to it"
                ),
            )
        if ups:
            parent[res.rank] = ups[0]
        children[res.rank] = sorted(q for q, op in first.items() if op not in ("send", "isend"))
    roots = [r for r in range(p) if r not in parent]
    if len(roots) != 1:
        return (
            parent,
            children,
            (
                f"ranks {roots} never sent first to any peer, so {len(roots)} ranks look like roots; a tree "
                "has one root, and every other rank sends its partial sum to its parent before it receives "
                "from it"
            ),
        )
    for r in range(p):
        for c in children[r]:
            if parent.get(c) != r:
                return (
                    parent,
                    children,
                    (
                        f"rank {r}/{p} received first from rank {c}, but rank {c}'s parent (the rank it sent "
                        f"to first) is {parent.get(c, 'none')}; a rank talks only to its parent and its "
                        "children"
                    ),
                )
        if len(children[r]) > 2:
            return parent, children, f"rank {r}/{p} has children {children[r]}; a binary tree has at most two"
    hops = depths([parent.get(r, -1) for r in range(p)], p)
    limit = math.ceil(math.log2(p))
    if min(hops) < 0 or max(hops) > limit:
        return (
            parent,
            children,
            (
                f"the tree your messages form (parent of each rank: {[parent.get(r, -1) for r in range(p)]})"
                f" is {max(hops)} hops deep; a binary tree over {p} ranks can keep every rank within "
                f"ceil(log2 p) = {limit} hops of the root"
            ),
        )
    return parent, children, ""


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_sum")
@pytest.mark.generated
def test_tree_sum_seeded(world: World) -> None:
    # Lengths and piece counts drawn in the judge: N < k (empty pieces), N not a multiple of k, k = 1.
    p = world.size
    g = torch.Generator().manual_seed(100 + p)
    for n, k in [
        (int(torch.randint(1, 4, (1,), generator=g)), 5),
        (int(torch.randint(10, 60, (1,), generator=g)), 3),
        (7, 1),
    ]:
        inputs = [rand((n,), torch.int64, seed=1000 * n + 10 * k + r) for r in range(p)]
        tree_allreduce(world, inputs, k, what=f" (N={n})")


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.parametrize("world", [3, 6], indirect=True)
@pytest.mark.concept("tree_sum")
def test_tree_dtypes_and_shapes(world: World) -> None:
    p = world.size
    for i, dtype in enumerate(DTYPES):
        inputs = [rand((3, 5), dtype, seed=10 * i + r) for r in range(p)]
        tree_allreduce(world, inputs, 4, what=f" ({dtype}, shape (3, 5))")
    tree_allreduce(world, [torch.tensor(7 * r - 3) for r in range(p)], 2, what=" (0-d tensor)")
    inputs = [torch.full((4,), 2**58 + 2 * r + 1, dtype=torch.int64) for r in range(p)]
    tree_allreduce(world, inputs, 2, what=" (int64 beyond 2^53)")


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_bitwise")
def test_tree_float_is_bitwise_identical_on_every_rank(world: World) -> None:
    # Random float32: any two summation orders round differently, so only one order, shared, gives equal bits.
    p = world.size
    g = torch.Generator().manual_seed(7 + p)
    inputs = [torch.randn(40, generator=g) for _ in range(p)]
    results = world.call(
        "allreduce",
        "tree_allreduce",
        args=[(x.clone(),) for x in inputs],
        kwargs={"num_chunks": 3},
        forbid=FORBID,
    )
    for res in results:
        assert_equal(
            res.args[0],
            results[0].args[0],
            rank=res.rank,
            world_size=p,
            what="float32 sum compared with rank 0's (every rank must hold the same bits)",
        )
    # p float32 roundings of values of size ~sqrt(p): far below 1e-4 from the float64 sum.
    exact = total([x.double() for x in inputs]).float()
    assert torch.allclose(results[0].args[0], exact, rtol=0, atol=1e-4), "the float32 result is not the sum"


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_shape")
def test_tree_messages_form_a_binary_tree(world: World) -> None:
    p, k = world.size, 3
    n = 4 * k + 2  # pieces of 5, 5 and 4 elements (any split with at most ceil(N/k) per piece passes)
    results = traffic_k(world, [rand((n,), torch.int32, seed=r) for r in range(p)], k)
    parent, children, problem = tree_of(results)
    assert not problem, problem
    biggest = -(-n // k)
    for res in results:
        r = res.rank
        neighbours = [parent[r]] if r in parent else []
        neighbours += children[r]
        for q in neighbours:
            out = [e.numel for e in sends(res) if e.peer == q]
            inc = [e.numel for e in recvs(res) if e.peer == q]
            assert len(out) == len(inc) == k and sum(out) == sum(inc) == n, (
                f"rank {r}/{p} sent {out} and received {inc} elements to and from rank {q}; each tree "
                f"edge carries the tensor once each way, in num_chunks = {k} pieces: {k} messages summing "
                f"to N = {n}"
            )
        sizes = [e.numel for e in res.comm.events]
        assert max(sizes) <= biggest, (
            f"rank {r}/{p} moved a message of {max(sizes)} elements; with N={n} in {k} pieces each is "
            f"at most ceil(N/k) = {biggest}"
        )
        assert {e.peer for e in res.comm.events} <= set(neighbours), (
            f"rank {r}/{p} talked to {sorted({e.peer for e in res.comm.events})}; only its parent and "
            f"children {neighbours} are its neighbours in the tree"
        )
        assert res.comm.bytes_sent <= 3 * n * 4, (
            f"rank {r}/{p} sent {res.comm.bytes_sent} bytes; a binary-tree rank sends the tensor at most "
            f"three times (once up, once to each child): {3 * n * 4}"
        )


def traffic_k(world: World, inputs: list[torch.Tensor], k: int) -> list:
    return world.call(
        "allreduce",
        "tree_allreduce",
        args=[(x.clone(),) for x in inputs],
        kwargs={"num_chunks": k},
        forbid=FORBID,
    )


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_pipeline")
@pytest.mark.generated
def test_tree_is_pipelined(world: World) -> None:
    # A pipeline passes piece 0 on before it takes in the last piece: all levels work at once. Storing
    # the whole tensor first (receive every piece, then send every piece) takes depth * k piece-times.
    # The number of pieces is drawn here (2 to 5), so no fixed k can be special-cased.
    p = world.size
    k = int(torch.randint(2, 6, (1,), generator=torch.Generator().manual_seed(60 + p)))
    results = traffic_k(world, [rand((4 * k,), torch.int64, seed=r) for r in range(p)], k)
    parent, children, problem = tree_of(results)
    assert not problem, problem
    for res in results:
        r, events = res.rank, res.comm.events
        up = [i for i, e in enumerate(events) if e.peer == parent.get(r) and e.op in ("send", "isend")]
        down = [i for i, e in enumerate(events) if e.peer == parent.get(r) and e.op in ("recv", "irecv")]
        if up and down:
            assert len(up) > 1 and up[1] < down[0], (
                f"rank {r}/{p} received its first piece back from its parent (event {down[0]}) before it "
                f"sent its second piece up; a pipelined reduce does not wait for the broadcast of each "
                f"piece, or every piece makes the whole round trip alone, {k} times the tree's depth in all"
            )
        ops = [(i, e.op in ("send", "isend"), e.peer) for i, e in enumerate(events)]
        for phase, frm, to in (
            ("reduce", children[r], [parent.get(r)]),
            ("broadcast", [parent.get(r)], children[r]),
        ):
            got = [i for i, is_send, q in ops if not is_send and q in frm]
            put = [i for i, is_send, q in ops if is_send and q in to]
            if got and put:
                assert put[0] < got[-1], (
                    f"rank {r}/{p} in the {phase}: its first send onward (event {put[0]}) comes after it "
                    f"posted its last receive (event {got[-1]}); a pipelined tree passes piece 0 on before "
                    f"it takes in the last of the num_chunks = {k} pieces, so every level of the tree works "
                    "at once"
                )


# ---------------------------------------------------------------------------------------------------------
# lower bounds: numbers the student computes, checked against the bounds of ground-truth.md sections 1-2


def expected_ratios(algorithm: str, p: int) -> dict[str, float]:
    """Judge-side: algorithm's alpha and beta terms over the two bounds (ground-truth.md section 2 costs)."""
    rounds, volume = math.ceil(math.log2(p)), 2 * (p - 1) / p
    q = 1 << (p.bit_length() - 1)
    steps = {
        "ring": (2 * (p - 1), volume),
        "recursive_doubling": (int(math.log2(q)) + 2 * (p > q),) * 2,
        "rabenseifner": (2 * rounds, volume),
        "reduce_broadcast": (2 * rounds, 2 * rounds),
    }[algorithm]
    return {"latency": steps[0] / rounds, "bandwidth": steps[1] / volume}


def check_ratios(world: World, algorithm: str, sizes: list[int]) -> None:
    for p in sizes:
        [res] = world.call("allreduce", "bound_ratios", args=[(algorithm, p)])
        got, want = res.returned, expected_ratios(algorithm, p)
        assert isinstance(got, dict) and set(got) >= {"latency", "bandwidth"}, (
            f"bound_ratios({algorithm!r}, {p}) returned {got!r}; expected a dict with 'latency' and "
            "'bandwidth'"
        )
        for term in ("latency", "bandwidth"):
            assert isinstance(got[term], int | float) and math.isclose(got[term], want[term], rel_tol=1e-9), (
                f"bound_ratios({algorithm!r}, p={p})[{term!r}] = {got[term]!r}; the {algorithm} "
                f"{'alpha' if term == 'latency' else 'beta'} term over the {term} bound is {want[term]:.6g}"
            )


def seeded_sizes(seed: int, power_of_two: bool = False) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    if power_of_two:
        return [2, 4, 8, *(1 << int(e) for e in torch.randint(4, 12, (3,), generator=g))]
    return [2, 3, 5, 6, 7, 8, *torch.randint(9, 3000, (4,), generator=g).tolist()]


@pytest.mark.part("02.lower_bounds")
@pytest.mark.concept("lb_bounds")
def test_lower_bounds_numbers(world: World) -> None:
    g = torch.Generator().manual_seed(11)
    for p in seeded_sizes(12):
        nbytes = float(torch.randint(1, 1 << 30, (1,), generator=g))
        alpha, beta = float(torch.rand(1, generator=g)) * 1e-5, float(torch.rand(1, generator=g)) * 1e-10
        [res] = world.call("allreduce", "lower_bounds", args=[(p, nbytes, alpha, beta)])
        want = {"latency": math.ceil(math.log2(p)) * alpha, "bandwidth": 2 * (p - 1) / p * nbytes * beta}
        got = res.returned
        assert isinstance(got, dict), f"lower_bounds returned {got!r}; expected a dict"
        for term, value in want.items():
            assert isinstance(got.get(term), int | float) and math.isclose(got[term], value, rel_tol=1e-9), (
                f"lower_bounds(p={p}, nbytes={nbytes:.0f}, alpha={alpha:.3g}, beta={beta:.3g})[{term!r}] = "
                f"{got.get(term)!r}; expected {value:.6g} s (README, 'Lower bounds')"
            )


@pytest.mark.part("02.lower_bounds")
@pytest.mark.concept("lb_ring_tree")
def test_ratios_ring_and_reduce_broadcast(world: World) -> None:
    for algorithm in ("ring", "reduce_broadcast"):
        check_ratios(world, algorithm, seeded_sizes(13))


@pytest.mark.part("02.lower_bounds")
@pytest.mark.concept("lb_doubling")
def test_ratios_doubling(world: World) -> None:
    check_ratios(world, "recursive_doubling", seeded_sizes(14))
    check_ratios(world, "rabenseifner", seeded_sizes(15, power_of_two=True))


# ---------------------------------------------------------------------------------------------------------
# sub-groups: `group` is any process group holding this rank, drawn here from a seed. Members need not be
# 0..k-1 nor adjacent, two groups may run at once, and ranks outside a group take no part. The rank program
# (exercises/02_ring_tree/rank_programs.py) makes the groups, once per world, and calls the function.


def subgroup_splits(p: int) -> list[list[list[int]]]:
    """Two ways to cut p ranks into groups, drawn from a seed: (1) one group of 4 ranks, without rank 0 and
    not all adjacent, the other ranks idle; (2) a group of 3 ranks (not a power of two), not all adjacent,
    and a group of the other p - 3, both at the same time. One world size per part keeps the suite short:
    6 ranks (groups of 4, 3 and 3) for the ring and the tree, 8 (groups of 4, 3 and 5) for recursive
    doubling, whose fold needs group sizes that are not powers of two."""
    g = torch.Generator().manual_seed(4242 + p)
    while True:
        one = sorted((torch.randperm(p - 1, generator=g)[:4] + 1).tolist())
        if one[-1] - one[0] > 3:
            break
    while True:
        three = sorted(torch.randperm(p, generator=g)[:3].tolist())
        if three[-1] - three[0] > 2:
            break
    return [[one], [three, sorted(set(range(p)) - set(three))]]


def check_subgroups(world: World, function: str, n: int, seed: int, kwargs: dict | None = None) -> None:
    """`function` over every group of each split at once, on (n,) int64 inputs: every member must end with
    the sum over its own group's members, and ranks in no group must not send or receive."""
    p = world.size
    for split in subgroup_splits(p):
        made = {r: rand((n,), torch.int64, seed=seed + r) for members in split for r in members}
        inputs = [
            {"function": function, "split": split, "args": [made[r]] if r in made else None, "kwargs": kwargs}
            for r in range(p)
        ]
        if function == "ring_allreduce":
            expect(world, function, p)  # a ring in every group: group ranks, group sizes
        results = world.run("rank_programs:in_group", inputs=inputs, forbid=FORBID)
        for res in results:
            if res.rank not in made:
                assert not res.comm.events, (
                    f"rank {res.rank}/{p} is in none of the groups {split}, yet it sent or received during "
                    f"{function}: ranks outside `group` take no part"
                )
        for members in split:
            expected = total([made[r] for r in members])
            for j, rank in enumerate(members):
                assert_equal(
                    results[rank].value[0],
                    expected,
                    what=f"group rank {j} (global rank {rank} of {p}) in group {members}: sum after "
                    f"{function}",
                )


@pytest.mark.part("02.ring_allreduce")
@pytest.mark.concept("ring_sum")
@pytest.mark.generated
@pytest.mark.parametrize("world", [6], indirect=True)
def test_ring_in_subgroups(world: World) -> None:
    check_subgroups(world, "ring_allreduce", n=11, seed=300)


@pytest.mark.part("02.recursive_doubling")
@pytest.mark.concept("rd_sum")
@pytest.mark.generated
@pytest.mark.parametrize("world", [8], indirect=True)
def test_rd_in_subgroups(world: World) -> None:
    check_subgroups(world, "recursive_doubling_allreduce", n=5, seed=400)


@pytest.mark.part("02.tree_allreduce")
@pytest.mark.concept("tree_subgroup")
@pytest.mark.generated
@pytest.mark.parametrize("world", [6], indirect=True)
def test_tree_in_subgroups(world: World) -> None:
    check_subgroups(world, "tree_allreduce", n=10, seed=500, kwargs={"num_chunks": 3})
