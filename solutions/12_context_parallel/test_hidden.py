"""What this catches: context parallelism that is exact only by luck, or that moves more than it must.

- online_softmax: a merge that forgets to rescale the running output, NaN from rows whose keys are all
  masked (every zig-zag step has some), a missing 1/sqrt(D), a causal mask off by one (k < q).
- load_balance: zig-zag chunks in the wrong order or mirrored wrongly, a layout that accepts S it cannot
  split; the work table that shows why zig-zag exists.
- ring_forward: blocks merged under the wrong owner's positions (a causal ring that is right only on rank 0),
  the ring turned the wrong way, one pass too many, blocking sends that deadlock, any collective.
- ring_backward: dk/dv that never reach their owner (kept one pass early), or that keep only one rank's
  share; backwards that are right for contiguous shards only.
- ulysses_all_to_all: token or head groups in the wrong order; a backward that repeats the forward.
- ulysses_attention: an all-gather of everything (right values, P times the traffic), a missing head check.

Every expected value is computed here from the full, unsplit attention in float64. Tolerance rtol 1e-10,
atol 1e-12 (TOL): the blockwise softmax and the ring's sums add in a different order than one softmax over
all keys; float64 keeps that below 1e-14, while a bug is off by O(1e-2) or more. All-to-alls that only move
integers are compared exactly.

Traffic per rank (bytes, float64 = 8), block = B*s*H*D*8 for the k (or v) shard of one rank:
  ring forward   sends = receives = 2(P-1) blocks     k and v, passed P-1 times (ground-truth.md §10.3)
  ring backward  sends = receives = (2(P-1) + 2P) blocks   k, v again P-1 times; dk, dv P times (the last
                 pass delivers each block's sums to its owner), as zhuzilin/ring-flash-attention does
  Ulysses        each all-to-all sends (P-1)/P of the local tensor: 4 (P-1)/P blocks forward (q, k, v, out)
                 and 4 (P-1)/P backward, about 4Nh/P per rank (Jacobs et al. 2023; ground-truth.md §10.3)
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from grader.harness import RankFailure, World, assert_close, assert_equal

TOL = dict(rtol=1e-10, atol=1e-12)  # see the module docstring
F64 = 8
COLLECTIVES = [
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
]
NOT_A2A = [c for c in COLLECTIVES if not c.startswith("all_to_all")]


def randn(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def attention(q, k, v, causal: bool, q_pos=None, k_pos=None):
    """Reference softmax attention, (B, S, H, D); returns (out, lse (B, S, H))."""
    q_pos = torch.arange(q.shape[1]) if q_pos is None else q_pos
    k_pos = torch.arange(k.shape[1]) if k_pos is None else k_pos
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.nan_to_num(torch.exp(scores - lse[..., None]))  # all-masked rows: 0
    return torch.einsum("bhqk,bkhd->bqhd", probs, v), lse.transpose(1, 2)


def positions(S: int, P: int, r: int, layout: str) -> torch.Tensor:
    if layout == "contiguous":
        return torch.arange(r * S // P, (r + 1) * S // P)
    c = S // (2 * P)
    return torch.cat([torch.arange(r * c, (r + 1) * c), torch.arange((2 * P - 1 - r) * c, (2 * P - r) * c)])


def problem(B: int = 2, S: int = 16, H: int = 2, D: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    return {name: randn((B, S, H, D), seed + i) for i, name in enumerate(("q", "k", "v", "dout"))}


def call1(world: World, module: str, function: str, *args, **kwargs):
    [res] = world.call(module, function, args=[args], kwargs=kwargs)
    return res.returned


# ---------------------------------------------------------------------------------------------------------
# 12.online_softmax (one rank)


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("block_softmax")
def test_block_attention(world: World) -> None:
    d = problem(S=6, seed=1)
    interleaved = (torch.tensor([3, 4, 5, 9, 10, 11]), torch.tensor([0, 1, 2, 6, 7, 8]))
    diagonal = (torch.arange(6), torch.arange(6))  # a rank's own block: each query sees itself
    for (q_pos, k_pos), causal in [(interleaved, False), (interleaved, True), (diagonal, True)]:
        got = call1(
            world, "online_softmax", "block_attention", d["q"], d["k"], d["v"], q_pos, k_pos, causal=causal
        )
        out, lse = attention(d["q"], d["k"], d["v"], causal, q_pos, k_pos)
        what = f"(q_pos {q_pos.tolist()}, k_pos {k_pos.tolist()}, causal={causal})"
        assert_close(got[0], out, what=f"block out {what}", **TOL)
        assert_close(got[1], lse, what=f"block lse (B, Sq, H) {what}", **TOL)


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("empty_rows")
def test_block_attention_rows_that_see_nothing(world: World) -> None:
    d = problem(S=4, seed=2)
    q_pos, k_pos = torch.tensor([0, 1, 8, 9]), torch.tensor([4, 5, 6, 7])  # queries 0, 1 see none of them
    out, lse = call1(
        world, "online_softmax", "block_attention", d["q"], d["k"], d["v"], q_pos, k_pos, causal=True
    )
    assert not out.isnan().any() and not lse.isnan().any(), "block_attention returned NaN for all-masked rows"
    assert_equal(out[:, :2], torch.zeros_like(out[:, :2]), what="out of rows that see no key (must be 0)")
    assert_equal(lse[:, :2], torch.full_like(lse[:, :2], float("-inf")), what="lse of rows that see no key")
    ref_out, ref_lse = attention(d["q"], d["k"], d["v"], True, q_pos, k_pos)
    assert_close(out, ref_out, what="out of the other rows", **TOL)
    assert_close(lse, ref_lse, what="lse of the other rows", **TOL)


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("lse_merge")
def test_merge_blocks_in_any_order(world: World) -> None:
    d = problem(S=9, seed=3)
    full_out, full_lse = attention(d["q"], d["k"], d["v"], causal=True)
    pos = torch.arange(9)
    parts = [
        attention(d["q"], d["k"][:, i], d["v"][:, i], True, pos, pos[i])
        for i in (slice(6, 9), slice(0, 3), slice(3, 6))
    ]
    out, lse = parts[0]  # the LAST keys first: rows 0-5 start empty (lse -inf)
    for block_out, block_lse in parts[1:]:
        out, lse = call1(world, "online_softmax", "merge_attention", out, lse, block_out, block_lse)
    assert not out.isnan().any(), "merge_attention produced NaN"
    assert_close(out, full_out, what="three blocks merged (keys 6-8, then 0-2, then 3-5)", **TOL)
    assert_close(lse, full_lse, what="merged lse", **TOL)


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("empty_rows")
def test_merge_with_empty_sides(world: World) -> None:
    out = randn((1, 3, 2, 4), 5)
    lse = randn((1, 3, 2), 6)
    zeros, empty = torch.zeros_like(out), torch.full_like(lse, float("-inf"))
    got = call1(world, "online_softmax", "merge_attention", out, lse, zeros, empty)
    assert_close(got[0], out, what="merging an empty block leaves out", **TOL)
    assert_close(got[1], lse, what="merging an empty block leaves lse", **TOL)
    got = call1(world, "online_softmax", "merge_attention", zeros, empty, zeros, empty)
    assert not got[0].isnan().any(), "merging two empty sides gave NaN; it must give out = 0, lse = -inf"
    assert_equal(got[0], zeros, what="out after merging two empty sides")
    assert_equal(got[1], empty, what="lse after merging two empty sides")


# Logits beyond exp's range, in float32, the narrowest dtype the part is graded in: q and k scaled by 15 give
# lse values of several hundred (exp overflows float32 past 88.7) and, for other rows, below -103 (exp
# underflows to 0). Tolerance: float32 holds an lse of magnitude L to L * 2**-24 (5e-5 at L = 850), and each
# block's weight exp(lse_side - lse) carries that error relatively, so out and lse are compared to the float64
# result with atol 1e-3, rtol 1e-5 (measured error 4e-5 at worst); exponentiating an lse on its own gives
# inf, NaN or 0 there.
LIMITS_TOL = dict(rtol=1e-5, atol=1e-3)


def assert_close_f64(got: object, expected: torch.Tensor, what: str) -> None:
    """``got`` (float32 from float32 inputs, or wider) within LIMITS_TOL of the float64 ``expected``."""
    assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
    assert not got.isnan().any(), f"{what}: NaN"
    assert_close(got.double(), expected, what=what, **LIMITS_TOL)


def large_logits(seed: int) -> dict[str, torch.Tensor]:
    """float32 q, k, v with |logits| in the hundreds, and their float64 copies for the expected values."""
    d = problem(S=8, seed=seed)
    f32 = {"q": (15 * d["q"]).float(), "k": (15 * d["k"]).float(), "v": d["v"].float()}
    return f32 | {f"{name}64": t.double() for name, t in f32.items()}


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("stable_block_softmax")
def test_block_attention_beyond_exp_range(world: World) -> None:
    d = large_logits(seed=7)
    pos = torch.arange(8)
    for causal in (False, True):
        out, lse = call1(
            world, "online_softmax", "block_attention", d["q"], d["k"], d["v"], pos, pos, causal=causal
        )
        ref_out, ref_lse = attention(d["q64"], d["k64"], d["v64"], causal)
        what = f"float32 logits with lse up to {ref_lse.max().item():.0f} (causal={causal})"
        assert_close_f64(out, ref_out, f"block_attention out, {what}")
        assert_close_f64(lse, ref_lse, f"block_attention lse, {what}")


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("stable_merge")
def test_merge_beyond_exp_range(world: World) -> None:
    d = large_logits(seed=0)
    pos = torch.arange(8)
    late, early = (
        attention(d["q64"], d["k64"][:, i], d["v64"][:, i], True, pos, pos[i])
        for i in (slice(4, 8), slice(0, 4))
    )
    sides = [t.float() for t in (*late, *early)]
    check_shift_invariance(world, sides, f"two float32 blocks, lse up to {sides[1].max().item():.0f}")


def check_shift_invariance(world: World, sides: list[torch.Tensor], what: str) -> None:
    """A merge depends on the two lse only through their difference: the student's merge of `sides` (lse
    beyond exp's range) must give its own merge of the same sides with each row's larger lse subtracted
    from both (inside exp's range), the lse shifted back. Judged on the student's own merge, so that a wrong
    merge (lse_merge's) or a NaN on empty rows (empty_rows') costs those concepts, not this one."""
    out, lse, block_out, block_lse = sides
    top = torch.maximum(lse.double(), block_lse.double())
    shift = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # (B, S, H)
    moderate = [out, (lse.double() - shift).float(), block_out, (block_lse.double() - shift).float()]
    got_out, got_lse = call1(world, "online_softmax", "merge_attention", *sides)
    own_out, own_lse = call1(world, "online_softmax", "merge_attention", *moderate)
    for t, want in ((got_out, out), (got_lse, lse), (own_out, out), (own_lse, lse)):
        assert isinstance(t, torch.Tensor) and t.shape == want.shape, (
            f"merge_attention returned {t!r:.80} where a tensor of shape {tuple(want.shape)} was expected"
        )
    rows = torch.isfinite(own_lse) & torch.isfinite(own_out).all(-1)  # where the in-range merge is defined
    assert_close_f64(got_out[rows], own_out[rows].double(), f"merge_attention out, {what} (vs lse shifted)")
    assert_close_f64(got_lse[rows], (own_lse.double() + shift)[rows], f"merge_attention lse, {what}")


def extreme_sides(rng: random.Random) -> list[torch.Tensor]:
    """float32 (out, lse, block_out, block_lse) with lse of either sign far beyond exp's float32 range
    (|lse| = 10^x, x drawn in 2.05..3.5: 112 to 3162; exp overflows past 88.7 and underflows past -103),
    the block's lse within 20 of it, so both sides weigh in. Larger lse are not drawn: float32 then no
    longer resolves the difference of the two sides, and correct merges disagree by more than LIMITS_TOL."""
    g = torch.Generator().manual_seed(rng.randrange(10**6))
    shape = (1, rng.randint(2, 5), rng.randint(1, 3))  # (B, S, H)
    scale = torch.tensor([rng.choice((-1, 1)) * 10 ** rng.uniform(2.05, 3.5) for _ in range(shape[1])])
    lse = (scale[None, :, None] * (1 + 0.01 * torch.rand(shape, generator=g, dtype=torch.float64))).float()
    block_lse = (lse.double() + 40 * torch.rand(shape, generator=g, dtype=torch.float64) - 20).float()
    out, block_out = (torch.randn((*shape, 4), generator=g) for _ in range(2))
    return [out, lse, block_out, block_lse]


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("stable_merge")
@pytest.mark.generated
def test_merge_far_beyond_exp_range(world: World) -> None:
    # Logits at the dtype's limits, drawn here: a merge that exponentiates an lse before subtracting the
    # larger one overflows to inf (or underflows to 0) and returns NaN; the max shift keeps every exponent
    # in [-inf, 0], so the merge gives what it gives with the lse shifted into exp's range.
    rng = random.Random(1200)
    for case in range(3):
        sides = extreme_sides(rng)
        lse = sides[1]
        check_shift_invariance(
            world, sides, f"case {case + 1}: lse {lse.min().item():.3g}..{lse.max().item():.3g}"
        )


# ---------------------------------------------------------------------------------------------------------
# 12.load_balance (one rank)


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("zigzag_layout")
def test_shard_positions(world: World) -> None:
    for S, P in [(16, 2), (16, 4), (24, 3)]:
        for layout in ("contiguous", "zigzag"):
            for r in range(P):
                got = call1(world, "ring_attention", "shard_positions", S, P, r, layout)
                assert_equal(
                    got, positions(S, P, r, layout), what=f"{layout} positions of rank {r}, S={S}, P={P}"
                )


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("layout_validation")
def test_layouts_reject_what_they_cannot_split(world: World) -> None:
    for S, P, layout in [(12, 4, "zigzag"), (10, 4, "contiguous"), (16, 2, "striped")]:
        with pytest.raises(RankFailure) as failure:
            call1(world, "ring_attention", "shard_positions", S, P, 0, layout)
        assert "ValueError" in str(failure.value), (
            f"shard_positions({S}, {P}, 0, {layout!r}): {failure.value}"
        )


def work(S: int, P: int, layout: str) -> list[list[int]]:
    pos = [positions(S, P, r, layout) for r in range(P)]
    return [[int((pos[(r - i) % P][None, :] <= pos[r][:, None]).sum()) for i in range(P)] for r in range(P)]


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("causal_work_per_step")
def test_causal_work_table(world: World) -> None:
    for S, P in [(16, 2), (32, 4)]:
        for layout in ("contiguous", "zigzag"):
            got, want = call1(world, "ring_attention", "causal_work", S, P, layout), work(S, P, layout)
            assert got == want, f"causal_work({S}, {P}, {layout!r}) = {got}, expected {want}"
    # the point of zig-zag, which the README claims: every rank does the same work at every step, while
    # contiguous ranks all differ. A check of the course's own table, not of the submission.
    zig, flat = work(32, 4, "zigzag"), work(32, 4, "contiguous")
    assert all(len({row[i] for row in zig}) == 1 for i in range(4)) and len({sum(r) for r in flat}) == 4


# ---------------------------------------------------------------------------------------------------------
# 12.ring_forward and 12.ring_backward


def shard(x: torch.Tensor, P: int, r: int, layout: str) -> torch.Tensor:
    return x[:, positions(x.shape[1], P, r, layout)].contiguous()


def ring_forward(world: World, d: dict, causal: bool, layout: str) -> list:
    P = world.size
    args = [tuple(shard(d[n], P, r, layout) for n in ("q", "k", "v")) for r in range(P)]
    kwargs = {"causal": causal, "layout": layout}
    return world.call(
        "ring_attention", "ring_attention_forward", args=args, kwargs=kwargs, forbid=COLLECTIVES
    )


@pytest.mark.part("12.ring_forward")
@pytest.mark.parametrize(
    ("causal", "layout"), [(False, "contiguous"), (True, "contiguous"), (True, "zigzag")]
)
@pytest.mark.concept("ring_merges_every_block")
def test_ring_forward(world: World, causal: bool, layout: str) -> None:
    P, d = world.size, problem(seed=10)
    out, lse = attention(d["q"], d["k"], d["v"], causal)
    for res in ring_forward(world, d, causal, layout):
        r, (got_out, got_lse) = res.rank, res.returned
        what = (
            f"({layout}, causal={causal}) of my queries at positions {positions(16, P, r, layout).tolist()}"
        )
        assert_close(got_out, shard(out, P, r, layout), rank=r, world_size=P, what=f"out {what}", **TOL)
        assert_close(got_lse, shard(lse, P, r, layout), rank=r, world_size=P, what=f"lse {what}", **TOL)


def check_ring_traffic(results: list, P: int, block: int, blocks: int, what: str) -> None:
    for res in results:
        r, c = res.rank, res.comm
        sends = [e for e in c.events if e.op in ("send", "isend")]
        recvs = [e for e in c.events if e.op in ("recv", "irecv")]
        assert {e.peer for e in sends} <= {(r + 1) % P} and {e.peer for e in recvs} <= {(r - 1) % P}, (
            f"rank {r}/{P} sent to {sorted({e.peer for e in sends})} and received from "
            f"{sorted({e.peer for e in recvs})}; a ring sends only to r+1 = {(r + 1) % P} and receives only "
            f"from r-1 = {(r - 1) % P}"
        )
        assert c.bytes_sent == c.bytes_received == blocks * block, (
            f"rank {r}/{P}: {what} sent {c.bytes_sent} and received {c.bytes_received} bytes; expected "
            f"{blocks} blocks of B*s*H*D*8 = {block} bytes = {blocks * block}"
        )


@pytest.mark.part("12.ring_forward")
@pytest.mark.concept("ring_forward_traffic")
def test_ring_forward_traffic(world: World) -> None:
    P, d = world.size, problem(seed=11)
    block = d["k"].numel() // P * F64
    for layout in ("contiguous", "zigzag"):
        results = ring_forward(world, d, True, layout)
        check_ring_traffic(results, P, block, 2 * (P - 1), f"the {layout} forward (k and v, P-1 passes)")
        for res in results:
            assert res.comm.sends in (P - 1, 2 * (P - 1)), (
                f"rank {res.rank}/{P}: {res.comm.sends} sends; one per pass for k and v together, or two"
            )


def ring_backward(world: World, d: dict, causal: bool, layout: str) -> tuple[list, dict]:
    P = world.size
    leaves = {n: d[n].clone().requires_grad_() for n in ("q", "k", "v")}
    out, lse = attention(leaves["q"], leaves["k"], leaves["v"], causal)
    out.backward(d["dout"])
    full = {"dout": d["dout"], **{n: d[n] for n in ("q", "k", "v")}, "out": out.detach(), "lse": lse.detach()}
    args = [
        tuple(shard(full[n], P, r, layout) for n in ("dout", "q", "k", "v", "out", "lse")) for r in range(P)
    ]
    results = world.call(
        "ring_attention",
        "ring_attention_backward",
        args=args,
        kwargs={"causal": causal, "layout": layout},
        forbid=COLLECTIVES,
    )
    return results, {n: leaves[n].grad for n in ("q", "k", "v")}


@pytest.mark.part("12.ring_backward")
@pytest.mark.parametrize(
    ("causal", "layout"), [(False, "contiguous"), (True, "contiguous"), (True, "zigzag")]
)
@pytest.mark.concept("travelling_accumulator")
def test_ring_backward(world: World, causal: bool, layout: str) -> None:
    P = world.size
    results, grads = ring_backward(world, problem(seed=20), causal, layout)
    for res in results:
        for name, got in zip(("dq", "dk", "dv"), res.returned, strict=True):
            want = shard(grads[name[1]], P, res.rank, layout)
            what = f"{name} of my shard ({layout}, causal={causal})"
            assert_close(got, want, rank=res.rank, world_size=P, what=what, **TOL)


@pytest.mark.part("12.ring_backward")
@pytest.mark.concept("ring_backward_traffic")
def test_ring_backward_traffic(world: World) -> None:
    P, d = world.size, problem(seed=21)
    block = d["k"].numel() // P * F64
    results, _ = ring_backward(world, d, True, "zigzag")
    check_ring_traffic(results, P, block, 4 * P - 2, "backward (k, v: P-1 passes; dk, dv: P passes)")


# ---------------------------------------------------------------------------------------------------------
# 12.ulysses_all_to_all and 12.ulysses_attention


def ints(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randint(-99, 99, shape, generator=torch.Generator().manual_seed(seed)).double()


def seq(x: torch.Tensor, P: int, r: int) -> torch.Tensor:
    return x.chunk(P, dim=1)[r].contiguous()  # my tokens, all heads


def heads(x: torch.Tensor, P: int, r: int) -> torch.Tensor:
    return x.chunk(P, dim=2)[r].contiguous()  # all tokens, my heads


@pytest.mark.part("12.ulysses_all_to_all")
@pytest.mark.concept("seq_head_transpose")
def test_seq_to_head_and_back(world: World) -> None:
    P = world.size
    x = ints((2, 4 * P, 2 * P, 3), seed=30)  # (B, S, H, D) with two heads per rank
    results = world.call("ulysses", "seq_to_head", args=[(seq(x, P, r),) for r in range(P)], forbid=NOT_A2A)
    for res in results:
        assert_equal(
            res.returned, heads(x, P, res.rank), rank=res.rank, world_size=P, what="seq_to_head output"
        )
        called = list(res.comm.collectives)
        assert len(called) == 1 and called[0] in ("all_to_all_single", "all_to_all"), (
            f"rank {res.rank}/{P}: seq_to_head called {called}; it takes one all-to-all "
            "(dist.all_to_all_single, or dist.all_to_all with lists)"
        )
    results = world.call("ulysses", "head_to_seq", args=[(heads(x, P, r),) for r in range(P)], forbid=NOT_A2A)
    for res in results:
        assert_equal(
            res.returned, seq(x, P, res.rank), rank=res.rank, world_size=P, what="head_to_seq output"
        )


@pytest.mark.part("12.ulysses_all_to_all")
@pytest.mark.concept("all_to_all_adjoint")
def test_all_to_all_backward_is_the_inverse(world: World) -> None:
    P = world.size
    x, g = ints((1, 2 * P, P, 2), seed=31), ints((1, 2 * P, P, 2), seed=32)
    # The adjoint identity on the student's own forward, summed over the ranks: <f(x), dy> = <x, f*(dy)>. The
    # layout of the forward is seq_head_transpose's to grade; here only that backward undoes it.
    for which, fwd, back in [("seq_to_head", seq, heads), ("head_to_seq", heads, seq)]:
        inputs = [{"which": which, "x": fwd(x, P, r), "dy": back(g, P, r)} for r in range(P)]
        forward_dot = backward_dot = 0.0
        for res in world.run("rank_programs:region", inputs=inputs, forbid=NOT_A2A):
            y, x_grad, given = res.value["y"], res.value["x_grad"], inputs[res.rank]
            assert isinstance(y, torch.Tensor) and y.shape == given["dy"].shape, f"{which} forward: {y!r:.80}"
            assert isinstance(x_grad, torch.Tensor) and x_grad.shape == given["x"].shape, (
                f"rank {res.rank}/{P}: the gradient through {which} has shape "
                f"{getattr(x_grad, 'shape', None)}, not its input's {tuple(given['x'].shape)}"
            )
            forward_dot += float((y.double() * given["dy"]).sum())
            backward_dot += float((given["x"] * x_grad.double()).sum())
            elems = x.numel() // P * (P - 1) // P  # of my tensor, all but the slice I keep
            assert res.value["bytes"] == [elems * F64, elems * F64], (
                f"rank {res.rank}/{P}: {which} all-to-alls sent {res.value['bytes']} bytes to other ranks; "
                f"forward and backward each send (P-1)/P of the local tensor, {elems * F64} bytes"
            )
        assert forward_dot == backward_dot, (
            f"{which}: <forward(x), dy> = {forward_dot}, <x, backward(dy)> = {backward_dot} over the ranks; "
            "the backward of an all-to-all is the all-to-all that undoes it"
        )


def run_ulysses(world: World, d: dict, causal: bool) -> list:
    P = world.size
    inputs = [{**{n: seq(d[n], P, r) for n in ("q", "k", "v", "dout")}, "causal": causal} for r in range(P)]
    return world.run("rank_programs:ulysses", inputs=inputs, forbid=NOT_A2A)


@pytest.mark.part("12.ulysses_attention")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.concept("ulysses_matches_full_attention")
def test_ulysses_forward_and_backward(world: World, causal: bool) -> None:
    P, d = world.size, problem(H=4, seed=40)
    leaves = {n: d[n].clone().requires_grad_() for n in ("q", "k", "v")}
    out, _ = attention(leaves["q"], leaves["k"], leaves["v"], causal)
    out.backward(d["dout"])
    for res in run_ulysses(world, d, causal):
        ok = dict(rank=res.rank, world_size=P, **TOL)
        assert_close(res.value["out"], seq(out.detach(), P, res.rank), what=f"out (causal={causal})", **ok)
        for name, got in zip(("q", "k", "v"), res.value["grads"], strict=True):
            assert_close(got, seq(leaves[name].grad, P, res.rank), what=f"d{name} (causal={causal})", **ok)


@pytest.mark.part("12.ulysses_attention")
@pytest.mark.concept("ulysses_traffic")
def test_ulysses_traffic(world: World) -> None:
    P, d = world.size, problem(H=4, seed=41)
    B, S, H, D = d["q"].shape
    local = B * (S // P) * H * D * F64  # one of q, k, v, out on one rank
    per_a2a = local * (P - 1) // P
    n_h = B * S * H * D * F64  # N*h in bytes: DeepSpeed's 4Nh/P per link counts the kept slice too
    for res in run_ulysses(world, d, True):
        v = res.value
        assert res.comm.sends == 0, f"rank {res.rank}/{P}: Ulysses moves data with all-to-alls only"
        for phase in ("fwd_bytes", "bwd_bytes"):
            got = sum(v[phase])
            assert got == 4 * per_a2a, (
                f"rank {res.rank}/{P}: the {phase[:3]} pass sent {got} bytes to other ranks in "
                f"{len(v[phase])} all-to-all(s); q, k, v and out make 4 x (P-1)/P x {local} = {4 * per_a2a} "
                f"(DeepSpeed's 4Nh/P = {4 * n_h // P} per link, less the slice each rank keeps)"
            )


@pytest.mark.part("12.ulysses_attention")
@pytest.mark.concept("heads_divisible")
def test_ulysses_needs_heads_divisible_by_p(world: World) -> None:
    P = world.size
    d = problem(S=4 * P, H=P + 1, seed=42)  # P + 1 heads never divide by P >= 2
    with pytest.raises(RankFailure) as failure:
        run_ulysses(world, d, False)
    message = str(failure.value)
    assert "ValueError" in message and "head" in message.lower(), (
        f"ulysses_attention with {P + 1} heads on {P} ranks must raise a ValueError that names the heads; "
        f"got {message}"
    )


# ---------------------------------------------------------------------------------------------------------
# unseen inputs: a world size that is not a power of two, and shapes drawn from seeds here in the judge


def drawn_shape(seed: int, P: int, heads_per_rank: bool = False) -> dict[str, int]:
    """(B, S, H, D) drawn here: S a multiple of 2P (zig-zag), H a multiple of P when Ulysses needs it."""
    rng = random.Random(seed)
    return {
        "B": rng.randint(1, 2),
        "S": 2 * P * rng.randint(1, 3),
        "H": P * rng.randint(1, 2) if heads_per_rank else rng.randint(1, 3),
        "D": rng.choice([2, 3, 5]),
    }


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("zigzag_layout")
def test_shard_positions_unseen_sizes(world: World) -> None:
    rng = random.Random(1201)
    for P in (5, 6, 7):
        S = 2 * P * rng.randint(1, 3)
        for r in range(P):
            got = call1(world, "ring_attention", "shard_positions", S, P, r, "zigzag")
            assert_equal(
                got, positions(S, P, r, "zigzag"), what=f"zigzag positions of rank {r}, S={S}, P={P}"
            )


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("causal_work_per_step")
def test_causal_work_unseen_sizes(world: World) -> None:
    for S, P in [(30, 5), (36, 6)]:
        for layout in ("contiguous", "zigzag"):
            got, want = call1(world, "ring_attention", "causal_work", S, P, layout), work(S, P, layout)
            assert got == want, f"causal_work({S}, {P}, {layout!r}) = {got}, expected {want}"


@pytest.mark.part("12.ring_forward")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("ring_merges_every_block")
def test_ring_forward_3_ranks_drawn_shapes(world: World) -> None:
    P = world.size
    for seed, (causal, layout) in enumerate([(True, "zigzag"), (False, "contiguous")]):
        d = problem(**drawn_shape(1210 + seed, P), seed=1210 + seed)
        S = d["q"].shape[1]
        out, lse = attention(d["q"], d["k"], d["v"], causal)
        for res in ring_forward(world, d, causal, layout):
            r, (got_out, got_lse) = res.rank, res.returned
            what = f"({layout}, causal={causal}, S={S}, shape {tuple(d['q'].shape)})"
            assert_close(got_out, shard(out, P, r, layout), rank=r, world_size=P, what=f"out {what}", **TOL)
            assert_close(got_lse, shard(lse, P, r, layout), rank=r, world_size=P, what=f"lse {what}", **TOL)


@pytest.mark.part("12.ring_backward")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("travelling_accumulator")
def test_ring_backward_3_ranks_drawn_shapes(world: World) -> None:
    P = world.size
    d = problem(**drawn_shape(1220, P), seed=1220)
    results, grads = ring_backward(world, d, True, "zigzag")
    for res in results:
        for name, got in zip(("dq", "dk", "dv"), res.returned, strict=True):
            want = shard(grads[name[1]], P, res.rank, "zigzag")
            assert_close(
                got, want, rank=res.rank, world_size=P, what=f"{name} (zigzag, causal, 3 ranks)", **TOL
            )


@pytest.mark.part("12.ulysses_attention")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("ulysses_matches_full_attention")
def test_ulysses_3_ranks_drawn_shapes(world: World) -> None:
    P = world.size
    d = problem(**drawn_shape(1230, P, heads_per_rank=True), seed=1230)
    leaves = {n: d[n].clone().requires_grad_() for n in ("q", "k", "v")}
    out, _ = attention(leaves["q"], leaves["k"], leaves["v"], True)
    out.backward(d["dout"])
    for res in run_ulysses(world, d, True):
        ok = dict(rank=res.rank, world_size=P, **TOL)
        assert_close(res.value["out"], seq(out.detach(), P, res.rank), what="out (3 ranks, causal)", **ok)
        for name, got in zip(("q", "k", "v"), res.value["grads"], strict=True):
            assert_close(got, seq(leaves[name].grad, P, res.rank), what=f"d{name} (3 ranks)", **ok)


@pytest.mark.part("12.ring_forward")
@pytest.mark.concept("ring_overlap")
def test_ring_sends_before_it_computes(world: World) -> None:
    # README: a rank starts passing the block on BEFORE computing on it, so the transfer hides behind the
    # compute. Non-causal, so every step computes: the i-th compute (i < P-1) must come after the sends of
    # step i have been posted (k and v, in one message or two).
    P, d = world.size, problem(seed=12)
    inputs = [{n: shard(d[n], P, r, "contiguous") for n in ("q", "k", "v")} for r in range(P)]
    for res in world.run("rank_programs:ring_overlap", inputs=inputs, forbid=COLLECTIVES):
        events = res.value["events"]
        computes = [i for i, e in enumerate(events) if e == "compute"]
        sends = events.count("send")
        if not computes:  # block math inlined: nothing to observe here, the traffic tests still apply
            continue
        per_step = sends // (P - 1)
        for step, at in enumerate(computes[: P - 1]):
            posted = events[:at].count("send")
            assert posted >= (step + 1) * per_step, (
                f"rank {res.rank}/{P}: computed on block {step} after posting {posted} sends; the block must "
                f"be on its way to r+1 ({(step + 1) * per_step} sends posted) before its compute starts"
            )
