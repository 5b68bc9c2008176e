"""Run one rank's share of a pipeline schedule for real: activations forward, gradients back, by send/recv.

    rank r-1 --- activation x_i (b, H) --->  rank r: F(i) = chunk(x_i)  --- activation --->  rank r+1
    rank r-1 <--- grad of x_i (b, H) -------  rank r: B(i) = backward    <--- grad of y_i ---  rank r+1

Chunk c of rank r is virtual stage s = c*p + r; stage s's neighbours are stages s-1 and s+1, which live on
ranks (r-1) % p and (r+1) % p of the group. The last stage (S-1 = v*p - 1, on group rank p-1) turns its
output into the loss.
The gradients must be those of the batch's loss, the mean over microbatches (Megatron-LM schedules.py,
forward_step_calc_loss).
Check: `grade exercise 13`. Shapes: b rows per microbatch, H hidden width (every stage maps (b, H) -> (b, H)).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn


def tag_for(kind: str, microbatch: int, sender_stage: int, num_microbatches: int) -> int:
    """The tag of one message: kind "F" (an activation) or "B" (a gradient), sent by `sender_stage`.

    Why tags: a rank may receive several messages from the same neighbour (activations for several chunks,
    and with p = 2 gradients too), and a valid schedule need not ask for them in the order they were sent.
    Gloo matches a recv to a message with the same source AND tag, so one tag per message makes the order
    irrelevant. (Megatron-LM's schedules are built so both sides agree on the order, because NCCL ignores
    tags; the executor here must run any valid schedule.)
    """
    return (2 * sender_stage + (kind == "B")) * num_microbatches + microbatch


def run_pipeline(
    actions: list[tuple[str, int, int]],
    chunks: list[nn.Module],
    microbatches: list[torch.Tensor],
    loss_fn: Callable[[torch.Tensor, int], torch.Tensor],
    group=None,
) -> list[torch.Tensor]:
    """Execute this rank's `actions` (op, microbatch, chunk) in order, over send/recv; return the outputs.

    chunks[c] is virtual stage c*p + r. microbatches[i] (b, H) is microbatch i's input; only stage 0 reads it,
    and its shape and dtype are those of every activation and gradient message. loss_fn(y, i) is the loss of
    microbatch i from the last stage's output y. Afterwards each chunk's parameters hold in .grad the gradient
    of mean_i loss_fn(y_i, i). Messages: an F on stage s > 0 receives its input from stage s-1; an F on
    s < S-1 sends its output to stage s+1; a B on s < S-1 receives d loss / d output from s+1; a B on s > 0
    sends d loss / d input to s-1. Every message carries tag_for(kind, microbatch, sending stage, m).
    Returns the last stage's outputs y_0..y_{m-1} (detached) on the rank that holds it, [] on the others.
    `group` is None (the whole world) or a pipeline group of a larger world, whose members need not be
    adjacent nor include rank 0: p and r are the group's size and this rank's place in it, and stages live
    on group ranks, while send/recv address global ranks (dist.get_global_rank(group, j)).
    """
    ### BEGIN SOLUTION 13.executor
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    m, last = len(microbatches), len(chunks) * p - 1

    def peer(stage: int) -> int:  # the global rank of the group member holding `stage`: what send/recv take
        return stage % p if group is None else dist.get_global_rank(group, stage % p)

    like = microbatches[0]  # (b, H): the shape and dtype of every message
    stash = {}  # (microbatch, chunk) -> (input, output or loss): kept from F until its B frees it
    outputs: list[torch.Tensor | None] = [None] * m
    pending = []  # (work, tensor) of every isend: wait at the very end, keep the tensor alive until then

    def send(tensor: torch.Tensor, stage: int, kind: str, i: int, sender: int) -> None:
        # isend, not send: gloo's send blocks until the peer posts its recv, and in 1F1B's steady state rank
        # r sends an activation to r+1 while r+1 sends a gradient to r. Blocking sends would deadlock.
        pending.append(
            (dist.isend(tensor, peer(stage), group=group, tag=tag_for(kind, i, sender, m)), tensor)
        )

    def recv(stage: int, kind: str, i: int, sender: int) -> torch.Tensor:
        buf = torch.empty_like(like)  # (b, H)
        dist.recv(buf, peer(stage), group=group, tag=tag_for(kind, i, sender, m))
        return buf

    for op, i, c in actions:
        s = c * p + rank  # my virtual stage for this chunk
        if op == "F":
            # Stage 0 reads the data; later stages get the activation of stage s-1. requires_grad makes
            # autograd compute d loss / d input, which B sends back to stage s-1.
            x = microbatches[i] if s == 0 else recv(s - 1, "F", i, s - 1).requires_grad_()
            y = chunks[c](x)  # (b, H)
            if s == last:
                outputs[i] = y.detach()
                y = loss_fn(y, i) / m  # scalar: mean over microbatches, so gradients match the full batch
            else:
                send(y.detach(), s + 1, "F", i, s)
            stash[i, c] = (x, y)
        else:
            x, y = stash.pop((i, c))  # popping frees the activation: this is what 1F1B saves memory on
            if s == last:
                y.backward()  # y is the scaled loss
            else:
                y.backward(recv(s + 1, "B", i, s + 1))  # d loss / d y from stage s+1
            if s > 0:
                send(x.grad, s - 1, "B", i, s)  # (b, H) d loss / d x for stage s-1
    for work, _ in pending:
        work.wait()
    return [y for y in outputs if y is not None] if last % p == rank else []
    ### END SOLUTION
