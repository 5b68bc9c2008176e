"""Scripted hangs as flight-recorder dumps, each with the finding an analyzer must report (exercise 08).

`SCENARIOS` are stories written by hand and shipped as coursekit/data/fr_<name>.json (`load(name)`;
rewrite them with `python -m coursekit.fr_scenarios`). `random_scenario(seed)` makes as many more as you
like, each with one injected fault. The dumps come from `coursekit.flight_recorder.Recorder`, in torch 2.13's
JSON schema. A finding, per process group: {"collective_seq_id", "op", "kind": missing | op | sizes | dtypes,
"ranks", "found"}; exercises/08_debugging_hangs/analyzer.py documents it. Torch's own fr_trace agrees with
every expected finding: tests/test_coursekit_flight_recorder.py.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursekit.flight_recorder import Group, Recorder, dumps_of, world_group

DATA = Path(__file__).with_name("data")


@dataclass
class Scenario:
    name: str
    story: str
    dumps: dict[str, dict[str, Any]]  # str(rank) -> dump, as JSON object keys are strings
    expected: dict[str, dict[str, Any]]  # pg name -> finding; {} when every collective matches

    def to_json(self) -> str:
        return json.dumps({"story": self.story, "dumps": self.dumps, "expected": self.expected}, indent=1)


def _training_steps(recs: list[Recorder], steps: int, numel: int = 4096) -> None:
    for _ in range(steps):
        for r in recs:
            r.collective("all_reduce", [numel])


def skipped_allreduce() -> Scenario:
    """4 ranks; rank 2 never reaches the 4th all-reduce (stuck in its data loader); the others wait in it."""
    recs = [Recorder(r, [world_group(4)]) for r in range(4)]
    recs_all = recs
    for r in recs_all:
        r.collective("broadcast", [1024])  # parameters from rank 0 at start-up
    _training_steps(recs, 2)
    for r in recs:
        if r.rank != 2:
            r.collective("all_reduce", [4096], state="started")
            r.collective("all_reduce", [4096], state="scheduled")  # NCCL calls are async: the CPU ran ahead
    story = "Rank 2 hangs in its data loader; ranks 0, 1, 3 block in the next gradient all-reduce."
    expected = {
        "0": {"collective_seq_id": 4, "op": "all_reduce", "kind": "missing", "ranks": [2], "found": {}}
    }
    return Scenario("skipped_allreduce", story, dumps_of(recs), expected)


def broadcast_vs_allreduce() -> Scenario:
    """2 ranks; at the 3rd collective rank 1 broadcasts where rank 0 all-reduces (a rank-dependent branch)."""
    recs = [Recorder(r, [world_group(2)]) for r in range(2)]
    _training_steps(recs, 2, numel=512)
    recs[0].collective("all_reduce", [512], state="started")
    recs[1].collective("broadcast", [512], state="started")
    story = (
        "`if rank == 0: all_reduce(x) else: broadcast(x, 0)`: the two ranks disagree on the 3rd collective."
    )
    expected = {
        "0": {
            "collective_seq_id": 3,
            "op": "all_reduce",
            "kind": "op",
            "ranks": [1],
            "found": {"1": "broadcast"},
        }
    }
    return Scenario("broadcast_vs_allreduce", story, dumps_of(recs), expected)


def uneven_all_gather() -> Scenario:
    """4 ranks with pipeline send/recv in between; rank 3 all-gathers 250 elements, the others 256."""
    recs = [Recorder(r, [world_group(4)]) for r in range(4)]
    _training_steps(recs, 1, numel=256)
    for r in recs:  # activations go 0 -> 1 -> 2 -> 3: p2p entries that keep collective_seq_id at 1
        if r.rank > 0:
            r.recv(r.rank - 1, [8, 256])
        if r.rank < 3:
            r.send(r.rank + 1, [8, 256])
    for r in recs:
        r.collective("all_gather", [250 if r.rank == 3 else 256], state="started")
    story = "Rank 3's shard of the dataset is shorter: it all-gathers 250 elements, the others 256."
    found = {"3": [[[250]], [[4, 250]]]}
    expected = {
        "0": {"collective_seq_id": 2, "op": "all_gather", "kind": "sizes", "ranks": [3], "found": found}
    }
    return Scenario("uneven_all_gather", story, dumps_of(recs), expected)


def tp_group_dtype() -> Scenario:
    """4 ranks, two TP groups; in group "2" (ranks 2, 3) rank 3 all-reduces bf16 where rank 2 uses fp32."""
    world = world_group(4)
    tp = [Group("1", "tp", (0, 1)), Group("2", "tp", (2, 3))]
    recs = [Recorder(r, [world, *tp]) for r in range(4)]
    for step in range(3):
        for r in recs:
            mine = "1" if r.rank < 2 else "2"
            last = step == 2 and r.rank >= 2
            dtype = "BFloat16" if last and r.rank == 3 else "Float"
            r.collective(
                "all_reduce", [2, 1024], group=mine, dtype=dtype, state="started" if last else "completed"
            )
            if not last:
                r.collective("all_reduce", [4096])  # data-parallel gradients on the default group
    story = (
        "Tensor-parallel group 2 hangs: rank 3 cast its activations to bf16 before the all-reduce, so ranks 2"
        " and 3 never reach the next data-parallel all-reduce, where ranks 0 and 1 wait for them."
    )
    found = {"3": [["BFloat16"], ["BFloat16"]]}
    expected = {  # the symptom in the default group, and its cause in group 2
        "0": {"collective_seq_id": 3, "op": "all_reduce", "kind": "missing", "ranks": [2, 3], "found": {}},
        "2": {"collective_seq_id": 3, "op": "all_reduce", "kind": "dtypes", "ranks": [3], "found": found},
    }
    return Scenario("tp_group_dtype", story, dumps_of(recs), expected)


def ring_buffer_wrapped() -> Scenario:
    """3 ranks, 16-entry buffers, 40 steps: each dump starts somewhere else; rank 1 never joins step 41."""
    recs = [Recorder(r, [world_group(3)], buffer_size=16) for r in range(3)]
    for step in range(40):
        for r in recs:
            r.collective("all_reduce", [1024])
            if r.rank == 0 and step % 4 == 0:  # rank 0 also logs metrics to rank 2: its buffer wraps faster
                r.send(2, [4])
            if r.rank == 2 and step % 4 == 0:
                r.recv(0, [4])
    for r in recs:
        if r.rank != 1:
            r.collective("all_reduce", [1024], state="started")
    story = "Long job, TORCH_FR_BUFFER_SIZE=16: only the last 16 entries survive, not the same ones per rank."
    expected = {
        "0": {"collective_seq_id": 41, "op": "all_reduce", "kind": "missing", "ranks": [1], "found": {}}
    }
    return Scenario("ring_buffer_wrapped", story, dumps_of(recs), expected)


def healthy() -> Scenario:
    """Everything matches: the hang is not a collective mismatch (look at the stacks, the network, ...)."""
    recs = [Recorder(r, [world_group(2)]) for r in range(2)]
    _training_steps(recs, 3)
    for r in recs:
        r.collective("all_reduce", [4096], state="started")
    story = (
        "Both ranks sit in the same all-reduce: the flight recorder finds no mismatch; suspect the fabric."
    )
    return Scenario("healthy", story, dumps_of(recs), {})


SCENARIOS = {f.__name__: f for f in (skipped_allreduce, broadcast_vs_allreduce, uneven_all_gather,
                                     tp_group_dtype, ring_buffer_wrapped, healthy)}  # fmt: skip


def load(name: str) -> Scenario:
    """A shipped scenario from coursekit/data/fr_<name>.json."""
    data = json.loads((DATA / f"fr_{name}.json").read_text())
    return Scenario(name, data["story"], data["dumps"], data["expected"])


def write_data(folder: Path = DATA) -> list[Path]:
    """(Re)write coursekit/data/fr_<name>.json for every scenario: `python -m coursekit.fr_scenarios`."""
    folder.mkdir(exist_ok=True)
    paths = []
    for name, make in SCENARIOS.items():
        path = folder / f"fr_{name}.json"
        path.write_text(make().to_json() + "\n")
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------------
# random scenarios: one injected fault, whose finding is known by construction

_OPS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
_DTYPES = ["Float", "BFloat16", "Half", "Long"]


def random_scenario(seed: int) -> Scenario:
    """2-8 ranks, 3-30 collectives with send/recv noise, sometimes a 12-entry buffer, and one fault at
    collective k (or none): a rank that never gets there, or a minority of ranks with another op, size or
    dtype. The ranks that reach k may enqueue up to 2 more collectives (NCCL calls return before they run)."""
    rng = random.Random(seed)
    p, n = rng.choice([2, 3, 4, 5, 8]), rng.randint(3, 30)
    plan = [(rng.choice(_OPS), [rng.choice([64, 256, 1000])], rng.choice(_DTYPES[:2])) for _ in range(n)]
    kind = rng.choice(["missing", "op", "sizes", "dtypes", "none"])
    k = (
        n if kind == "none" else rng.randint(1, n)
    )  # collective_seq_id of the fault, or of the last collective
    # a strict minority of the ranks, or exactly half of them without the lowest rank: the majority is clear
    culprits = sorted(rng.sample(range(1, p), rng.randint(1, max(1, p // 2))))
    buffer_size = rng.choice([2000, 2000, 12])
    recs = [Recorder(r, [world_group(p)], buffer_size=buffer_size) for r in range(p)]
    last = {r: min(n, k + rng.randint(0, 2)) for r in range(p)}
    if kind == "missing":
        last.update({r: k - 1 for r in culprits})
    found: dict[str, Any] = {}
    for seq, (op, shape, dtype) in enumerate(plan, start=1):
        for r in recs:
            if seq > last[r.rank]:
                continue
            bad = seq == k and r.rank in culprits and kind in ("op", "sizes", "dtypes")
            my_op = other(op, _OPS, seed + r.rank) if bad and kind == "op" else op
            my_shape = [shape[0] - 8] if bad and kind == "sizes" else shape
            my_dtype = other(dtype, _DTYPES, seed + 2 * r.rank) if bad and kind == "dtypes" else dtype
            state = "completed" if seq < k else ("started" if seq == k else "scheduled")
            r.collective(my_op, my_shape, dtype=my_dtype, state=state)
            if bad:
                e = r.entries[-1]
                found[str(r.rank)] = {
                    "op": my_op,
                    "sizes": [e["input_sizes"], e["output_sizes"]],
                    "dtypes": [e["input_dtypes"], e["output_dtypes"]],
                }[kind]
            if rng.random() < 0.3:  # point-to-point noise between collectives
                if r.rank % 2 == 0:
                    r.send((r.rank + 1) % p, [16])
                else:
                    r.recv((r.rank - 1) % p, [16])
    if kind == "none":
        return Scenario(f"random_{seed}", "no fault", dumps_of(recs), {})
    finding = {"collective_seq_id": k, "op": plan[k - 1][0], "kind": kind, "ranks": culprits, "found": found}
    return Scenario(f"random_{seed}", f"{kind} at collective {k}", dumps_of(recs), {"0": finding})


def other(value: str, choices: list[str], seed: int) -> str:
    """A choice different from `value`, deterministic in `seed`."""
    others = [c for c in choices if c != value]
    return others[seed % len(others)]


if __name__ == "__main__":
    for written in write_data():
        print(written)
