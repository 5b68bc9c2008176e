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
    """What `value` (an NCCL_ALGO or NCCL_PROTO string) enables, per function in FUNCS.

    `elems` is ALGOS or PROTOS. Returns {function: the enabled names, in `elems` order}, with None for a
    function no entry mentions (it keeps NCCL's defaults). As in NCCL's parseList:
    - pieces are cut like C's strtok: on ';' into entries, each entry on ':' into [function, list], each list
      on ',' into names; empty pieces are skipped, and nothing is trimmed (" ring" is not a name);
    - an entry without a function applies to all five, and is allowed only as the very first thing in
      `value`; an entry sets its functions to exactly what it lists: with '^', everything but those names;
    - ValueError for an unknown name, an unknown function, or a function-less entry that is not first.
    """
    out: dict[str, list[str] | None] = {f: None for f in FUNCS}
    lower_elems = {e.lower(): e for e in elems}
    lower_funcs = {f.lower(): f for f in FUNCS}
    for index, (start, entry) in enumerate(_strtok(value, ";")):
        parts = [p for _, p in _strtok(entry, ":")]
        if len(parts) == 1:
            if start != 0 or index != 0:
                raise ValueError(f"an entry without a function must come first: {entry!r}")
            funcs, names = list(FUNCS), parts[0]
        elif len(parts) == 2:
            if parts[0].lower() not in lower_funcs:
                raise ValueError(f"unknown function {parts[0]!r}")
            funcs, names = [lower_funcs[parts[0].lower()]], parts[1]
        else:
            raise ValueError(f"bad entry {entry!r}")
        invert = names.startswith("^")
        listed = set()
        for _, name in _strtok(names[1:] if invert else names, ","):
            if name.lower() not in lower_elems:
                raise ValueError(f"unknown name {name!r}")
            listed.add(lower_elems[name.lower()])
        enabled = [e for e in elems if (e in listed) != invert]
        for f in funcs:
            out[f] = enabled
    return out
