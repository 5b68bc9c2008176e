"""The judge's handle on the rank factory (``zygote``): start it (sandboxed or not), fork ranks, signal them.

One factory serves every world of a grading run, so torch is imported once per run, not once per rank.
Ranks are known by the pid the factory sees; the judge never signals a pid itself (inside a pid namespace
that pid means another process out here). If the factory stops answering, ``close`` ends it, and with a
sandbox, everything inside it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Pipe, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from grader.core.sandbox import Sandbox, minimal_env
from grader.harness.activity import Activity
from grader.harness.zygote import BOOTSTRAP, MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from grader.harness.worker import WorkerSpec

PRELOAD = ("torch", "torch.distributed", "grader.harness.worker")
"""What every factory imports before its first fork: torch once per grading run, not once per rank. An
exercise adds what its ranks need beyond this (course.yml's ``preload``): ``backward(grad)`` imports
``torch.fx.experimental.symbolic_shapes`` (sympy), an optimizer's first ``step()`` ``torch._dynamo``: seconds
per rank, better paid once here, and only by the exercises that use them.
This module imports no torch itself, so a judge can start the factory before it imports torch."""

START_TIMEOUT_S = 120.0
ANSWER_TIMEOUT_S = 10.0


class FactoryError(RuntimeError):
    """The factory died or stopped answering; the grading run needs a new one."""


@dataclass
class RankProcess:
    """A rank as the judge sees it: its factory-side pid and a pipe that becomes readable when it ends."""

    pid: int
    sentinel: int
    exitcode: int | None = field(default=None)

    def is_alive(self) -> bool:
        return self._settle(0.0) is None

    def join(self, timeout: float) -> int | None:
        return self._settle(timeout)

    def _settle(self, timeout: float) -> int | None:
        if self.exitcode is None and self.sentinel >= 0 and wait([self.sentinel], timeout):
            data = os.read(self.sentinel, 64)
            os.close(self.sentinel)
            self.sentinel = -1
            # No code means the factory itself died (or the sandbox ended): report the rank as killed.
            self.exitcode = int(data) if data.strip() else -signal.SIGKILL
        return self.exitcode


class RankFactory:
    """Owns the factory process. Not thread-safe."""

    def __init__(self, sandbox: Sandbox | None, log_path: Path, preload: tuple[str, ...] = ()) -> None:
        """``preload``: modules to import besides ``PRELOAD`` (an exercise's ``preload``)."""
        self.sandbox = sandbox
        self.log_path = log_path
        self.preload = tuple(dict.fromkeys((*PRELOAD, *preload)))
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._ready = False

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Launch the factory (unless ``launch`` did) and wait until it has preloaded and is ready."""
        if self._process is None:
            self.launch()
        if not self._ready:
            self._receive(START_TIMEOUT_S, "start")
            self._ready = True

    def launch(self) -> None:
        """Start the factory process and send it its configuration, without waiting for it: it imports
        torch meanwhile, while the judge does other work (imports torch too, collects the suite)."""
        judge_end, factory_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = minimal_env()
        argv = [sys.executable, "-I", "-c", BOOTSTRAP, str(factory_end.fileno())]
        if self.sandbox is not None:
            argv = self.sandbox.wrap(argv, env)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(factory_end.fileno(),),
                start_new_session=True,
            )
        factory_end.close()
        self._sock = judge_end
        config = {"sys_path": [p for p in sys.path if os.path.isabs(p)], "preload": [*self.preload]}
        self._sock.send(json.dumps(config).encode())

    def place(self, spec: WorkerSpec) -> WorkerSpec:
        """``spec`` as the rank sees it: here, unchanged (a ``remote.NodeRankFactory`` maps paths)."""
        return spec

    def read(self, path: Path, limit: int = 100_000) -> str:
        """The end of a file a rank wrote (its log, a stack dump); '' if it has none."""
        try:
            return path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""

    def read_bytes(self, path: Path, limit: int) -> bytes:
        """The first ``limit`` bytes of a file a rank wrote (its flight file); b'' if it has none."""
        try:
            with open(path, "rb") as handle:
                return handle.read(limit)
        except FileNotFoundError:
            return b""

    def fork(self, spec: WorkerSpec) -> tuple[RankProcess, Connection, Connection]:
        """Start one rank; returns it with the judge's ends of its task and reply pipes."""
        task_recv, task_send = Pipe(duplex=False)
        reply_recv, reply_send = Pipe(duplex=False)
        status_r, status_w = os.pipe()
        try:
            fds = [task_recv.fileno(), reply_send.fileno(), status_w]
            answer = self._request({"op": "fork", "spec": spec.to_fields()}, fds)
        finally:
            task_recv.close()
            reply_send.close()
            os.close(status_w)
        return RankProcess(answer["pid"], status_r), task_send, reply_recv

    def signal(self, ranks: list[RankProcess], signum: int, *, group: bool) -> None:
        pids = [r.pid for r in ranks if r.exitcode is None]
        if pids:
            self._request({"op": "signal", "pids": pids, "signal": int(signum), "group": group})

    def activity(self, ranks: list[RankProcess]) -> dict[int, Activity] | None:
        """Each live rank's process group by pid (``activity.group_activity``); None if unknown."""
        pids = [r.pid for r in ranks if r.exitcode is None]
        try:
            found = self._request({"op": "activity", "pids": pids})["activity"]
            return None if found is None else {int(pid): Activity.from_json(a) for pid, a in found.items()}
        except (FactoryError, KeyError, TypeError, ValueError):
            return None

    def close(self) -> None:
        """End the factory and, with a sandbox, every process inside it."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(2.0)  # it kills its ranks when the socket closes
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
            self._process = None
        self._ready = False

    # Any: the factory's JSON answer, read by the field its request asks for
    def _request(self, message: Mapping[str, object], fds: list[int] | None = None) -> dict[str, Any]:
        if self._sock is None or not self.alive or not self._ready:
            raise FactoryError("the rank factory is not running (or not ready)")
        try:
            socket.send_fds(self._sock, [json.dumps(message).encode()], fds or [])
        except OSError as exc:
            raise FactoryError(f"the rank factory is gone ({exc})") from None
        return answer_or_raise(self._receive(ANSWER_TIMEOUT_S, str(message["op"])))

    # Any: the factory's JSON answer, read by the field its request asks for
    def _receive(self, timeout_s: float, what: str) -> dict[str, Any]:
        assert self._sock is not None
        deadline = time.monotonic() + timeout_s
        while True:
            if wait([self._sock], max(0.0, deadline - time.monotonic())):
                data = self._sock.recv(MAX_MESSAGE_BYTES)
                if not data:
                    raise FactoryError(
                        f"the rank factory ended during {what}; its log: {_tail(self.log_path)}"
                    )
                reply = json.loads(data)
                if not isinstance(reply, dict):
                    raise FactoryError(f"the rank factory answered {what} with {reply!r}, not an object")
                return reply
            if time.monotonic() >= deadline or not self.alive:
                raise FactoryError(f"the rank factory did not answer {what}; its log: {_tail(self.log_path)}")


A = TypeVar("A", bound=Mapping[str, object])


def answer_or_raise(answer: A) -> A:
    """The factory's answer, or ``FactoryError`` when it says it could not do what was asked."""
    if "error" in answer:
        raise FactoryError(answer["error"])
    return answer


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip() or "(empty)"
    except FileNotFoundError:
        return "(none)"
