"""Copies between host memory and a GPU: pageable against pinned (page-locked) host memory.

How fast a copy between host memory and GPU memory runs depends on the kind of host memory; README.md,
"Host copies: pageable against pinned", says why, with its sources.
Units: seconds for one copy; bandwidth in GB/s with GB = 1e9 bytes; "h2d" is host to device, "d2h" device
to host. Check: `grade exercise 05 --device cuda` on a machine with an NVIDIA GPU for 05.host_copies
(on a CPU it is reported blocked); `grade exercise 05` checks 05.staging anywhere.
"""

from __future__ import annotations

import statistics

import torch

GB = 10**9
DIRECTIONS = ("h2d", "d2h")
KINDS = ("pageable", "pinned")


# ------------------------------------------------------------------------------------------------------------
# 05.host_copies (needs a GPU): measure it


def host_buffer(nbytes: int, *, pinned: bool) -> torch.Tensor:
    """A 1-D torch.uint8 tensor of ``nbytes`` bytes in host (CPU) memory: page-locked when ``pinned``,
    ordinary pageable memory otherwise. Its contents are unspecified."""
    raise NotImplementedError("TODO(05.host_copies): not implemented yet")


def time_copy(dst: torch.Tensor, src: torch.Tensor, *, repeats: int = 5) -> float:
    """Seconds that one ``dst.copy_(src)`` takes: the median of ``repeats`` timed copies, made after an
    untimed warm-up copy.

    One of ``dst`` and ``src`` is on a CUDA device, the other in host memory (pinned or pageable); both have
    the same dtype and shape. A copy's time runs from when the copy starts to when its last byte has
    arrived, not to when a call that only queued it returned. When this function returns, ``dst`` holds
    ``src``'s bytes and no copy is still in flight.
    """
    raise NotImplementedError("TODO(05.host_copies): not implemented yet")


def copy_bandwidth(
    nbytes: int, device: torch.device, *, repeats: int = 5
) -> dict[str, dict[str, dict[str, float]]]:
    """How fast ``nbytes`` bytes move between host memory and ``device``, for each direction and each kind of
    host memory:

        {"h2d": {"pageable": {"seconds": s, "gbps": g}, "pinned": {...}}, "d2h": {...}}

    Each figure copies between a host buffer made by ``host_buffer`` and a buffer on ``device`` and is timed
    by ``time_copy`` with ``repeats``: "seconds" for one copy, "gbps" its bandwidth in GB/s (GB = 1e9 bytes).
    """
    raise NotImplementedError("TODO(05.host_copies): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 05.staging (any machine): explain it. Answer each question in QUESTIONS with a choice letter.

QUESTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "pageable_slower": (
        "A 256 MiB copy from an ordinary (pageable) CPU tensor to the GPU is several times slower than the "
        "same copy from a pinned one. Why?",
        {"a": "pageable pages may be swapped out, so every copy reads them back from disk",
         "b": "the PCIe link trains to a lower generation for copies from pageable memory",
         "c": "the GPU's copy engine can only DMA from page-locked memory, so the driver first copies the "
              "bytes with the CPU into a pinned staging buffer and DMAs them from there: one more trip "
              "through host memory, at the speed of a CPU memcpy",
         "d": "the GPU must walk the CPU's page tables for every 4 KiB page before it can read it"},
    ),
    "d2h_pageable": (
        "And a copy from the GPU into pageable host memory?",
        {"a": "it is staged too, the other way round: the GPU DMAs into a pinned buffer, the CPU copies from "
              "there into the pageable pages, and the call returns only once the whole copy has completed",
         "b": "the GPU writes straight into the pageable pages: only host-to-device copies are staged",
         "c": "it raises an error unless the destination is pinned",
         "d": "it is staged through a second buffer in GPU memory instead of host memory"},
    ),
    "non_blocking_pageable": (
        "x is a 256 MiB tensor in pageable host memory. What does x.to('cuda', non_blocking=True) do?",
        {"a": "it returns at once and the copy engine reads x while the Python thread runs ahead, as it "
              "would from pinned memory",
         "b": "it raises an error: an asynchronous copy needs pinned memory",
         "c": "it locks x's pages in place, without copying them, and then copies asynchronously",
         "d": "it returns only after the driver has copied all of x into pinned staging memory: the calling "
              "thread makes that copy itself, so it cannot run ahead of it"},
    ),
    "pin_then_copy": (
        "A pageable tensor x is needed on the GPU once. Is x.pin_memory().to('cuda', non_blocking=True) "
        "faster than x.to('cuda')?",
        {"a": "yes: a copy from pinned memory is always the faster one",
         "b": "no: pin_memory() itself copies x, with the CPU, into newly allocated page-locked memory, the "
              "copy the driver's staging would have made; pinning pays when a pinned buffer is copied many "
              "times or is filled off the critical path (a DataLoader's pin-memory thread)",
         "c": "yes: pin_memory() locks x's own pages without copying them",
         "d": "it fails: non_blocking=True needs a CUDA stream other than the default one"},
    ),
    "pin_everything": (
        "Why not allocate all host memory pinned?",
        {"a": "the CPU cannot read pinned memory, only the GPU can",
         "b": "pinned memory is limited to 4 GiB per process",
         "c": "page-locked memory cannot be paged out, so the operating system loses that much memory to "
              "page with: pinning too much slows the whole system down, and pinned allocations start failing "
              "long before pageable ones do",
         "d": "pinned memory bypasses the CPU caches, so the CPU reads it slowly"},
    ),
}  # fmt: skip


def staging_answers() -> dict[str, str]:
    """Your answer to each question in QUESTIONS, a choice letter: {"pageable_slower": "a", ...}."""
    raise NotImplementedError("TODO(05.staging): not implemented yet")
