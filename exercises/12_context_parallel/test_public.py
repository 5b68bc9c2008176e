"""What this catches: the first thing to get right in each part. Run: `grade exercise 12`.

Every expected value is computed here from the full, unsplit softmax attention in float64 and compared with
rtol 1e-10 / atol 1e-12: block by block, the sums run in another order, nothing more. The hidden suite adds
the zig-zag layout everywhere, rows that see no key, the work table, and the bytes every rank sends.
"""

from __future__ import annotations

import math

import pytest
import torch

from grader.harness import World, assert_close, assert_equal

TOL = dict(rtol=1e-10, atol=1e-12)
P2P_ONLY = [
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "broadcast",
    "all_to_all",
    "all_to_all_single",
]


def randn(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def attention(q, k, v, causal: bool):
    """Softmax attention over the whole sequence, (B, S, H, D); returns (out, lse (B, S, H))."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        S = q.shape[1]
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v), lse.transpose(1, 2)


def qkv(B: int = 1, S: int = 8, H: int = 2, D: int = 4) -> list[torch.Tensor]:
    return [randn((B, S, H, D), seed) for seed in range(4)]  # q, k, v, dout


@pytest.mark.part("12.online_softmax")
@pytest.mark.concept("lse_merge")
def test_merge_two_halves(world: World) -> None:
    q, k, v, _ = qkv()
    pos = torch.arange(8)
    [res] = world.call(
        "online_softmax",
        "block_attention",
        args=[(q, k[:, :4], v[:, :4], pos, pos[:4])],
        kwargs={"causal": False},
    )
    first = res.returned
    [res] = world.call(
        "online_softmax",
        "block_attention",
        args=[(q, k[:, 4:], v[:, 4:], pos, pos[4:])],
        kwargs={"causal": False},
    )
    second = res.returned
    [res] = world.call("online_softmax", "merge_attention", args=[(*first, *second)])
    out, lse = attention(q, k, v, causal=False)
    assert_close(res.returned[0], out, what="out merged from two halves of the keys", **TOL)
    assert_close(res.returned[1], lse, what="lse merged from two halves of the keys", **TOL)


@pytest.mark.part("12.load_balance")
@pytest.mark.concept("zigzag_layout")
def test_zigzag_positions(world: World) -> None:
    # S = 8, P = 2: chunks of 2; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    for rank, want in [(0, [0, 1, 6, 7]), (1, [2, 3, 4, 5])]:
        [res] = world.call("ring_attention", "shard_positions", args=[(8, 2, rank, "zigzag")])
        assert_equal(res.returned, torch.tensor(want), what=f"zigzag positions of rank {rank} (S=8, P=2)")


def contiguous(x: torch.Tensor, P: int, r: int) -> torch.Tensor:
    return x.chunk(P, dim=1)[r].contiguous()


@pytest.mark.part("12.ring_forward")
@pytest.mark.concept("ring_merges_every_block")
def test_ring_forward_causal(world: World) -> None:
    P = world.size
    q, k, v, _ = qkv()
    out, lse = attention(q, k, v, causal=True)
    args = [(contiguous(q, P, r), contiguous(k, P, r), contiguous(v, P, r)) for r in range(P)]
    kwargs = {"causal": True, "layout": "contiguous"}
    for res in world.call(
        "ring_attention", "ring_attention_forward", args=args, kwargs=kwargs, forbid=P2P_ONLY
    ):
        ok = dict(rank=res.rank, world_size=P, **TOL)
        assert_close(res.returned[0], contiguous(out, P, res.rank), what="out of my queries", **ok)
        assert_close(res.returned[1], contiguous(lse, P, res.rank), what="lse of my queries", **ok)


@pytest.mark.part("12.ring_backward")
@pytest.mark.concept("travelling_accumulator")
def test_ring_backward_causal(world: World) -> None:
    P = world.size
    q, k, v, dout = (t.requires_grad_() for t in qkv())
    out, lse = attention(q, k, v, causal=True)
    out.backward(dout)
    full = [dout, q, k, v, out, lse]
    args = [tuple(contiguous(t.detach(), P, r) for t in full) for r in range(P)]
    kwargs = {"causal": True, "layout": "contiguous"}
    for res in world.call(
        "ring_attention", "ring_attention_backward", args=args, kwargs=kwargs, forbid=P2P_ONLY
    ):
        for name, got, leaf in zip(("dq", "dk", "dv"), res.returned, (q, k, v), strict=True):
            want = contiguous(leaf.grad, P, res.rank)
            assert_close(got, want, rank=res.rank, world_size=P, what=f"{name} of my shard", **TOL)


@pytest.mark.part("12.ulysses_all_to_all")
@pytest.mark.concept("seq_head_transpose")
def test_seq_to_head(world: World) -> None:
    P = world.size
    x = torch.arange(2 * P * P * 3, dtype=torch.float64).view(1, 2 * P, P, 3)  # (B, S, H, D), exact values
    args = [(contiguous(x, P, r),) for r in range(P)]
    for res in world.call(
        "ulysses", "seq_to_head", args=args, forbid=["all_gather", "all_gather_into_tensor"]
    ):
        want = x.chunk(P, dim=2)[res.rank]  # every token, my head
        assert_equal(res.returned, want, rank=res.rank, world_size=P, what="(B, S, H/P, D) after seq_to_head")


@pytest.mark.part("12.ulysses_attention")
@pytest.mark.concept("ulysses_matches_full_attention")
def test_ulysses_forward(world: World) -> None:
    P = world.size
    q, k, v, dout = qkv(H=4)
    out, _ = attention(q, k, v, causal=True)
    inputs = [
        {
            "q": contiguous(q, P, r),
            "k": contiguous(k, P, r),
            "v": contiguous(v, P, r),
            "dout": contiguous(dout, P, r),
            "causal": True,
        }
        for r in range(P)
    ]
    for res in world.run(
        "rank_programs:ulysses", inputs=inputs, forbid=["all_gather", "all_gather_into_tensor"]
    ):
        want = contiguous(out, P, res.rank)
        assert_close(
            res.value["out"], want, rank=res.rank, world_size=P, what="Ulysses output, my tokens", **TOL
        )
