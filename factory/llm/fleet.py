"""Where each request of the openai backend goes: a fleet of OpenAI-compatible endpoints.

- **Fewest in flight.** A request goes to the healthy endpoint with the fewest requests in flight
  (``llm.concurrency_per_url`` bounds each; ``llm.concurrency`` bounds them all), so a replica that
  is three times slower holds three times fewer of the slots instead of a third of them.
- **A trajectory stays on its endpoint** when it can: its calls share a prompt prefix (the system
  prompt, the question, the graph so far) that vLLM's prefix cache serves cheaper on the replica
  that saw it. A request with an ``affinity`` (the trajectory id) goes back to that trajectory's
  endpoint while it is healthy, has room, and holds no more than its fair share of the load.
- **Endpoints that keep failing leave the rotation.** After ``FAIL_AFTER`` failed attempts in a row
  (refused or dropped connections, timeouts, 5xx) an endpoint takes no new request; every
  ``PROBE_EVERY_S`` it is asked for ``/v1/models``, and the first answer brings it back. Both
  moments are logged. Requests wait while no healthy endpoint has room; when every endpoint is out
  of rotation they go on trying them, so that a request's retries, not a probe, decide its fate.

All of it runs on the backend's event loop (one thread): no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

AFFINITY_MEMORY = 1 << 16  # trajectories whose endpoint is remembered (least recently used forgotten)
# Not user params: one or two failures in a row are a request's bad luck (its retries cover them), three
# mean the endpoint is down; probing every 5 s brings a restarted server back within seconds for one
# GET /models each time. Tests shorten the probe interval (Fleet's ``probe_every_s`` keyword).
FAIL_AFTER = 3
PROBE_EVERY_S = 5.0


@dataclass
class Endpoint:
    url: str
    bound: int | None  # requests in flight at most (None: only the fleet's bound)
    in_flight: int = 0
    failures: int = 0  # failed attempts in a row
    healthy: bool = True
    sent: int = 0
    down_since: float | None = None
    prober: asyncio.Task | None = field(default=None, repr=False)

    def has_room(self) -> bool:
        return self.healthy and (self.bound is None or self.in_flight < self.bound)


class Fleet:
    """Chooses an endpoint for each attempt and learns from how it went (see module doc).

    ``per_url`` and ``routing`` are ``llm.concurrency_per_url`` and ``llm.routing`` (their defaults
    live in ``factory.params.agent_sections.LLMParams``); ``probe`` asks an endpoint out of rotation
    whether it is back (None: it stays out)."""

    def __init__(
        self,
        urls: list[str],
        *,
        per_url: int | None,
        routing: str,
        probe_every_s: float = PROBE_EVERY_S,
        probe: Callable[[str], Awaitable[bool]] | None = None,
    ):
        self.endpoints = [Endpoint(u, per_url) for u in urls]
        self.routing = routing  # 'round_robin': each in turn, whatever its load or health (a baseline)
        self._turn = 0
        self.probe_every_s, self.probe = probe_every_s, probe
        self._affinity: OrderedDict[str, int] = OrderedDict()
        self._changed: asyncio.Condition | None = None  # made on the loop that uses the fleet

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def choose(self, affinity: str | None = None) -> Endpoint | None:
        """The endpoint for the next attempt, or None when none has room."""
        if self.routing == "round_robin":
            self._turn += 1
            return self.endpoints[(self._turn - 1) % len(self.endpoints)]
        open_ = [e for e in self.endpoints if e.has_room()]
        if not open_:
            if any(e.healthy for e in self.endpoints):
                return None  # the healthy ones are full: wait for a slot
            # every endpoint is out of rotation: keep trying them (the request's retries decide when
            # to give up) rather than wait for a probe that may never answer
            open_ = [e for e in self.endpoints if e.bound is None or e.in_flight < e.bound]
            if not open_:
                return None
        least = min(open_, key=lambda e: e.in_flight)  # the first of the least loaded: deterministic
        if affinity is not None:
            i = self._affinity.get(affinity)
            if i is not None:
                mine = self.endpoints[i]
                # its own endpoint while that holds no more than a fair share over the least loaded
                if mine.has_room() and mine.in_flight <= least.in_flight + max(2, least.in_flight // 2):
                    self._affinity.move_to_end(affinity)
                    return mine
            self._affinity[affinity] = self.endpoints.index(least)
            self._affinity.move_to_end(affinity)
            if len(self._affinity) > AFFINITY_MEMORY:
                self._affinity.popitem(last=False)
        return least

    async def acquire(self, affinity: str | None = None) -> Endpoint:
        """Wait for an endpoint with room; count the attempt in flight on it."""
        changed = self._condition()
        async with changed:
            while (endpoint := self.choose(affinity)) is None:
                await changed.wait()
        endpoint.in_flight += 1
        endpoint.sent += 1
        return endpoint

    async def release(self, endpoint: Endpoint, failed: bool) -> None:
        """The attempt is over: ``failed`` when the endpoint did not serve it (a fault of the endpoint,
        not of the request)."""
        endpoint.in_flight -= 1
        if failed:
            endpoint.failures += 1
            if self.routing != "round_robin" and endpoint.healthy and endpoint.failures >= FAIL_AFTER:
                self._take_out(endpoint)
        else:
            endpoint.failures = 0
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def _take_out(self, endpoint: Endpoint) -> None:
        endpoint.healthy = False
        endpoint.down_since = time.monotonic()
        up = sum(e.healthy for e in self.endpoints)
        log.warning(
            "endpoint %s is out of rotation after %d failed attempts in a row (%d of %d endpoints left); "
            "asking its /models every %g s",
            endpoint.url,
            endpoint.failures,
            up,
            len(self.endpoints),
            self.probe_every_s,
        )
        if self.probe is not None:
            endpoint.prober = asyncio.get_running_loop().create_task(self._probe(endpoint))

    async def _probe(self, endpoint: Endpoint) -> None:
        while True:
            await asyncio.sleep(self.probe_every_s)
            try:
                alive = await self.probe(endpoint.url)
            except Exception:  # noqa: BLE001 — any failure of the probe means: still down
                alive = False
            if alive:
                break
        down = time.monotonic() - (endpoint.down_since or time.monotonic())
        endpoint.healthy, endpoint.failures, endpoint.down_since, endpoint.prober = True, 0, None, None
        log.info(
            "endpoint %s is back in rotation after %.1f s out (its /models answered)", endpoint.url, down
        )
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def close(self) -> None:
        for endpoint in self.endpoints:
            if endpoint.prober is not None:
                endpoint.prober.cancel()
