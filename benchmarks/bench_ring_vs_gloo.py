"""Bus bandwidth of exercise 02's reference ring all-reduce against the built-in all_reduce.

    .venv/bin/python benchmarks/bench_ring_vs_gloo.py                  # gloo, 4 ranks on CPU, 1 KB .. 64 MB
    .venv/bin/python benchmarks/bench_ring_vs_gloo.py --backend nccl   # NCCL, one GPU per rank
    python3 benchmarks/bench_ring_vs_gloo.py --backend nccl --ranks 1  # scripts/gpu-check's smoke test

busbw = algbw * 2(p-1)/p, algbw = bytes / time, GB = 1e9 (nccl-tests' PERFORMANCE.md conventions).
Each size is timed as the fastest of `--repeats` runs of `--iters` back-to-back calls, after a barrier.
With NCCL every tensor is a CUDA tensor on the rank's GPU, the timing reduced across ranks included (NCCL
has no CPU tensors). On one rank busbw is 0 by definition (nothing crosses between ranks, as nccl-tests
prints it); the last line gives the largest size's figures either way, for scripts/gpu-check to record.
Run it by hand on a quiet machine: figures on a shared 2-core box vary by 30 % or more.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REFERENCE = Path(__file__).resolve().parent.parent / "solutions" / "02_ring_tree" / "allreduce.py"
SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB


def load_ring():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("reference_allreduce", REFERENCE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.ring_allreduce


def best_seconds(fn, tensor: torch.Tensor, iters: int, repeats: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeats):
        dist.barrier()
        if tensor.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn(tensor)
        if tensor.is_cuda:
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / iters
        elapsed = torch.tensor([seconds], dtype=torch.float64, device=tensor.device)  # NCCL: CUDA only
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # a collective is as slow as its slowest rank
        best = min(best, elapsed.item())
    return best


def rank_main(rank: int, world: int, backend: str, store: str, iters: int, repeats: int) -> None:
    torch.set_num_threads(1)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    ring = load_ring()
    factor = 2 * (world - 1) / world  # busbw over algbw for an all-reduce: 0 on one rank
    if rank == 0:
        print(f"{backend} on {device.type}, {world} ranks: bandwidth in GB/s (float32)")
        print(f"{'size':>10} {'ring busbw':>10} {'busbw':>8} {'algbw':>8} {'ring/built-in':>13}")
    for nbytes in SIZES:
        tensor = torch.ones(nbytes // 4, device=device)
        ring_s = best_seconds(ring, tensor, iters, repeats)
        builtin_s = best_seconds(dist.all_reduce, tensor, iters, repeats)
        algbw = nbytes / builtin_s / 1e9
        if rank == 0:
            ring_bus, bus = factor * nbytes / ring_s / 1e9, factor * algbw
            print(f"{nbytes:>10} {ring_bus:>10.3f} {bus:>8.3f} {algbw:>8.3f} {builtin_s / ring_s:>13.2f}")
    if rank == 0:
        last = f"{backend} all_reduce of {SIZES[-1]} B on {world} rank(s) ({device.type} tensors):"
        print(f"{last} busbw {bus:.3f} GB/s, algbw {algbw:.3f} GB/s")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    store = f"/tmp/bench-ring-{os.getpid()}"
    mp.spawn(rank_main, args=(args.ranks, args.backend, store, args.iters, args.repeats), nprocs=args.ranks)
    if os.path.exists(store):
        os.remove(store)


if __name__ == "__main__":
    main()
