"""The step record: one builder for the agent's programs and the simulated trajectories."""

from __future__ import annotations

from factory.agent.step_record import Outcome, step_record
from schemas import STEP


def outcome(**kw) -> Outcome:
    base = dict(
        status="ok",
        parsed=None,
        output="Answer: Paris",
        error=None,
        messages=[{"role": "user", "content": "Where?"}],
        attempts=1,
        prompt_tokens=3,
        completion_tokens=2,
        latency_s=0.5,
    )
    return Outcome(**{**base, **kw})


def test_a_step_record_has_exactly_the_contracts_fields():
    record = step_record(4, "final", outcome(), thought="it is Paris", answer="Paris")
    assert list(record) == [f.name for f in STEP]
    assert (record["index"], record["kind"], record["answer"], record["thought"]) == (
        4,
        "final",
        "Paris",
        "it is Paris",
    )
    assert record["pairs"] == [] and record["retrieved"] == [] and record["triplet_ids"] == []


def test_the_outcomes_error_wins_and_messages_are_copied():
    out = outcome(status="parse_error", error="no 'Answer:' line")
    record = step_record(0, "final", out, error="lines not read as triplets: x")
    assert record["error"] == "no 'Answer:' line"
    assert step_record(0, "complete", outcome(), error="lines not read as triplets: x")["error"].startswith(
        "lines"
    )
    record["messages"][0]["content"] = "changed"
    assert out.messages[0]["content"] == "Where?"
