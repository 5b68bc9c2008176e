"""Every world of one grading run: a ``LiveRanks`` per world size and node count, and the factories they
fork from.

One rank factory here serves every single-node world; multi-node worlds fork their ranks on a factory per
node (``remote``), all meeting at a store the judge hosts. One world is
``world.LiveRanks``, the live rank workers of one world size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.harness.factory import FactoryError, RankFactory
from grader.harness.remote import NodeRankFactory, Switchboard, judge_host
from grader.harness.world import Factory, LiveRanks, WorldConfig

if TYPE_CHECKING:
    from torch._C._distributed_c10d import TCPStore


class Pools:
    """One ``LiveRanks`` per world size (and node count), started on first use and restarted after it was
    killed.

    ``nodes``: the nodes multi-node parts may use (``remote.allocation_nodes``). A part that asks for more
    nodes than that runs all its ranks here. ``reuse=False`` starts a fresh world for every ``get``: the
    spawn-per-test baseline of the benchmark. ``factory``: this run's rank factory, already launched (it
    imports torch while the judge collects the suite); by default one is started at the first world.
    ``keep_factory``: ``close`` leaves the local factory running and hands it back, for the next run of the
    same author's code (``LocalRunner(keep_factory=True)``).
    """

    def __init__(
        self,
        config: WorldConfig,
        *,
        reuse: bool = True,
        nodes: list[str] | None = None,
        factory: RankFactory | None = None,
        keep_factory: bool = False,
    ) -> None:
        self.config = config
        self.reuse = reuse
        self.keep_factory = keep_factory
        self.nodes = nodes or []
        self._pools: dict[tuple[int, int, int | None], LiveRanks] = {}
        self._factory: RankFactory | None = factory
        self._node_factories: dict[int, NodeRankFactory] = {}
        self._switchboard: Switchboard | None = None
        self._store: TCPStore | None = None
        self.starts: list[tuple[int, float]] = []
        """(world size, seconds) for every start, for reports and benchmarks."""
        self.nodes_used: set[str] = set()
        """Where multi-node worlds ran ranks, as the agents there reported it."""

    def spread(self, nodes: int) -> int:
        """Over how many nodes a part that asks for ``nodes`` runs here: that many, or 1 if not available."""
        return nodes if 1 < nodes <= len(self.nodes) else 1

    def get(self, size: int, nodes: int = 1, *, shared_gpus: int | None = None) -> LiveRanks:
        """The world of ``size`` ranks over ``spread(nodes)`` nodes for the next test (on ``shared_gpus``
        GPUs when given, see ``LiveRanks``). Worlds retired by the last test go first, whatever their size:
        what they left running must not hold the pids and memory this world needs."""
        for retired in [key for key, p in self._pools.items() if p.retired]:
            self._pools.pop(retired).stop()
        key = (size, self.spread(nodes), shared_gpus)
        pool = self._pools.get(key)
        if pool is None or not pool.alive or not self.reuse:
            if pool is not None:
                pool.stop()
            pool = self._pools[key] = self._started(*key)
            self.starts.append((size, pool.start_seconds))
        return pool

    def retire_all(self) -> None:
        """Make the next ``get`` start fresh ranks, whatever size: for a test run again, which must not meet
        what an earlier test left behind."""
        for pool in self._pools.values():
            pool.retired = True

    def _started(self, size: int, nodes: int, shared_gpus: int | None) -> LiveRanks:
        """A started world; a factory that died under it (a rank may kill it) is replaced once."""
        for attempt in (1, 2):
            pool = LiveRanks(size, self.config, self._live_factories(nodes), shared_gpus)
            try:
                pool.start()
                return pool
            except FactoryError:
                pool.kill()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _live_factories(self, nodes: int) -> list[Factory]:
        if nodes == 1:
            return [self._live_factory()]
        return [self._live_node_factory(index) for index in range(nodes)]

    def _live_factory(self) -> RankFactory:
        """The run's factory, (re)started when missing or dead; a fresh one per world when not reusing."""
        if self._factory is not None and (not self._factory.alive or not self.reuse):
            for (_, nodes, _), pool in self._pools.items():
                if nodes == 1:
                    pool.kill()
            self._factory.close()
            self._factory = None
        if self._factory is None:
            log_path = self.config.scratch_dir / "factory.log"
            self._factory = RankFactory(self.config.sandbox, log_path, self.config.preload)
        self._factory.start()  # a launched one: waits until it is ready; a ready one: nothing to do
        return self._factory

    def _live_node_factory(self, index: int) -> NodeRankFactory:
        """The factory on ``self.nodes[index]``, (re)started when missing or dead."""
        factory = self._node_factories.get(index)
        if factory is not None and not factory.alive:
            factory.close()
            factory = None
        if factory is None:
            if self._switchboard is None or self._store is None:  # made together, dropped together
                host = judge_host(self.nodes)
                self._switchboard, self._store = Switchboard(host), _judge_store(host)
            factory = NodeRankFactory(
                self.nodes[index],
                self._switchboard,
                log_path=self.config.scratch_dir / f"agent{index}.log",
                staged={"impl": self.config.impl_dir, "programs": self.config.programs_dir},
                store_address=f"{self._switchboard.host}:{self._store.port}",
                sandboxed=self.config.sandbox is not None,
            )
            self._node_factories[index] = factory
            factory.start()
            self.nodes_used.add(factory.where)
        return factory

    def close(self) -> RankFactory | None:
        """Stop every world and factory; with ``keep_factory``, the local factory (if alive) is returned
        running instead."""
        for pool in self._pools.values():
            pool.ask_to_stop()  # every world leaves at once, not one after the other
        for pool in self._pools.values():
            pool.stop()
        self._pools.clear()
        kept = self._factory if self.keep_factory and self._factory and self._factory.alive else None
        for factory in [self._factory, *self._node_factories.values()]:
            if factory is not None and factory is not kept:
                factory.close()
        self._factory = None
        self._node_factories.clear()
        if self._switchboard is not None:
            self._switchboard.close()
            self._switchboard = None
        self._store = None
        return kept


def _judge_store(host: str) -> TCPStore:
    """The TCPStore that multi-node worlds rendezvous through, hosted by the judge (each world keeps its
    keys under its own prefix)."""
    from datetime import timedelta

    # torch.distributed re-exports the stores without declaring them (no __all__): take them from where
    # they are typed
    import torch._C._distributed_c10d as c10d

    return c10d.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
