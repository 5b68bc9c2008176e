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
    """Fraction (a float in (0, 1]) of the bytes `proto` puts on the wire that are payload, computed from the
    line layouts above (device.h), not typed in. ValueError for a name not in PROTOS."""
    ### BEGIN SOLUTION 04.protocols
    _check(proto)
    if proto == "LL":
        return LL_DATA_BYTES / LL_LINE_BYTES  # 8 / 16: every data word travels with its flag
    if proto == "LL128":
        return NCCL_LL128_DATAELEMS / NCCL_LL128_LINEELEMS  # 15 / 16 = 120 / 128: one flag word per line
    return 1.0  # Simple: flags travel separately, after a memory fence
    ### END SOLUTION


def default_buffer_bytes(proto: str) -> int:
    """Bytes (an int) of the FIFO buffer NCCL allocates per connection for `proto` by default (src/init.cc,
    where each protocol's default is built from the constants above). ValueError for an unknown protocol."""
    ### BEGIN SOLUTION 04.protocols
    _check(proto)
    if proto == "LL":
        return NCCL_LL_LINES_PER_THREAD * NCCL_LL_MAX_NTHREADS * NCCL_STEPS * LL_LINE_BYTES  # 524288
    if proto == "LL128":
        return NCCL_LL128_ELEMS_PER_THREAD * NCCL_LL128_MAX_NTHREADS * NCCL_STEPS * 8  # 4915200
    return DEFAULT_BUFFSIZE  # 4194304
    ### END SOLUTION


def step_bytes(proto: str, buff_bytes: int | None = None) -> int:
    """Payload bytes (an int) in one of the NCCL_STEPS slots of a `buff_bytes` buffer (None: the protocol's
    default buffer), as calcBytePerStep in src/device/primitives.h computes it, in C integer arithmetic
    (`//`, in the order the C code divides and multiplies). ValueError for an unknown protocol."""
    ### BEGIN SOLUTION 04.protocols
    _check(proto)
    buff = default_buffer_bytes(proto) if buff_bytes is None else buff_bytes
    per_step = buff // NCCL_STEPS
    if proto == "LL":
        return per_step // 2  # 32768 by default
    if proto == "LL128":
        return per_step * NCCL_LL128_DATAELEMS // NCCL_LL128_LINEELEMS  # 576000 by default
    return per_step  # 524288 by default
    ### END SOLUTION


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
    """The pieces [offset, nelem] (in elements of `elem_size` bytes) that each channel's ring moves in an
    all-reduce of `count` elements, as NCCL 2.19's runRing (src/device/all_reduce.h) cuts the buffer with
    `proto`, `nthreads` threads per block (Simple's extra sync warp not counted) and a `buff_bytes` FIFO
    (None: the default). Returns result[c] = the pieces of channel c, in the order the kernel moves them
    (loop by loop, chunk index k = 0..n_ranks-1 ascending), leaving out pieces with no elements; every
    piece's [offset, offset + nelem) lies inside [0, count). README.md, "Channels and chunks", describes
    the loop and the two layouts.
    """
    ### BEGIN SOLUTION 04.chunks
    _check(proto)
    chunk = step_bytes(proto, buff_bytes) // elem_size * (ALLREDUCE_CHUNKSTEPS if proto == "Simple" else 1)
    loop = n_channels * n_ranks * chunk  # elements one pass of every channel's ring covers
    if proto == "LL":
        min_chunk = nthreads * (8 // elem_size)  # one 8-byte payload word per thread per line
    elif proto == "LL128":
        min_chunk = nthreads * (_ll128_grain_bytes() // elem_size) // 2  # "/2 makes performance smoother"
    pieces: list[list[list[int]]] = [[] for _ in range(n_channels)]
    for grid in range(0, count, loop):
        left = count - grid
        if proto == "Simple":
            real = min(chunk, -(-left // (n_channels * n_ranks)))
            grain = nthreads * 8 // elem_size
            real = -(-real // grain) * grain  # roundUp: whole 8-byte words for every thread
        else:
            real = min(chunk, -(-left // (n_channels * n_ranks * min_chunk)) * min_chunk)
        for c in range(n_channels):
            for k in range(n_ranks):
                if proto == "Simple":
                    offset = grid + (c * n_ranks + k) * real  # channel c owns n_ranks consecutive chunks
                else:
                    offset = grid + (k * n_channels + c) * real  # chunk k of every channel, side by side
                nelem = min(real, count - offset)
                if nelem > 0:
                    pieces[c].append([offset, nelem])
    return pieces
    ### END SOLUTION


def _ll128_grain_bytes() -> int:
    """ProtoLL128::calcBytePerGrain: payload bytes one thread moves per grain (60)."""
    return NCCL_LL128_SHMEM_ELEMS_PER_THREAD * NCCL_LL128_DATAELEMS * 8 // NCCL_LL128_LINEELEMS
