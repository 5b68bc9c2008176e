"""NCCL's three protocols, what their buffers hold, and how a ring all-reduce cuts a buffer into chunks.

A protocol is how a GPU tells its peer "your data has arrived". LL (low latency) stores 8-byte words that
are 4 bytes of data and a 4-byte flag, so the receiver polls the data itself: half the bytes are payload.
LL128 spends one 8-byte flag per 128-byte line: 120/128. Simple writes bulk data, then a fence and a flag:
all the bandwidth, the most latency. Check: `grade exercise 04`.
Sources (NVIDIA/nccl): src/include/device.h (line layouts and limits), src/init.cc (default buffers),
src/device/primitives.h (payload per step), src/device/all_reduce.h (runRing, NCCL 2.19), src/enqueue.cc.
Units: bytes unless a name says elements ("count", "nelem": elements of `elem_size` bytes).
"""

from __future__ import annotations

PROTOS = ("LL", "LL128", "Simple")  # ncclProtoStr in src/init.cc; NCCL_PROTO_LL = 0, LL128 = 1, SIMPLE = 2

# src/include/device.h
NCCL_STEPS = 8  # slots in each connection's FIFO: a sender may run up to 8 steps ahead of its receiver
WARP_SIZE = 32
LL_LINE_BYTES = 16  # union ncclLLFifoLine { uint32_t data1; uint32_t flag1; uint32_t data2; uint32_t flag2; }
LL_DATA_BYTES = 8  # data1 + data2; each 8-byte store is (4 B data, 4 B flag), atomic on IB/RDMA
NCCL_LL_LINES_PER_THREAD = 8
NCCL_LL_MAX_NTHREADS = 512
NCCL_LL128_LINESIZE = 128  # bytes
NCCL_LL128_LINEELEMS = NCCL_LL128_LINESIZE // 8  # 16 uint64 words per line
NCCL_LL128_DATAELEMS = NCCL_LL128_LINEELEMS - 1  # 15 carry data; the 16th carries the flag
NCCL_LL128_MAX_NTHREADS = 640
NCCL_LL128_ELEMS_PER_THREAD = 120  # uint64 words of buffer per thread per step
NCCL_LL128_SHMEM_ELEMS_PER_THREAD = 8
NCCL_SIMPLE_MAX_NTHREADS = 512
# src/init.cc: DEFAULT_BUFFSIZE, Simple's buffer per connection (NCCL_BUFFSIZE overrides it)
DEFAULT_BUFFSIZE = 1 << 22
# src/include/collectives.h: a Simple ring all-reduce chunk spans 4 of the 8 FIFO steps
ALLREDUCE_CHUNKSTEPS = NCCL_STEPS // 2


def _check(proto: str) -> None:
    if proto not in PROTOS:
        raise ValueError(f"unknown protocol {proto!r}; NCCL's are {PROTOS}")


# ------------------------------------------------------------------------------------------------------------
# 04.protocols: what a protocol puts on the wire


def proto_efficiency(proto: str) -> float:
    """Fraction of the bytes on the wire that are payload: LL 0.5, LL128 120/128, Simple 1.0.
    Compute it from the line layouts above, not from a table. ValueError for an unknown protocol."""
    _check(proto)
    if proto == "LL":
        return LL_DATA_BYTES / LL_LINE_BYTES
    if proto == "LL128":
        return NCCL_LL128_DATAELEMS * 8 / NCCL_LL128_LINESIZE
    return 1.0


def default_buffer_bytes(proto: str) -> int:
    """Bytes of the FIFO buffer NCCL allocates per connection and protocol by default (src/init.cc):
    LL: lines per thread x max threads x steps x line size; LL128: words per thread x max threads x steps x
    8 bytes; Simple: DEFAULT_BUFFSIZE. ValueError for an unknown protocol."""
    _check(proto)
    sizes = {
        "LL": NCCL_LL_LINES_PER_THREAD * NCCL_LL_MAX_NTHREADS * NCCL_STEPS * LL_LINE_BYTES,
        "LL128": NCCL_LL128_ELEMS_PER_THREAD * NCCL_LL128_MAX_NTHREADS * NCCL_STEPS * 8,
        "Simple": DEFAULT_BUFFSIZE,
    }
    return sizes[proto]


def step_bytes(proto: str, buff_bytes: int | None = None) -> int:
    """Payload bytes in one of the NCCL_STEPS slots of a `buff_bytes` buffer (default: the protocol's default
    buffer), as primitives.h's calcBytePerStep computes it, in C integer arithmetic: Simple buff/8;
    LL buff/8/2 (half of every line is flags); LL128 (buff/8)*15/16."""
    _check(proto)
    buff = default_buffer_bytes(proto) if buff_bytes is None else buff_bytes
    per_step = buff // NCCL_STEPS
    if proto == "LL":
        return per_step // 2
    if proto == "LL128":
        return per_step * NCCL_LL128_DATAELEMS // NCCL_LL128_LINEELEMS
    return per_step


# ------------------------------------------------------------------------------------------------------------
# 04.chunks: which elements each channel moves (ring all-reduce, src/device/all_reduce.h runRing)


def ring_allreduce_chunks(
    count: int,
    elem_size: int,
    n_ranks: int,
    n_channels: int,
    proto: str,
    nthreads: int = 512,
    buff_bytes: int | None = None,
) -> list[list[list[int]]]:
    """The pieces [offset, nelem] (in elements) that each channel's ring moves, NCCL 2.19's runRing.

    chunk = step_bytes(proto, buff_bytes) // elem_size elements, times ALLREDUCE_CHUNKSTEPS for Simple.
    The buffer is walked in loops of n_channels * n_ranks * chunk elements from gridOffset = 0. In each loop
    the chunk actually used (realChunk) shrinks to fit what is left:
      Simple: min(chunk, ceil(left / (n_channels*n_ranks))), rounded UP to a multiple of nthreads*8//elem_size
              (every thread moves whole 8-byte words; nthreads excludes Simple's extra sync warp);
      LL:     min(chunk, ceil(left / (n_channels*n_ranks*m)) * m) with m = nthreads * (8 // elem_size);
      LL128:  the same with m = nthreads * (60 // elem_size) // 2 (60 = bytes per thread-grain).
    Piece k (k = 0..n_ranks-1) of channel c starts at
      Simple: gridOffset + (c * n_ranks + k) * realChunk   (each channel gets one contiguous slab)
      LL/LL128: gridOffset + (k * n_channels + c) * realChunk   (channels interleave chunk by chunk)
    and holds min(realChunk, count - offset) elements. Return result[c] = the pieces of channel c, loop by
    loop, k ascending, leaving out pieces with no elements.
    """
    _check(proto)
    chunk = step_bytes(proto, buff_bytes) // elem_size
    if proto == "Simple":
        chunk *= ALLREDUCE_CHUNKSTEPS
    per_loop = n_channels * n_ranks
    out: list[list[list[int]]] = [[] for _ in range(n_channels)]
    offset = 0
    while offset < count:
        left = count - offset
        if proto == "Simple":
            grain = nthreads * 8 // elem_size
            real = min(chunk, -(-left // per_loop))
            real = -(-real // grain) * grain
        else:
            m = nthreads * (8 // elem_size) if proto == "LL" else nthreads * (60 // elem_size) // 2
            real = min(chunk, -(-left // (per_loop * m)) * m)
        for c in range(n_channels):
            for k in range(n_ranks):
                slot = c * n_ranks + k if proto == "Simple" else k * n_channels + c
                start = offset + slot * real
                nelem = min(real, count - start)
                if nelem > 0:
                    out[c].append([start, nelem])
        offset += per_loop * chunk
    return out


def _ll128_grain_bytes() -> int:
    """ProtoLL128::calcBytePerGrain: payload bytes one thread moves per grain (8 words x 15/16 x 8 B = 60)."""
    return NCCL_LL128_SHMEM_ELEMS_PER_THREAD * NCCL_LL128_DATAELEMS * 8 // NCCL_LL128_LINEELEMS
