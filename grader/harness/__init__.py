"""The multi-rank harness: tests run in the judge, student code only in rank workers.

The names below load on first use, so that a submodule that needs no torch (``factory``, ``zygote``) can be
imported without it: the container's judge starts the rank factory before it imports torch itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.harness.collectives import COLLECTIVES
    from grader.harness.outcomes import CheckFailure, CommEvent, CommLog, RankFailure, RankResult
    from grader.harness.patterns import exchange, from_root, pairwise, peers, ring, to_root
    from grader.harness.testing import World, assert_close, assert_equal, chunk_of, comm_trace

_HOMES = {
    "COLLECTIVES": "collectives",
    "CheckFailure": "outcomes",
    "CommEvent": "outcomes",
    "CommLog": "outcomes",
    "RankFailure": "outcomes",
    "RankResult": "outcomes",
    "World": "testing",
    "assert_close": "testing",
    "assert_equal": "testing",
    "chunk_of": "testing",
    "comm_trace": "testing",
    "exchange": "patterns",
    "from_root": "patterns",
    "pairwise": "patterns",
    "peers": "patterns",
    "ring": "patterns",
    "to_root": "patterns",
}

__all__ = [
    "COLLECTIVES",
    "CheckFailure",
    "CommEvent",
    "CommLog",
    "RankFailure",
    "RankResult",
    "World",
    "assert_close",
    "assert_equal",
    "chunk_of",
    "comm_trace",
    "exchange",
    "from_root",
    "pairwise",
    "peers",
    "ring",
    "to_root",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'grader.harness' has no attribute {name!r}")
    return getattr(importlib.import_module(f"grader.harness.{home}"), name)
