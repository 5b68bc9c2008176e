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

    Per group (named in the dumps' `pg_config`, members parsed from its "ranks" string): take each member's
    collective entries of the group (skip `is_p2p` entries: a send/recv repeats the last collective_seq_id).
    Start at the largest of the members' first recorded collective_seq_id (older entries may have left some
    ring buffers; a member with no entry of the group at all counts as having reached nothing) and walk up
    to the largest seq id any member reached. At each seq id k, in this order:
      "missing": members with no entry k (they never got there);
      "op":      members whose op (`op_name` of profiling_name) differs from the majority's;
      "sizes":   members whose [input_sizes, output_sizes] differ from the majority's;
      "dtypes":  members whose [input_dtypes, output_dtypes] differ from the majority's.
    The majority value is the one most members hold; on a tie, the one the lowest such rank holds.
    Return {pg_name: {"collective_seq_id": k, "op": majority op at k, "kind": ..., "ranks": sorted culprits,
    "found": {str(rank): that rank's value}}} ("found" is {} for "missing"). Groups without a problem are left
    out; {} when every collective matches.
    """
    findings: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}  # every group any rank knows (a rank sees only its own groups)
    for dump in dumps.values():
        groups.update(dump.get("pg_config", {}))
    for _, cfg in sorted(groups.items()):
        members = [int(r) for r in json.loads(cfg["ranks"])]
        # seq id -> entry, per member; a member without a dump has no entries
        per_rank: dict[int, dict[int, dict[str, Any]]] = {}
        for r in members:
            entries = dumps.get(str(r), {}).get("entries", [])
            per_rank[r] = {
                e["collective_seq_id"]: e
                for e in entries
                if not e.get("is_p2p") and e["process_group"][0] == cfg["name"]
            }
        reached = [max(seqs) for seqs in per_rank.values() if seqs]
        if not reached:
            continue
        start = max(min(seqs) if seqs else 0 for seqs in per_rank.values())
        start = max(start, 1)
        for k in range(start, max(reached) + 1):
            finding = _check_seq(k, members, per_rank)
            if finding is not None:
                findings[cfg["name"]] = finding
                break
    return findings


def _majority(values: dict[int, Any]) -> Any:
    """The value most ranks hold; on a tie, the lowest such rank's."""
    counts = Counter(json.dumps(v) for v in values.values())
    first_rank = {}
    for r in sorted(values):
        first_rank.setdefault(json.dumps(values[r]), r)
    best = min(counts, key=lambda key: (-counts[key], first_rank[key]))
    return json.loads(best)


def _check_seq(k: int, members: list[int], per_rank: dict[int, dict[int, dict[str, Any]]]) -> Any:
    here = {r: per_rank[r][k] for r in members if k in per_rank[r]}
    ops = {r: op_name(e["profiling_name"]) for r, e in here.items()}
    op = _majority(ops)
    missing = sorted(r for r in members if r not in here)
    if missing:
        return {"collective_seq_id": k, "op": op, "kind": "missing", "ranks": missing, "found": {}}
    views = {
        "op": ops,
        "sizes": {r: [e["input_sizes"], e["output_sizes"]] for r, e in here.items()},
        "dtypes": {r: [e["input_dtypes"], e["output_dtypes"]] for r, e in here.items()},
    }
    for kind, values in views.items():
        common = _majority(values)
        odd = sorted(r for r, val in values.items() if json.loads(json.dumps(val)) != common)
        if odd:
            found = {str(r): values[r] for r in odd}
            return {"collective_seq_id": k, "op": op, "kind": kind, "ranks": odd, "found": found}
    return None
