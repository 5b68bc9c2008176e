"""Alternative host copies: host wall clock around synchronized copies, pinning with Tensor.pin_memory()."""

from __future__ import annotations

import time

import torch

GB = 10**9
DIRECTIONS = ("h2d", "d2h")
KINDS = ("pageable", "pinned")


def host_buffer(nbytes: int, *, pinned: bool) -> torch.Tensor:
    buf = torch.zeros(nbytes, dtype=torch.uint8)
    if pinned:
        buf = buf.pin_memory()  # a page-locked copy of the pageable one
    return buf


def time_copy(dst: torch.Tensor, src: torch.Tensor, *, repeats: int = 5) -> float:
    gpu = dst.device if dst.device.type == "cuda" else src.device
    for _ in range(2):  # warm-up
        dst.copy_(src)
    torch.cuda.synchronize(gpu)
    laps = []
    for _ in range(repeats):
        begin = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(gpu)  # the copy is done only when the GPU says so
        laps.append(time.perf_counter() - begin)
    laps.sort()
    return laps[len(laps) // 2]


def copy_bandwidth(
    nbytes: int, device: torch.device, *, repeats: int = 5
) -> dict[str, dict[str, dict[str, float]]]:
    gpu_buf = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    hosts = {}
    for kind in KINDS:
        hosts[kind] = host_buffer(nbytes, pinned=kind == "pinned")
        hosts[kind].random_(0, 256)  # every page written
    result = {}
    for direction in DIRECTIONS:
        result[direction] = {}
        for kind, host in hosts.items():
            if direction == "h2d":
                s = time_copy(gpu_buf, host, repeats=repeats)
            else:
                s = time_copy(host, gpu_buf, repeats=repeats)
            result[direction][kind] = {"seconds": s, "gbps": nbytes / s / GB}
    return result


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
    return dict(
        pageable_slower="c",  # DMA needs page-locked memory: the driver stages through a pinned buffer
        d2h_pageable="a",  # staged the other way round, and the call returns only when it is done
        non_blocking_pageable="d",  # the thread makes the staging copy before the call returns
        pin_then_copy="b",  # pin_memory() is that copy, made by hand
        pin_everything="c",  # the OS cannot page it; too much slows the system, allocations fail early
    )
