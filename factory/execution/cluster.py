"""The Ray engine: a stage's shards as Ray tasks on the cluster ``RAY_ADDRESS`` names.

- **Where.** ``RAY_ADDRESS`` unset: a local cluster started for the stage (``execution.local_cpus``
  CPUs). Set (``host:6379``, ``ray://host:10001`` or ``auto``): that cluster, checked before any
  work; one that does not answer is a one-line error naming it. Every task changes into the
  project folder of the driver, which must be the same path on every node (a shared file system:
  the index and the models are read there; outputs are written by the driver alone).
- **Faults.** A task whose worker dies is retried (``execution.max_retries``) and only its shard
  is redone: the driver journals a shard when its task returns, never before, so nothing is lost
  or written twice. A driver killed and restarted resumes from that journal.
- **The response cache** stays one SQLite file with one writer: a ``CacheService`` actor on the
  driver's node owns it, and the workers' backends look up and store replies through it
  (``RemoteCache``). SQLite on a network file system, written from several machines, corrupts;
  one owner on local disk does not, and a lookup costs one actor call (under a millisecond),
  small beside an LLM call.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from factory.utils import paths
from factory.utils.errors import FactoryError

ShardWork = Callable[[Any, Callable[[int], None]], Any]  # as factory.execution.engine names it

log = logging.getLogger(__name__)

NAMESPACE = "tracefactory"


def _ray():
    try:
        import ray
    except ImportError:
        raise FactoryError(
            "execution.engine is 'ray' but Ray is not installed: pip install -e '.[ray]'"
        ) from None
    return ray


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail with one line naming ``address`` unless something listens there ('auto' is Ray's own search)."""
    if address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise FactoryError(f"RAY_ADDRESS={address!r}: expected host:port or ray://host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise FactoryError(
            f"RAY_ADDRESS={address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
            "with `ray start --head`, or unset RAY_ADDRESS to run on a local cluster"
        ) from None


def _run_shard(project_dir: str, work: ShardWork, shard: Any) -> Any:
    """A task: the shard work in the driver's project folder (relative data paths resolve the same)."""
    if os.getcwd() != project_dir:
        os.chdir(project_dir)
    # A Ray worker holds Ray's own objects (hundreds of thousands): frozen out of the cyclic
    # collector, its collections traverse the shard's objects only
    gc.freeze()
    return work(shard, lambda n: None)


class CacheService:
    """The response cache's only writer: an actor on the driver's node around the SQLite file."""

    def __init__(self, path: str):
        from factory.llm.responses import ResponseCache

        self.cache = ResponseCache(path)
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get_many(self, keys: list[str], unusable: bool = False) -> dict:
        found = self.cache.get_many(keys, unusable)
        with self._lock:
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def put_many(self, items: list) -> None:
        self.cache.put_many(items)

    def store(self, items: list) -> dict:
        return self.cache.store(items)

    def mark_unusable(self, keys: list[str], reason: str) -> None:
        self.cache.mark_unusable(keys, reason)

    def counts(self) -> dict:
        return {"hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        self.cache.close()


class RemoteCache:
    """A worker's view of the ``CacheService``: ``ResponseCache``'s interface over actor calls.
    Stores go out without waiting; ``flush`` waits for them (a shard flushes before it returns)."""

    def __init__(self, actor: Any):
        self.actor = actor
        self._pending: list = []
        self._lock = threading.Lock()

    def get_many(self, keys: list[str], unusable: bool = False) -> dict:
        return _ray().get(self.actor.get_many.remote(list(keys), unusable)) if keys else {}

    def get(self, key: str, unusable: bool = False):
        return self.get_many([key], unusable).get(key)

    def put_many(self, items: list) -> None:
        if items:
            ref = self.actor.put_many.remote(list(items))
            with self._lock:
                self._pending.append(ref)

    def store(self, items: list) -> dict:
        """Stored, and the replies the cache holds instead of the given ones (``ResponseCache.store``)."""
        return _ray().get(self.actor.store.remote(list(items))) if items else {}

    def mark_unusable(self, keys: list[str], reason: str) -> None:
        ref = self.actor.mark_unusable.remote(list(keys), reason)
        with self._lock:
            self._pending.append(ref)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        if pending:
            _ray().get(pending)

    def close(self) -> None:
        self.flush()  # the file is the driver's: nothing else to close

    def __reduce__(self):  # travels as its actor handle alone
        return RemoteCache, (self.actor,)

    def __repr__(self) -> str:  # the same for every copy: a worker's resources are keyed by it
        return f"RemoteCache({self.actor!r})"


class RayEngine:
    """Shards as Ray tasks; results as they return. See the module docstring."""

    name = "ray"
    remote = True

    def __init__(self, params: Any):
        self.params = params
        self.project_dir = str(Path.cwd().resolve())
        self._cache_actor = None

    @classmethod
    def connect(cls, params: Any) -> RayEngine:
        ray = _ray()
        address = os.environ.get("RAY_ADDRESS") or None
        if address:
            check_reachable(address)
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    num_cpus=None if address else params.execution.local_cpus,
                    namespace=NAMESPACE,
                    include_dashboard=False,
                    log_to_driver=True,
                    configure_logging=False,
                )
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                where = f"RAY_ADDRESS={address}" if address else "a local Ray cluster (RAY_ADDRESS unset)"
                hint = ""
                if address and not os.environ.get("RAY_AUTH_MODE"):
                    hint = (
                        " (a cluster started by `ray start` asks for its token: export RAY_AUTH_MODE=token, "
                        "with the token in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
                    )
                raise FactoryError(f"{where}: cannot connect: {first}{hint}") from None
        resources = ray.cluster_resources()
        log.info(
            "execution on Ray (%s): %s CPUs, %s GPUs",
            address or "a local cluster",
            resources.get("CPU", 0),
            resources.get("GPU", 0),
        )
        return cls(params)

    def response_cache(self) -> RemoteCache | None:
        """The cache the workers' backends use (None when ``llm.cache`` is off)."""
        if not self.params.llm.cache:
            return None
        if self._cache_actor is None:
            ray = _ray()
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()
            actor = ray.remote(CacheService).options(
                num_cpus=0,
                max_concurrency=16,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
            )
            path = (Path(self.project_dir) / paths.CACHE_DIR / "responses.sqlite").resolve()
            self._cache_actor = actor.remote(str(path))
        return RemoteCache(self._cache_actor)

    def cache_counts(self) -> dict | None:
        if self._cache_actor is None:
            return None
        return _ray().get(self._cache_actor.counts.remote())

    def map(
        self, work: ShardWork, shards: Sequence[tuple[int, Any]], tick: Callable[[int], None]
    ) -> Iterator[tuple[int, Any]]:
        ray = _ray()
        ex = self.params.execution
        task = ray.remote(_run_shard).options(
            num_cpus=ex.cpus_per_task,
            num_gpus=ex.gpus_per_task,
            max_retries=ex.max_retries,
            retry_exceptions=False,
        )
        work_ref = ray.put(work)  # shipped once, shared by every task
        refs = {task.remote(self.project_dir, work_ref, shard): k for k, shard in shards}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                k = refs.pop(ready[0])
                yield k, self._result(ready[0], k)
        finally:
            for ref in refs:  # the caller stopped early (an error): the rest is not wanted
                ray.cancel(ref, force=True)

    def _result(self, ref: Any, k: int) -> Any:
        ray = _ray()
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if exc.cause is not None else exc
            if isinstance(cause, FactoryError):
                raise FactoryError(f"shard {k}: {cause}") from None
            log.error("shard %d failed on the cluster:\n%s", k, exc)
            raise FactoryError(f"shard {k} failed on the cluster: {type(cause).__name__}: {cause}") from None
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            raise FactoryError(
                f"shard {k}: its worker died {self.params.execution.max_retries + 1} times "
                f"(execution.max_retries): {type(exc).__name__}"
            ) from None

    def close(self) -> None:
        if self._cache_actor is not None:
            ray = _ray()
            try:
                ray.get(self._cache_actor.close.remote())
            finally:
                ray.kill(self._cache_actor)
                self._cache_actor = None

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
