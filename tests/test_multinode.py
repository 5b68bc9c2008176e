"""Multi-node parts: ranks on rank factories of their own (``grader.harness.agent``), reached over TCP.

Outside Slurm, ``DISTGPU_NODES=here,here`` starts both agents on this machine: the same path as on a
cluster (TCP lines, TCPStore rendezvous, files staged to each agent, logs and stacks read back) minus
``srun``. tests/test_slurm.py runs it through ``srun`` on a two-node partition.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_grading_e2e import grade

from grader.core.course import Course
from grader.core.results import Status
from grader.harness.remote import NODES_VAR, Switchboard
from grader.runners.local import LocalRunner

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

TWO_NODES = ("world_sizes: [2, 3], timeout: 8}", "world_sizes: [2, 4], timeout: 4, nodes: 2}")


@pytest.fixture
def two_node_course(edited_course) -> Course:  # type: ignore[no-untyped-def]
    return edited_course(*TWO_NODES)


@pytest.fixture
def two_nodes_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(NODES_VAR, "here,here")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    yield
    assert agents_running() == [], "an agent outlived its grading run"


def agents_running() -> list[str]:
    found = subprocess.run(["pgrep", "-af", "grader.harness.agent"], capture_output=True, text=True)
    return found.stdout.splitlines()


def test_reference_gets_full_marks_with_ranks_split_over_two_agents(
    two_nodes_here: None, two_node_course: Course
) -> None:
    runner = LocalRunner()
    result = grade(runner, two_node_course, None)
    assert result.full_marks, [t.output for t in result.tests if t.status is not Status.PASSED]
    assert f"multi-node parts ran their ranks on {socket.gethostname()}" in result.notes
    assert runner.last_pools is not None
    assert sorted(runner.last_pools.starts)[0][0] == 1  # the 1-rank part stayed here, in the local factory


def test_a_deadlock_across_nodes_names_every_stuck_rank_and_its_line(
    two_nodes_here: None, two_node_course: Course
) -> None:
    result = grade(LocalRunner(), two_node_course, "hang")
    four = next(t for t in result.tests if t.name == "test_sum[4ranks]")
    assert four.status is Status.TIMEOUT
    assert "ranks 0, 1, 2, 3 (of 4) blocked in dist.send at toy.py:9 in allreduce" in four.output


def test_a_rank_that_exits_on_another_node_is_reported_with_its_output(
    two_nodes_here: None, two_node_course: Course
) -> None:
    result = grade(LocalRunner(), two_node_course, "crash")
    crashed = [t for t in result.tests if t.status is Status.CRASHED]
    assert crashed and all("exited with code 3" in t.output for t in crashed)
    assert next(t for t in result.tests if t.part == "01.square").status is Status.PASSED


def test_without_a_node_list_a_multi_node_part_runs_here(
    monkeypatch: pytest.MonkeyPatch, two_node_course: Course
) -> None:
    monkeypatch.delenv(NODES_VAR, raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    result = grade(LocalRunner(), two_node_course, None)
    assert result.full_marks and not any("multi-node" in note for note in result.notes)


def test_the_switchboard_drops_strangers_and_wrong_tokens() -> None:
    board = Switchboard("127.0.0.1")
    board.expect("rank-0")
    host, port = board.address.rsplit(":", 1)
    try:
        for hello in ({"token": "guess", "ticket": "rank-0"}, {"token": board.token, "ticket": "rank-9"}):
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                frame = json.dumps(hello).encode()
                sock.sendall(struct.pack("!i", len(frame)) + frame)
                assert sock.recv(1) == b"", f"{hello} was let in"
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            frame = json.dumps({"token": board.token, "ticket": "rank-0"}).encode()
            sock.sendall(struct.pack("!i", len(frame)) + frame)
            line = board.take("rank-0", 5)
            sock.sendall(struct.pack("!i", 2) + b"hi")
            assert line.recv_bytes() == b"hi"
            line.close()
    finally:
        board.close()


def test_staged_paths_stay_inside_the_agent_scratch(tmp_path: Path) -> None:
    from grader.harness.agent import NodeFactory

    factory = NodeFactory.__new__(NodeFactory)
    factory.scratch = tmp_path / "scratch"
    factory.scratch.mkdir()
    (tmp_path / "secret").write_text("hidden tests")
    assert factory._read(factory.scratch / ".." / "secret", 100) == ""
    with pytest.raises(ValueError, match="outside"):
        factory._stage({"../escape.py": "cHJpbnQoKQ=="})
    assert not (tmp_path / "escape.py").exists()
