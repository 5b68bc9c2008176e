"""Reading a faulthandler dump of a stuck rank: which collective it waits in, and on which student line."""

from __future__ import annotations

import re
from pathlib import Path

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def where_stuck(dump: str, impl_dir: Path) -> str:
    """Where a rank is stuck, for the student: ``blocked in dist.recv at ring.py:42 in f: <code>``.

    ``dump`` is faulthandler's text (most recent call first); the main thread's block is used.
    """
    frames = _main_thread_frames(dump)
    if not frames:
        return "gave no stack (it did not answer SIGUSR1)"
    collective = next((func for file, _, func in frames if file.endswith("distributed_c10d.py")), None)
    own = [(f, ln, fn) for f, ln, fn in frames if f.startswith(str(impl_dir))]
    text = f"blocked in dist.{collective}" if collective else "still running (not inside torch.distributed)"
    if own:
        file, line, func = own[0]
        text += f" at {Path(file).name}:{line} in {func}: {_source_line(Path(file), line)}"
    if len(own) > 1:
        text += "\n    your stack, innermost first: " + " <- ".join(
            f"{Path(f).name}:{ln} in {fn}" for f, ln, fn in own
        )
    return text


def _main_thread_frames(dump: str) -> list[tuple[str, int, str]]:
    blocks = re.split(r"^(?=(?:Current thread|Thread) 0x)", dump, flags=re.MULTILINE)
    current = [b for b in blocks if b.startswith("Current thread")]
    chosen = current[-1] if current else (blocks[-1] if blocks else "")
    frames = []
    for line in chosen.splitlines():
        match = _FRAME.match(line)
        if match:
            frames.append((match["file"], int(match["line"]), match["func"]))
    return frames


def _source_line(path: Path, line: int) -> str:
    try:
        return path.read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return "?"
