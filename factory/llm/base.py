"""The one LLM interface every backend implements.

Callers hand a backend a *batch* of chat requests and get one response per request, in order.
A backend never raises for a single failed call: the response carries ``error`` (after its own
retries), so one bad request cannot lose the other records of a batch. Batching is how the
agent runs many trajectories in lockstep on the local backend (one padded forward pass per batch).
A backend that also has ``async acomplete(request) -> ChatResponse`` and ``run(coroutine)`` (the
openai backend and its cached wrapper: ``run`` runs a coroutine on the backend's event loop, where
``acomplete`` answers) takes requests one at a time while others are in flight: the agent's
continuous scheduler (``factory.execution.scheduler``) runs there to keep a server busy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; part of the cache key."""

    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 160
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Constraint:
    """A grammar the reply must follow (constrained decoding), in each form a backend may send.

    All forms describe the same language (they are printed from one definition, see
    ``factory.agent.grammar``): the local backend runs ``regex`` through llguidance; the openai
    backend sends ``json_schema``, ``regex`` or ``gbnf`` in the field ``llm.constraint_field`` names.
    Part of the cache key (a constrained reply is another reply than an unconstrained one).
    """

    name: str  # e.g. 'knowtrace-json-v1/explore/pairs=2': for logs and schema names
    regex: str
    gbnf: str
    json_schema: str | None = None  # the schema as canonical JSON text; None for a text syntax


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[tuple[str, str], ...]  # ((role, content), ...): hashable and ordered
    sampling: Sampling = field(default_factory=Sampling)
    sample: int = 0  # sample index: k samples of one prompt differ by this (and by the seed)
    constraint: Constraint | None = None
    # which calls belong together (a trajectory's): routed to one endpoint when it can. Not part of
    # the reply, so not of the cache key
    affinity: str | None = field(default=None, compare=False)
    # leading messages that every call of this kind repeats (instructions, few-shot turns): the local
    # backend computes them once (factory.llm.prefix). None: the system message, when one leads. Not
    # part of the reply, so not of the cache key
    shared_messages: int | None = field(default=None, compare=False)

    @staticmethod
    def of(
        messages: list[dict],
        sampling: Sampling,
        sample: int = 0,
        constraint: Constraint | None = None,
        affinity: str | None = None,
        shared_messages: int | None = None,
    ) -> ChatRequest:
        return ChatRequest(
            tuple((m["role"], m["content"]) for m in messages),
            sampling,
            sample,
            constraint,
            affinity,
            shared_messages,
        )

    def message_dicts(self) -> list[dict]:
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None  # stop | length | error
    error: str | None = None  # set when the call failed after all retries
    # the response cache's key of this call (set by factory.llm.cache.CachedLLM): a caller that cannot
    # use the reply hands it back with ``llm.mark_unusable([key], reason)``
    cache_key: str | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class LLM(Protocol):
    """A chat model. ``identity`` names model + adapter (with a hash of the adapter weights)."""

    identity: str
    backend: str

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]: ...

    def count_tokens(self, text: str) -> int: ...

    def close(self) -> None: ...


def cache_use(llm: LLM) -> dict[str, int]:
    """{"hits", "misses"}: the calls a backend answered from its response cache and those it sent on
    (both 0 for a backend without a cache, ``llm.cache: false``)."""
    return {"hits": int(getattr(llm, "hits", 0)), "misses": int(getattr(llm, "misses", 0))}
