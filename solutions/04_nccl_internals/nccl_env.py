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
    ### BEGIN SOLUTION 04.env_parsing
    enabled: dict[str, list[bool] | None] = {f: None for f in FUNCS}
    for start, entry in _strtok(value, ";"):
        parts = [piece for _, piece in _strtok(entry, ":")]
        prefix, names = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        if prefix is None and start != 0:
            raise ValueError(f"all entries except the first must have a prefix: {value!r}")
        negate = names.startswith("^")  # '^': start from everything, switch the listed ones off
        if negate:
            names = names[1:]
        funcs = [f for f in FUNCS if prefix is None or f.lower() == prefix.lower()]
        if not funcs:
            raise ValueError(f"unrecognized prefix token {prefix!r} when parsing {value!r}")
        for func in funcs:
            state = [negate] * len(elems)  # this entry replaces whatever earlier entries said
            for _, name in _strtok(names, ","):
                matches = [i for i, e in enumerate(elems) if e.lower() == name.lower()]
                if not matches:
                    raise ValueError(f"unrecognized element token {name!r} when parsing {value!r}")
                state[matches[0]] = not negate
            enabled[func] = state
    return {
        f: None if s is None else [e for e, on in zip(elems, s, strict=True) if on]
        for f, s in enabled.items()
    }
    ### END SOLUTION
