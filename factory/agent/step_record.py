"""One step of a trajectory as recorded: the outcome of its LLM call and the step record built from it
(``schemas.TRAJECTORY`` steps), for the agent's programs and the simulated trajectories alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EMPTY = "empty completion"  # the error of a step whose reply was empty


def unusable_reason(status: str, error: str | None) -> str | None:
    """Why a step's replies could not be used (``parse_error``: unreadable after its repairs, e.g. an
    error page or a refusal; ``empty``), else None. A step that failed for want of a reply (an HTTP
    error) is not counted: it had none. Such replies are marked in the response cache (asked again by
    a later run) and counted in a round's metrics (``unusable``)."""
    if status == "parse_error":
        return "parse_error"
    if status == "llm_error" and error == EMPTY:
        return "empty"
    return None


@dataclass
class Outcome:
    """One step's LLM call after its repairs: what the step record is built from."""

    status: str  # ok | parse_error | llm_error
    parsed: Any
    output: str  # raw text of the accepted (or last) attempt
    error: str | None
    messages: list[dict]  # recorded (hint-free) prompt of that attempt
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # as first measured: a cache hit replays the recorded latency


def step_record(index: int, kind: str, out: Outcome, **fields: Any) -> dict:
    """The ``schemas.TRAJECTORY`` step record of one call's outcome; ``fields``: what the step parsed."""
    return {
        "index": index,
        "kind": kind,
        "messages": [dict(m) for m in out.messages],
        "output": out.output,
        "status": out.status,
        "error": out.error or fields.get("error"),
        "sufficient": fields.get("sufficient"),
        "thought": fields.get("thought"),
        "answer": fields.get("answer"),
        "pairs": fields.get("pairs", []),
        "pair_id": fields.get("pair_id"),
        "retrieved": fields.get("retrieved", []),
        "triplet_ids": fields.get("triplet_ids", []),
        "attempts": out.attempts,
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.completion_tokens,
        "latency_s": out.latency_s,
    }
