"""Read PyTorch flight-recorder dumps from every rank and name the first collective the ranks disagree on.

Each rank keeps a ring buffer of its last TORCH_FR_BUFFER_SIZE collectives and point-to-point ops; on a hang
(TORCH_NCCL_DUMP_ON_TIMEOUT=1) every rank writes it out. A collective is the same call on every member of its
process group exactly when the entries with the same `collective_seq_id` agree. torch's own analyzer does the
same: torch/distributed/flight_recorder/components/builder.py, `build_collectives` ("Not all ranks joining
collective", COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, COLLECTIVE_DTYPE_MISMATCH in types.py).
Dump schema 2.10: see coursekit/flight_recorder.py. Check: `grade exercise 08`.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def op_name(profiling_name: str) -> str:
    """'nccl:all_reduce' -> 'all_reduce'; 'nccl:send 0->1' -> 'send' (any backend prefix: nccl, gloo, ...)."""
    return profiling_name.split(":", 1)[1].split(" ")[0]


def find_mismatches(dumps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each process group's FIRST bad collective. `dumps`: str(rank) -> that rank's dump (a JSON object).

    A group's members are the ranks its `pg_config` entry names. A group's collectives (not its sends and
    receives) are numbered by `collective_seq_id`, the same way on every member. At collective k a member
    disagrees when it has no entry for k (it never got there; a member with no collective entry of the group
    at all got to none), or when its entry differs from the majority's in op (`op_name` of its
    profiling_name), in sizes ([input_sizes, output_sizes]) or in dtypes ([input_dtypes, output_dtypes]).
    The majority value is the one most members hold; on a tie, the one the lowest such rank holds. Seq ids
    that some member's ring buffer no longer holds prove nothing: report nothing there.
    Return {pg_name: {"collective_seq_id": k, "op": majority op at k, "kind": ..., "ranks": sorted culprits,
    "found": {str(rank): that rank's value}}} for the lowest k with a disagreement, where kind is the first
    of "missing", "op", "sizes", "dtypes" that applies at k ("found" is {} for "missing"). Groups without a
    problem are left out; {} when every collective matches.
    """
    ### BEGIN SOLUTION 08.flight_recorder
    groups: dict[str, list[int]] = {}
    for dump in dumps.values():
        for name, config in dump["pg_config"].items():
            groups[name] = json.loads(config["ranks"])  # "[0, 1, 2]": the ranks come as a string
    findings = {}
    for name, members in groups.items():
        # seq id -> entry, per member; p2p entries carry the previous collective's seq id, so skip them
        seen = {r: {} for r in members}
        for r in members:
            for e in dumps.get(str(r), {}).get("entries", []):
                if e["process_group"][0] == name and not e["is_p2p"]:
                    seen[r][e["collective_seq_id"]] = e
        reached = [min(s) for s in seen.values() if s]
        if not reached:
            continue
        start, top = max(reached), max(max(s) for s in seen.values() if s)  # the window every buffer covers
        for k in range(start, top + 1):
            finding = _check(k, {r: seen[r].get(k) for r in members})
            if finding:
                findings[name] = finding
                break
    return findings


def _check(k: int, at_k: dict[int, dict[str, Any] | None]) -> dict[str, Any] | None:
    present = {r: e for r, e in sorted(at_k.items()) if e is not None}
    op = _majority({r: op_name(e["profiling_name"]) for r, e in present.items()})[0]
    missing = sorted(r for r, e in at_k.items() if e is None)
    if missing:
        return {"collective_seq_id": k, "op": op, "kind": "missing", "ranks": missing, "found": {}}
    for kind, value in (
        ("op", lambda e: op_name(e["profiling_name"])),
        ("sizes", lambda e: [e["input_sizes"], e["output_sizes"]]),
        ("dtypes", lambda e: [e["input_dtypes"], e["output_dtypes"]]),
    ):
        values = {r: value(e) for r, e in present.items()}
        _, culprits = _majority(values)
        if culprits:
            found = {str(r): values[r] for r in culprits}
            return {"collective_seq_id": k, "op": op, "kind": kind, "ranks": culprits, "found": found}
    return None


def _majority(values: dict[int, Any]) -> tuple[Any, list[int]]:
    """(the most common value, lowest rank first on a tie; the ranks that hold another value)."""
    counts = Counter(json.dumps(v) for v in values.values())
    best = max(counts.values())
    winner = next(v for v in values.values() if counts[json.dumps(v)] == best)  # values are in rank order
    return winner, sorted(r for r, v in values.items() if v != winner)
    ### END SOLUTION
