"""The judge's side of multi-node worlds: rank factories on other nodes (``agent``), reached over TCP.

A part with ``nodes: N`` runs its ranks on N nodes when the grading run knows N nodes (``allocation_nodes``:
the Slurm allocation, or ``DISTGPU_NODES``); otherwise every rank runs here, as for any other part.
On each node an agent is started (``srun --overlap`` inside a Slurm job) and connects back to this
process's ``Switchboard``; ranks connect back there too, one connection each. ``NodeRankFactory`` gives
the pool the same handle as the local ``RankFactory``: fork, signal, read a rank's log, close.
Rendezvous goes through a ``TCPStore`` this process hosts, one key prefix per world.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from grader import SOURCE_ROOT
from grader.harness import agent
from grader.harness.factory import (
    ANSWER_TIMEOUT_S,
    PRELOAD,
    START_TIMEOUT_S,
    FactoryError,
    RankProcess,
    answer_or_raise,
)
from grader.harness.worker import WorkerSpec

NODES_VAR = "DISTGPU_NODES"
"""Comma-separated node names for multi-node parts, instead of the Slurm allocation's (e.g. two names for
one machine, to try a multi-node part there; outside Slurm, agents then start as local processes)."""

JUDGE_HOST_VAR = "DISTGPU_JUDGE_HOST"
"""The address agents and ranks on other nodes use to reach the judge (default: this host name's)."""

HELLO_TIMEOUT_S = 10.0
MAX_HELLO_BYTES = 4096
MAX_STAGED_BYTES = 64 << 20


def allocation_nodes() -> list[str] | None:
    """The nodes multi-node parts may use: ``DISTGPU_NODES``, else the Slurm job's, else None."""
    if os.environ.get(NODES_VAR):
        return [n.strip() for n in os.environ[NODES_VAR].split(",") if n.strip()]
    if os.environ.get("SLURM_JOB_ID") and os.environ.get("SLURM_JOB_NODELIST"):
        shown = subprocess.run(
            ["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
            capture_output=True,
            text=True,
            check=True,
        )
        return shown.stdout.split()
    return None


def launch_prefix(node: str) -> list[str]:
    """How to run a command on ``node``: a one-task job step inside a Slurm job, else right here."""
    if not os.environ.get("SLURM_JOB_ID"):
        return []
    return [
        "srun",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--quiet",
        "--kill-on-bad-exit=1",
    ]


def judge_host(nodes: list[str]) -> str:
    """The address the other nodes reach this one at: ``DISTGPU_JUDGE_HOST``, else the address this host
    sends from towards the first node that resolves to a non-loopback address, else its host name's.
    (A host name alone can mislead: Debian maps it to 127.0.1.1 in /etc/hosts.)"""
    if os.environ.get(JUDGE_HOST_VAR):
        return os.environ[JUDGE_HOST_VAR]
    for node in nodes:
        try:
            address = socket.gethostbyname(node)
        except OSError:
            continue
        if not address.startswith("127."):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect((address, 9))  # UDP: picks the route, sends nothing
                return str(probe.getsockname()[0])
    return socket.gethostbyname(socket.gethostname())


class Switchboard:
    """A TCP listener for one grading run. A connection counts only if its first frame carries the run's
    token and a ticket the judge is expecting; anything else is closed."""

    def __init__(self, host: str) -> None:
        """``host``: the address to announce (``judge_host``); the listener takes every interface."""
        self.token = secrets.token_hex(16)
        self.host = host
        self._listener = socket.create_server(("", 0))
        self.address = f"{host}:{self._listener.getsockname()[1]}"
        self._arrived: dict[str, Connection | None] = {}
        self._changed = threading.Condition()
        threading.Thread(target=self._accept, daemon=True, name="distgpu-switchboard").start()

    def expect(self, ticket: str) -> None:
        with self._changed:
            self._arrived[ticket] = None

    def take(
        self, ticket: str, timeout_s: float, still_coming: Callable[[], object] = lambda: True
    ) -> Connection:
        """The connection that showed ``ticket``; ``FactoryError`` after ``timeout_s`` or once
        ``still_coming()`` says it never will."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._arrived.get(ticket) is None:
                if time.monotonic() >= deadline or not still_coming():
                    self._arrived.pop(ticket, None)
                    raise FactoryError(f"nothing connected back with {ticket} within {timeout_s:.0f} s")
                self._changed.wait(0.2)
            connection = self._arrived.pop(ticket)
            assert connection is not None
            return connection

    def close(self) -> None:
        self._listener.close()
        with self._changed:
            for connection in self._arrived.values():
                if connection is not None:
                    connection.close()
            self._arrived.clear()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._admit, args=(sock,), daemon=True).start()

    def _admit(self, sock: socket.socket) -> None:
        try:
            sock.settimeout(HELLO_TIMEOUT_S)
            hello = json.loads(_read_frame(sock))
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, ValueError):
            sock.close()
            return
        with self._changed:
            welcome = secrets.compare_digest(str(hello.get("token")), self.token)
            ticket = str(hello.get("ticket"))
            if not welcome or ticket not in self._arrived or self._arrived[ticket] is not None:
                sock.close()
                return
            self._arrived[ticket] = Connection(sock.detach())
            self._changed.notify_all()


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack("!i", _read_exactly(sock, 4))
    if not 0 < size <= MAX_HELLO_BYTES:
        raise ValueError("not a hello")
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("closed during hello")
        data += chunk
    return data


class NodeRankFactory:
    """A rank factory on ``node``, driven like ``factory.RankFactory``. Not thread-safe.

    A reader thread takes everything the agent says: answers go to the caller, rank exits to the rank's
    status pipe (as the local factory writes them), so the pool waits on ranks here as on local ones.
    """

    def __init__(
        self,
        node: str,
        switchboard: Switchboard,
        *,
        log_path: Path,
        staged: dict[str, Path],
        store_address: str,
        sandboxed: bool,
    ) -> None:
        """``staged``: folders to copy to the node, by the name they get in its scratch (``impl``...)."""
        self.node, self.switchboard, self.log_path = node, switchboard, log_path
        self.staged, self.store_address, self.sandboxed = staged, store_address, sandboxed
        self._process: subprocess.Popen[bytes] | None = None
        self._line: Connection | None = None
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._status: dict[int, int] = {}
        self._early_exits: dict[int, int] = {}
        self._lock = threading.Lock()
        self._hung_up = False
        self.scratch = Path()
        self.where = node
        """The node the agent says it runs on (Slurm's name for it), once started."""

    @property
    def alive(self) -> bool:
        running = self._process is not None and self._process.poll() is None
        return running and self._line is not None and not self._hung_up

    def start(self) -> None:
        ticket = f"agent-{self.node}-{secrets.token_hex(4)}"
        self.switchboard.expect(ticket)
        env = os.environ | {
            agent.ADDRESS_VAR: self.switchboard.address,
            agent.TOKEN_VAR: self.switchboard.token,
            agent.TICKET_VAR: ticket,
            agent.SANDBOX_VAR: "bwrap" if self.sandboxed else "none",
        }
        argv = [*launch_prefix(self.node), sys.executable, "-m", "grader.harness.agent"]
        with open(self.log_path, "ab") as log:
            self._process = process = subprocess.Popen(
                argv,
                env=env,
                cwd=SOURCE_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self._line = self.switchboard.take(ticket, START_TIMEOUT_S, lambda: process.poll() is None)
        config = {"sys_path": [p for p in sys.path if os.path.isabs(p)], "preload": [*PRELOAD]}
        self._line.send_bytes(json.dumps(config).encode())
        threading.Thread(target=self._listen, args=(self._line,), daemon=True).start()
        self.where = str(self._wait_answer(START_TIMEOUT_S, "start").get("node", self.node))
        self.scratch = Path(self._request({"op": "stage", "files": self._files()})["scratch"])

    def place(self, spec: WorkerSpec) -> WorkerSpec:
        """``spec`` as the rank runs it on the node: the node's copies and its own log folder."""
        run_dir = self.scratch / spec.log_path.parent.name
        return replace(
            spec,
            impl_dir=self.scratch / "impl",
            programs_dir=self.scratch / "programs",
            log_path=run_dir / spec.log_path.name,
            stack_path=run_dir / spec.stack_path.name,
            flight_path=run_dir / spec.flight_path.name if spec.flight_path else None,
            store_address=self.store_address,
        )

    def fork(self, spec: WorkerSpec) -> tuple[RankProcess, Connection, Connection]:
        ticket = f"rank-{spec.rank}-{secrets.token_hex(8)}"
        self.switchboard.expect(ticket)
        pid = self._request({"op": "fork", "spec": spec.to_fields(), "ticket": ticket})["pid"]
        status_r, status_w = os.pipe()
        with self._lock:
            if pid in self._early_exits:
                _report(status_w, self._early_exits.pop(pid))
            elif self._line is None:
                os.close(status_w)
            else:
                self._status[pid] = status_w
        line = self.switchboard.take(ticket, ANSWER_TIMEOUT_S, lambda: self.alive)
        return RankProcess(pid, status_r), line, line

    def signal(self, ranks: list[RankProcess], signum: int, *, group: bool) -> None:
        pids = [r.pid for r in ranks if r.exitcode is None]
        if pids:
            self._request({"op": "signal", "pids": pids, "signal": int(signum), "group": group})

    def read(self, path: Path, limit: int = 100_000) -> str:
        """The end of a file the node's ranks wrote (their log, a stack dump); '' if unreadable."""
        try:
            text = self._request({"op": "read", "path": str(path), "limit": limit})["text"]
            return text if isinstance(text, str) else ""
        except FactoryError:
            return ""

    def activity(self, ranks: list[RankProcess]) -> None:
        """Nothing: across nodes a rank may sleep while its bytes cross the network, so a world that looks
        still is not known to be deadlocked; a multi-node hang waits out its time limit."""
        return None

    def read_bytes(self, path: Path, limit: int) -> bytes:
        """The first ``limit`` bytes of a file the node's ranks wrote (a flight file); b'' if unreadable."""
        try:
            data = self._request({"op": "read_bytes", "path": str(path), "limit": limit})["data"]
            return base64.b64decode(data) if isinstance(data, str) else b""
        except (FactoryError, ValueError):
            return b""

    def close(self) -> None:
        """Hang up (the agent kills its ranks and exits), then make sure the launcher is gone."""
        if self._line is not None:
            with socket.socket(fileno=os.dup(self._line.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread; the agent reads EOF
            self._line.close()
            self._line = None
        if self._process is not None:
            try:
                self._process.wait(5.0)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGTERM)  # srun passes it to the step
                try:
                    self._process.wait(5.0)
                except subprocess.TimeoutExpired:
                    os.killpg(self._process.pid, signal.SIGKILL)
                    self._process.wait()
            self._process = None

    def _files(self) -> dict[str, str]:
        files: dict[str, str] = {}
        for name, folder in self.staged.items():
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    files[f"{name}/{path.relative_to(folder)}"] = base64.b64encode(path.read_bytes()).decode()
        if sum(map(len, files.values())) > MAX_STAGED_BYTES:
            raise FactoryError(f"more than {MAX_STAGED_BYTES >> 20} MiB to copy to {self.node}")
        return files

    # Any: the factory's JSON answer, read by the field its request asks for
    def _request(self, message: Mapping[str, object]) -> dict[str, Any]:
        if self._line is None or not self.alive:
            raise FactoryError(f"the rank factory on {self.node} is not running")
        try:
            self._line.send_bytes(json.dumps(message).encode())
        except OSError as exc:
            raise FactoryError(f"the rank factory on {self.node} is gone ({exc})") from None
        return answer_or_raise(self._wait_answer(ANSWER_TIMEOUT_S, str(message["op"])))

    # Any: the factory's JSON answer, read by the field its request asks for
    def _wait_answer(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            answer = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            raise FactoryError(f"the rank factory on {self.node} did not answer {what}") from None
        if answer is None:
            raise FactoryError(f"the rank factory on {self.node} ended during {what}; see {self.log_path}")
        return answer

    def _listen(self, line: Connection) -> None:
        """The reader thread: answers to the queue, exits to status pipes; on hang-up, every rank ends."""
        try:
            while True:
                message = json.loads(line.recv_bytes())
                if "exit" in message:
                    self._exited(message["exit"], message["code"])
                else:
                    self._answers.put(message)
        except (EOFError, OSError, ValueError):
            pass
        with self._lock:
            self._hung_up = True
            for status_w in self._status.values():
                os.close(status_w)  # no code: the pool reports these ranks as killed
            self._status.clear()
        self._answers.put(None)

    def _exited(self, pid: int, code: int) -> None:
        with self._lock:
            if pid in self._status:
                _report(self._status.pop(pid), code)
            else:
                self._early_exits[pid] = code


def _report(status_w: int, code: int) -> None:
    os.write(status_w, f"{code}\n".encode())
    os.close(status_w)
