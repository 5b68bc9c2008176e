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
    result: dict[str, list[str] | None] = dict.fromkeys(FUNCS)
    by_name = {e.lower(): e for e in elems}
    for n, (pos, entry) in enumerate(_strtok(value, ";")):
        tokens = _strtok(entry, ":")
        if len(tokens) > 2 or not tokens:
            raise ValueError(f"cannot parse {entry!r}")
        if len(tokens) == 2:
            fname = next((f for f in FUNCS if f.lower() == tokens[0][1].lower()), None)
            if fname is None:
                raise ValueError(f"unknown function {tokens[0][1]!r}")
            targets, spec = [fname], tokens[1][1]
        else:
            if n > 0 or pos > 0:
                raise ValueError("only the first entry may leave out the function")
            targets, spec = list(FUNCS), tokens[0][1]
        negate = spec[:1] == "^"
        names = [t for _, t in _strtok(spec[1:] if negate else spec, ",")]
        for name in names:
            if name.lower() not in by_name:
                raise ValueError(f"unknown name {name!r}")
        chosen = {by_name[name.lower()] for name in names}
        for f in targets:
            result[f] = [e for e in elems if (e in chosen) != negate]
    return result
