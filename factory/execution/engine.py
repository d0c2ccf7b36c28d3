"""Where a stage's shards run: in the stage's process, or as Ray tasks on a cluster.

A stage cuts its work (questions, trajectories) into deterministic shards and hands a *shard work*
to the engine: a callable ``work(shard, tick) -> result``. ``Engine.map`` runs it over the shards
not yet done and yields ``(k, result)`` as each finishes; the caller journals each result as it
comes and assembles the output in plan order, so the engine decides where and when a shard runs,
never what the output holds.

- ``LocalEngine`` (``execution.engine: local``) calls ``work`` in this process, shard after shard;
  ``tick`` advances the stage's progress bar as the shard goes.
- ``RayEngine`` (``execution.engine: ray``, ``factory.execution.cluster``) sends ``work`` to the
  cluster as one task per shard. ``work`` then has to travel: a picklable object holding params and
  plain data that builds its heavy parts (index, backend) in the worker (``worker_resource``).

``make_engine(params)`` gives the one the params name; use it as a context manager.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from factory.utils.errors import FactoryError

ShardWork = Callable[[Any, Callable[[int], None]], Any]

# What a worker process built for shard works (an index, a backend), by key: a Ray worker runs
# many shards of a stage and builds each resource once. In the local engine it is never used.
_RESOURCES: dict[Any, Any] = {}


def worker_resource(key: Any, build: Callable[[], Any]) -> Any:
    """The resource ``key`` of this process, built by ``build()`` on first use."""
    if key not in _RESOURCES:
        _RESOURCES[key] = build()
    return _RESOURCES[key]


class Engine(Protocol):
    name: str
    remote: bool  # True when shards run elsewhere: ``tick`` is not called, the caller ticks on return

    def map(
        self, work: ShardWork, shards: Sequence[tuple[int, Any]], tick: Callable[[int], None]
    ) -> Iterator[tuple[int, Any]]: ...

    def response_cache(self) -> Any | None:
        """The response cache the shard works use where they run (None: each opens the local file)."""
        ...

    def close(self) -> None: ...


class LocalEngine:
    """Every shard in this process, in plan order."""

    name = "local"
    remote = False

    def map(
        self, work: ShardWork, shards: Sequence[tuple[int, Any]], tick: Callable[[int], None]
    ) -> Iterator[tuple[int, Any]]:
        for k, shard in shards:
            yield k, work(shard, tick)

    def response_cache(self) -> None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def preflight(params: Any) -> None:
    """Fail now, in one line, if the engine the params name cannot run: a stage calls this before it
    reads or calls anything (Ray missing, or RAY_ADDRESS naming a cluster that does not answer)."""
    if params.execution.engine == "ray":
        import os

        from factory.execution.cluster import _ray, check_reachable

        _ray()
        if os.environ.get("RAY_ADDRESS"):
            check_reachable(os.environ["RAY_ADDRESS"])


def count_cluster_cache(engine: Any, llm: Any) -> None:
    """Add the response-cache hits and misses of the engine's workers to ``llm``'s own counts (the
    stage's metrics read them there); nothing on the local engine, whose ``llm`` counted them."""
    counts = engine.cache_counts() if engine.remote else None
    if counts and hasattr(llm, "hits"):
        llm.hits += counts["hits"]
        llm.misses += counts["misses"]


def make_engine(params: Any):
    """The engine ``params.execution.engine`` names (Ray: connected to its cluster, or failing with
    a one-line error naming RAY_ADDRESS before any work starts); the local engine for a caller
    without params (or with params that have no ``execution`` section)."""
    if getattr(params, "execution", None) is None:
        return LocalEngine()
    engine = params.execution.engine
    if engine == "local":
        return LocalEngine()
    if engine == "ray":
        from factory.execution.cluster import RayEngine

        return RayEngine.connect(params)
    raise FactoryError(f"execution.engine {engine!r}: expected 'local' or 'ray'")
