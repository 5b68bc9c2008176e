"""The multi-rank harness: tests run in the judge, student code only in rank workers."""

from grader.harness.comm import COLLECTIVES
from grader.harness.outcomes import CheckFailure, CommEvent, CommLog, RankFailure, RankResult
from grader.harness.testing import World, assert_close, assert_equal, chunk_of, comm_trace

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
]
