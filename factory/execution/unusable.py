"""A round's unusable replies (the share the agent could not use, by reason) and the warning when most
were: read from a round's summary (``factory.execution.summary``) by the round and by the report, which
must not import the agent to say it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

# A round whose replies are mostly unusable says so: the server or model, not the agent, is at fault
MOST_UNUSABLE = 0.5
LIKELY_CAUSE = {
    "parse_error": "is llm.model the model you meant, and does the server answer chat completions in the "
    "prompt format (not an error page or a refusal)?",
    "empty": "does the server return text (a stop string or max_tokens that cut every reply)?",
}


def unusable_share(summary: Mapping) -> dict:
    """A round's replies the agent could not use (``Stats``' ``unusable_replies`` of the ordinary and the
    rationalized trajectories): their count, the calls, the share and the count by reason."""
    blocks = [summary.get("overall") or {}, summary.get("rationalized") or {}]
    by_reason: Counter = Counter()
    for block in blocks:
        by_reason.update(block.get("unusable_replies") or {})
    calls = sum(int(block.get("llm_calls") or 0) for block in blocks)
    replies = sum(by_reason.values())
    return {
        "replies": replies,
        "calls": calls,
        "share": replies / calls if calls else 0.0,
        "by_reason": dict(sorted(by_reason.items())),
    }


def unusable_warning(unusable: Mapping | None) -> str | None:
    """'87% of this round's replies were unusable (parse_error): is llm.model ...?' when most were."""
    if not unusable or unusable.get("share", 0.0) <= MOST_UNUSABLE:
        return None
    reasons = unusable["by_reason"]
    main = max(reasons, key=reasons.get)
    listed = ", ".join(f"{reason} {n}" for reason, n in reasons.items())
    return (
        f"{unusable['share']:.0%} of this round's replies were unusable ({listed} of {unusable['calls']} "
        f"calls): {LIKELY_CAUSE.get(main, 'check the server and llm.model')} Their response-cache entries "
        "are marked unusable, so a re-run asks those calls again (`factory cache list --outcome unusable`)"
    )
