"""A rank factory on another node: started there (by ``srun``), it connects back to the judge over TCP.

A multi-node world cannot pass pipes from the judge to its ranks, so this is ``zygote``'s factory with a
network line instead. Two stages run on the node:

- the launcher, ``python -m grader.harness.agent`` (trusted, no torch): makes a scratch folder on the node
  and starts the agent in it, inside bubblewrap when the judge asks (with the network: ranks must reach
  their peers), with a minimal environment; it removes the scratch folder when the agent ends;
- the agent: connects to the judge at ``DISTGPU_AGENT_ADDRESS``, shows ``DISTGPU_AGENT_TOKEN`` and its
  ticket, receives ``sys_path`` and ``preload``, imports torch once, and serves ``zygote``'s requests as
  JSON frames over that connection, plus two of its own:
  - ``{"op": "stage", "files": {"impl/ring.py": base64, ...}}``: write the submission and rank programs
    into scratch -> ``{"scratch": path}``;
  - ``{"op": "read", "path": p, "limit": n}``: the last ``n`` characters of a rank's log or stack file;
  - ``{"op": "read_bytes", "path": p, "limit": n}``: the first ``n`` bytes of a rank's flight file, base64.

  ``fork`` carries a ``ticket``: the agent opens the rank's own connection to the judge (tasks and
  replies both travel on it) before it forks. When a rank ends the agent sends ``{"exit": pid, "code": c}``
  unasked. When the judge's line closes, the agent kills every rank and exits.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from grader.core import sandbox
from grader.harness.zygote import Factory, serve_preloaded

ADDRESS_VAR = "DISTGPU_AGENT_ADDRESS"
TOKEN_VAR = "DISTGPU_AGENT_TOKEN"
TICKET_VAR = "DISTGPU_AGENT_TICKET"
NODE_VAR = "DISTGPU_AGENT_NODE"
"""Where the agent runs, as it reports it: Slurm's name for the node, else the host name."""
SANDBOX_VAR = "DISTGPU_AGENT_SANDBOX"
"""``bwrap`` to run the agent in bubblewrap; anything else runs it as the launcher's user, unsandboxed."""

AGENT_BOOTSTRAP = """\
import json, sys
sys.path[:0] = json.loads(sys.argv[2])
from grader.harness.agent import serve_judge
serve_judge(sys.argv[1])
"""


def hello(address: str, token: str, ticket: str) -> int:
    """The fd of a connection to the judge that has introduced itself: its first frame (in
    ``multiprocessing.connection``'s framing) holds the token and the ticket."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frame = json.dumps({"token": token, "ticket": ticket}).encode()
    sock.sendall(struct.pack("!i", len(frame)) + frame)
    sock.settimeout(None)
    return sock.detach()


class NodeFactory(Factory):
    """``zygote.Factory`` over a TCP ``Connection``; each rank gets its own connection to the judge."""

    def __init__(self, line: Connection, address: str, token: str, scratch: Path) -> None:
        super().__init__(line)
        self.address, self.token, self.scratch = address, token, scratch

    def _ready(self) -> dict[str, object]:
        return super()._ready() | {"node": os.environ.get(NODE_VAR) or socket.gethostname()}

    # Any: a JSON message of the factory's protocol, its fields read by name as the other side wrote them
    def _receive(self) -> tuple[dict[str, Any], list[int]] | None:
        try:
            return json.loads(self.sock.recv_bytes()), []
        except (EOFError, OSError):
            return None

    def _send(self, message: Mapping[str, object]) -> None:
        self.sock.send_bytes(json.dumps(message).encode())

    # Any: a JSON message of the factory's protocol, its fields read by name as the other side wrote them
    def _handle(self, request: dict[str, Any], fds: list[int]) -> dict[str, object]:
        if request["op"] == "stage":
            return self._stage(request["files"])
        if request["op"] == "read":
            return {"text": self._read(Path(request["path"]), request["limit"])}
        if request["op"] == "read_bytes":
            return {
                "data": base64.b64encode(self._read_bytes(Path(request["path"]), request["limit"])).decode()
            }
        if request["op"] == "fork":
            spec = request["spec"]
            run_dir = Path(spec["log_path"]).parent
            run_dir.mkdir(exist_ok=True)
            if spec.get("run_as_uid") is not None:
                run_dir.chmod(0o777)  # the rank writes its log and stack file here after dropping privileges
            fds = [hello(self.address, self.token, request["ticket"])]
        return super()._handle(request, fds)

    def _fds_ranks_must_not_hold(self, fds: list[int]) -> list[int]:
        return [self.sock.fileno(), self.wake_r, self.wake_w]

    def _channels(self, fds: list[int]) -> tuple[Connection, Connection]:
        line = Connection(fds[0])
        return line, line

    def _forked(self, pid: int, fds: list[int]) -> None:
        os.close(fds[0])
        self.children[pid] = -1

    def _ended(self, pid: int, code: int) -> None:
        del self.children[pid]
        self._send({"exit": pid, "code": code})

    def _stage(self, files: dict[str, str]) -> dict[str, object]:
        for relative, content in files.items():
            target = self._inside(self.scratch / relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(content))
            target.chmod(0o644)
        for folder in self.scratch.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)  # ranks that dropped to nobody read the submission
        return {"scratch": str(self.scratch)}

    def _read(self, path: Path, limit: int) -> str:
        try:
            return self._inside(path).read_text(errors="replace")[-limit:]
        except (FileNotFoundError, ValueError):
            return ""

    def _read_bytes(self, path: Path, limit: int) -> bytes:
        try:
            with open(self._inside(path), "rb") as handle:
                return handle.read(limit)
        except (FileNotFoundError, ValueError):
            return b""

    def _inside(self, path: Path) -> Path:
        resolved = path.resolve()
        if not resolved.is_relative_to(self.scratch.resolve()):
            raise ValueError(f"{path} is outside the agent's scratch folder")
        return resolved


def serve_judge(scratch: str) -> None:
    """The agent: say hello, take the configuration, preload, serve until the judge hangs up."""
    address, token, ticket = (os.environ.pop(name) for name in (ADDRESS_VAR, TOKEN_VAR, TICKET_VAR))
    line = Connection(hello(address, token, ticket))
    config = json.loads(line.recv_bytes())
    sys.path[:] = [*config["sys_path"], *sys.path]
    serve_preloaded(config, NodeFactory(line, address, token, Path(scratch)))


def launch() -> int:
    """The launcher: a scratch folder, the agent in it (sandboxed when asked), then clean up."""
    scratch = Path(tempfile.mkdtemp(prefix="distgpu-agent-"))
    scratch.chmod(0o755)
    env = sandbox.minimal_env() | {name: os.environ[name] for name in (ADDRESS_VAR, TOKEN_VAR, TICKET_VAR)}
    env[NODE_VAR] = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    here = str(Path(__file__).resolve().parents[2])  # the folder that holds the grader package
    argv = [sys.executable, "-I", "-c", AGENT_BOOTSTRAP, str(scratch), json.dumps([here])]
    if os.environ.get(SANDBOX_VAR) == "bwrap":
        argv = sandbox.for_node_agent(scratch).wrap(argv, env)
    try:
        return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(launch())
