"""NCCL_ALGO and NCCL_PROTO, parsed the way NCCL 2.24+ parses them (parseList in src/graph/tuning.cc).

Grammar: entries separated by ';'; an entry is "[function:]list"; a list is comma-separated names, or '^'
then names to mean "all but these". Only the first entry may omit the function, and it then applies to every
function; later entries override single functions. Names and functions match case-insensitively.
  NCCL_ALGO="ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"
  NCCL_PROTO="^LL128;allreduce:LL128"      everything but LL128, except AllReduce: only LL128
Check: `grade exercise 04`.
"""

from __future__ import annotations

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # ncclFuncStr, src/init.cc
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")  # ncclAlgoStr
PROTOS = ("LL", "LL128", "Simple")  # ncclProtoStr


def _strtok(text: str, sep: str) -> list[tuple[int, str]]:
    """C's strtok: the non-empty pieces of `text` between `sep`s, each with its start index."""
    pieces, start = [], 0
    for piece in text.split(sep):
        if piece:
            pieces.append((start, piece))
        start += len(piece) + 1
    return pieces


# ------------------------------------------------------------------------------------------------------------
# 04.env_parsing


def parse_nccl_list(value: str, elems: list[str] | tuple[str, ...]) -> dict[str, list[str] | None]:
    """What `value` (an NCCL_ALGO or NCCL_PROTO string) enables, per function in FUNCS, as NCCL's parseList
    (src/graph/tuning.cc) reads it with the grammar above.

    `elems` is ALGOS or PROTOS. Returns {function: the enabled names, in `elems` order and spelling}, with
    None for a function no entry mentions (it keeps NCCL's defaults). ValueError for every string parseList
    rejects: an unknown name or function, or a function-less entry anywhere but at the very start.
    """
    raise NotImplementedError("TODO(04.env_parsing): not implemented yet")
