"""Forbidding and counting cannot be bypassed: every road a rank has to the network is recorded or refused.

Two gloo ranks (plain subprocesses: ``comm.install`` patches torch for good, never in the pytest process)
install the harness's wrappers and take each road in turn, once with every collective forbidden and once
with nothing forbidden. The adversarial corpus (tests/adversarial, group "forbidding bypass") grades the
same roads end to end; this is the quick check of each road and of counting every message exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent

ROUTES = {
    # name: (what it is, what the forbidding run must say)
    "dist.all_reduce": "dist.all_reduce is not allowed here: build",
    "c10d.all_reduce": "dist.all_reduce is not allowed here: build",
    "nn.functional.all_reduce": "dist.all_reduce is not allowed here: build",
    "pg.allreduce": "(called as ProcessGroup.allreduce)",
    "group.WORLD.broadcast": "(called as ProcessGroup.broadcast)",
    "backend.allgather": "(called as Backend.allgather)",
    "pg._allgather_base": "(called as ProcessGroup._allgather_base)",
    "pg.alltoall_base": "(called as ProcessGroup.alltoall_base)",
    "pg.barrier": "(called as ProcessGroup.barrier)",
    "ops.c10d.broadcast_": "(called as torch.ops.c10d.broadcast_)",
    "functional.all_reduce": "(called as torch.ops._c10d_functional.all_reduce)",
    "closure original": "(called as ProcessGroup.allreduce)",
    "jit operator": "1 collective or point-to-point call(s) went around torch.distributed",
}
P2P = ("dist.send", "pg.send", "backend.send", "ops.c10d.send", "functional.isend", "batch_isend_irecv")

RANK_SCRIPT = r"""
import json, sys
import torch, torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
rank, store = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
from grader.harness import comm
comm.install()
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn.functional as dist_nn
pg = c10d._get_default_group()
backend = pg._get_backend(torch.device("cpu"))
t, peer = torch.ones(4), 1 - rank
closure = [c.cell_contents for c in dist.all_reduce.__closure__ if callable(c.cell_contents)][-1]
jit_broadcast = torch._C._jit_get_operation("c10d::broadcast_")[0]
routes = {
    "dist.all_reduce": lambda: dist.all_reduce(t),
    "c10d.all_reduce": lambda: c10d.all_reduce(t),
    "nn.functional.all_reduce": lambda: dist_nn.all_reduce(t),
    "pg.allreduce": lambda: pg.allreduce([t]).wait(),
    "group.WORLD.broadcast": lambda: dist.group.WORLD.broadcast(t, 0).wait(),
    "backend.allgather": lambda: backend.allgather([[torch.empty(4), torch.empty(4)]], [t]).wait(),
    "pg._allgather_base": lambda: pg._allgather_base(torch.empty(8), t).wait(),
    "pg.alltoall_base": lambda: pg.alltoall_base(torch.empty(4), t, [2, 2], [2, 2]).wait(),
    "pg.barrier": lambda: pg.barrier().wait(),
    "ops.c10d.broadcast_": lambda: torch.ops.c10d.broadcast_([t], pg.boxed(), 0, 0, False, -1)[1].wait(),
    "functional.all_reduce": lambda: funcol.wait_tensor(funcol.all_reduce(t, "sum", pg)),
    "closure original": lambda: closure(t),
    "jit operator": lambda: jit_broadcast([t], pg.boxed(), 0, 0, False, -1)[1].wait(),
    # point to point: rank 0 sends 4 floats to rank 1 (both ways for batch_isend_irecv)
    "dist.send": lambda: dist.send(t, 1) if rank == 0 else dist.recv(t, 0),
    "pg.send": lambda: (pg.send([t], 1, 0) if rank == 0 else pg.recv([t], 0, 0)).wait(),
    "backend.send": lambda: (backend.send([t], 1, 0) if rank == 0 else backend.recv([t], 0, 0)).wait(),
    "ops.c10d.send": lambda: (
        torch.ops.c10d.send([t], pg.boxed(), 1, 0)
        if rank == 0
        else torch.ops.c10d.recv_([t], pg.boxed(), 0, 0)
    ).wait(),
    "functional.isend": lambda: funcol.wait_tensor(
        torch.ops._c10d_functional.isend(t, 1, 0, pg.group_name)
        if rank == 0
        else torch.ops._c10d_functional.irecv(t, 0, 0, pg.group_name)
    ),
    "batch_isend_irecv": lambda: [
        w.wait()
        for w in dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, torch.empty(4), peer)]
        )
    ],
}
out = {}
for forbid in (True, False):
    for name, route in routes.items():
        comm.RECORDER.reset(frozenset(comm.COLLECTIVES if forbid else ()))
        try:
            route()
            comm.RECORDER.finish()
            outcome = comm.RECORDER.summary()
        except comm.ForbiddenCollective as exc:
            outcome = {"refused": str(exc)}
        out[f"{'forbid' if forbid else 'allow'} {name}"] = outcome
        comm.RECORDER.reset(frozenset())
        dist.barrier()  # both ranks leave the road together
print("RESULT " + json.dumps(out))
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def outcomes() -> list[dict]:
    """Per rank: road -> the summary the harness made of it, or {"refused": message}."""
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "store"
        ranks = [
            subprocess.Popen(
                [sys.executable, "-c", RANK_SCRIPT, str(rank), str(store)],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in range(2)
        ]
        results = []
        for proc in ranks:
            stdout, stderr = proc.communicate(timeout=180)
            assert proc.returncode == 0, stderr[-3000:]
            line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
            results.append(json.loads(line.removeprefix("RESULT ")))
        return results


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_forbidden_collective_is_refused_whatever_the_road(outcomes: list[dict], route: str) -> None:
    for rank, out in enumerate(outcomes):
        refused = out[f"forbid {route}"].get("refused", "")
        assert ROUTES[route] in refused, f"rank {rank}: {route} gave {out[f'forbid {route}']}"


@pytest.mark.parametrize("route", [r for r in ROUTES if r != "jit operator"])
def test_an_allowed_collective_is_recorded_once(outcomes: list[dict], route: str) -> None:
    for out in outcomes:
        summary = out[f"allow {route}"]
        assert len(summary["collectives"]) == 1 and not summary["events"], summary
        assert "unrecorded" not in summary, summary


def test_a_call_no_wrapper_saw_is_counted_when_allowed(outcomes: list[dict]) -> None:
    for out in outcomes:
        assert out["allow jit operator"] == {
            "events": [],
            "collectives": [],
            "collective_bytes": [],
            "unrecorded": 1,
        }


@pytest.mark.parametrize("route", P2P)
def test_every_message_is_counted_once_with_its_bytes_and_peer(outcomes: list[dict], route: str) -> None:
    for rank, out in enumerate(outcomes):
        for mode in ("forbid", "allow"):
            summary = out[f"{mode} {route}"]
            assert "refused" not in summary and "unrecorded" not in summary, summary
            sends = [e for e in summary["events"] if e["op"] in ("send", "isend")]
            recvs = [e for e in summary["events"] if e["op"] in ("recv", "irecv")]
            if route == "batch_isend_irecv":
                assert len(sends) == len(recvs) == 1, summary
            else:
                assert (len(sends), len(recvs)) == ((1, 0) if rank == 0 else (0, 1)), summary
            assert all(e["nbytes"] == 16 and e["peer"] == 1 - rank for e in summary["events"]), summary
