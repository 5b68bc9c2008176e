"""The rank factory's inside: one process per grading run that imports torch once and forks rank workers.

It runs where the ranks run (inside the sandbox when there is one) and is started by ``factory.RankFactory``
with the bootstrap below. It speaks over one SOCK_SEQPACKET Unix socket, one JSON message per packet:

- ``{"op": "fork", "spec": {...}}`` with three fds attached (the rank's task pipe, reply pipe and status
  pipe) -> ``{"pid": N}``, or ``{"error": why}`` when no process can be made. When the rank ends, the
  factory kills what it left in its process group and writes its exit code (as ``multiprocessing``
  reports it: negative for a signal) to the status pipe and closes it; the judge waits on that pipe.
- ``{"op": "signal", "pids": [...], "signal": S, "group": bool}`` -> ``{"ok": true}``. Pids are as this
  process sees them (its pid namespace); only its own ranks can be signalled.
- ``{"op": "activity", "pids": [...]}`` -> ``{"activity": {"PID": [cpu_ns, threads, busy], ...}}`` (or
  null): each rank's process group as ``activity.group_activity`` reads it, for the judge's deadlock check.

When the judge's end of the socket closes, every rank is killed and the factory exits.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from grader.harness.activity import group_activity

MAX_MESSAGE_BYTES = 1 << 20
FORK_ATTEMPTS = 10
LEFTOVER_WAIT_S = 5.0

BOOTSTRAP = """\
import json, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
config = json.loads(sock.recv(1 << 20))
sys.path[:] = config["sys_path"]
from grader.harness.zygote import serve
serve(sock, config)
"""
"""Run as ``python -I -c BOOTSTRAP FD``: the judge sends ``sys_path`` and ``preload`` first."""


# Any: the judge's JSON config (sys_path, preload), read by name
def serve(sock: socket.socket, config: dict[str, Any]) -> None:
    """Preload, say ready, then serve requests until the judge hangs up; then exit at once.

    The ranks are killed by then. Skipping the interpreter's finalization (a second or more for a process
    that imported torch, on a loaded 2-core machine) matters: the judge waits for this exit."""
    serve_preloaded(config, Factory(sock))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# Any: the judge's JSON config (sys_path, preload), read by name
def serve_preloaded(config: dict[str, Any], factory: Factory) -> None:
    """Die with the parent, adopt orphans, import what ``config`` says to preload, then run ``factory``."""
    _die_with_parent()
    _adopt_orphans()
    for module in config["preload"]:
        importlib.import_module(module)
    factory.run()


class Factory:
    # Any: a socket here, a Connection for agent.NodeFactory; each class calls its own line's methods
    def __init__(self, sock: Any) -> None:
        """``sock``: the judge's line, a socket here, a ``Connection`` for ``agent.NodeFactory``."""
        self.sock = sock
        self.children: dict[int, int] = {}
        """rank pid -> the write end of its status pipe (-1 where ends are reported otherwise)."""
        self.leftovers: set[int] = set()
        """Process groups of ended ranks that may still hold processes (killed, not yet reaped)."""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def run(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of each exit
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ)
        selector.register(self.wake_r, selectors.EVENT_READ)
        self._send(self._ready())
        while True:
            for key, _ in selector.select():
                if key.fileobj is self.sock:
                    if not self._answer():
                        self._kill_all()
                        return
                else:
                    _drain(self.wake_r)
                    self._reap()

    def _ready(self) -> dict[str, object]:
        return {"ready": os.getpid()}

    def _answer(self) -> bool:
        """Serve one request; False when the judge has hung up."""
        received = self._receive()
        if received is None:
            return False
        request, fds = received
        self._send(self._handle(request, fds))
        return True

    # Any: a JSON message of the factory's protocol, its fields read by name as the other side wrote them
    def _receive(self) -> tuple[dict[str, Any], list[int]] | None:
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE_BYTES, 3)
        except OSError:
            return None
        return (json.loads(data), fds) if data else None

    def _send(self, message: Mapping[str, object]) -> None:
        self.sock.send(json.dumps(message).encode())

    # Any: a JSON message of the factory's protocol, its fields read by name as the other side wrote them
    def _handle(self, request: dict[str, Any], fds: list[int]) -> dict[str, object]:
        if request["op"] == "fork":
            try:
                return {"pid": self._fork(request["spec"], fds)}
            except OSError as exc:  # no pid left, or no memory: the judge reports it; this factory goes on
                for fd in fds:
                    os.close(fd)
                return {"error": f"could not start a rank: {exc}"}
        if request["op"] == "activity":
            found = group_activity([pid for pid in request["pids"] if pid in self.children])
            return {"activity": None if found is None else {str(g): a.to_json() for g, a in found.items()}}
        self._signal(request["pids"], request["signal"], request["group"])
        return {"ok": True}

    # Any: a WorkerSpec's fields as JSON (WorkerSpec.to_fields), passed on to WorkerSpec.from_fields
    def _fork(self, spec_fields: dict[str, Any], fds: list[int]) -> int:
        from grader.harness.worker import WorkerSpec, worker_main

        pid = self._fork_when_pids_free()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in self._fds_ranks_must_not_hold(fds):
                    os.close(fd)
                tasks, replies = self._channels(fds)
                worker_main(WorkerSpec.from_fields(spec_fields), tasks, replies)
            finally:
                os._exit(70)
        self._forked(pid, fds)
        return pid

    def _fork_when_pids_free(self) -> int:
        """``os.fork`` once what ended ranks left behind is gone (killed, then reaped here: its pids are free
        only then), retried for a while should the pid limit still be reached."""
        self._await_leftovers(LEFTOVER_WAIT_S)
        # What the factory holds (torch, the harness) moves out of the collector's reach: a rank's first
        # collections would otherwise walk every one of those objects, writing to each page it touches and
        # so copying it (Python's gc docs, gc.freeze: "If a process will fork() without exec() ...").
        gc.freeze()
        for attempt in range(1, FORK_ATTEMPTS):
            try:
                return os.fork()
            except BlockingIOError:
                time.sleep(0.1 * attempt)
                self._reap()
        return os.fork()

    def _await_leftovers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.leftovers and time.monotonic() < deadline:
            self._reap()
            self.leftovers = {group for group in self.leftovers if _kill_group(group)}
            if self.leftovers:
                time.sleep(0.02)

    def _fds_ranks_must_not_hold(self, fds: list[int]) -> list[int]:
        """The factory's own fds, the new rank's status pipe, and the other ranks' status pipes."""
        return [self.sock.fileno(), self.wake_r, self.wake_w, fds[2], *self.children.values()]

    def _channels(self, fds: list[int]) -> tuple[Connection, Connection]:
        """The new rank's task and reply pipes (the first two fds the judge sent)."""
        return Connection(fds[0], writable=False), Connection(fds[1], readable=False)

    def _forked(self, pid: int, fds: list[int]) -> None:
        os.close(fds[0])
        os.close(fds[1])
        self.children[pid] = fds[2]

    def _signal(self, pids: list[int], signum: int, group: bool) -> None:
        for pid in pids:
            if pid not in self.children:
                continue
            kills = (os.killpg, os.kill) if group else (os.kill,)  # the group, then the rank if it left it
            for kill in kills:
                try:
                    kill(pid, signum)
                except (ProcessLookupError, PermissionError):
                    pass

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                if _kill_group(pid):  # it led its own group: nothing it started may outlive it
                    self.leftovers.add(pid)
                self._ended(pid, os.waitstatus_to_exitcode(status))

    def _ended(self, pid: int, code: int) -> None:
        """Tell the judge a rank ended: its exit code on its status pipe, then EOF."""
        status_w = self.children.pop(pid)
        os.write(status_w, f"{code}\n".encode())
        os.close(status_w)

    def _kill_all(self) -> None:
        self._signal(list(self.children), signal.SIGKILL, group=True)


def _kill_group(group: int) -> bool:
    """SIGKILL process group ``group``; False once it has no process left (zombies count until reaped)."""
    try:
        os.killpg(group, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _adopt_orphans() -> None:
    """Become the child subreaper: what a rank forked and left behind is reparented here, and ``_reap``
    collects it once killed. Otherwise it goes to pid 1 (the judge, in a container without an init), which
    never reaps it, and thousands of zombies from a fork bomb keep every later world from forking."""
    if sys.platform == "linux":
        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _die_with_parent() -> None:
    """SIGKILL this factory when the judge (or bwrap's init) goes; its ranks follow it the same way."""
    if sys.platform == "linux":
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
