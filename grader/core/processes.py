"""Whether a process of this host is still there: what leftovers (a temporary file, a container) were
left by, named by the pid of the process that made them."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (another user's counts; 0 and below name none)."""
    if pid <= 0:
        return False  # os.kill(0, ...) would signal our own process group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
